"""Termination terms: ``(state, ctx, **params) -> bool (N,)``."""

from __future__ import annotations

import torch

from unilab.context import EnvContext, State
from unilab.mdp.observations import sensor
from unilab.mdp.terrain import bodies_height, distance_from_tile, height_above_ground
from unilab.terrain.heightmap import HeightMap


def time_out(state: State, ctx: EnvContext) -> torch.Tensor:
    return state["env", "episode_step"] >= ctx.max_episode_steps


def tilt_exceeds(state: State, ctx: EnvContext, upvector: str, limit: float) -> torch.Tensor:
    """Angle between a body z-axis and world z above ``limit`` radians."""
    cos_tilt = sensor(state, ctx, upvector)[:, 2].clamp(-1.0, 1.0)
    return torch.acos(cos_tilt) > limit


def root_height_below(
    state: State, ctx: EnvContext, min_height: float, ground: HeightMap | None = None
) -> torch.Tensor:
    """The root below ``min_height``: above the world's z = 0, or above the surface under it on a terrain."""
    root = state["sim", "qpos"][:, :3]
    height = root[:, 2] if ground is None else height_above_ground(ground, root)
    return height < min_height


def off_terrain(state: State, ctx: EnvContext, ground: HeightMap, margin: float) -> torch.Tensor:
    """The root within ``margin`` of the terrain's edge, past which there is no ground: a truncation, since the
    robot did nothing wrong by walking there."""
    half_x, half_y = ground.half_extent
    xy = state["sim", "qpos"][:, :2].abs()
    return (xy[:, 0] > half_x - margin) | (xy[:, 1] > half_y - margin)


def crossed_tile(state: State, ctx: EnvContext, origins: torch.Tensor, tile_size: float) -> torch.Tensor:
    """The base past its tile's half-width from the centre: it has crossed the terrain it was put on, and the
    terrain curriculum moves it a row up the moment it resets. A truncation: ending here lets a robot that walks
    well climb a row every few seconds instead of once per whole episode."""
    return distance_from_tile(state, origins) > tile_size / 2


def bodies_near_ground(
    state: State, ctx: EnvContext, bodies: tuple[str, ...], min_height: float, ground: HeightMap | None = None
) -> torch.Tensor:
    """Any of ``bodies``' origins within ``min_height`` of z = 0, or of the surface under it on a terrain: a part
    that should never touch the ground (a knee, say) on it."""
    return (bodies_height(state, ctx, bodies, ground) < min_height).any(-1)


def ground_contact(state: State, ctx: EnvContext, sensors: tuple[str, ...]) -> torch.Tensor:
    """Any body whose ground contact sensor (``unilab.sim.contact_sensors``) counts a contact: a part that should
    never touch the ground (a quadruped's trunk) on it, as the collision stage found it."""
    counts = torch.stack([sensor(state, ctx, name)[:, 0] for name in sensors], dim=-1)
    return (counts > 0).any(-1)
