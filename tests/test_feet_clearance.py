"""The feet's clearance penalty: a foot pays for its horizontal speed by how far it is from the swing height, counted
from the highest ground within its reach, and only while the command asks for motion. Both rough walks weigh it
(the Go1's unless ``task.feet_clearance=0``); the flat walks do not."""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace

import mujoco
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from unilab.apps.compose import compose_config
from unilab.context import RobotConfig
from unilab.core import rng as rnglib
from unilab.envs.config import TaskConfig
from unilab.mdp import rewards
from unilab.mdp.terrain import footprint
from unilab.robots import g1, go1
from unilab.tasks.g1_walk_rough.config import ROUGH
from unilab.tasks.g1_walk_rough.config import WALK as ROUGH_WALK
from unilab.tasks.go1_walk_rough.config import ROUGH as GO1_ROUGH
from unilab.tasks.registry import make_functional_env, make_task
from unilab.terrain.heightmap import HeightMap

TARGET = 0.09
_SLICES = {"pos": slice(0, 3), "vel": slice(3, 6)}
CTX = SimpleNamespace(sensor=lambda data, name: data[:, _SLICES[name]])


def _cost(
    foot: list[float], velocity: list[float], command: list[float], ground: HeightMap | None = None, reach: float = 0.0
) -> float:
    """The penalty of one foot at ``foot`` moving at ``velocity`` under ``command`` (vx, vy, wz)."""
    data = torch.tensor([foot + velocity])
    state = TensorDict({"sim": {"sensordata": data}, "env": {"velocity": torch.tensor([command])}}, batch_size=[])
    around = footprint(reach) if ground is not None else None
    cost = rewards.feet_clearance_by_speed(
        state, CTX, "velocity", ("pos",), ("vel",), TARGET, deadzone=0.2, ground=ground, around=around
    )
    return cost.item()


WALK = [0.5, 0.0, 0.0]


def test_a_foot_at_the_swing_height_moves_for_free_and_one_off_it_pays_for_its_speed() -> None:
    assert _cost([0.0, 0.0, TARGET], [1.5, -0.5, 0.0], WALK) == pytest.approx(0.0, abs=1e-7)
    low = _cost([0.0, 0.0, 0.03], [1.0, 0.0, 0.0], WALK)
    assert low == pytest.approx(0.06 * 1.0, rel=1e-5)  # |0.03 - 0.09| at 1 m/s
    assert _cost([0.0, 0.0, 0.03], [2.0, 0.0, 0.0], WALK) == pytest.approx(2 * low, rel=1e-5)  # twice the speed
    assert _cost([0.0, 0.0, -0.03], [1.0, 0.0, 0.0], WALK) == pytest.approx(2 * low, rel=1e-5)  # twice the error
    assert _cost([0.0, 0.0, 0.15], [0.6, 0.8, 0.0], WALK) == pytest.approx(0.06 * 1.0, rel=1e-5)  # too high: as low
    # Only the horizontal speed counts: a foot lifting straight up or set straight down pays nothing.
    assert _cost([0.0, 0.0, 0.0], [0.0, 0.0, 1.0], WALK) == pytest.approx(0.0, abs=1e-7)


def test_the_feet_pay_together() -> None:
    # the left foot 3 cm up at 1 m/s, the right one on the ground at 2 m/s
    data = torch.tensor([[0.0, 0.1, 0.03, 0.0, -0.1, 0.0, 1.0, 0.0, 0.0, 0.0, 2.0, 0.0]])
    ctx = SimpleNamespace(sensor=lambda d, name: d[:, {"l": 0, "r": 3, "lv": 6, "rv": 9}[name] :][:, :3])
    state = TensorDict({"sim": {"sensordata": data}, "env": {"velocity": torch.tensor([WALK])}}, batch_size=[])
    cost = rewards.feet_clearance_by_speed(state, ctx, "velocity", ("l", "r"), ("lv", "rv"), TARGET, 0.2)
    assert cost.item() == pytest.approx(0.06 * 1.0 + 0.09 * 2.0, rel=1e-5)


