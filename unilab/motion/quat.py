"""Quaternion arithmetic on numpy arrays, scalar-first (w, x, y, z) like MuJoCo.

Motion files are read and written with numpy, so these helpers stay in numpy too; they
broadcast over any leading axes, which lets a whole clip (T, bodies, 4) go through at once.
"""

from __future__ import annotations

import numpy as np

_SMALL_ANGLE = 1e-8


def normalize(q: np.ndarray) -> np.ndarray:
    """Unit quaternions; interpolation and float32 storage both leave the norm slightly off."""
    return q / np.linalg.norm(q, axis=-1, keepdims=True)


def conjugate(q: np.ndarray) -> np.ndarray:
    """The inverse of a unit quaternion, without a division."""
    return q * np.array([1.0, -1.0, -1.0, -1.0], dtype=q.dtype)


def multiply(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton product a*b: rotation b first, then a."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        axis=-1,
    )


def rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Rotate 3-vectors by unit quaternions (v' = q v q*), expanded to avoid building matrices."""
    w = q[..., :1]
    u = q[..., 1:]
    t = 2.0 * np.cross(u, v)
    return v + w * t + np.cross(u, t)


def to_rotation_vector(q: np.ndarray) -> np.ndarray:
    """Axis * angle of unit quaternions, taking the short way round (angle in [0, pi]).

    q and -q are the same rotation; flipping to w >= 0 first picks the smaller angle, which
    is what a finite difference between nearby orientations needs.
    """
    q = np.where(q[..., :1] < 0.0, -q, q)
    w = q[..., 0]
    v = q[..., 1:]
    sin_half = np.linalg.norm(v, axis=-1)
    angle = 2.0 * np.arctan2(sin_half, w)
    # angle / sin_half tends to 2 / w as the angle vanishes; use that limit to avoid 0 / 0.
    scale = np.where(sin_half > _SMALL_ANGLE, angle / np.maximum(sin_half, _SMALL_ANGLE), 2.0 / w)
    return v * scale[..., None]


def align_signs(reference: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Flip q where it lies in the opposite hemisphere from ``reference`` so that blends take the short path."""
    dot = np.sum(reference * q, axis=-1, keepdims=True)
    return np.where(dot < 0.0, -q, q)


def nlerp(a: np.ndarray, b: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Normalised linear blend from a (weight 0) to b (weight 1), sign-aligned.

    Between neighbouring frames of a motion the rotation is small, where nlerp and slerp
    differ by far less than the interpolation error itself, and nlerp needs no special case
    for nearly identical quaternions.
    """
    b = align_signs(a, b)
    return normalize(a + weight * (b - a))


def angular_velocity_world(quat: np.ndarray, dt: float) -> np.ndarray:
    """World-frame angular velocity of a quaternion trajectory (axis 0 = time), by differences.

    Mirrors ``np.gradient``: central differences q[t+1] q[t-1]* / (2 dt) inside, one-sided at
    the two ends, so that it has the same second-order accuracy as the linear velocities.
    Left-multiplying by the conjugate gives the rotation increment expressed in the world frame.
    """
    if quat.shape[0] < 2:
        raise ValueError("need at least two orientations to differentiate")
    omega = np.empty((*quat.shape[:-1], 3), dtype=np.float64)
    omega[1:-1] = to_rotation_vector(multiply(quat[2:], conjugate(quat[:-2]))) / (2.0 * dt)
    omega[0] = to_rotation_vector(multiply(quat[1], conjugate(quat[0]))) / dt
    omega[-1] = to_rotation_vector(multiply(quat[-1], conjugate(quat[-2]))) / dt
    return omega
