"""How ``unilab eval`` scores a tracking policy: does it survive the clip, and how close does it stay.

Two ways to start, both scored: ``from_start`` (primary, judged by the thresholds) starts every env at the first
frame of a clip, so survival means playing a whole clip through; ``adaptive_start`` starts where training's sampler
puts episodes (at eval its failure rates are zero, so starts spread evenly over every clip's seconds). Both are
broken down per clip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from unilab.core.math import quat_angle
from unilab.tasks.g1_motion_tracking import terms as tracking
from unilab.tasks.metrics import active_mean, episode_lengths, share
from unilab.tasks.task import EvalMetrics

if TYPE_CHECKING:  # annotations only: the env, and tensordict with torch._dynamo, load when an env is built
    from tensordict import TensorDict

    from unilab.envs.functional import FunctionalEnv
    from unilab.envs.layout import EnvView

TRACKING_REWARD = "motion_body_pos"  # its params carry the device-placed motion, anchor and tracked bodies


def readings(env: EnvView, state: TensorDict) -> dict[str, torch.Tensor]:
    """Reference and robot poses at the state's frame, using the reward's own alignment and body set."""
    params = env.task.rewards[TRACKING_REWARD].params
    motion, anchor, bodies = params["motion"], params["anchor"], params["bodies"]
    frame = tracking.frame_index(state)
    ref_body_pos, _ = tracking.aligned_reference_bodies(state, motion, anchor, bodies)
    xpos, xquat = state["sim", "xpos"], state["sim", "xquat"]
    return {
        "ref_body_pos": ref_body_pos.clone(),
        "body_pos": xpos[:, bodies].clone(),
        "ref_anchor_pos": motion.body_pos_w[frame, anchor].clone(),
        "anchor_pos": xpos[:, anchor].clone(),
        "ref_anchor_quat": motion.body_quat_w[frame, anchor].clone(),
        "anchor_quat": xquat[:, anchor].clone(),
        "ref_joint_pos": motion.joint_pos[frame].clone(),
        "joint_pos": state["sim", "qpos"][:, env.ctx.joint_qpos].clone(),
    }


def score(
    ref_body_pos: torch.Tensor,
    body_pos: torch.Tensor,
    ref_anchor_pos: torch.Tensor,
    anchor_pos: torch.Tensor,
    ref_anchor_quat: torch.Tensor,
    anchor_quat: torch.Tensor,
    ref_joint_pos: torch.Tensor,
    joint_pos: torch.Tensor,
    active: torch.Tensor,
    failed: torch.Tensor,
    episode_length: torch.Tensor,
    dt: float,
) -> dict[str, float]:
    """Imitation scores from (T, N, ...) trajectories.

    ``ref_body_pos`` (T, N, B, 3) should be the yaw-aligned reference the reward compares against
    (``terms.aligned_reference_bodies``), so a policy is not charged for the heading drift the reward forgives;
    the anchor errors use the global reference, as the global anchor rewards and the failure checks do.
    ``failed`` (N,) marks envs whose first episode ended by a failure termination (not clip end or time-out).
    """
    body = torch.linalg.vector_norm(ref_body_pos - body_pos, dim=-1).mean(-1)
    anchor = torch.linalg.vector_norm(ref_anchor_pos - anchor_pos, dim=-1)
    joints = (ref_joint_pos - joint_pos).abs().mean(-1)
    return {
        "survival_rate": share(~failed),
        "body_pos_error": active_mean(body, active),
        "anchor_pos_error": active_mean(anchor, active),
        "anchor_ori_error": active_mean(quat_angle(ref_anchor_quat, anchor_quat), active),
        "joint_pos_error": active_mean(joints, active),
        **episode_lengths(episode_length, dt),
    }


def clip_groups(env: FunctionalEnv, state: TensorDict) -> dict[str, torch.Tensor]:
    """The envs playing each clip of the library, by clip name."""
    motion = env.task.rewards[TRACKING_REWARD].params["motion"]
    clip = tracking.clip_index(state)
    return {name: clip == c for c, name in enumerate(motion.clip_names)}


METRICS = EvalMetrics(
    readings,
    score,
    thresholds={"survival_rate": (">=", 0.90), "body_pos_error": ("<=", 0.10)},
    starts={"from_start": {"start": "first_frame"}, "adaptive_start": {"start": "adaptive"}},
    groups={"per_clip": clip_groups},
    judged_groupings=("per_clip",),
    rates=("survival_rate",),
)
"""A tracking policy works when, started at the first frame of its clip, at least 90 % of robots reach the clip's
last frame and their bodies stay within 0.10 m of the reference on average: over all envs and on every clip."""
