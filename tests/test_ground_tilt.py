"""The orientation penalty against the ground: the fitted plane's normal on a plane, on level ground and on a flight
of stairs, the penalty against values worked by hand, and which walks measure the tilt from the ground."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
from tensordict import TensorDict

from unilab.apps.train import main
from unilab.mdp import rewards
from unilab.mdp.terrain import ground_normal
from unilab.tasks.registry import make_task
from unilab.terrain.heightmap import HeightMap

SAMPLES = 121  # a 6 m map, 5 cm apart, centred on the origin
XS = (torch.arange(SAMPLES) - SAMPLES // 2) * 0.05


def _map(height_of_xy) -> HeightMap:
    y, x = torch.meshgrid(XS, XS, indexing="ij")
    return HeightMap(height_of_xy(x, y).contiguous(), 0.05)


def _stairs() -> HeightMap:
    """Treads 0.3 m deep, risers 0.1 m high, rising along +x (a flight of 18.4 degrees)."""
    return _map(lambda x, y: torch.floor(x / 0.3 + 1e-6) * 0.1)


def _angle(normal: torch.Tensor) -> torch.Tensor:
    return torch.rad2deg(torch.acos(normal[..., 2]))


def test_the_normal_of_a_plane_is_its_own_whatever_the_span() -> None:
    ground = _map(lambda x, y: 0.2 * x - 0.1 * y)  # MuJoCo's triangles make a plane of a plane's samples
    xy = torch.tensor([[0.0, 0.0], [0.73, -1.21], [-1.5, 0.4]])
    expected = torch.tensor([-0.2, 0.1, 1.0]) / math.sqrt(1.05)
    for span in (0.1, 0.3, 0.8):
        assert torch.allclose(ground_normal(ground, xy, span), expected.expand(3, 3), atol=1e-5)


def test_the_fitted_plane_follows_a_flight_at_every_phase_of_its_steps() -> None:
    xy = torch.stack((torch.linspace(-0.6, 0.6, 41), torch.zeros(41)), dim=-1)
    normal = ground_normal(_stairs(), xy, 0.3)
    angle = _angle(normal)
    # Two heights a step apart read 0 or 90 degrees; the line through five reads 14.9 to 18.4 (the flight's 18.4).
    assert angle.min() > 14.5 and angle.max() < 18.5
    assert angle.mean().item() == pytest.approx(math.degrees(math.atan(0.1 / 0.3)), abs=0.5)
    assert torch.allclose(normal[:, 1], torch.zeros(41))  # the flight rises along x alone


def _state(up: list[float], base_xy: list[float]) -> tuple[TensorDict, SimpleNamespace]:
    sim = {"sensordata": torch.tensor([up]), "xpos": torch.tensor([[[*base_xy, 0.3]]])}
    ctx = SimpleNamespace(body_ids={"trunk": 0}, sensor=lambda data, name: data[:, {"up": slice(0, 3)}[name]])
    return TensorDict({"sim": sim}, batch_size=[1]), ctx


def test_the_penalty_is_the_squared_sine_of_the_trunks_tilt_from_the_grounds_normal() -> None:
    slope = math.radians(20.0)
    ground = _map(lambda x, y: math.tan(slope) * x)
    params = {"upvector": "up", "body": "trunk", "ground": ground, "span": 0.3}
    # Level on the slope: tilted 20 degrees from its normal; along the slope: not at all; 10 degrees nose-up past
    # it: 10 degrees.
    for pitch, tilt in ((0.0, 20.0), (20.0, 0.0), (30.0, 10.0)):
        a = math.radians(pitch)
        state, ctx = _state([-math.sin(a), 0.0, math.cos(a)], [0.4, -0.2])  # body z, turned nose-up about y
        penalty = rewards.upvector_from_ground_l2(state, ctx, **params)
        assert penalty.item() == pytest.approx(math.sin(math.radians(tilt)) ** 2, abs=1e-5)


def test_on_level_ground_the_penalty_is_the_tilt_from_the_vertical() -> None:
    level = _map(lambda x, y: torch.full_like(x, 0.25))
    up = [0.3, -0.2, math.sqrt(1 - 0.13)]
    state, ctx = _state(up, [1.0, 1.0])
    ground = rewards.upvector_from_ground_l2(state, ctx, upvector="up", body="trunk", ground=level, span=0.3)
    vertical = rewards.upvector_xy_l2(state, ctx, upvector="up")
    assert ground.item() == pytest.approx(vertical.item(), abs=1e-6) == pytest.approx(0.13, abs=1e-6)


def test_the_go1_measures_its_tilt_from_the_ground_and_the_g1_from_the_vertical() -> None:
    go1 = make_task("go1_walk_rough").rewards["penalty_orientation"]
    assert go1.func is rewards.upvector_from_ground_l2 and go1.params["span"] == 0.3
    assert make_task("go1_walk_rough", tilt_span=0.0).rewards["penalty_orientation"].func is rewards.upvector_xy_l2
    assert make_task("g1_walk_rough").rewards["penalty_orientation"].func is rewards.upvector_xy_l2
    assert make_task("go1_walk_flat").rewards["penalty_orientation"].func is rewards.upvector_xy_l2


def test_a_negative_span_is_refused_with_the_config(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--cfg", "sim=mujoco", "task=go1_walk_rough", "task.tilt_span=-0.1"])
    assert capsys.readouterr().err.splitlines() == [
        "train: error: task.tilt_span must be in [0, 2] (metres either side of the base; 0: the vertical), got -0.1"
    ]
