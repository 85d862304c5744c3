"""How ``unilab eval`` scores a rough-terrain walk: the flat walk's figures, with a looser velocity bound, since a
robot climbing a step slows down for it."""

from __future__ import annotations

from unilab.tasks.g1_walk_flat.metrics import readings, score
from unilab.tasks.task import EvalMetrics

METRICS = EvalMetrics(readings, score, thresholds={"fall_rate": ("<=", 0.05), "lin_vel_error": ("<=", 0.30)})
"""A rough-terrain policy works when at most 5 % of robots fall and the mean velocity error is at most 0.3 m/s."""
