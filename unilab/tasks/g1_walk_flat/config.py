"""``g1_walk_flat``'s env: the walk (``unilab.tasks.walking``) with the G1's data.

Actor observation (100): torso gyro x0.25 (3), gravity projected into the torso frame (3),
q - q0 (29, noise 0.01), qdot x0.05 (29, noise 0.1 before scaling), last action (29),
command (vx, vy, wz) (3), gait clock [sin phi_L, sin phi_R, cos phi_L, cos phi_R] (4).
Critic observation (103): the same without noise, then pelvis body-frame linear velocity x2.0.
"""

from __future__ import annotations

import math

from unilab.robots import g1
from unilab.sim import SimConfig
from unilab.tasks.walking import Gait, WalkSpec, flat_walk_factory

# Per-joint weights of the pose penalty, by short joint name: the legs are free to walk, the rest holds still.
_POSE_WEIGHTS = {
    "hip_pitch": 0.01,
    "hip_roll": 1.0,
    "hip_yaw": 5.0,
    "knee": 0.01,
    "ankle_pitch": 5.0,
    "ankle_roll": 5.0,
}

WALK = WalkSpec(
    name="g1_walk_flat",
    robot=g1.ROBOT,
    scene=g1.SCENE,
    physics=SimConfig(substeps=3, nconmax=64, njmax=400),
    commands={"lin_vel_x": (-0.6, 1.0), "lin_vel_y": (-0.4, 0.4), "ang_vel_z": (-0.8, 0.8), "deadzone": 0.2},
    gait=Gait(frequency=1.5, offsets=(0.0, math.pi), swing_height=0.09),
    weights={
        "tracking_lin_vel": 2.0,
        "tracking_ang_vel": 1.5,
        "penalty_ang_vel_xy": -1.0,
        "penalty_orientation": -10.0,
        "penalty_action_rate": -4.0,
        "pose": -0.5,
        "penalty_feet_ori": -20.0,
        "feet_phase": 5.0,
        "alive": 10.0,
    },
    pose_weights=tuple(_POSE_WEIGHTS.get(g1.short_name(j), 50.0) for j in g1.JOINT_NAMES),
    tilt_limit_deg=65.0,
    min_root_height=0.3,
)


make_task = flat_walk_factory(WALK)
