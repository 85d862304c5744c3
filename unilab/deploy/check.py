"""The sim-to-sim check: the runtime (``Policy``) drives a robot in C MuJoCo (``MujocoRobot``), not the training
stack, over randomised episodes with sensor noise, actuation latency and control-rate jitter (``episodes``), and the
episodes are scored as ``unilab eval`` scores the task: survival, velocity tracking and a verdict against the task's
thresholds (carried in the policy's metadata), with the worst joint-limit and torque margins and the runtime's own
time per control step beside them.

Each episode is scored over its steps before the one that ends it, from the true (noise-free) sensors, as eval
scores an env's first episode. With noise, latency and jitter off and eval's starts, the figures are eval's on the
``mujoco`` backend, to within what float64 physics here against the backend's float32 state lets trajectories part
(``tests/test_deploy_check.py`` states the tolerance).
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from unilab.deploy.episodes import Conditions, Ends, EpisodeStart, draw_starts, robot_id
from unilab.deploy.mujoco_robot import MujocoRobot
from unilab.deploy.policy import Policy
from unilab.deploy.schema import DeployError


@dataclass
class EpisodeResult:
    """One episode's sums, kept apart so that the figures pool every scored step of every episode, as eval's do."""

    failed: bool = False
    length: int = 0  # control steps, the ending one included
    active: int = 0  # steps scored
    lin_vel_error: float = 0.0  # summed over the scored steps
    yaw_rate_error: float = 0.0
    path: float = 0.0  # planar speed summed over the scored steps
    joint_margin: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per joint, rad
    torque_ratio: np.ndarray = field(default_factory=lambda: np.zeros(0))  # per joint, of the torque limit
    step_s: list[float] = field(default_factory=list)  # the runtime's time per control step


def load_scene(policy: Policy, scene: Path | None = None) -> mujoco.MjModel:
    """The scene the policy was exported with (``metadata.check.scene`` beside it, or ``scene``), refused in one line
    where it is missing, is not the file exported with the policy, or steps at another rate."""
    check = policy.metadata.check
    if check is None:
        raise DeployError(f"{policy.path}: the check cannot run this policy: {policy.metadata.check_unsupported}")
    path = Path(scene) if scene is not None else policy.path.parent / check.scene
    if not path.is_file():
        raise DeployError(f"the policy's scene {path} is not there: export the policy again, or give --scene")
    if scene is None and hashlib.sha256(path.read_bytes()).hexdigest() != check.scene_sha256:
        raise DeployError(f"{path} is not the scene exported with {policy.path.name}: export the policy again")
    try:
        model = mujoco.MjModel.from_binary_path(str(path))
    except Exception as exc:  # MuJoCo's own error for a file it cannot read
        raise DeployError(f"cannot load scene {path}: {str(exc).strip().splitlines()[0]}") from None
    if abs(model.opt.timestep - check.physics_dt) > 1e-12:
        raise DeployError(
            f"{path} steps every {model.opt.timestep:g} s; the policy was trained at {check.physics_dt:g} s"
        )
    return model


def run_episode(
    policy: Policy, robot: MujocoRobot, start: EpisodeStart, steps: int, jitter_s: float, rng: np.random.Generator
) -> EpisodeResult:
    """One episode of at most ``steps`` control steps: read, act and write at each read time (the control grid, moved
    by up to ``jitter_s``), the physics advanced between reads, the terminations tested after each advance."""
    check = policy.metadata.check
    robot.reset(start.qpos, start.qvel, start.gain_scale, start.latency_s)
    policy.reset(start.phase)
    ends = Ends(check, robot)
    linvel = int(robot.model.sensor_adr[robot_id(robot.model, "SENSOR", check.linvel_sensor)])
    gyro = int(robot.model.sensor_adr[robot_id(robot.model, "SENSOR", policy.metadata.imu.gyro_sensor)])
    result = EpisodeResult()
    command = start.command if start.command is not None else np.zeros(3)
    for k in range(steps + 1):
        if k > 0:
            robot.advance(k * policy.control_dt + (rng.uniform(-jitter_s, jitter_s) if jitter_s > 0 else 0.0))
            failed, truncated = ends()
            if failed or truncated or k == steps:
                result.failed, result.length = failed, k
                break
            sensors = robot.data.sensordata
            velocity = sensors[linvel : linvel + 2]
            result.active += 1
            result.lin_vel_error += float(np.linalg.norm(command[:2] - velocity))
            result.yaw_rate_error += abs(float(command[2] - sensors[gyro + 2]))
            result.path += float(np.linalg.norm(velocity))
        readings = robot.read()
        began = time.perf_counter()
        targets = policy.act(readings, start.command)
        result.step_s.append(time.perf_counter() - began)
        robot.write(targets)
    result.joint_margin, result.torque_ratio = robot.worst_joint_margin.copy(), robot.worst_torque_ratio.copy()
    return result


def _mean(total: float, count: int) -> float:
    return total / count if count else float("nan")  # nothing scored: no figure, rather than a perfect one


def figures(results: list[EpisodeResult], policy: Policy, nonfinite_actions: int) -> dict[str, Any]:
    """The task's figures over the episodes, as eval computes them (errors averaged over every scored step of every
    episode), the worst margins with the joint that has them, and the runtime's step time."""
    dt, names = policy.control_dt, policy.joint_names
    active = sum(r.active for r in results)
    fall_rate = float(np.mean([r.failed for r in results]))
    lengths = np.array([r.length for r in results], dtype=np.float64)
    margin = np.min([r.joint_margin for r in results], axis=0)
    torque = np.max([r.torque_ratio for r in results], axis=0)
    step_us = np.array([s for r in results for s in r.step_s]) * 1e6
    return {
        "fall_rate": fall_rate,
        "survival_rate": 1.0 - fall_rate,
        "lin_vel_error": _mean(sum(r.lin_vel_error for r in results), active),
        "yaw_rate_error": _mean(sum(r.yaw_rate_error for r in results), active),
        "distance_walked": float(np.mean([r.path for r in results])) * dt,
        "mean_episode_length": float(lengths.mean()),
        "mean_episode_length_s": float(lengths.mean()) * dt,
        "joint_limit_margin": {"rad": float(margin.min()), "joint": names[int(margin.argmin())]},
        "torque_margin": {"fraction": float(1.0 - torque.max()), "joint": names[int(torque.argmax())]},
        "step_time_us": {"median": float(np.median(step_us)), "p99": float(np.percentile(step_us, 99))},
        "nonfinite_actions": nonfinite_actions,
    }