def test_a_robot_asked_to_stand_pays_nothing_and_one_asked_to_turn_pays() -> None:
    assert _cost([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]) == 0.0
    assert _cost([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.1]) == 0.0  # a turn within the deadzone
    assert _cost([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.5]) == pytest.approx(0.09, rel=1e-5)  # on the spot
    assert _cost([0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, -0.3, 0.0]) == pytest.approx(0.09, rel=1e-5)  # sideways


def _step_ahead(height: float) -> HeightMap:
    """A 4 m map sampled every 5 cm, level, with a step of ``height`` up from x = 0 on (the riser between x = -0.05
    and x = 0, one cell of the map)."""
    xs = (torch.arange(81) - 40) * 0.05
    return HeightMap(torch.where(xs >= -1e-6, height, 0.0).expand(81, 81).contiguous(), 0.05)


def test_on_a_step_the_height_counts_from_the_highest_ground_within_the_feets_reach() -> None:
    ground = _step_ahead(0.12)
    foot, velocity = [-0.1, 0.0, 0.09], [1.0, 0.0, 0.0]  # 9 cm over the lower tread, 5 cm short of the riser
    # Over the lower tread alone the foot is at the swing height; within 15 cm it meets the step's top, 0.12 m up:
    # it is 0.03 m under it, 0.12 m short of the height it should hold there.
    assert _cost(foot, velocity, WALK, ground, reach=0.0) == pytest.approx(0.0, abs=1e-6)
    assert _cost(foot, velocity, WALK, ground, reach=0.15) == pytest.approx(0.12, rel=1e-4)
    assert _cost(foot, velocity, WALK, None) == pytest.approx(0.0, abs=1e-6)  # flat ground: from z = 0
    # Over the step's top, 9 cm above it, the foot is where it should be.
    assert _cost([0.3, 0.0, 0.21], velocity, WALK, ground, reach=0.15) == pytest.approx(0.0, abs=1e-6)


def _check_clearance_term(task: TaskConfig, swing: float, robot: RobotConfig, deadzone: float, reach: float) -> None:
    """The clearance penalty at weight -2, scaled by the penalty curriculum, asking the gait reward's swing height of
    ``robot``'s feet, over ``deadzone``, from the highest ground within ``reach`` of a foot."""
    term = task.rewards["penalty_feet_clearance"]
    assert term.func is rewards.feet_clearance_by_speed and term.weight == -2.0 and term.curriculum_scaled
    params = term.params
    assert params["target_height"] == swing == task.rewards["feet_phase"].params["swing_height"]
    assert params["foot_linvel_sensors"] == robot.foot_linvel_sensors and params["deadzone"] == deadzone
    assert params["ground"] is not None and torch.equal(params["around"], footprint(reach))


def test_the_rough_g1_walk_weighs_the_clearance_and_no_flat_walk_does() -> None:
    rough = make_task("g1_walk_rough")
    _check_clearance_term(rough, 0.09, g1.ROBOT, 0.2, ROUGH.foot_reach)
    # the penalties first, the gait and alive after: the order the rewards are summed in
    assert list(rough.rewards)[-4:] == ["penalty_feet_ori", "penalty_feet_clearance", "feet_phase", "alive"]
    for task in ("g1_walk_flat", "g1_walk_flat_rand", "go1_walk_flat"):
        assert "penalty_feet_clearance" not in make_task(task).rewards, task
    assert make_task("g1_walk_rough").rewards.keys() - make_task("g1_walk_flat_rand").rewards.keys() == {
        "penalty_feet_clearance"
    }


def test_the_go1_s_rough_walk_weighs_the_clearance_unless_told_not_to() -> None:
    task = make_task("go1_walk_rough")
    _check_clearance_term(task, 0.08, go1.ROBOT, 0.1, GO1_ROUGH.foot_reach)
    assert list(task.rewards)[-3:] == ["penalty_feet_clearance", "feet_phase", "alive"]
    off = compose_config(["task=go1_walk_rough", "sim=mujoco", "task.feet_clearance=0"])
    assert "penalty_feet_clearance" not in make_task("go1_walk_rough", **off.task.knobs).rewards
    with pytest.raises(ValueError, match=r"task.feet_clearance must be in \[-1000, 0\] \(a penalty's weight"):
        compose_config(["task=go1_walk_rough", "sim=mujoco", "task.feet_clearance=2"])


