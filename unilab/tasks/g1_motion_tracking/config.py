"""``g1_motion_tracking``'s env: G1 whole-body imitation of a reference motion.

Actor observation (160): reference joint_pos and joint_vel (58), reference torso position in the
robot torso frame (3), relative torso orientation as 6-D (6), pelvis local linvel (3, noise 0.1),
torso gyro (3, noise 0.2), q - q0 (29, noise 0.01), qdot (29, noise 1.5), last action (29).
Critic observation (289): the same without noise, then the 14 tracked bodies' positions (42) and
6-D orientations (84) in the robot torso frame, then the pelvis linvel again (3).
"""

from __future__ import annotations

import torch

from unilab.envs.config import ConstraintRows, ContactsPerWorld, NoiseScale, SolverIterations, TaskConfig
from unilab.managers.terms import (
    ActionTerm,
    CommandTerm,
    CurriculumTerm,
    EventTerm,
    ObsTerm,
    RewardTerm,
    TerminationTerm,
)
from unilab.mdp import actions, observations, rewards, terminations
from unilab.motion import DEFAULT_MOTION, MotionClips, MotionSpec, load_motions
from unilab.robots import g1
from unilab.sim import SimConfig
from unilab.tasks.g1_motion_tracking import terms as tracking

ANCHOR = 16  # torso_link
TRACKED_BODIES = (1, 3, 5, 7, 9, 11, 13, 16, 18, 20, 23, 25, 27, 30)
END_EFFECTORS = (7, 13, 23, 30)  # L/R ankle_roll, L/R wrist_yaw
UNDESIRED_BODIES = tuple(b for b in TRACKED_BODIES if b not in END_EFFECTORS)
LINVEL, GYRO = "pelvis_local_linvel", "torso_gyro"

# Reset perturbation half-widths: root position, root rotation xyz, root lin vel, root ang vel.
ROOT_NOISE = (0.05, 0.05, 0.01, 0.1, 0.1, 0.2, 0.5, 0.5, 0.2, 0.52, 0.52, 0.78)
JOINT_NOISE = 0.1
FAILURE = {"anchor_z": 0.5, "gravity": 0.8, "end_effector_z": 0.5}
UNIFORM_RATIO = 0.1
EMA_ALPHA = 0.001
EPISODE_LENGTH_S = 10.0
STARTS = ("adaptive", "first_frame")


def _actor_terms(motion, noise_scale: float) -> dict[str, ObsTerm]:
    ref = {"motion": motion, "anchor": ANCHOR}
    return {
        "command": ObsTerm(tracking.reference_joints, {"motion": motion}),
        "motion_anchor_pos_b": ObsTerm(tracking.motion_anchor_pos_b, ref),
        "motion_anchor_ori_b": ObsTerm(tracking.motion_anchor_ori_b, ref),
        "linvel": ObsTerm(observations.sensor, {"name": LINVEL}, noise=0.1 * noise_scale),
        "gyro": ObsTerm(observations.sensor, {"name": GYRO}, noise=0.2 * noise_scale),
        "joint_pos": ObsTerm(observations.joint_pos_rel, noise=0.01 * noise_scale),
        "joint_vel": ObsTerm(observations.joint_vel, noise=1.5 * noise_scale),
        "actions": ObsTerm(observations.last_action),
    }


def _rewards(motion: MotionClips, bodies: torch.Tensor) -> dict[str, RewardTerm]:
    """BeyondMimic's tracking rewards: the anchor and body poses and velocities against the reference, and the
    regularisers."""
    anchor_ref = {"motion": motion, "anchor": ANCHOR}
    body_ref = {"motion": motion, "anchor": ANCHOR, "bodies": bodies}
    return {
        "motion_global_root_pos": RewardTerm(tracking.global_anchor_pos_exp, 1.0, {**anchor_ref, "std": 0.3}),
        "motion_global_root_ori": RewardTerm(tracking.global_anchor_ori_exp, 0.5, {**anchor_ref, "std": 0.4}),
        "motion_body_pos": RewardTerm(tracking.body_pos_exp, 2.0, {**body_ref, "std": 0.3}),
        "motion_body_ori": RewardTerm(tracking.body_ori_exp, 1.0, {**body_ref, "std": 0.4}),
        "motion_body_lin_vel": RewardTerm(
            tracking.body_lin_vel_exp, 1.0, {"motion": motion, "bodies": bodies, "std": 1.0}
        ),
        "motion_body_ang_vel": RewardTerm(
            tracking.body_ang_vel_exp, 1.0, {"motion": motion, "bodies": bodies, "std": 3.14}
        ),
        "action_rate_l2": RewardTerm(rewards.action_rate_l2, -0.1),
        "joint_limit": RewardTerm(tracking.joint_limit_l2, -2.0),
        "undesired_contacts": RewardTerm(
            tracking.bodies_below, -0.1, {"bodies": torch.tensor(UNDESIRED_BODIES), "height": 0.05}
        ),
    }


