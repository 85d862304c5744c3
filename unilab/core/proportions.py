"""How sure a share of trials is: the interval a verdict on a fall or survival rate needs.

A rate judged over episodes is a binomial proportion. With 100 robots, 3 % and 8 % falls lie within two standard
errors of each other, so a verdict near its bound can flip on the draw alone. Wilson's score interval stays inside
[0, 1] and is not empty at 0 % or 100 %, as the normal approximation's is. Plain arithmetic, so the torch-free
deployment check can use it too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Z_95 = 1.959964
"""The standard normal quantile of a two-sided 95 % interval."""


def rate_interval(rate: float, n: int, z: float = Z_95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``rate`` observed over ``n`` trials (all of [0, 1] for none)."""
    if n <= 0:
        return (0.0, 1.0)
    z2n = z * z / n
    centre = (rate + z2n / 2) / (1 + z2n)
    half = z * math.sqrt(rate * (1 - rate) / n + z2n / (4 * n)) / (1 + z2n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def rate_intervals(figures: Mapping[str, Any], rates: Iterable[str], n: int) -> dict[str, list[float]]:
    """The interval over ``n`` trials of each of ``rates`` that ``figures`` holds, rounded as a summary stores it."""
    return {name: [round(x, 6) for x in rate_interval(float(figures[name]), n)] for name in rates if name in figures}


def unsettled(intervals: Mapping[str, Sequence[float]], thresholds: Mapping[str, Sequence[Any]]) -> list[str]:
    """The rates whose bound (``thresholds[name] = (op, bound)``) lies inside their interval: verdicts against them
    the trials cannot settle."""
    return [name for name, (low, high) in intervals.items() if low <= thresholds[name][1] <= high]


def interval_text(interval: Sequence[float], n: int, trials: str) -> str:
    """How a verdict line states a rate's interval (appended to the rate's figure)."""
    low, high = interval
    return f", 95 % {low:.3f}-{high:.3f} over {n} {trials}"


def unsettled_text(names: Sequence[str], remedy: str) -> str:
    """How a verdict line ends when some of its rates are unsettled (empty when none is)."""
    return f"; unsettled: {', '.join(names)} within its interval of the bound, {remedy}" if names else ""
