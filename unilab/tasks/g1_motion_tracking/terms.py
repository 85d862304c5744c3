"""Motion-tracking terms: a per-env pointer into a reference stream, and the
observations, rewards, terminations, reset and adaptive sampling that read it.

The stream is a motion library: its clips concatenated along time, clip ``c`` at offset
``clip_starts[c]``. The pointer is the command ``("env", "motion")`` = (frame, last frame of its
clip), both stream indices (clip offset + frame within the clip), so every reference lookup is
one gather; the clip an env plays is ``("env", "motion_clip")``, set with the pointer at reset.
Both are floats so they live beside the other per-env entries. Following BeyondMimic/mjlab, the
pointer is advanced before physics, so obs and reward of a step compare the robot with the same
frame. Everything is fixed-shape tensor arithmetic: no host syncs, no data-dependent control flow.
"""

from __future__ import annotations

import torch

from unilab.context import EnvContext, State
from unilab.core.math import (
    gravity_z,
    quat_angle_sq,
    quat_conjugate,
    quat_from_euler_xyz,
    quat_mul,
    quat_rotate,
    quat_rotate_inverse,
    quat_to_6d,
    quat_yaw,
    yaw_quat,
)
from unilab.core.rng import uniform
from unilab.motion import MotionClips

ROOT_BODY = 1  # pelvis: the free-joint body, whose pose and velocity are the reference's root
COMMAND = "motion"
CLIP_KEY = "motion_clip"
FAIL_EMA_KEY = "motion_fail_ema"


# -- reference and robot lookups ------------------------------------------------------------------


def frame_index(state: State) -> torch.Tensor:
    """Each env's reference frame as a stream index: its clip's offset plus the frame within the clip."""
    return state["env", COMMAND][:, 0].long()


def clip_index(state: State) -> torch.Tensor:
    """The clip each env's episode plays."""
    return state["env", CLIP_KEY].long()


def robot_body_lin_vel_w(state: State) -> torch.Tensor:
    """Body-origin linear velocities in world, (N, nbody, 3).

    ``cvel`` is the spatial velocity [angular, linear] taken at the root subtree's COM; every
    robot body hangs off the pelvis, so the origin velocity is lin + ang x (x_body - c_pelvis).
    """
    cvel = state["sim", "cvel"]
    offset = state["sim", "xpos"] - state["sim", "subtree_com"][:, ROOT_BODY : ROOT_BODY + 1]
    return cvel[..., 3:] + torch.linalg.cross(cvel[..., :3], offset, dim=-1)


def robot_body_ang_vel_w(state: State) -> torch.Tensor:
    return state["sim", "cvel"][..., :3]