def _terminations(motion: MotionClips, ee: torch.Tensor) -> dict[str, TerminationTerm]:
    """Falling off the reference ends an episode; the clip's end and the time limit truncate it."""
    anchor_ref = {"motion": motion, "anchor": ANCHOR}
    return {
        "anchor_pos": TerminationTerm(tracking.anchor_height_error, {**anchor_ref, "threshold": FAILURE["anchor_z"]}),
        "anchor_ori": TerminationTerm(tracking.anchor_gravity_error, {**anchor_ref, "threshold": FAILURE["gravity"]}),
        "ee_body_pos": TerminationTerm(
            tracking.body_height_error,
            {"motion": motion, "bodies": ee, "threshold": FAILURE["end_effector_z"]},
        ),
        "clip_end": TerminationTerm(tracking.clip_ended, time_out=True),
        "time_out": TerminationTerm(terminations.time_out, time_out=True),
    }


def make_task(
    motion_file: MotionSpec | None = None,
    reset_noise_scale: NoiseScale = 1.0,
    start: str = "adaptive",
    failure_look_back: int = 1,
    nconmax: ContactsPerWorld = 64,
    njmax: ConstraintRows = 400,
    solver_iterations: SolverIterations = None,
    ls_iterations: SolverIterations = None,
) -> TaskConfig:
    """The tracking task on ``motion_file``: a clip, a directory of clips or a list of either (default: the shipped
    clip).

    ``reset_noise_scale`` multiplies the reset perturbations (0 starts every env exactly on its
    reference frame, which tests use to check that perfect tracking earns the maximum reward).
    ``start`` says where episodes begin: ``adaptive`` (training) samples start frames by failure rate over every
    clip's seconds; ``first_frame`` starts env ``i`` at the first frame of clip ``i mod clips``, with episodes
    long enough for the longest clip, so that surviving an episode means reaching the end of the clip.
    ``failure_look_back`` is how many one-second bins a failure weighs in the adaptive sampler, its own and those
    before it (``terms.look_back``; 1: only its own; BeyondMimic's paper uses 3). ``nconmax`` and ``njmax``
    size the physics buffers; ``solver_iterations`` and ``ls_iterations`` cap the Newton solver's iterations (None:
    the MJCF's).
    """
    if start not in STARTS:
        raise ValueError(f"start must be one of {', '.join(STARTS)}, got {start!r}")
    if isinstance(failure_look_back, bool) or not isinstance(failure_look_back, int) or failure_look_back < 1:
        raise ValueError(f"failure_look_back must be an integer >= 1 (bins), got {failure_look_back!r}")
    sim = SimConfig(substeps=3, nconmax=nconmax, njmax=njmax, iterations=solver_iterations, ls_iterations=ls_iterations)
    motion = load_motions(DEFAULT_MOTION if motion_file is None else motion_file, g1.load_model(sim))
    num_joints = motion.joint_pos.shape[1]
    bins = tracking.clip_bins(motion)
    episode_length_s = EPISODE_LENGTH_S
    if start == "first_frame":
        episode_length_s = float(motion.clip_lengths.max() - 1) / motion.fps
    half = torch.tensor(ROOT_NOISE + (JOINT_NOISE,) * num_joints) * reset_noise_scale
    low = torch.cat((torch.zeros(2), -half))
    high = torch.cat((torch.ones(2), half))

    bodies = torch.tensor(TRACKED_BODIES)
    ee = torch.tensor(END_EFFECTORS)
    robot_bodies = {"anchor": ANCHOR, "bodies": bodies}
    critic = {
        **_actor_terms(motion, 0.0),
        "body_pos_b": ObsTerm(tracking.body_pos_b, robot_bodies),
        "body_ori_b": ObsTerm(tracking.body_ori_b, robot_bodies),
        "linvel_critic": ObsTerm(observations.sensor, {"name": LINVEL}),
    }
    anchor_ref = {"motion": motion, "anchor": ANCHOR}
    return TaskConfig(
        name="g1_motion_tracking",
        scene=g1.SCENE,
        robot=g1.ROBOT,
        physics=sim,
        episode_length_s=episode_length_s,
        action=ActionTerm(actions.joint_position_offsets, {"scale": 2.0}),
        observations={"policy": _actor_terms(motion, 1.0), "critic": critic},
        rewards=_rewards(motion, bodies),
        terminations=_terminations(motion, ee),
        commands={
            tracking.COMMAND: CommandTerm(2, tracking.keep_pointer, advance=tracking.advance_pointer),
        },
        events={
            "reset_to_reference": EventTerm(
                tracking.reset_to_reference,
                {
                    "motion": motion,
                    "bins_per_clip": bins,
                    "low": low,
                    "high": high,
                    "uniform_ratio": UNIFORM_RATIO,
                    "first_frame": start == "first_frame",
                    "look_back_bins": failure_look_back,
                },
                state={tracking.CLIP_KEY: ((), 0.0)},
            ),
        },
        curricula={
            "adaptive_sampling": CurriculumTerm(
                tracking.failure_ema,
                state={tracking.FAIL_EMA_KEY: torch.zeros(int(bins.sum()))},
                params={**anchor_ref, "bins_per_clip": bins, "alpha": EMA_ALPHA, "end_effectors": ee, **FAILURE},
            )
        },
    )
