"""Reset events: ``(state, ctx, mask, rng, **params) -> {state key: tensor for all envs}``.

The event manager keeps the returned values only in the masked envs, so events sample
for every env (fixed shapes) and need not look at the mask themselves.
"""

from __future__ import annotations

import math

import torch

from unilab.context import EnvContext, State
from unilab.core.math import quat_mul, yaw_quat
from unilab.core.rng import uniform
from unilab.mdp.terrain import tile_origins
from unilab.terrain.heightmap import HeightMap


def reset_to_default_pose(
    state: State,
    ctx: EnvContext,
    mask: torch.Tensor,
    rng: torch.Tensor,
    xy_range: float,
    yaw_range: float,
    root_vel_range: float,
) -> dict:
    """Stand keyframe shifted by U(+-xy) in x and y, turned by U(+-yaw) about its own z axis,
    root velocities U(+-root_vel_range) (qvel[0:6]); joints exactly at q0 and at rest."""
    n = ctx.num_envs
    u = uniform(rng, 0, (n, 9), -1.0, 1.0)  # one draw: xy (2), yaw (1), root velocity (6)
    qpos = ctx.default_qpos.expand(n, -1).clone()
    qpos[:, :2] += xy_range * u[:, :2]
    qpos[:, 3:7] = quat_mul(qpos[:, 3:7], yaw_quat(yaw_range * u[:, 2]))
    qvel = torch.zeros_like(state["sim", "qvel"])
    qvel[:, :6] = root_vel_range * u[:, 3:]
    return {("sim", "qpos"): qpos, ("sim", "qvel"): qvel}


def scale_pd_gains(
    state: State, ctx: EnvContext, mask: torch.Tensor, rng: torch.Tensor, scale_range: tuple[float, float]
) -> dict:
    """The robot's default kp and kd, each times an independent per-env scalar."""
    scales = uniform(rng, 0, (ctx.num_envs, 2), *scale_range)
    return {
        ("sim", "actuator_kp"): ctx.default_kp * scales[:, :1],
        ("sim", "actuator_kv"): ctx.default_kv * scales[:, 1:],
    }


def push_root(
    state: State, ctx: EnvContext, mask: torch.Tensor, rng: torch.Tensor, speed_range: tuple[float, float]
) -> dict:
    """A shove: the root's horizontal velocity (qvel[0:2]) changed by U(speed_range) m/s in a direction drawn
    uniformly, so every push has a speed within the range."""
    u = uniform(rng, 0, (ctx.num_envs, 2), 0.0, 1.0)
    speed = speed_range[0] + (speed_range[1] - speed_range[0]) * u[:, :1]
    angle = (2 * math.pi) * u[:, 1:]
    kick = speed * torch.cat((torch.cos(angle), torch.sin(angle)), dim=-1)
    qvel = state["sim", "qvel"]
    return {("sim", "qvel"): torch.cat((qvel[:, :2] + kick, qvel[:, 2:]), dim=-1)}


def spawn_on_terrain(
    state: State,
    ctx: EnvContext,
    mask: torch.Tensor,
    rng: torch.Tensor,
    ground: HeightMap,
    origins: torch.Tensor,
    max_init_level: int,
    level: int | str | None = None,
    lift: float = 0.02,
) -> dict:
    """Carry the pose an earlier event drew (about the world origin) onto the env's tile, standing ``lift`` above
    the surface under the root.

    ``origins`` (rows, cols, 3) are the tiles' centres; env ``i`` walks column ``i % cols`` (the types in equal
    shares) at row ``state["env", "terrain_level"]``, which this event owns. A level below 0 (an env never placed)
    starts at a row drawn from 0 to ``max_init_level``; a level past the last row (the curriculum's mark of a
    mastered grid) restarts anywhere, so such envs keep seeing every difficulty. ``level`` pins every env to one row
    (eval at one difficulty), or with ``"all"`` spreads them over every tile from the hardest row down: env ``i``
    on row ``rows - 1 - (i // cols) % rows`` (eval at every difficulty at once; too few envs for every row still put
    one on each type of the hardest)."""
    n = ctx.num_envs
    rows = origins.shape[0]
    current = state["env", "terrain_level"]
    u = uniform(rng, 0, (n, 2), 0.0, 1.0)
    start = (u[:, 0] * (min(max_init_level, rows - 1) + 1)).floor()
    anywhere = (u[:, 1] * rows).floor()
    new = torch.where(current < 0, start, torch.where(current >= rows, anywhere, current))
    if level == "all":
        below_top = (torch.arange(n, device=current.device) // origins.shape[1]) % rows
        new = (rows - 1 - below_top).to(current.dtype)
    elif level is not None:
        new = torch.full_like(current, float(level))
    origin = tile_origins(origins, new)
    qpos = state["sim", "qpos"].clone()
    qpos[:, :2] += origin[:, :2]
    qpos[:, 2] += ground(qpos[:, 0], qpos[:, 1]) + lift
    return {("sim", "qpos"): qpos, ("env", "terrain_level"): new}
