"""Curriculum terms: ``(state, ctx, done, **params) -> {("task", key): scalar}``."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from unilab.context import EnvContext


def penalty_scale_by_episode_length(
    state: TensorDict,
    ctx: EnvContext,
    done: torch.Tensor,
    window: int,
    down_threshold: float,
    up_threshold: float,
    rate: float,
    min_scale: float,
    max_scale: float,
) -> dict:
    """Scale penalties with how long episodes last.

    The mean length of finished episodes is an EMA with weight min(n_done / window, 1);
    the scale shrinks by (1 - rate) while it is below ``down_threshold`` and grows by
    (1 + rate) above ``up_threshold``, only on steps where some episode ended. Every
    finished episode counts, timeouts included, so a policy that stops falling still moves
    the scale up.
    """
    done_f = done.float()
    n_done = done_f.sum()
    lengths = state["env", "episode_step"].float()
    mean_len = (lengths * done_f).sum() / n_done.clamp(min=1.0)
    w = (n_done / window).clamp(max=1.0)
    avg = (1.0 - w) * state["task", "mean_episode_length"] + w * mean_len
    scale = state["task", "penalty_scale"]
    factor = torch.where(avg < down_threshold, 1.0 - rate, torch.where(avg > up_threshold, 1.0 + rate, 1.0))
    new_scale = torch.where(n_done > 0, (scale * factor).clamp(min_scale, max_scale), scale)
    return {("task", "mean_episode_length"): avg, ("task", "penalty_scale"): new_scale}
