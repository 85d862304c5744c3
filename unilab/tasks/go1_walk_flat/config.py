"""``go1_walk_flat``'s env: the walk (``unilab.tasks.walking``) with the Go1's data.

Actor observation (53): trunk gyro x0.25 (3), gravity projected into the trunk frame (3), q - q0 (12, noise 0.01),
qdot x0.05 (12, noise 0.1 before scaling), last action (12), command (vx, vy, wz) (3), gait clock
[sin phi_FR..RL, cos phi_FR..RL] (8). Critic observation (56): the same without noise, then the trunk's body-frame
linear velocity x2.0.

Where the Go1's walk differs from the G1's: a trot (the diagonal legs in phase, 2 Hz, feet lifted 8 cm), wider
command ranges (a quadruped side-steps and turns as easily as it walks), a pose penalty that holds mainly the hips,
no foot orientation penalty (its feet are points), an episode that ends only when the trunk tilts past 70 degrees
(a lying quadruped has not necessarily fallen), and 5 ms physics steps, four to a control step.
"""

from __future__ import annotations

import math

from unilab.robots import go1
from unilab.sim import SimConfig
from unilab.tasks.walking import Gait, WalkSpec, flat_walk_factory

TROT = (0.0, math.pi, math.pi, 0.0)
"""Gait phase offsets in foot order (FR, FL, RR, RL): the diagonal pairs swing half a cycle apart."""

# Per-joint weights of the pose penalty: the hips (abduction) keep the legs under the trunk; thighs and calves walk.
_POSE_WEIGHTS = {"hip": 1.0, "thigh": 0.1, "calf": 0.1}

WALK = WalkSpec(
    name="go1_walk_flat",
    robot=go1.ROBOT,
    scene=go1.SCENE,
    physics=SimConfig(substeps=4, nconmax=32, njmax=200),
    commands={"lin_vel_x": (-1.0, 1.0), "lin_vel_y": (-0.6, 0.6), "ang_vel_z": (-1.0, 1.0), "deadzone": 0.1},
    gait=Gait(frequency=2.0, offsets=TROT, swing_height=0.08, sigma=0.08),
    weights={
        "tracking_lin_vel": 2.0,
        "tracking_ang_vel": 1.5,
        "penalty_ang_vel_xy": -1.0,
        "penalty_orientation": -10.0,
        "penalty_action_rate": -1.0,
        "pose": -0.5,
        "feet_phase": 5.0,
        "alive": 10.0,
    },
    pose_weights=tuple(_POSE_WEIGHTS[go1.part(j)] for j in go1.JOINT_NAMES),
    tilt_limit_deg=70.0,
)


make_task = flat_walk_factory(WALK)
