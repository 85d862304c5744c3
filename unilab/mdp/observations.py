"""Observation terms: ``(state, ctx, **params) -> (N, dim)`` tensors, pure."""

from __future__ import annotations

import torch

from unilab.context import EnvContext, State
from unilab.core.math import quat_rotate_inverse


def sensor(state: State, ctx: EnvContext, name: str) -> torch.Tensor:
    """A named MuJoCo sensor of the model (a gyro, a velocimeter, ...)."""
    return ctx.sensor(state["sim", "sensordata"], name)


def projected_gravity(state: State, ctx: EnvContext, body: str) -> torch.Tensor:
    """Unit gravity direction in ``body``'s frame: (0, 0, -1) when the body is upright."""
    quat = state["sim", "xquat"][:, ctx.body_ids[body]]
    down = torch.zeros_like(quat[:, 1:])
    down[:, 2] = -1.0
    return quat_rotate_inverse(quat, down)


def joint_pos_rel(state: State, ctx: EnvContext) -> torch.Tensor:
    return state["sim", "qpos"][:, ctx.joint_qpos] - ctx.default_joint_pos


def joint_vel(state: State, ctx: EnvContext) -> torch.Tensor:
    return state["sim", "qvel"][:, ctx.joint_dof]


def last_action(state: State, ctx: EnvContext) -> torch.Tensor:
    """The action applied at the latest step (zeros right after a reset)."""
    return state["env", "action"]


def command(state: State, ctx: EnvContext, name: str) -> torch.Tensor:
    return state["env", name]


def phase_sin_cos(state: State, ctx: EnvContext, name: str) -> torch.Tensor:
    """A clock command as ``[sin(phi_1..k), cos(phi_1..k)]``: continuous where raw radians wrap."""
    phase = state["env", name]
    return torch.cat((torch.sin(phase), torch.cos(phase)), dim=-1)
