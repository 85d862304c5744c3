"""``g1_walk_flat``'s env: G1 velocity tracking on flat ground.

Actor observation (100): torso gyro x0.25 (3), gravity projected into the torso frame (3),
q - q0 (29, noise 0.01), qdot x0.05 (29, noise 0.1 before scaling), last action (29),
command (vx, vy, wz) (3), gait clock [sin phi_L, sin phi_R, cos phi_L, cos phi_R] (4).
Critic observation (103): the same without noise, then pelvis body-frame linear velocity x2.0.
"""

from __future__ import annotations

import math

import torch

from unilab.core.spec import Mirror
from unilab.envs.config import TaskConfig
from unilab.managers.terms import (
    ActionTerm,
    CommandTerm,
    CurriculumTerm,
    EventTerm,
    ObsTerm,
    RewardTerm,
    TerminationTerm,
)
from unilab.mdp import actions, commands, curricula, events, observations, rewards, terminations
from unilab.robots import g1
from unilab.sim import SimConfig

# Per-joint weights of the pose penalty, by short joint name.
_POSE_WEIGHTS = {
    "hip_pitch": 0.01,
    "hip_roll": 1.0,
    "hip_yaw": 5.0,
    "knee": 0.01,
    "ankle_pitch": 5.0,
    "ankle_roll": 5.0,
}
POSE_WEIGHTS = torch.tensor([_POSE_WEIGHTS.get(g1.short_name(j), 50.0) for j in g1.JOINT_NAMES])

JOINTS = Mirror(g1.MIRROR_JOINT_INDEX, g1.MIRROR_JOINT_SIGN)
ANGULAR = Mirror.signs(-1, 1, -1)  # a pseudo-vector under the sagittal mirror
LINEAR = Mirror.signs(1, -1, 1)
COMMAND = Mirror.signs(1, -1, -1)  # (vx, vy, wz)
CLOCK = Mirror((1, 0, 3, 2), (1.0, 1.0, 1.0, 1.0))  # left and right phases swap

GYRO, UPVECTOR, LINVEL = "torso_gyro", "torso_upvector", "pelvis_local_linvel"


def _actor_terms(noise_scale: float) -> dict[str, ObsTerm]:
    return {
        "gyro": ObsTerm(observations.sensor, {"name": GYRO}, scale=0.25, mirror=ANGULAR),
        "gravity": ObsTerm(observations.projected_gravity, {"body": g1.TORSO_BODY}, mirror=LINEAR),
        "joint_pos": ObsTerm(observations.joint_pos_rel, noise=0.01 * noise_scale, mirror=JOINTS),
        "joint_vel": ObsTerm(observations.joint_vel, noise=0.1 * noise_scale, scale=0.05, mirror=JOINTS),
        "actions": ObsTerm(observations.last_action, mirror=JOINTS),
        "command": ObsTerm(observations.command, {"name": "velocity"}, mirror=COMMAND),
        "gait_phase": ObsTerm(observations.phase_sin_cos, {"name": "gait_phase"}, mirror=CLOCK),
    }


def make_task(noise_scale: float = 1.0) -> TaskConfig:
    """The task; ``noise_scale`` multiplies the actor's observation noise amplitudes."""
    critic = {**_actor_terms(0.0), "linvel": ObsTerm(observations.sensor, {"name": LINVEL}, scale=2.0, mirror=LINEAR)}
    feet_pos = ("left_foot_pos", "right_foot_pos")
    return TaskConfig(
        name="g1_walk_flat",
        scene=g1.SCENE,
        robot=g1.ROBOT,
        physics=SimConfig(substeps=3, nconmax=64, njmax=400),
        episode_length_s=20.0,
        action=ActionTerm(actions.joint_position_offsets, {"scale": 1.0}, mirror=JOINTS),
        observations={"policy": _actor_terms(noise_scale), "critic": critic},
        rewards={
            "tracking_lin_vel": RewardTerm(
                rewards.track_lin_vel_xy_exp,
                2.0,
                {"command": "velocity", "velocity_sensor": LINVEL, "sigma": 0.25},
            ),
            "tracking_ang_vel": RewardTerm(
                rewards.track_ang_vel_z_exp, 1.5, {"command": "velocity", "gyro": GYRO, "sigma": 0.25}
            ),
            "penalty_ang_vel_xy": RewardTerm(rewards.ang_vel_xy_l2, -1.0, {"gyro": GYRO}, curriculum_scaled=True),
            "penalty_orientation": RewardTerm(
                rewards.upvector_xy_l2, -10.0, {"upvector": UPVECTOR}, curriculum_scaled=True
            ),
            "penalty_action_rate": RewardTerm(rewards.action_rate_l2, -4.0, curriculum_scaled=True),
            "pose": RewardTerm(rewards.joint_pose_weighted_l2, -0.5, {"weights": POSE_WEIGHTS}, curriculum_scaled=True),
            "penalty_feet_ori": RewardTerm(
                rewards.quat_xy_l2,
                -20.0,
                {"quat_sensors": ("left_foot_quat", "right_foot_quat")},
                curriculum_scaled=True,
            ),
            "feet_phase": RewardTerm(
                rewards.feet_phase_height_exp,
                5.0,
                {"phase": "gait_phase", "foot_pos_sensors": feet_pos, "swing_height": 0.09, "sigma": 0.04},
            ),
            "alive": RewardTerm(rewards.alive, 10.0),
        },
        terminations={
            "tilt": TerminationTerm(terminations.tilt_exceeds, {"upvector": UPVECTOR, "limit": math.radians(65.0)}),
            "fall": TerminationTerm(terminations.root_height_below, {"min_height": 0.3}),
            "time_out": TerminationTerm(terminations.time_out, time_out=True),
        },
        commands={
            "velocity": CommandTerm(
                3,
                commands.uniform_velocity,
                {"lin_vel_x": (-0.6, 1.0), "lin_vel_y": (-0.4, 0.4), "ang_vel_z": (-0.8, 0.8), "deadzone": 0.2},
            ),
            "gait_phase": CommandTerm(
                2, commands.gait_phase_offset, advance=commands.gait_phase_advance, advance_params={"frequency": 1.5}
            ),
        },
        events={
            "root_pose": EventTerm(
                events.reset_to_default_pose, {"xy_range": 0.5, "yaw_range": math.pi, "root_vel_range": 0.5}
            ),
            "pd_gains": EventTerm(events.scale_pd_gains, {"scale_range": (0.9, 1.1)}),
        },
        curricula={
            "penalty_scale": CurriculumTerm(
                curricula.penalty_scale_by_episode_length,
                state={"penalty_scale": 0.5, "mean_episode_length": 0.0},
                params={
                    "window": 500,
                    "down_threshold": 150.0,
                    "up_threshold": 750.0,
                    "rate": 0.001,
                    "min_scale": 0.5,
                    "max_scale": 1.0,
                },
            )
        },
        penalty_scale_key=("task", "penalty_scale"),
    )
