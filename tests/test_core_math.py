"""The one quaternion implementation: rotation vectors, blends and normalisation on batched tensors."""

from __future__ import annotations

import math

import torch

from unilab.core.math import quat_angle, quat_mul, quat_nlerp, quat_normalize, quat_to_rotation_vector


def about_z(angle: float) -> torch.Tensor:
    return torch.tensor([math.cos(angle / 2), 0.0, 0.0, math.sin(angle / 2)], dtype=torch.float64)


def test_rotation_vector_is_axis_times_angle_the_short_way_round() -> None:
    torch.testing.assert_close(
        quat_to_rotation_vector(about_z(0.7)), torch.tensor([0.0, 0.0, 0.7], dtype=torch.float64)
    )
    torch.testing.assert_close(
        quat_to_rotation_vector(-about_z(0.7)), torch.tensor([0.0, 0.0, 0.7], dtype=torch.float64)
    )
    tiny = quat_to_rotation_vector(about_z(1e-12))  # the small-angle limit, no 0 / 0
    assert torch.isfinite(tiny).all() and abs(float(tiny[2]) - 1e-12) < 1e-18


def test_nlerp_takes_the_short_path_and_stays_unit() -> None:
    a, b = about_z(0.2), -about_z(0.6)  # b in the other hemisphere: the same rotation as about_z(0.6)
    mid = quat_nlerp(a, b, torch.tensor(0.5, dtype=torch.float64))
    assert abs(float(mid.norm()) - 1.0) < 1e-12
    assert float(quat_angle(mid, about_z(0.4))) < 1e-6
    batch = quat_normalize(torch.randn(5, 3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(0)))
    torch.testing.assert_close(batch.norm(dim=-1), torch.ones(5, 3, dtype=torch.float64))
    torch.testing.assert_close(quat_mul(batch, torch.tensor([1.0, 0, 0, 0], dtype=torch.float64)), batch)
