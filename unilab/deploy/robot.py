"""The robot side of the runtime: what a robot reports each control step, what it is sent back, and the interface a
robot's adapter implements.

The runtime reads no hardware itself: an adapter turns the robot's own messages into ``Readings`` in the policy's
joint order and sends the ``JointTargets`` on to its motor controllers, so that one ``Policy`` runs on the MuJoCo
adapter that ships (``unilab.deploy.mujoco_robot``) and on a real robot alike. The next adapter is Unitree's SDK
(``unitree_sdk2py``'s low-level state and command messages; ``docs/deploy.md``); it is an interface only so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Readings:
    """One control step's sensor readings, in SI units and the policy's joint order (``Policy.joint_names``).

    ``gyro`` is the angular velocity (rad/s) in the frame of the IMU the policy was trained with
    (``metadata.imu.gyro_sensor``); ``quat`` the orientation (w, x, y, z) of ``metadata.imu.orientation_body`` in a
    world frame whose z axis points up (only its tilt matters: yaw is free). ``height_scan``, for a policy that
    reads one, is the base's height above the ground (m) at each point of ``metadata.scan.points`` turned with the
    base's yaw and centred under it; the runtime clips it as training did.
    """

    joint_pos: np.ndarray
    joint_vel: np.ndarray
    gyro: np.ndarray
    quat: np.ndarray
    height_scan: np.ndarray | None = None


@dataclass(frozen=True)
class JointTargets:
    """What the motor controllers are sent each control step: position targets (rad) and the stiffness (N m/rad)
    and damping (N m s/rad) the policy was trained with, in the policy's joint order. A controller applies
    ``kp * (position - q) - kv * qdot``, clipped to each joint's torque limit, at its own rate."""

    position: np.ndarray
    kp: np.ndarray
    kv: np.ndarray


class Robot(Protocol):
    """A robot as the runtime drives it; implement it for a robot's own I/O."""

    def read(self) -> Readings:
        """The latest readings, taken now: the policy acts on what this returns."""
        ...

    def write(self, targets: JointTargets) -> None:
        """Hand the targets to the motor controllers, which hold them until the next write."""
        ...
