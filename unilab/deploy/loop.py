"""The control loop on a real robot: read, act, write once per control period, on a fixed grid of deadlines.

The policy was trained to act every ``control_dt`` and counts its gait clock in those steps, so the loop keeps to a
grid anchored at its start (a late step does not shift the ones after it) rather than sleeping one period after
each step, which would drift by the work's own time. A step whose work runs past the next deadline is an overrun:
counted, and the grid re-anchored after it, so the loop never bursts steps to catch up.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from unilab.deploy.policy import Policy
from unilab.deploy.robot import Robot


@dataclass
class LoopStats:
    """Each step's work (read, act and write) in seconds, and how many steps overran their period."""

    work_s: list[float] = field(default_factory=list)
    overruns: int = 0


def run_loop(
    policy: Policy,
    robot: Robot,
    command: Callable[[], np.ndarray | None],
    steps: int,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> LoopStats:
    """``steps`` control steps of ``policy`` on ``robot``, from a reset, each acting on ``command()`` (the velocity
    command, e.g. from a joystick; None for a policy without one)."""
    period = policy.control_dt
    stats = LoopStats()
    policy.reset()
    start = clock()
    for k in range(steps):
        wait = start + k * period - clock()
        if wait > 0:
            sleep(wait)
        began = clock()
        robot.write(policy.act(robot.read(), command()))
        done = clock()
        stats.work_s.append(done - began)
        if done > start + (k + 1) * period:
            stats.overruns += 1
            start = done - (k + 1) * period  # the next step starts now, and the grid moves with it
    return stats
