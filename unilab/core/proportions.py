"""How sure a share of trials is: the interval a verdict on a fall or survival rate needs.

A rate judged over episodes is a binomial proportion. With 100 robots, 3 % and 8 % falls lie within two standard
errors of each other, so a verdict near its bound can flip on the draw alone. Wilson's score interval stays inside
[0, 1] and is not empty at 0 % or 100 %, as the normal approximation's is. Plain arithmetic, so the torch-free
deployment check can use it too.
"""

from __future__ import annotations

import math

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


def holds(bound: float, interval: tuple[float, float] | list[float]) -> bool:
    """Whether ``bound`` lies inside ``interval``: a verdict against it the trials cannot settle."""
    low, high = interval
    return low <= bound <= high
