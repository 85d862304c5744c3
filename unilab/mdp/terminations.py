"""Termination terms: ``(state, ctx, **params) -> bool (N,)``."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from unilab.context import EnvContext
from unilab.mdp.observations import sensor


def time_out(state: TensorDict, ctx: EnvContext) -> torch.Tensor:
    return state["env", "episode_step"] >= ctx.max_episode_steps


def tilt_exceeds(state: TensorDict, ctx: EnvContext, upvector: str, limit: float) -> torch.Tensor:
    """Angle between a body z-axis and world z above ``limit`` radians."""
    cos_tilt = sensor(state, ctx, upvector)[:, 2].clamp(-1.0, 1.0)
    return torch.acos(cos_tilt) > limit


def root_height_below(state: TensorDict, ctx: EnvContext, min_height: float) -> torch.Tensor:
    return state["sim", "qpos"][:, 2] < min_height
