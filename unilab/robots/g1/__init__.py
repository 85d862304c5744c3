"""The Unitree G1 (29 DoF): its model (``g1.xml``, the flat scene ``scene_flat.xml``, their licence and provenance
beside this file) and its robot config, ``ROBOT``.

Everything a task or a learner needs to know about the robot, and nothing the MJCF could not tell it, lives here
so that tasks never parse the model for constants. The values follow the robot's published specification and the
MJCF; ``tests/test_robot_constants.py`` checks that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mujoco

from unilab import sim
from unilab.context import RobotConfig
from unilab.sim import SimConfig

JOINT_NAMES: tuple[str, ...] = (
    "left_hip_pitch_joint",
    "left_hip_roll_joint",
    "left_hip_yaw_joint",
    "left_knee_joint",
    "left_ankle_pitch_joint",
    "left_ankle_roll_joint",
    "right_hip_pitch_joint",
    "right_hip_roll_joint",
    "right_hip_yaw_joint",
    "right_knee_joint",
    "right_ankle_pitch_joint",
    "right_ankle_roll_joint",
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    "left_shoulder_pitch_joint",
    "left_shoulder_roll_joint",
    "left_shoulder_yaw_joint",
    "left_elbow_joint",
    "left_wrist_roll_joint",
    "left_wrist_pitch_joint",
    "left_wrist_yaw_joint",
    "right_shoulder_pitch_joint",
    "right_shoulder_roll_joint",
    "right_shoulder_yaw_joint",
    "right_elbow_joint",
    "right_wrist_roll_joint",
    "right_wrist_pitch_joint",
    "right_wrist_yaw_joint",
)
NUM_JOINTS = len(JOINT_NAMES)

BODY_NAMES: tuple[str, ...] = (
    "world",
    "pelvis",
    "left_hip_pitch_link",
    "left_hip_roll_link",
    "left_hip_yaw_link",
    "left_knee_link",
    "left_ankle_pitch_link",
    "left_ankle_roll_link",
    "right_hip_pitch_link",
    "right_hip_roll_link",
    "right_hip_yaw_link",
    "right_knee_link",
    "right_ankle_pitch_link",
    "right_ankle_roll_link",
    "waist_yaw_link",
    "waist_roll_link",
    "torso_link",
    "left_shoulder_pitch_link",
    "left_shoulder_roll_link",
    "left_shoulder_yaw_link",
    "left_elbow_link",
    "left_wrist_roll_link",
    "left_wrist_pitch_link",
    "left_wrist_yaw_link",
    "right_shoulder_pitch_link",
    "right_shoulder_roll_link",
    "right_shoulder_yaw_link",
    "right_elbow_link",
    "right_wrist_roll_link",
    "right_wrist_pitch_link",
    "right_wrist_yaw_link",
)

ROOT_HEIGHT = 0.754
"""Pelvis height of the ``stand`` keyframe (m)."""


def short_name(joint: str) -> str:
    """``left_hip_pitch_joint`` -> ``hip_pitch``: the name shared by a joint and its mirror twin."""
    return joint.removeprefix("left_").removeprefix("right_").removesuffix("_joint")


_SHORT_DEFAULTS = {"hip_pitch": -0.312, "knee": 0.669, "ankle_pitch": -0.363, "shoulder_pitch": 0.2, "elbow": 0.6}


def _default_pos(joint: str) -> float:
    if short_name(joint) == "shoulder_roll":
        return 0.2 if joint.startswith("left_") else -0.2
    return _SHORT_DEFAULTS.get(short_name(joint), 0.0)


DEFAULT_JOINT_POS: tuple[float, ...] = tuple(_default_pos(j) for j in JOINT_NAMES)
"""q0 of the ``stand`` keyframe, in joint order."""


@dataclass(frozen=True)
class ActuatorGroup:
    """One motor class: PD gains and torque limit of a MuJoCo ``<position>`` actuator.

    kp = armature * (2*pi*10 Hz)^2 and kv = 2 * zeta * armature * omega with zeta = 2
    (mjlab's G1 values); the torque limit is the motor's effort limit.
    """

    kp: float
    kv: float
    effort_limit: float
    joints: tuple[str, ...]  # short names, without side prefix and "_joint" suffix


ACTUATOR_GROUPS: dict[str, ActuatorGroup] = {
    "A": ActuatorGroup(40.179, 2.558, 88.0, ("hip_pitch", "hip_yaw", "waist_yaw")),
    "B": ActuatorGroup(99.098, 6.309, 139.0, ("hip_roll", "knee")),
    "C": ActuatorGroup(28.501, 1.814, 50.0, ("ankle_pitch", "ankle_roll", "waist_roll", "waist_pitch")),
    "D": ActuatorGroup(14.251, 0.907, 25.0, ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll")),
    "E": ActuatorGroup(16.778, 1.068, 5.0, ("wrist_pitch", "wrist_yaw")),
}


def actuator_group(joint: str) -> str:
    """Name of the actuator group that drives ``joint``."""
    short = short_name(joint)
    for name, group in ACTUATOR_GROUPS.items():
        if short in group.joints:
            return name
    raise KeyError(f"joint {joint!r} belongs to no G1 actuator group")


JOINT_KP: tuple[float, ...] = tuple(ACTUATOR_GROUPS[actuator_group(j)].kp for j in JOINT_NAMES)
JOINT_KV: tuple[float, ...] = tuple(ACTUATOR_GROUPS[actuator_group(j)].kv for j in JOINT_NAMES)
JOINT_EFFORT_LIMIT: tuple[float, ...] = tuple(ACTUATOR_GROUPS[actuator_group(j)].effort_limit for j in JOINT_NAMES)


def _mirror_index(joint: str) -> int:
    if joint.startswith("left_"):
        return JOINT_NAMES.index("right_" + joint.removeprefix("left_"))
    if joint.startswith("right_"):
        return JOINT_NAMES.index("left_" + joint.removeprefix("right_"))
    return JOINT_NAMES.index(joint)


MIRROR_JOINT_INDEX: tuple[int, ...] = tuple(_mirror_index(j) for j in JOINT_NAMES)
"""mirrored[i] = x[MIRROR_JOINT_INDEX[i]] * MIRROR_JOINT_SIGN[i] mirrors a joint vector left-right."""

MIRROR_JOINT_SIGN: tuple[float, ...] = tuple(-1.0 if ("roll" in j or "yaw" in j) else 1.0 for j in JOINT_NAMES)
"""Roll and yaw axes flip under the sagittal mirror; pitch axes do not."""

TORSO_BODY = "torso_link"
FOOT_SITES: tuple[str, str] = ("left_foot", "right_foot")

SENSORS: dict[str, int] = {
    "pelvis_local_linvel": 3,
    "pelvis_gyro": 3,
    "torso_gyro": 3,
    "torso_upvector": 3,
    "left_foot_pos": 3,
    "left_foot_quat": 4,
    "right_foot_pos": 3,
    "right_foot_quat": 4,
    "left_foot_linvel": 3,
    "right_foot_linvel": 3,
}
"""Sensor name -> dimension, in the MJCF's order."""

SCENE = Path(__file__).resolve().parent / "scene_flat.xml"
"""The G1 on flat ground: the MJCF tasks build their worlds from (a terrain replaces its ``floor``)."""

ROBOT = RobotConfig(
    name="g1",
    joint_names=JOINT_NAMES,
    default_joint_pos=DEFAULT_JOINT_POS,
    keyframe="stand",
    base_body="pelvis",
    torso_body=TORSO_BODY,
    foot_sites=FOOT_SITES,
    foot_pos_sensors=("left_foot_pos", "right_foot_pos"),
    foot_quat_sensors=("left_foot_quat", "right_foot_quat"),
    foot_linvel_sensors=("left_foot_linvel", "right_foot_linvel"),
    foot_bodies=("left_ankle_roll_link", "right_ankle_roll_link"),  # each sole: seven capsules and four spheres
    gyro_sensor="torso_gyro",
    upvector_sensor="torso_upvector",
    linvel_sensor="pelvis_local_linvel",
    mirror_joint_index=MIRROR_JOINT_INDEX,
    mirror_joint_sign=MIRROR_JOINT_SIGN,
    mirror_foot_index=(1, 0),
    joint_kp=JOINT_KP,
    joint_kv=JOINT_KV,
    joint_effort=JOINT_EFFORT_LIMIT,
    # The G1's tasks are tuned with actions in radians: their policies' outputs are the offsets themselves.
    action_scale=1.0,
    payload_body=TORSO_BODY,
)
"""What the env needs of the G1 beyond its MJCF."""


def load_model(config: SimConfig | None = None) -> mujoco.MjModel:
    """The G1 scene compiled, with ``config``'s solver overrides."""
    return sim.load_model(SCENE, config)
