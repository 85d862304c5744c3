"""Throughput metrics for training runs.

The project's acceptance number is the tail rate: env steps per second over the last few completed training
iterations. Warm-up, compilation, graph capture and replay pre-fill are one-off costs that would drag an all-run
average down and make runs of different lengths incomparable, so the trainer only records iterations that did
real training work, and the meter only looks at the most recent ones.
"""

from __future__ import annotations

import math
import operator
from collections import deque


class TailRateMeter:
    """Aggregate env-step rate over a sliding window of completed iterations.

    The tail rate is total steps divided by total seconds over the window, not the mean of per-iteration rates:
    a mean of rates over-weights the fast iterations, so a run that alternates fast and slow iterations would
    report a throughput it never achieved over wall-clock time.

    Only ``window`` iterations are kept, so memory stays constant however long the run is.
    """

    def __init__(self, window: int = 20) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self.window = window
        self._tail: deque[tuple[int, float]] = deque(maxlen=window)
        self._phases: deque[dict[str, float]] = deque(maxlen=window)
        self._completed = 0
        self._total_steps = 0

    def record(self, env_steps: int, seconds: float, phases: dict[str, float] | None = None) -> None:
        """Add one completed training iteration; never call this for warm-up or other one-off phases.

        ``phases`` optionally splits the iteration's seconds by what it spent them on (env step, updates).
        """
        steps = _checked_steps(env_steps)
        wall = _checked_seconds(seconds)
        self._tail.append((steps, wall))
        self._phases.append(dict(phases or {}))
        self._completed += 1
        self._total_steps += steps

    @property
    def completed_iterations(self) -> int:
        return self._completed

    @property
    def total_env_steps(self) -> int:
        return self._total_steps

    @property
    def tail_iteration_count(self) -> int:
        return len(self._tail)

    def tail_env_steps_per_sec(self) -> float | None:
        """The acceptance metric; ``None`` until an iteration is recorded, so a missing number is not read as 0."""
        if not self._tail:
            return None
        steps = sum(step for step, _ in self._tail)
        seconds = math.fsum(wall for _, wall in self._tail)
        return steps / seconds

    def tail_phase_seconds(self) -> dict[str, float]:
        """Mean seconds per iteration of each phase over the window (phases every tail iteration reported)."""
        if not self._phases:
            return {}
        names = set.intersection(*(set(p) for p in self._phases))
        return {name: math.fsum(p[name] for p in self._phases) / len(self._phases) for name in sorted(names)}

    def final_env_steps_per_sec(self) -> float | None:
        """Rate of the last iteration alone; a diagnostic for spotting a slowdown the window would smooth over."""
        if not self._tail:
            return None
        steps, seconds = self._tail[-1]
        return steps / seconds


def _checked_steps(env_steps: int) -> int:
    """``operator.index`` refuses floats, so a fractional step count is caught instead of silently truncated."""
    steps = operator.index(env_steps)
    if steps < 0:
        raise ValueError(f"env_steps must be non-negative, got {env_steps!r}")
    return steps


def _checked_seconds(seconds: float) -> float:
    """A zero, negative or non-finite duration would make the rate infinite or meaningless, so it is refused."""
    wall = float(seconds)
    if not (math.isfinite(wall) and wall > 0):
        raise ValueError(f"seconds must be a positive finite number, got {seconds!r}")
    return wall