def verdict(policy: Policy, result: dict[str, Any]) -> bool:
    """Every threshold of the task met, and no non-finite action (NaN figures meet none)."""
    passes = {"<=": lambda v, b: v <= b, ">=": lambda v, b: v >= b}
    thresholds = policy.metadata.check.thresholds
    return result["nonfinite_actions"] == 0 and all(
        passes[op](result[k], bound) for k, (op, bound) in thresholds.items()
    )


def run(
    policy: Policy, model: mujoco.MjModel, conditions: Conditions, starts: list[EpisodeStart] | None = None
) -> dict[str, Any]:
    """The check of ``policy`` in ``model`` under ``conditions`` (``starts`` in place of the drawn ones, eval's for a
    comparison); returns the figures, the thresholds and the verdict."""
    conditions.validate(policy.control_dt)
    check = policy.metadata.check
    rng = np.random.default_rng(conditions.seed + 1)  # the reads' jitter and the readings' noise
    robot = MujocoRobot(model, policy.metadata, conditions.noise_scale, rng)
    starts = starts if starts is not None else draw_starts(policy.metadata, robot, conditions)
    seconds = conditions.seconds if conditions.seconds is not None else check.episode_s
    steps = round(seconds / policy.control_dt)
    before = policy.nonfinite_actions
    results = [run_episode(policy, robot, start, steps, conditions.jitter_s, rng) for start in starts]
    result = {"task": policy.metadata.task, "episodes": len(results), "seconds": steps * policy.control_dt}
    result |= figures(results, policy, policy.nonfinite_actions - before)
    result["thresholds"] = {k: list(v) for k, v in check.thresholds.items()}
    result["meets_thresholds"] = verdict(policy, result)
    return result
