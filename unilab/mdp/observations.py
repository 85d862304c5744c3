"""Observation terms: ``(state, ctx, **params) -> (N, dim)`` tensors, pure."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab.context import EnvContext
from unilab.core.math import quat_rotate_inverse

if TYPE_CHECKING:  # annotations only: tensordict loads torch._dynamo, about a second of `train --help`
    from tensordict import TensorDict


def sensor(state: TensorDict, ctx: EnvContext, name: str) -> torch.Tensor:
    """A named MuJoCo sensor of the model (a gyro, a velocimeter, ...)."""
    return ctx.sensor(state["sim", "sensordata"], name)


def projected_gravity(state: TensorDict, ctx: EnvContext, body: str) -> torch.Tensor:
    """Unit gravity direction in ``body``'s frame: (0, 0, -1) when the body is upright."""
    quat = state["sim", "xquat"][:, ctx.body_ids[body]]
    down = torch.zeros_like(quat[:, 1:])
    down[:, 2] = -1.0
    return quat_rotate_inverse(quat, down)


def joint_pos_rel(state: TensorDict, ctx: EnvContext) -> torch.Tensor:
    return state["sim", "qpos"][:, ctx.joint_qpos] - ctx.default_joint_pos


def joint_vel(state: TensorDict, ctx: EnvContext) -> torch.Tensor:
    return state["sim", "qvel"][:, ctx.joint_dof]


def last_action(state: TensorDict, ctx: EnvContext) -> torch.Tensor:
    """The action applied at the latest step (zeros right after a reset)."""
    return state["env", "action"]


def command(state: TensorDict, ctx: EnvContext, name: str) -> torch.Tensor:
    return state["env", name]


def phase_sin_cos(state: TensorDict, ctx: EnvContext, name: str) -> torch.Tensor:
    """A clock command as ``[sin(phi_1..k), cos(phi_1..k)]``: continuous where raw radians wrap."""
    phase = state["env", name]
    return torch.cat((torch.sin(phase), torch.cos(phase)), dim=-1)