def aligned_reference_bodies(
    state: State, motion: MotionClips, anchor: int, bodies: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference body positions and orientations moved onto the robot: turned by the heading
    difference of the anchors, anchored at the robot's (x, y) and the reference's height."""
    f = frame_index(state)
    ref_pos, ref_quat = motion.body_pos_w[f], motion.body_quat_w[f]
    ref_anchor_pos, ref_anchor_quat = ref_pos[:, anchor], ref_quat[:, anchor]
    rob_anchor_pos, rob_anchor_quat = state["sim", "xpos"][:, anchor], state["sim", "xquat"][:, anchor]
    psi = quat_yaw(quat_mul(rob_anchor_quat, quat_conjugate(ref_anchor_quat)))
    turn = yaw_quat(psi).unsqueeze(1).expand(-1, bodies.shape[0], -1)
    origin = torch.cat((rob_anchor_pos[:, :2], ref_anchor_pos[:, 2:]), dim=-1).unsqueeze(1)
    pos = quat_rotate(turn, ref_pos[:, bodies] - ref_anchor_pos.unsqueeze(1)) + origin
    return pos, quat_mul(turn, ref_quat[:, bodies])


# -- command ----------------------------------------------------------------------------------------


def keep_pointer(state: State, ctx: EnvContext, mask: torch.Tensor, rng: torch.Tensor) -> torch.Tensor:
    """The pointer as the reset event left it: the event must know the frame to place the robot,
    and events run before commands are resampled, so the event samples it."""
    return state["env", COMMAND]


def advance_pointer(pointer: torch.Tensor, ctx: EnvContext) -> torch.Tensor:
    """One frame per control step (the stream is at the control rate), held at the clip's end."""
    frame = torch.minimum(pointer[:, :1] + 1.0, pointer[:, 1:])
    return torch.cat((frame, pointer[:, 1:]), dim=-1)


# -- observations ----------------------------------------------------------------------------------


def reference_joints(state: State, ctx: EnvContext, motion: MotionClips) -> torch.Tensor:
    f = frame_index(state)
    return torch.cat((motion.joint_pos[f], motion.joint_vel[f]), dim=-1)


def motion_anchor_pos_b(state: State, ctx: EnvContext, motion: MotionClips, anchor: int) -> torch.Tensor:
    ref = motion.body_pos_w[frame_index(state), anchor]
    rob_pos, rob_quat = state["sim", "xpos"][:, anchor], state["sim", "xquat"][:, anchor]
    return quat_rotate_inverse(rob_quat, ref - rob_pos)


def motion_anchor_ori_b(state: State, ctx: EnvContext, motion: MotionClips, anchor: int) -> torch.Tensor:
    ref = motion.body_quat_w[frame_index(state), anchor]
    return quat_to_6d(quat_mul(quat_conjugate(state["sim", "xquat"][:, anchor]), ref))


def body_pos_b(state: State, ctx: EnvContext, anchor: int, bodies: torch.Tensor) -> torch.Tensor:
    """Robot body positions in the robot anchor frame, flattened (N, 3 * len(bodies))."""
    xpos, xquat = state["sim", "xpos"], state["sim", "xquat"]
    rel = xpos[:, bodies] - xpos[:, anchor : anchor + 1]
    q = xquat[:, anchor : anchor + 1].expand(-1, bodies.shape[0], -1)
    return quat_rotate_inverse(q, rel).flatten(1)


def body_ori_b(state: State, ctx: EnvContext, anchor: int, bodies: torch.Tensor) -> torch.Tensor:
    """Robot body orientations relative to the robot anchor as 6-D, flattened (N, 6 * len(bodies))."""
    xquat = state["sim", "xquat"]
    q = quat_conjugate(xquat[:, anchor : anchor + 1]).expand(-1, bodies.shape[0], -1)
    return quat_to_6d(quat_mul(q, xquat[:, bodies])).flatten(1)


# -- rewards -------------------------------------------------------------------------------------


def global_anchor_pos_exp(state: State, ctx: EnvContext, motion: MotionClips, anchor: int, std: float):
    error = (motion.body_pos_w[frame_index(state), anchor] - state["sim", "xpos"][:, anchor]).square().sum(-1)
    return torch.exp(-error / std**2)


def global_anchor_ori_exp(state: State, ctx: EnvContext, motion: MotionClips, anchor: int, std: float):
    error = quat_angle_sq(motion.body_quat_w[frame_index(state), anchor], state["sim", "xquat"][:, anchor])
    return torch.exp(-error / std**2)


def body_pos_exp(
    state: State, ctx: EnvContext, motion: MotionClips, anchor: int, bodies: torch.Tensor, std: float
) -> torch.Tensor:
    ref, _ = aligned_reference_bodies(state, motion, anchor, bodies)
    error = (ref - state["sim", "xpos"][:, bodies]).square().sum(-1).mean(-1)
    return torch.exp(-error / std**2)


def body_ori_exp(
    state: State, ctx: EnvContext, motion: MotionClips, anchor: int, bodies: torch.Tensor, std: float
) -> torch.Tensor:
    _, ref = aligned_reference_bodies(state, motion, anchor, bodies)
    error = quat_angle_sq(ref, state["sim", "xquat"][:, bodies]).mean(-1)
    return torch.exp(-error / std**2)


def body_lin_vel_exp(
    state: State, ctx: EnvContext, motion: MotionClips, bodies: torch.Tensor, std: float
) -> torch.Tensor:
    ref = motion.body_lin_vel_w[frame_index(state)][:, bodies]
    error = (ref - robot_body_lin_vel_w(state)[:, bodies]).square().sum(-1).mean(-1)
    return torch.exp(-error / std**2)


def body_ang_vel_exp(
    state: State, ctx: EnvContext, motion: MotionClips, bodies: torch.Tensor, std: float
) -> torch.Tensor:
    ref = motion.body_ang_vel_w[frame_index(state)][:, bodies]
    error = (ref - robot_body_ang_vel_w(state)[:, bodies]).square().sum(-1).mean(-1)
    return torch.exp(-error / std**2)


def joint_limit_l2(state: State, ctx: EnvContext) -> torch.Tensor:
    """Squared violation of the hard joint limits, summed over joints."""
    q = state["sim", "qpos"][:, ctx.joint_qpos]
    below = (ctx.joint_lower - q).clamp(min=0.0)
    above = (q - ctx.joint_upper).clamp(min=0.0)
    return (below + above).square().sum(-1)


def bodies_below(state: State, ctx: EnvContext, bodies: torch.Tensor, height: float) -> torch.Tensor:
    """How many of ``bodies`` are below ``height``: a contact proxy that needs no contact sensors."""
    return (state["sim", "xpos"][:, bodies, 2] < height).float().sum(-1)


# -- terminations ---------------------------------------------------------------------------------


def anchor_height_error(
    state: State, ctx: EnvContext, motion: MotionClips, anchor: int, threshold: float
) -> torch.Tensor:
    ref = motion.body_pos_w[frame_index(state), anchor, 2]
    return (ref - state["sim", "xpos"][:, anchor, 2]).abs() > threshold


def anchor_gravity_error(
    state: State, ctx: EnvContext, motion: MotionClips, anchor: int, threshold: float
) -> torch.Tensor:
    ref = gravity_z(motion.body_quat_w[frame_index(state), anchor])
    return (ref - gravity_z(state["sim", "xquat"][:, anchor])).abs() > threshold


def body_height_error(
    state: State, ctx: EnvContext, motion: MotionClips, bodies: torch.Tensor, threshold: float
) -> torch.Tensor:
    ref = motion.body_pos_w[frame_index(state)][:, bodies, 2]
    return ((ref - state["sim", "xpos"][:, bodies, 2]).abs() > threshold).any(-1)


def clip_ended(state: State, ctx: EnvContext) -> torch.Tensor:
    """The reference reached its clip's last frame, so the next step would have nothing to track."""
    pointer = state["env", COMMAND]
    return pointer[:, 0] >= pointer[:, 1]


def tracking_failed(
    state: State,
    ctx: EnvContext,
    motion: MotionClips,
    anchor: int,
    end_effectors: torch.Tensor,
    anchor_z: float,
    gravity: float,
    end_effector_z: float,
) -> torch.Tensor:
    """The union of the three failure terminations (no time-outs), for the sampling curriculum."""
    return (
        anchor_height_error(state, ctx, motion, anchor, anchor_z)
        | anchor_gravity_error(state, ctx, motion, anchor, gravity)
        | body_height_error(state, ctx, motion, end_effectors, end_effector_z)
    )


# -- adaptive start-frame sampling ----------------------------------------------------------------


def clip_bins(motion: MotionClips) -> torch.Tensor:
    """Sampling bins per clip, about one per second of clip: clip ``c`` owns the ``c``-th run of consecutive bins of
    the failure EMA, so one vector weighs clips against each other and seconds within a clip alike."""
    return motion.clip_lengths // motion.fps + 1


LOOK_BACK_DECAY = 0.8  # BeyondMimic's weight per bin of look-back (their lambda)


def look_back(fail_ema: torch.Tensor, bin_ends: torch.Tensor, size: int) -> torch.Tensor:
    """Each bin's weight from its own failures and those of the ``size - 1`` bins after it in its clip, decaying by
    ``LOOK_BACK_DECAY`` per bin (weights summing to one): episodes then also start in the seconds leading up to a
    failure, where the policy must arrive with the errors it has built up, as a clip played from its first frame
    does. A clip's last bin stands in for the bins past its end, so no clip borrows failures from the next.
    ``bin_ends`` holds each clip's end in the EMA's bins (exclusive, cumulative)."""
    if size == 1:
        return fail_ema
    index = torch.arange(fail_ema.shape[0], device=fail_ema.device)
    last = bin_ends[torch.searchsorted(bin_ends, index, right=True)] - 1
    weights = [LOOK_BACK_DECAY**ahead for ahead in range(size)]
    return sum(w / sum(weights) * fail_ema[torch.minimum(index + ahead, last)] for ahead, w in enumerate(weights))


def sample_frames(
    fail_ema: torch.Tensor,
    u: torch.Tensor,
    num_frames: int | torch.Tensor,
    uniform_ratio: float,
    bins_per_clip: torch.Tensor | None = None,
    look_back_bins: int = 1,
) -> torch.Tensor:
    """Start frames (stream indices) drawn bin by bin with p ∝ EMA_fail + ratio / bins (inverse CDF, no multinomial).

    ``num_frames`` holds each clip's length and ``bins_per_clip`` how many of the EMA's bins each clip owns, in
    library order (``clip_bins``); a single length with no ``bins_per_clip`` is one clip owning every bin. A bin
    covers an equal share of its clip. ``u`` holds two U(0, 1) columns: one picks the bin, the other the frame
    inside it. With ``look_back_bins`` > 1 a failure also weighs the bins before it in its clip (``look_back``).
    """
    bins = fail_ema.shape[0]
    lengths = torch.as_tensor(num_frames, device=fail_ema.device).reshape(-1)
    owned = torch.full_like(lengths, bins) if bins_per_clip is None else bins_per_clip
    bin_ends = torch.cumsum(owned, 0)
    p = look_back(fail_ema, bin_ends, look_back_bins) + uniform_ratio / bins
    cdf = torch.cumsum(p, 0) / p.sum()
    b = torch.searchsorted(cdf, u[:, 0].contiguous(), right=True).clamp(max=bins - 1)
    clip = torch.searchsorted(bin_ends, b, right=True)
    length = lengths[clip]
    frame = torch.floor(((b - bin_ends[clip] + owned[clip]).float() + u[:, 1]) / owned[clip] * (length - 1)).long()
    return (torch.cumsum(lengths, 0) - lengths)[clip] + torch.minimum(frame.clamp(min=0), length - 1)


def frame_bin(
    motion: MotionClips, bins_per_clip: torch.Tensor, clip: torch.Tensor, frame: torch.Tensor
) -> torch.Tensor:
    """The EMA bin a failure at stream frame ``frame`` of clip ``clip`` counts in: the clip's bins split its
    frames evenly. (``sample_frames`` spreads a bin over one frame fewer, so a bin's first frame may count in the
    bin before it; kept so that one clip keeps the results it always had.)"""
    owned = bins_per_clip[clip]
    first = torch.cumsum(bins_per_clip, 0)[clip] - owned
    within = (frame - motion.clip_starts[clip]) * owned // motion.clip_lengths[clip]
    return first + torch.minimum(within.clamp(min=0), owned - 1)


def clip_of(motion: MotionClips, frame: torch.Tensor) -> torch.Tensor:
    """The clip that stream frame ``frame`` belongs to."""
    return torch.searchsorted(motion.clip_starts, frame, right=True) - 1


def clip_last_frame(motion: MotionClips, frame: torch.Tensor) -> torch.Tensor:
    clip = clip_of(motion, frame)
    return motion.clip_starts[clip] + motion.clip_lengths[clip] - 1


def reference_root_state(motion: MotionClips, frame: torch.Tensor, noise: torch.Tensor) -> dict:
    """qpos/qvel of the reference frame, perturbed by ``noise`` = (N, 41) columns: root position (3),
    root rotation angles xyz (3), root linear velocity (3), root angular velocity (3), joints (29)."""
    pos = motion.body_pos_w[frame, ROOT_BODY] + noise[:, 0:3]
    quat = quat_mul(quat_from_euler_xyz(noise[:, 3:6]), motion.body_quat_w[frame, ROOT_BODY])
    lin = motion.body_lin_vel_w[frame, ROOT_BODY] + noise[:, 6:9]
    ang = quat_rotate_inverse(quat, motion.body_ang_vel_w[frame, ROOT_BODY] + noise[:, 9:12])
    joints = motion.joint_pos[frame] + noise[:, 12:]
    return {
        "qpos": torch.cat((pos, quat, joints), dim=-1),
        "qvel": torch.cat((lin, ang, motion.joint_vel[frame]), dim=-1),
    }


def reset_to_reference(
    state: State,
    ctx: EnvContext,
    mask: torch.Tensor,
    rng: torch.Tensor,
    motion: MotionClips,
    bins_per_clip: torch.Tensor,
    low: torch.Tensor,
    high: torch.Tensor,
    uniform_ratio: float,
    first_frame: bool,
    look_back_bins: int,
) -> dict:
    """Pick a start frame per env, then place the robot on that frame, perturbed.

    The frame is sampled adaptively over every clip's bins (``sample_frames``), or with ``first_frame`` is the
    first frame of clip ``env index mod clips`` (how eval measures whole clips: each clip gets an equal share of the
    envs). One draw of 2 + 41 columns either way: (bin, offset) in [0, 1), then the perturbations in [low, high].
    """
    u = uniform(rng, 0, (ctx.num_envs, low.shape[0]), low, high)
    if first_frame:
        frame = motion.clip_starts[torch.arange(ctx.num_envs, device=u.device) % motion.num_clips]
    else:
        fail_ema = state["task", FAIL_EMA_KEY]
        frame = sample_frames(fail_ema, u[:, :2], motion.clip_lengths, uniform_ratio, bins_per_clip, look_back_bins)
    ref = reference_root_state(motion, frame, u[:, 2:])
    qpos = ref["qpos"]
    joints = torch.maximum(torch.minimum(qpos[:, ctx.joint_qpos], ctx.joint_upper), ctx.joint_lower)
    qpos = torch.cat((qpos[:, : ctx.joint_qpos.start], joints), -1)
    pointer = torch.stack((frame, clip_last_frame(motion, frame)), dim=-1).float()
    return {
        ("sim", "qpos"): qpos,
        ("sim", "qvel"): ref["qvel"],
        ("env", COMMAND): pointer,
        ("env", CLIP_KEY): clip_of(motion, frame).float(),
    }


def failure_ema(
    state: State,
    ctx: EnvContext,
    done: torch.Tensor,
    terminated: torch.Tensor,
    motion: MotionClips,
    bins_per_clip: torch.Tensor,
    alpha: float,
    anchor: int,
    end_effectors: torch.Tensor,
    anchor_z: float,
    gravity: float,
    end_effector_z: float,
) -> dict:
    """Per clip-bin EMA of failures, updated on steps where some env failed.

    ``done`` also holds time-outs and clip ends, which must not count, and ``terminated`` diverged envs, which say
    nothing of the clip; the failures are recomputed from the same pure termination functions on the same (not yet
    reset) state.
    """
    failed = tracking_failed(state, ctx, motion, anchor, end_effectors, anchor_z, gravity, end_effector_z).float()
    ema = state["task", FAIL_EMA_KEY]
    b = frame_bin(motion, bins_per_clip, clip_index(state), frame_index(state))
    counts = torch.zeros_like(ema).index_add(0, b, failed)
    new = alpha * counts + (1.0 - alpha) * ema
    return {("task", FAIL_EMA_KEY): torch.where(failed.sum() > 0, new, ema)}
