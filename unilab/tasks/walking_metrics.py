"""How ``unilab eval`` scores a walking policy, of any robot: does it fall, and how well does it follow the command."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from unilab.envs.functional import FunctionalEnv
from unilab.tasks.metrics import active_mean, episode_lengths
from unilab.tasks.task import EvalMetrics


def readings(env: FunctionalEnv, state: TensorDict) -> dict[str, torch.Tensor]:
    """The command and the signals the rewards compare it with, cloned (the runner rewrites its state)."""
    sensordata, robot = state["sim", "sensordata"], env.task.robot
    return {
        "commands": state["env", "velocity"][:, :3].clone(),
        "lin_vel_xy": env.ctx.sensor(sensordata, robot.linvel_sensor)[:, :2].clone(),
        "yaw_rate": env.ctx.sensor(sensordata, robot.gyro_sensor)[:, 2].clone(),
    }


def score(
    commands: torch.Tensor,
    lin_vel_xy: torch.Tensor,
    yaw_rate: torch.Tensor,
    active: torch.Tensor,
    failed: torch.Tensor,
    episode_length: torch.Tensor,
    dt: float,
) -> dict[str, float]:
    """Velocity-tracking scores from (T, N) trajectories.

    ``commands`` (T, N, 3) is (vx, vy, wz) in the base frame, matching ``lin_vel_xy`` (T, N, 2) from the robot's
    body-frame velocity sensor and ``yaw_rate`` (T, N) from its gyro, the same signals the rewards use.
    ``failed`` (N,) marks envs whose first episode ended by a failure termination rather than the time-out.
    ``distance_walked`` is the mean path length of the first episodes, in metres.
    """
    lin = torch.linalg.vector_norm(commands[..., :2] - lin_vel_xy, dim=-1)
    yaw = (commands[..., 2] - yaw_rate).abs()
    path = (torch.linalg.vector_norm(lin_vel_xy, dim=-1) * active.float()).sum(0) * dt
    return {
        "fall_rate": float(failed.float().mean()),
        "lin_vel_error": active_mean(lin, active),
        "yaw_rate_error": active_mean(yaw, active),
        "distance_walked": float(path.mean()),
        **episode_lengths(episode_length, dt),
    }


METRICS = EvalMetrics(readings, score, thresholds={"fall_rate": ("<=", 0.05), "lin_vel_error": ("<=", 0.25)})
"""A walking policy works when at most 5 % of robots fall and the mean velocity error is at most 0.25 m/s."""

ROUGH_METRICS = EvalMetrics(readings, score, thresholds={"fall_rate": ("<=", 0.05), "lin_vel_error": ("<=", 0.30)})
"""On rough ground the velocity bound is looser, 0.3 m/s, since a robot climbing a step slows down for it."""
