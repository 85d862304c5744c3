"""The shipped G1 reference clip: a kinematic squat-and-sway built from the ``stand`` keyframe.

Imitation code needs a clip it can always load, one that exists without motion-capture data
and whose licence is not in doubt. This one is synthesised: joint angles are sums of
low-frequency sinusoids under a quintic fade-in/fade-out, so the clip starts and ends at rest in
the stand pose; the legs come from a small inverse-kinematics solve so that the feet neither
slide nor tilt; the pelvis stays level above the stand x, y and its height is set so that the
lower foot touches the ground exactly where it does in the stand keyframe.

It is kinematic only: nothing here checks balance, contact forces or torque limits.
``scripts/make_reference_clip.py`` writes it; ``unilab/assets/motions/PROVENANCE.md`` documents it.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from unilab.core.math import quat_conjugate, quat_mul, quat_to_rotation_vector
from unilab.robots.g1 import JOINT_NAMES

FPS = 50.0
DURATION_S = 10.0
RAMP_S = 1.5
"""Fade-in/fade-out time: long enough that the start and end accelerations stay small."""

SQUAT_DEPTH_M = 0.12
"""How far the pelvis drops at the bottom of a squat."""

SQUAT_PERIOD_S = 5.0
"""Two full squats in ten seconds, each starting and ending at full height."""

ARM_SWING_HZ = 0.4
WAIST_YAW_HZ = 0.3
SHOULDER_ROLL_HZ = 0.2

STAND_KEY = "stand"
FOOT_SITES = ("left_foot", "right_foot")
_IDENTITY_QUAT = np.array([1.0, 0.0, 0.0, 0.0])
_FREE_QPOS = 7


def smootherstep(x: np.ndarray) -> np.ndarray:
    """0 -> 1 with zero first and second derivatives at both ends, so fades add no jerk spikes."""
    x = np.clip(x, 0.0, 1.0)
    return x * x * x * (x * (6.0 * x - 15.0) + 10.0)


def envelope(t: np.ndarray, duration: float) -> np.ndarray:
    """1 in the middle of the clip, fading to exactly 0 (at rest) at both ends."""
    return smootherstep(t / RAMP_S) * smootherstep((duration - t) / RAMP_S)


def squat_depth(t: np.ndarray, duration: float) -> np.ndarray:
    """Pelvis drop (m): raised cosine cycles, each beginning and ending at full height."""
    return SQUAT_DEPTH_M * envelope(t, duration) * 0.5 * (1.0 - np.cos(2.0 * np.pi * t / SQUAT_PERIOD_S))


def upper_body_offsets(t: np.ndarray, duration: float) -> dict[str, np.ndarray]:
    """Offsets from the stand pose for the waist and arms, per joint name.

    The arms swing in antiphase with the elbows bending as each arm comes forward, reach forward
    as the robot squats (as a person counterbalances), and open slightly sideways; the torso
    leans into the squat and turns a little. Every term is multiplied by the envelope.
    """
    env = envelope(t, duration)
    squat = squat_depth(t, duration) / SQUAT_DEPTH_M
    swing = env * np.sin(2.0 * np.pi * ARM_SWING_HZ * t)
    spread = env * 0.5 * (1.0 - np.cos(2.0 * np.pi * SHOULDER_ROLL_HZ * t))
    return {
        "waist_yaw_joint": 0.25 * env * np.sin(2.0 * np.pi * WAIST_YAW_HZ * t),
        "waist_pitch_joint": 0.15 * squat,
        "left_shoulder_pitch_joint": 0.4 * swing - 0.5 * squat,
        "right_shoulder_pitch_joint": -0.4 * swing - 0.5 * squat,
        "left_shoulder_roll_joint": 0.15 * spread,
        "right_shoulder_roll_joint": -0.15 * spread,
        "left_elbow_joint": -0.3 * swing,
        "right_elbow_joint": 0.3 * swing,
    }


def _qpos_address(model: mujoco.MjModel, joint: str) -> int:
    return int(model.joint(joint).qposadr[0])


def _ankle_xz(model: mujoco.MjModel, data: mujoco.MjData, body: int) -> np.ndarray:
    mujoco.mj_kinematics(model, data)
    return data.xpos[body, [0, 2]].copy()


def _solve_leg(model: mujoco.MjModel, data: mujoco.MjData, side: str, target: np.ndarray) -> None:
    """Set hip pitch and knee in ``data.qpos`` so the ankle reaches ``target`` (x, z), by Newton steps.

    The leg is planar in pitch while hip roll and yaw stay at zero, so two joints fix the ankle's
    x and z exactly; a numerical 2x2 Jacobian is enough and warm starts make it converge in a few steps.
    """
    adr = [_qpos_address(model, f"{side}_hip_pitch_joint"), _qpos_address(model, f"{side}_knee_joint")]
    body = model.body(f"{side}_ankle_pitch_link").id
    for _ in range(50):
        error = target - _ankle_xz(model, data, body)
        if np.max(np.abs(error)) < 1e-10:  # far below float32 resolution of the stored clip
            return
        jacobian = np.empty((2, 2))
        for col, a in enumerate(adr):
            data.qpos[a] += 1e-6
            jacobian[:, col] = (_ankle_xz(model, data, body) - (target - error)) / 1e-6
            data.qpos[a] -= 1e-6
        data.qpos[adr] += np.linalg.solve(jacobian, error)
    raise RuntimeError(f"leg inverse kinematics did not converge for the {side} leg")


def _keep_foot_flat(model: mujoco.MjModel, qpos: np.ndarray, stand: np.ndarray, side: str) -> None:
    """Ankle pitch cancels hip + knee so the foot keeps its stand orientation relative to the level pelvis."""
    names = [f"{side}_hip_pitch_joint", f"{side}_knee_joint"]
    change = sum(qpos[_qpos_address(model, n)] - stand[_qpos_address(model, n)] for n in names)
    ankle = _qpos_address(model, f"{side}_ankle_pitch_joint")
    qpos[ankle] = stand[ankle] - change


def _lowest_foot_z(model: mujoco.MjModel, data: mujoco.MjData) -> float:
    return float(min(data.site_xpos[model.site(s).id, 2] for s in FOOT_SITES))


def _stand_qpos(model: mujoco.MjModel) -> np.ndarray:
    qpos = model.key(STAND_KEY).qpos.copy()
    qpos[3:_FREE_QPOS] = _IDENTITY_QUAT
    return qpos


def _pose_frame(
    model: mujoco.MjModel,
    data: mujoco.MjData,
    stand: np.ndarray,
    upper: dict[str, float],
    ankle_targets: dict[str, np.ndarray],
    ground: float,
) -> None:
    """Fill ``data`` (qpos and kinematics) for one frame.

    The root is put back at the stand pose before the leg solve, so the ankle targets are
    effectively relative to the pelvis; the hip and knee angles of the previous frame stay in
    ``data.qpos`` as the warm start. The pelvis is lowered only afterwards, by the height that
    puts the lower foot back on the ground.
    """
    data.qpos[:_FREE_QPOS] = stand[:_FREE_QPOS]
    for name, offset in upper.items():
        adr = _qpos_address(model, name)
        data.qpos[adr] = stand[adr] + offset
    for side, target in ankle_targets.items():
        _solve_leg(model, data, side, target)
        _keep_foot_flat(model, data.qpos, stand, side)
    mujoco.mj_kinematics(model, data)
    data.qpos[2] += ground - _lowest_foot_z(model, data)
    mujoco.mj_kinematics(model, data)


def _check_joint_ranges(model: mujoco.MjModel, joint_pos: np.ndarray) -> None:
    """A clip outside the joint limits could never be tracked; fail at generation time instead."""
    for col, name in enumerate(JOINT_NAMES):
        low, high = model.jnt_range[model.joint(name).id]
        if joint_pos[:, col].min() < low or joint_pos[:, col].max() > high:
            raise RuntimeError(f"reference motion leaves the range [{low}, {high}] of {name}")


def angular_velocity_world(quat: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity of a quaternion trajectory (axis 0 = time), by differences.

    Like ``np.gradient``: central differences q[t+1] q[t-1]* / (2 dt) inside, one-sided at the two ends, so
    it has the accuracy of the linear velocities. Left-multiplying by the conjugate gives the rotation
    increment in the world frame.
    """
    if quat.shape[0] < 2:
        raise ValueError("need at least two orientations to differentiate")
    q = torch.from_numpy(quat)

    def rate(later: torch.Tensor, earlier: torch.Tensor, span: float) -> torch.Tensor:
        return quat_to_rotation_vector(quat_mul(later, quat_conjugate(earlier))) / span

    inside = rate(q[2:], q[:-2], 2.0 * dt)
    first, last = rate(q[1:2], q[:1], dt), rate(q[-1:], q[-2:-1], dt)
    return torch.cat((first, inside, last)).numpy()


