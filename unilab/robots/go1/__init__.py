"""The Unitree Go1 quadruped: its model (``go1.xml``, the flat scene ``scene_flat.xml``, the ``NOTICE`` naming where
they come from, ``PROVENANCE.md`` saying what was changed) and its robot config, ``ROBOT``.

Joints are in the MJCF's order, which is also the action order: hip (abduction, about x), thigh and calf (both
about y) of the front-right, front-left, rear-right and rear-left legs. The actuators are position servos whose
gains follow from each joint's reflected rotor inertia a (the armature): kp = a w^2 and kd = 2 zeta a w with
w = 2 pi 10 Hz and zeta = 2, which keeps every joint's closed loop at the same stiffness whatever its gearing.
``tests/test_robot_constants.py`` checks these constants against the compiled model.
"""

from __future__ import annotations

from pathlib import Path

import mujoco

from unilab import sim
from unilab.context import RobotConfig
from unilab.sim import SimConfig

LEGS: tuple[str, ...] = ("FR", "FL", "RR", "RL")
JOINT_NAMES: tuple[str, ...] = tuple(f"{leg}_{part}_joint" for leg in LEGS for part in ("hip", "thigh", "calf"))
NUM_JOINTS = len(JOINT_NAMES)

ROOT_HEIGHT = 0.278
"""Trunk height of the ``stand`` keyframe (m)."""

DEFAULT_JOINT_POS: tuple[float, ...] = tuple(
    {"hip": 0.1 if leg[1] == "R" else -0.1, "thigh": 0.9, "calf": -1.8}[part]
    for leg in LEGS
    for part in ("hip", "thigh", "calf")
)
"""q0 of the ``stand`` keyframe: legs bent under the trunk, the hips splayed outwards."""

ROTOR_INERTIA = 0.000111842  # kg m^2, about the rotor's axis
GEAR_RATIO = {"hip": 6.0, "thigh": 6.0, "calf": 9.0}
EFFORT_LIMIT = {"hip": 23.7, "thigh": 23.7, "calf": 35.55}  # N m
NATURAL_FREQUENCY = 2 * 3.1415926535 * 10.0  # rad/s
DAMPING_RATIO = 2.0


def part(joint: str) -> str:
    """``FR_thigh_joint`` -> ``thigh``."""
    return joint.split("_")[1]


def armature(joint: str) -> float:
    """The rotor inertia reflected through the joint's gearbox, a = I_rotor * ratio^2."""
    return ROTOR_INERTIA * GEAR_RATIO[part(joint)] ** 2


JOINT_ARMATURE: tuple[float, ...] = tuple(armature(j) for j in JOINT_NAMES)
JOINT_KP: tuple[float, ...] = tuple(a * NATURAL_FREQUENCY**2 for a in JOINT_ARMATURE)
JOINT_KV: tuple[float, ...] = tuple(2 * DAMPING_RATIO * a * NATURAL_FREQUENCY for a in JOINT_ARMATURE)
JOINT_EFFORT_LIMIT: tuple[float, ...] = tuple(EFFORT_LIMIT[part(j)] for j in JOINT_NAMES)

ACTION_SCALE: tuple[float, ...] = tuple(0.25 * e / kp for e, kp in zip(JOINT_EFFORT_LIMIT, JOINT_KP, strict=True))
"""An action of 1 asks a quarter of the joint's torque limit of its servo: 0.373 rad at the hip and thigh, 0.249 at
the calf, so one policy output means about the same effort on every joint."""

_MIRROR_LEG = {"FR": "FL", "FL": "FR", "RR": "RL", "RL": "RR"}
MIRROR_JOINT_INDEX: tuple[int, ...] = tuple(
    JOINT_NAMES.index(f"{_MIRROR_LEG[j.split('_')[0]]}_{part(j)}_joint") for j in JOINT_NAMES
)
"""The sagittal mirror swaps right and left legs."""
MIRROR_JOINT_SIGN: tuple[float, ...] = tuple(-1.0 if part(j) == "hip" else 1.0 for j in JOINT_NAMES)
"""The hips turn about the forward axis, which the mirror reverses; thighs and calves pitch, which it keeps."""

FOOT_SITES: tuple[str, ...] = LEGS
SENSORS: dict[str, int] = {
    "trunk_local_linvel": 3,
    "trunk_gyro": 3,
    "trunk_upvector": 3,
    "FR_foot_pos": 3,
    "FL_foot_pos": 3,
    "RR_foot_pos": 3,
    "RL_foot_pos": 3,
    "FR_foot_linvel": 3,
    "FL_foot_linvel": 3,
    "RR_foot_linvel": 3,
    "RL_foot_linvel": 3,
}
"""Sensor name -> dimension, in the MJCF's order."""

SCENE = Path(__file__).resolve().parent / "scene_flat.xml"
"""The Go1 on flat ground: the MJCF tasks build their worlds from (a terrain replaces its ``floor``)."""

ROBOT = RobotConfig(
    name="go1",
    joint_names=JOINT_NAMES,
    default_joint_pos=DEFAULT_JOINT_POS,
    keyframe="stand",
    base_body="trunk",
    torso_body="trunk",
    foot_sites=FOOT_SITES,
    foot_pos_sensors=tuple(f"{leg}_foot_pos" for leg in LEGS),
    foot_linvel_sensors=tuple(f"{leg}_foot_linvel" for leg in LEGS),
    foot_geoms=tuple(f"{leg}_foot_collision" for leg in LEGS),
    gyro_sensor="trunk_gyro",
    upvector_sensor="trunk_upvector",
    linvel_sensor="trunk_local_linvel",
    mirror_joint_index=MIRROR_JOINT_INDEX,
    mirror_joint_sign=MIRROR_JOINT_SIGN,
    mirror_foot_index=tuple(LEGS.index(_MIRROR_LEG[leg]) for leg in LEGS),
    joint_kp=JOINT_KP,
    joint_kv=JOINT_KV,
    joint_effort=JOINT_EFFORT_LIMIT,
    action_scale=ACTION_SCALE,
    payload_body="trunk",
)
"""What the env needs of the Go1 beyond its MJCF."""


def load_model(config: SimConfig | None = None) -> mujoco.MjModel:
    """The Go1 scene compiled, with ``config``'s solver overrides."""
    return sim.load_model(SCENE, config)
