"""How long one control step of the deployment runtime takes on this CPU: ``Policy.act`` timed with
``time.perf_counter`` over many steps, on one core and one onnxruntime thread, the readings coming from the policy's
scene in C MuJoCo (the robot's own read is not part of the runtime's budget, and is timed apart).

    python scripts/deploy_timing.py logs/sac/g1_walk_flat/<run>/policy.onnx --steps 20000

Prints one JSON line: the median, 99th percentile and maximum of each part, in microseconds. Imports no torch.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np

from unilab.deploy import DeployError, Policy
from unilab.deploy.check import load_scene
from unilab.deploy.episodes import Conditions, draw_starts
from unilab.deploy.mujoco_robot import MujocoRobot


def _stats(seconds: list[float]) -> dict[str, float]:
    us = np.asarray(seconds) * 1e6
    return {
        "median": round(float(np.median(us)), 1),
        "p99": round(float(np.percentile(us, 99)), 1),
        "max": round(float(us.max()), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("policy", type=Path)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--core", type=int, default=0, help="the CPU core to run on")
    args = parser.parse_args()
    if args.core not in os.sched_getaffinity(0):
        parser.error(f"--core {args.core} is not one this process may run on: {sorted(os.sched_getaffinity(0))}")
    os.sched_setaffinity(0, {args.core})
    try:
        policy = Policy(args.policy, threads=1)
        robot = MujocoRobot(load_scene(policy), policy.metadata)
    except DeployError as exc:
        parser.error(str(exc))
    episode = policy.metadata.check.episode_s
    parts: dict[str, list[float]] = {"read (simulation)": [], "observe": [], "act": []}
    while len(parts["act"]) < args.steps:  # an episode's worth of steps from each start, until there are enough
        start = draw_starts(policy.metadata, robot, Conditions(episodes=1, seed=len(parts["act"])))[0]
        robot.reset(start.qpos, start.qvel)
        policy.reset(start.phase)
        for k in range(1, round(episode / policy.control_dt) + 1):
            began = time.perf_counter()
            readings = robot.read()
            read = time.perf_counter()
            policy.observe(readings, start.command)
            observed = time.perf_counter()
            targets = policy.act(readings, start.command)
            acted = time.perf_counter()
            parts["read (simulation)"].append(read - began)
            parts["observe"].append(observed - read)
            parts["act"].append(acted - observed)
            robot.write(targets)
            robot.advance(k * policy.control_dt)
    report = {"policy": str(args.policy), "task": policy.metadata.task, "steps": len(parts["act"]), "core": args.core}
    print(json.dumps({**report, **{name: _stats(times) for name, times in parts.items()}}))


if __name__ == "__main__":
    main()