def test_the_go1_s_clearance_adds_its_term_to_the_reward_and_changes_nothing_else() -> None:
    """The same steps with and without the term, on the top row's stairs: the physics, and so every other term, are
    the same; the reward differs by the term, which is a cost wherever a foot moves at the wrong height."""
    envs = [
        make_functional_env("go1_walk_rough", sim="mujoco", num_envs=4, device="cpu", terrain_level=9, **knobs)
        for knobs in ({"feet_clearance": 0.0}, {})
    ]
    states = [env.reset(rnglib.make_rng(0)) for env in envs]
    actions = torch.Generator().manual_seed(0)
    paid = torch.zeros(4)
    for step in range(6):
        action = torch.rand(4, envs[0].action_dim, generator=actions) * 2 - 1
        plain, with_term = (
            env.step(state, action, rnglib.make_rng(step + 1)) for env, state in zip(envs, states, strict=True)
        )
        states = [plain[0], with_term[0]]
        terms = with_term[1]["reward_terms"]
        assert torch.equal(plain[0]["sim", "qpos"], with_term[0]["sim", "qpos"])
        for name, value in plain[1]["reward_terms"].items():
            assert torch.equal(value, terms[name]), name
        clearance = terms["penalty_feet_clearance"]
        torch.testing.assert_close(with_term[1]["next", "reward"], plain[1]["next", "reward"] + clearance)
        assert (clearance <= 0).all()
        paid += clearance
    assert (paid < 0).any()


@pytest.mark.parametrize(("task", "default"), [("g1_walk_rough", 0.15), ("go1_walk_rough", 0.1)])
def test_how_far_around_a_foot_the_swing_s_ground_is_sought_is_a_knob(task: str, default: float) -> None:
    def around(knobs: list[str]) -> dict[str, torch.Tensor]:
        """The offsets the gait reward and the clearance penalty look for the ground at."""
        made = make_task(task, **compose_config([f"task={task}", "sim=mujoco", *knobs]).task.knobs)
        return {name: made.rewards[name].params["around"] for name in ("feet_phase", "penalty_feet_clearance")}

    for name, offsets in around([]).items():
        assert torch.equal(offsets, footprint(default)), name
    for name, offsets in around(["task.foot_reach=0.2"]).items():
        assert torch.equal(offsets, footprint(0.2)), name
    with pytest.raises(ValueError, match=r"task.foot_reach must be in \[0, 0.5\] \(metres around a foot"):
        compose_config([f"task={task}", "sim=mujoco", "task.foot_reach=1"])


def test_a_walk_cannot_weigh_the_clearance_of_feet_without_velocity_sensors() -> None:
    blind = dataclasses.replace(g1.ROBOT, foot_linvel_sensors=())
    with pytest.raises(ValueError, match="penalty_feet_clearance needs foot velocity sensors"):
        dataclasses.replace(ROUGH_WALK, robot=blind)


@pytest.mark.parametrize("package", [g1, go1], ids=["g1", "go1"])
def test_each_foots_velocity_sensor_reads_its_site_moving_in_the_world(package) -> None:
    """Against a finite difference of the site's world position, on a turned, moving robot: the velocity is the
    site's own (not its body's centre's) and in the world frame (not the foot's)."""
    model = package.load_model()
    data = mujoco.MjData(model)
    rng = np.random.default_rng(0)
    mujoco.mj_resetDataKeyframe(model, data, model.key(package.ROBOT.keyframe).id)
    data.qpos[3:7] = [math.cos(0.6), 0.2, 0.3, math.sin(0.6)]
    data.qpos[3:7] /= np.linalg.norm(data.qpos[3:7])
    data.qvel[:] = rng.normal(scale=0.5, size=model.nv)
    mujoco.mj_forward(model, data)
    h = 1e-6
    moved = data.qpos.copy()
    mujoco.mj_integratePos(model, moved, data.qvel, h)
    later = mujoco.MjData(model)
    later.qpos[:] = moved
    mujoco.mj_kinematics(model, later)
    for site, name in zip(package.ROBOT.foot_sites, package.ROBOT.foot_linvel_sensors, strict=True):
        sensor = data.sensor(name).data
        expected = (later.site(site).xpos - data.site(site).xpos) / h
        np.testing.assert_allclose(sensor, expected, atol=1e-4)
        assert np.linalg.norm(sensor) > 0.1  # a moving foot: the comparison says something
