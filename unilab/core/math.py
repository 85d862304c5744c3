"""Quaternion and frame helpers on batched tensors; quaternions are MuJoCo's (w, x, y, z)."""

from __future__ import annotations

import torch


def quat_mul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Hamilton product a * b."""
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ),
        dim=-1,
    )


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    return torch.cat((q[..., :1], -q[..., 1:]), dim=-1)


def quat_rotate(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate v by the unit quaternion q (body to world when q is a body's orientation)."""
    w, xyz = q[..., :1], q[..., 1:]
    t = 2.0 * torch.linalg.cross(xyz, v, dim=-1)
    return v + w * t + torch.linalg.cross(xyz, t, dim=-1)


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate v by q's inverse (world to body)."""
    return quat_rotate(quat_conjugate(q), v)


def yaw_quat(yaw: torch.Tensor) -> torch.Tensor:
    """Rotation about world z by ``yaw`` radians."""
    half = 0.5 * yaw
    zero = torch.zeros_like(half)
    return torch.stack((torch.cos(half), zero, zero, torch.sin(half)), dim=-1)


def quat_to_6d(q: torch.Tensor) -> torch.Tensor:
    """First two columns of the rotation matrix of ``q``, row-major [R00, R01, R10, R11, R20, R21]."""
    w, x, y, z = q.unbind(-1)
    r00, r01 = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z)
    r10, r11 = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z)
    r20, r21 = 2 * (x * z - w * y), 2 * (y * z + w * x)
    return torch.stack((r00, r01, r10, r11, r20, r21), dim=-1)


def quat_yaw(q: torch.Tensor) -> torch.Tensor:
    """Heading angle of ``q`` about world z."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


def quat_from_euler_xyz(angles: torch.Tensor) -> torch.Tensor:
    """R_z(yaw) R_y(pitch) R_x(roll) as a quaternion, for ``angles`` = (roll, pitch, yaw) on the last axis."""
    half = 0.5 * angles
    cr, cp, cy = torch.cos(half).unbind(-1)
    sr, sp, sy = torch.sin(half).unbind(-1)
    return torch.stack(
        (
            cy * cr * cp + sy * sr * sp,
            cy * sr * cp - sy * cr * sp,
            cy * cr * sp + sy * sr * cp,
            sy * cr * cp - cy * sr * sp,
        ),
        dim=-1,
    )


def quat_angle_sq(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Squared rotation angle between ``a`` and ``b``: (2 acos |<a, b>|)^2, sign-invariant."""
    dot = (a * b).sum(-1).abs().clamp(max=1.0)
    return (2.0 * torch.acos(dot)).square()


def gravity_z(q: torch.Tensor) -> torch.Tensor:
    """z of world gravity seen from a body with orientation ``q``: -1 upright, +1 upside down."""
    return 2.0 * (q[..., 1].square() + q[..., 2].square()) - 1.0


def quat_angle(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Rotation angle between unit quaternions; |<a, b>| makes q and -q (the same rotation) agree."""
    dot = (a * b).sum(-1).abs().clamp(max=1.0)
    return 2.0 * torch.acos(dot)


def quat_normalize(q: torch.Tensor) -> torch.Tensor:
    """Unit quaternions; interpolation and float32 storage both leave the norm slightly off."""
    return q / torch.linalg.vector_norm(q, dim=-1, keepdim=True)


def quat_nlerp(a: torch.Tensor, b: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Normalised linear blend from a (weight 0) to b (weight 1) the short way round (b's sign aligned to a).

    Between neighbouring frames of a motion the rotation is small, where nlerp and slerp differ by far less
    than the interpolation error itself, and nlerp needs no special case for nearly identical quaternions.
    """
    b = torch.where((a * b).sum(-1, keepdim=True) < 0.0, -b, b)
    return quat_normalize(a + weight * (b - a))


def quat_to_rotation_vector(q: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """Axis * angle of unit quaternions, the short way round (angle in [0, pi]).

    q and -q are one rotation; flipping to w >= 0 first picks the smaller angle, which is what a finite
    difference between nearby orientations needs. Near angle 0, angle / sin(angle / 2) tends to 2 / w.
    """
    q = torch.where(q[..., :1] < 0.0, -q, q)
    w, v = q[..., 0], q[..., 1:]
    sin_half = torch.linalg.vector_norm(v, dim=-1)
    angle = 2.0 * torch.atan2(sin_half, w)
    scale = torch.where(sin_half > eps, angle / sin_half.clamp(min=eps), 2.0 / w)
    return v * scale.unsqueeze(-1)