def generate_reference_clip(
    model: mujoco.MjModel, fps: float = FPS, duration: float = DURATION_S
) -> dict[str, np.ndarray]:
    """The reference motion sampled at ``fps`` as a format-A dict of float64 arrays (plus names)."""
    num_frames = round(duration * fps) + 1
    t = np.arange(num_frames) / fps
    stand = _stand_qpos(model)
    data = mujoco.MjData(model)
    data.qpos[:] = stand
    mujoco.mj_kinematics(model, data)
    ground = _lowest_foot_z(model, data)
    stand_ankles = {s: data.xpos[model.body(f"{s}_ankle_pitch_link").id, [0, 2]].copy() for s in ("left", "right")}

    offsets = upper_body_offsets(t, duration)
    depths = squat_depth(t, duration)
    columns = [_qpos_address(model, j) for j in JOINT_NAMES]
    joint_pos = np.empty((num_frames, len(JOINT_NAMES)))
    body_pos = np.empty((num_frames, model.nbody, 3))
    body_quat = np.empty((num_frames, model.nbody, 4))
    for k in range(num_frames):
        upper = {name: float(value[k]) for name, value in offsets.items()}
        targets = {side: xz + np.array([0.0, depths[k]]) for side, xz in stand_ankles.items()}
        _pose_frame(model, data, stand, upper, targets, ground)
        joint_pos[k] = data.qpos[columns]
        body_pos[k] = data.xpos
        body_quat[k] = data.xquat
    _check_joint_ranges(model, joint_pos)
    dt = 1.0 / fps
    return {
        "fps": np.asarray(float(fps)),
        "joint_pos": joint_pos,
        "joint_vel": np.gradient(joint_pos, dt, axis=0),
        "body_pos_w": body_pos,
        "body_quat_w": body_quat,
        "body_lin_vel_w": np.gradient(body_pos, dt, axis=0),
        "body_ang_vel_w": angular_velocity_world(body_quat, dt),
        "joint_names": np.array(JOINT_NAMES),
        "body_names": np.array([model.body(b).name for b in range(model.nbody)]),
    }
