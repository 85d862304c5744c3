"""Command terms: resample functions ``(state, ctx, mask, rng, **params)`` and clocks."""

from __future__ import annotations

import math

import torch

from unilab.context import EnvContext, State
from unilab.core.rng import uniform


def uniform_velocity(
    state: State,
    ctx: EnvContext,
    mask: torch.Tensor,
    rng: torch.Tensor,
    lin_vel_x: tuple[float, float],
    lin_vel_y: tuple[float, float],
    ang_vel_z: tuple[float, float],
    deadzone: float,
    straight: float = 0.0,
) -> torch.Tensor:
    """(vx, vy, wz) uniform in the ranges; planar speeds at or below ``deadzone`` become 0 (wz kept). A share
    ``straight`` of the envs, drawn anew at each resample, gets wz = 0: held for a whole episode, a turning command
    walks a circle, and on a terrain a robot must also cross its tile to meet what is on it."""
    u = uniform(rng, 0, (ctx.num_envs, 3))
    cmd = torch.stack(
        [lo + (hi - lo) * u[:, i] for i, (lo, hi) in enumerate((lin_vel_x, lin_vel_y, ang_vel_z))], dim=-1
    )
    slow = cmd[:, :2].norm(dim=-1, keepdim=True) <= deadzone
    turn = cmd[:, 2:]
    if straight > 0.0:
        turn = torch.where(uniform(rng, 1, (ctx.num_envs, 1)) < straight, 0.0, turn)
    return torch.cat((torch.where(slow, 0.0, cmd[:, :2]), turn), dim=-1)


def gait_phase_offset(
    state: State, ctx: EnvContext, mask: torch.Tensor, rng: torch.Tensor, offsets: tuple[float, ...]
) -> torch.Tensor:
    """One phase per foot: the first uniform in [0, 2pi), foot ``i`` ``offsets[i]`` radians behind it (a biped's
    (0, pi) alternates the feet; a trot pairs the diagonals)."""
    first = uniform(rng, 0, (ctx.num_envs, 1), 0.0, 2 * math.pi)
    return torch.cat([first + offset for offset in offsets], dim=-1)


def gait_phase_advance(phase: torch.Tensor, ctx: EnvContext, frequency: float) -> torch.Tensor:
    """Advance the phases by 2pi * f * dt and wrap to [0, 2pi)."""
    return torch.remainder(phase + 2 * math.pi * frequency * ctx.dt, 2 * math.pi)
