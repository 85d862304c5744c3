"""Pieces every task's eval metrics share: means over the steps an env was scored, episode lengths."""

from __future__ import annotations

import math

import torch


def share(mask: torch.Tensor) -> float:
    """The share of ``mask``'s entries that are set, as an exact count over a count: a rate judged against a bound
    must equal it when it is the bound (20 of 400 is 0.05, where float32's mean gives 0.0500000007 and fails
    ``<= 0.05``)."""
    return int(mask.sum()) / mask.numel()


def active_mean(values: torch.Tensor, active: torch.Tensor) -> float:
    """Mean over active (step, env) cells; NaN when nothing was active so an empty eval cannot pass as perfect."""
    active = active.bool()
    count = active.sum()
    if count == 0:
        return math.nan
    return float((values * active).sum() / count)


def episode_lengths(episode_length: torch.Tensor, dt: float) -> dict[str, float]:
    steps = float(episode_length.float().mean())
    return {"mean_episode_length": steps, "mean_episode_length_s": steps * dt}
