"""Curriculum terms: ``(state, ctx, done, **params) -> {state key: new value}`` after every step, before the
finished envs reset: task-level scalars, or per-env entries the next reset reads."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from unilab.context import EnvContext
from unilab.mdp.terrain import tile_origins


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


def terrain_levels(
    state: TensorDict,
    ctx: EnvContext,
    done: torch.Tensor,
    origins: torch.Tensor,
    tile_size: float,
    command: str,
    episode_length_s: float,
    short_fraction: float = 0.5,
) -> dict:
    """Move each finished env a terrain row up when it walked off its tile's half-width from the centre, and a row
    down when it walked less than ``short_fraction`` of what its command asked over a whole episode (and did not
    move up); never below the first row. A level past the last row is left for the spawn event to redraw.

    The mean level over envs (past the last row counted as the last) is ``state["task", "terrain_level_mean"]``.
    """
    level = state["env", "terrain_level"]
    origin = tile_origins(origins, level)[:, :2]
    walked = torch.linalg.vector_norm(state["sim", "qpos"][:, :2] - origin, dim=-1)
    asked = torch.linalg.vector_norm(state["env", command][:, :2], dim=-1) * episode_length_s
    up = walked > tile_size / 2
    down = (walked < short_fraction * asked) & ~up
    moved = (level + up.float() - down.float()).clamp(min=0.0)
    new = torch.where(done, moved, level)
    return {("env", "terrain_level"): new, ("task", "terrain_level_mean"): new.clamp(max=origins.shape[0] - 1).mean()}
