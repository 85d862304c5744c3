"""Curriculum terms: ``(state, ctx, done, terminated, **params) -> {state key: new value}`` after every step, before the
finished envs reset: task-level scalars, or per-env entries the next reset reads."""

from __future__ import annotations

import torch

from unilab.context import EnvContext, State
from unilab.mdp.terrain import distance_from_tile, env_columns


def penalty_scale_by_episode_length(
    state: State,
    ctx: EnvContext,
    done: torch.Tensor,
    terminated: torch.Tensor,
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
    the scale up; an episode cut short without a failure (a truncation) counts as a whole one,
    since its robot was doing well.
    """
    done_f = done.float()
    n_done = done_f.sum()
    lengths = torch.where(terminated, state["env", "episode_step"].float(), float(ctx.max_episode_steps))
    mean_len = (lengths * done_f).sum() / n_done.clamp(min=1.0)
    w = (n_done / window).clamp(max=1.0)
    avg = (1.0 - w) * state["task", "mean_episode_length"] + w * mean_len
    scale = state["task", "penalty_scale"]
    factor = torch.where(avg < down_threshold, 1.0 - rate, torch.where(avg > up_threshold, 1.0 + rate, 1.0))
    new_scale = torch.where(n_done > 0, (scale * factor).clamp(min_scale, max_scale), scale)
    return {("task", "mean_episode_length"): avg, ("task", "penalty_scale"): new_scale}


def commanded_displacement(command: torch.Tensor, duration_s: float) -> torch.Tensor:
    """How far (N,) a robot that follows a constant ``command`` (vx, vy, wz) exactly for ``duration_s`` ends up from
    where it started: it walks an arc of length |v| t turning at wz, whose chord is |v| t sinc(wz t / 2). A command
    that turns walks circles and may come back; a straight one goes |v| t."""
    speed = torch.linalg.vector_norm(command[:, :2], dim=-1)
    half_turn = command[:, 2] * (duration_s / 2)
    return speed * duration_s * torch.special.sinc(half_turn / torch.pi).abs()


def terrain_levels(
    state: State,
    ctx: EnvContext,
    done: torch.Tensor,
    terminated: torch.Tensor,
    origins: torch.Tensor,
    tile_size: float,
    command: str,
    episode_length_s: float,
    short_fraction: float = 0.5,
    type_of_column: torch.Tensor | None = None,
    type_names: tuple[str, ...] = (),
) -> dict:
    """Move each finished env a terrain row up when it walked off its tile's half-width from the centre, and a row
    down when it did not and either it failed (``terminated``: it fell) or it got less than ``short_fraction`` of
    the way its command would have carried it over a whole episode (``commanded_displacement``); never below the
    first row. A level past the last row is left for the spawn event to redraw.

    What a command asks is judged by where it leads, not by its speed: a command that turns walks a circle, and a
    robot that follows it perfectly may end near its start, which is no reason to move it down. Commands are drawn
    at reset and held for the episode, so the episode's command is the one in the state.

    The levels' mean and spread over envs (past the last row counted as the last) are ``state["task",
    "terrain_level_mean"]`` and ``state["task", "terrain_level_std"]``. Given the terrain's types (``type_names``)
    and the index into them of each column (``type_of_column``), the mean over the envs of each type is
    ``state["task", "terrain_level_<type>"]``: the overall mean hides a type whose envs stay on its low rows, and
    that type is the one the suites' hardest row will fail.
    """
    level = state["env", "terrain_level"]
    walked = distance_from_tile(state, origins)
    asked = commanded_displacement(state["env", command], episode_length_s)
    up = walked > tile_size / 2
    down = (terminated | (walked < short_fraction * asked)) & ~up
    moved = (level + up.float() - down.float()).clamp(min=0.0)
    new = torch.where(done, moved, level)
    shown = new.clamp(max=origins.shape[0] - 1)
    if type_of_column is None:  # every env of one kind
        sums = level_sums(shown, torch.zeros_like(new, dtype=torch.long), 1)
    else:
        sums = level_sums(
            shown, type_of_column[env_columns(new.shape[0], origins.shape[1], new.device)], len(type_names)
        )
    count, total, squares = sums.sum(0)
    mean = total / count
    out = {
        ("env", "terrain_level"): new,
        ("task", "terrain_level_mean"): mean.float(),
        ("task", "terrain_level_std"): (squares / count - mean * mean).clamp(min=0.0).sqrt().float(),
    }
    if type_of_column is not None:
        for index, name in enumerate(type_names):  # a type no env walks (fewer envs than columns) reads 0
            out["task", f"terrain_level_{name}"] = (sums[index, 1] / sums[index, 0].clamp(min=1.0)).float()
    return out


def level_sums(levels: torch.Tensor, kind: torch.Tensor, kinds: int) -> torch.Tensor:
    """Per kind of terrain (``kinds``, 3): its envs, the sum of their ``levels`` and of the levels' squares, in float64.

    Added by one scatter over the envs rather than reduced to scalars: Inductor compiles a reduction to a scalar into
    one block of threads and fuses into it the whole per-env curriculum that feeds it, so the curriculum ran on a
    single multiprocessor (docs/performance.md). Levels are whole rows, so every partial sum is an integer that
    float64 holds exactly: the scatter's atomic adds give the same sums in any order."""
    values = torch.stack((torch.ones_like(levels), levels, levels * levels), dim=-1).double()
    return torch.zeros(kinds, 3, dtype=torch.float64, device=levels.device).index_add_(0, kind, values)
