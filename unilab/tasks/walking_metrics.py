"""How ``unilab eval`` scores a walking policy, of any robot: does it fall, and how well does it follow the command."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from unilab.tasks.metrics import active_mean, episode_lengths, share
from unilab.tasks.task import EvalMetrics

if TYPE_CHECKING:  # annotations only: the env, and tensordict with torch._dynamo, load when an env is built
    from tensordict import TensorDict

    from unilab.envs.functional import FunctionalEnv
    from unilab.envs.layout import EnvView


def readings(env: EnvView, state: TensorDict) -> dict[str, torch.Tensor]:
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
    position: torch.Tensor | None = None,
) -> dict[str, Any]:
    """Velocity-tracking scores from (T, N) trajectories.

    ``commands`` (T, N, 3) is (vx, vy, wz) in the base frame, matching ``lin_vel_xy`` (T, N, 2) from the robot's
    body-frame velocity sensor and ``yaw_rate`` (T, N) from its gyro, the same signals the rewards use.
    ``failed`` (N,) marks envs whose first episode ended by a failure termination rather than the time-out.
    ``distance_walked`` is the mean path length of the first episodes, in metres. ``falls_by_command`` splits the
    envs by the kind of command their first episode held (``command_kinds``), each kind with its envs and fall rate,
    so that a fall rate names what the robots that fell were asked to do. Given ``position`` (T, N, 3), the
    base's world x and y and the height of the lowest foot, ``fall_distance`` is how far from their starting point
    the robots that fell were at their last scored step (on a pyramid of stairs: on the platform, on the steps, or
    past them), ``fall_rise`` how much higher their lowest foot then was (negative: on the way down); both are left
    out when no robot fell.
    """
    lin = torch.linalg.vector_norm(commands[..., :2] - lin_vel_xy, dim=-1)
    yaw = (commands[..., 2] - yaw_rate).abs()
    path = (torch.linalg.vector_norm(lin_vel_xy, dim=-1) * active.float()).sum(0) * dt
    figures = {
        "fall_rate": share(failed),
        "lin_vel_error": active_mean(lin, active),
        "yaw_rate_error": active_mean(yaw, active),
        "distance_walked": float(path.mean()),
        **episode_lengths(episode_length, dt),
        "falls_by_command": falls_by_command(commands[0], failed),
    }
    if position is not None and failed.any():
        last = (active.long().sum(0) - 1).clamp(min=0)  # each env's last scored step
        envs = torch.arange(position.shape[1], device=position.device)
        moved = position[last, envs] - position[0]
        figures["fall_distance"] = float(torch.linalg.vector_norm(moved[failed, :2], dim=-1).mean())
        figures["fall_rise"] = float(moved[failed, 2].mean())
    return figures


TURN_RATE = 0.2
"""rad/s: a command turning slower than this is walked as if straight: its robot turns less than 35 degrees in the 3 s
a 0.5 m/s walker takes to reach a terrain pyramid's first step, and meets the steps about as a straight one does."""


def command_kinds(command: torch.Tensor, turn_rate: float = TURN_RATE) -> dict[str, torch.Tensor]:
    """Envs (N,) by the kind of their command (N, 3) (vx, vy, wz), a partition: ``turning`` above ``turn_rate``
    whatever the walk; else ``standing`` with no planar speed (the commands' deadzone zeroes the slow ones), else
    ``forward``, ``backward`` or ``sideways`` by the larger planar component. The terrain suites hand half their
    robots straight commands and half turning ones, in every direction: one fall rate hides which of them fail."""
    vx, vy, wz = command.unbind(-1)
    turning = wz.abs() > turn_rate
    standing = (vx == 0) & (vy == 0) & ~turning
    walking = ~turning & ~standing
    along = vx.abs() >= vy.abs()
    return {
        "forward": walking & along & (vx > 0),
        "backward": walking & along & (vx < 0),
        "sideways": walking & ~along,
        "turning": turning,
        "standing": standing,
    }


def falls_by_command(command: torch.Tensor, failed: torch.Tensor) -> dict[str, dict[str, float]]:
    """For each of ``command_kinds``: its envs and, where it has any, the share of them that fell.

    ``command`` is each env's command at its first scored step, which its first episode holds throughout; an env
    whose episode ended on its very first step (only a physics that blew up does that) is counted under the command
    of the episode after it."""
    out = {}
    for kind, envs in command_kinds(command).items():
        count = int(envs.sum())
        out[kind] = {"num_envs": count} if count == 0 else {"num_envs": count, "fall_rate": share(failed[envs])}
    return out


METRICS = EvalMetrics(
    readings, score, thresholds={"fall_rate": ("<=", 0.05), "lin_vel_error": ("<=", 0.25)}, rates=("fall_rate",)
)
"""A walking policy works when at most 5 % of robots fall and the mean velocity error is at most 0.25 m/s."""


def rough_readings(env: EnvView, state: TensorDict) -> dict[str, torch.Tensor]:
    """``readings``, and where the robot is on the terrain: the base's world x and y, and the height of its lowest
    foot, which stands on the ground while the robot does (the base's own height also drops as it falls)."""
    sensordata, robot = state["sim", "sensordata"], env.task.robot
    feet = torch.stack([env.ctx.sensor(sensordata, name)[:, 2] for name in robot.foot_pos_sensors], dim=-1)
    position = torch.cat((state["sim", "qpos"][:, :2], feet.amin(-1, keepdim=True)), dim=-1)
    return {**readings(env, state), "position": position}


def terrain_rows(env: FunctionalEnv, state: TensorDict) -> dict[str, torch.Tensor]:
    """Envs by the terrain row (difficulty) their first episode starts on: ``row_0`` (easiest) to the last."""
    level = state["env", "terrain_level"]
    return {f"row_{row}": level == row for row in range(env.task.terrain.rows)}


ROUGH_METRICS = EvalMetrics(
    rough_readings,
    score,
    thresholds={"fall_rate": ("<=", 0.05), "lin_vel_error": ("<=", 0.30)},
    groups={"terrain_rows": terrain_rows},
    rates=("fall_rate",),
)
"""On rough ground the velocity bound is looser, 0.3 m/s, since a robot climbing a step slows down for it; the
figures are also given for each terrain row."""
