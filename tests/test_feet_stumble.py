"""The stumble penalty: a foot the ground pushes sideways more than five times as hard as vertically counts, read
from a sensor of each foot's net contact force with the ground (its geom's, or its body's geoms' together), which C
MuJoCo and MuJoCo Warp fill alike. Both rough walks weigh it when asked (``task.stumble``)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
from tensordict import TensorDict

from unilab.apps.compose import compose_config
from unilab.core import rng as rnglib
from unilab.envs.config import task_model
from unilab.mdp import rewards
from unilab.robots import g1, go1
from unilab.sim.contact_sensors import add_ground_force_sensors, ground_force_sensor
from unilab.tasks.go1_walk_flat.config import WALK
from unilab.tasks.randomization import Randomization
from unilab.tasks.registry import make_functional_env, make_task
from unilab.tasks.walking import STUMBLE_RATIO

FEET = go1.ROBOT.foot_geoms
SOLES = g1.ROBOT.foot_bodies


def _stumbles(*forces: list[float], ratio: float = STUMBLE_RATIO) -> float:
    """The penalty of feet whose net ground forces are ``forces`` (world frame, one foot each), in one env."""
    names = tuple(f"foot{i}" for i in range(len(forces)))
    ctx = SimpleNamespace(sensor=lambda data, name: data[:, 3 * names.index(name) :][:, :3])
    data = torch.tensor([[component for force in forces for component in force]])
    state = TensorDict({"sim": {"sensordata": data}}, batch_size=[])
    return rewards.feet_stumble(state, ctx, names, ratio).item()


def test_a_foot_pushed_sideways_stumbles_and_one_standing_or_in_the_air_does_not() -> None:
    assert _stumbles([0.0, 0.0, -40.0]) == 0  # standing on a tread
    assert _stumbles([0.0, 0.0, 0.0]) == 0  # in the air
    assert _stumbles([30.0, 0.0, -10.0]) == 0  # braking hard on a tread: three times, not five
    assert _stumbles([0.0, -60.0, -10.0]) == 1  # against a riser, the tread bearing a little
    assert _stumbles([60.0, 0.0, 0.0], [0.0, 0.0, -40.0], [-3.0, 4.0, 0.9]) == 2  # each foot on its own
    assert _stumbles([50.0, 0.0, 10.0]) == 0  # exactly five times: not more


def test_a_lower_ratio_counts_a_riser_met_while_the_tread_still_bears_the_foot() -> None:
    """At 2, a foot pushed back three times as hard as it is held up counts; one braking on a tread at its friction
    of 1.5 (the Go1's highest) does not."""
    assert _stumbles([30.0, 0.0, -10.0], ratio=2.0) == 1
    assert _stumbles([9.0, 12.0, -10.0], ratio=2.0) == 0  # 1.5 times
    assert _stumbles([30.0, 0.0, -10.0], ratio=5.0) == 0


# A 1 kg ball beside a wall on a floor, each part of the world body. On the floor, sliding: friction pushes it back
# about as hard as the floor holds it up. Against the wall, alone or with the floor under it: a stumble.
SCENE = """<mujoco><worldbody>
  <geom name="floor" type="plane" size="2 2 0.1"/>
  <geom name="wall" type="box" pos="0.3 0 0.2" size="0.05 1 0.2"/>
  <body name="ball" pos="0 0 0.1"><freejoint/><geom name="foot" type="sphere" size="0.1" mass="1"/></body>
</worldbody></mujoco>"""


@pytest.mark.parametrize("part", ["foot", "ball"], ids=["a-geom", "a-body"])
@pytest.mark.parametrize(
    ("where", "sideways"),
    [((0.0, 0.099), False), ((0.152, 0.3), True), ((0.152, 0.099), True)],
    ids=["on-the-floor", "against-the-wall", "in-the-corner"],
)
def test_the_force_sensor_reads_the_ground_s_push_in_the_world_frame_on_both_engines(
    where: tuple[float, float], sideways: bool, part: str
) -> None:
    spec = mujoco.MjSpec.from_string(SCENE)
    add_ground_force_sensors(spec, (part,))
    model = spec.compile()
    data = mujoco.MjData(model)
    data.qpos[0], data.qpos[2] = where
    data.qvel[0] = 1.0  # moving towards the wall at 1 m/s: sliding on the floor, striking the wall
    mujoco.mj_forward(model, data)
    force = data.sensordata[model.sensor(ground_force_sensor(part)).adr[0] :][:3].copy()
    assert np.linalg.norm(force) > 1.0  # the ball presses into what it touches: a force, not a zero
    assert bool(np.linalg.norm(force[:2]) > STUMBLE_RATIO * abs(force[2])) is sideways
    import mujoco_warp as mjw

    with wp.ScopedDevice("cpu"):
        warped = mjw.put_data(model, data)
        mjw.forward(mjw.put_model(model), warped)
        np.testing.assert_allclose(warped.sensordata.numpy()[0][:3], force, rtol=1e-4, atol=1e-3)


def test_a_geom_the_scene_lacks_is_refused() -> None:
    with pytest.raises(ValueError, match="no geom or body named 'toe' for a ground force sensor"):
        add_ground_force_sensors(mujoco.MjSpec.from_string(SCENE), ("toe",))


@pytest.mark.parametrize(
    ("task", "parts", "kind"),
    [("go1_walk_rough", FEET, mujoco.mjtObj.mjOBJ_GEOM), ("g1_walk_rough", SOLES, mujoco.mjtObj.mjOBJ_BODY)],
    ids=["go1", "g1"],
)
def test_the_stumble_is_a_knob_off_by_default(task: str, parts: tuple[str, ...], kind: mujoco.mjtObj) -> None:
    """A Go1's foot is one geom, a G1's sole eleven: a sensor of the sole's body sums their contacts."""
    plain = make_task(task)
    assert "penalty_feet_stumble" not in plain.rewards and plain.ground_force_parts == ()
    asked = make_task(task, stumble=-1.0)
    term = asked.rewards["penalty_feet_stumble"]
    assert term.func is rewards.feet_stumble and term.weight == -1.0 and term.curriculum_scaled
    assert term.params == {"force_sensors": tuple(ground_force_sensor(part) for part in parts), "ratio": 5.0}
    assert list(asked.rewards)[-4:] == ["penalty_feet_clearance", "penalty_feet_stumble", "feet_phase", "alive"]
    assert asked.ground_force_parts == parts
    model = task_model(asked)
    for part in parts:
        sensor = model.sensor(ground_force_sensor(part))
        assert sensor.objtype[0] == kind and mujoco.mj_id2name(model, kind, sensor.objid[0]) == part
    with pytest.raises(ValueError, match=r"task.stumble must be in \[-1000, 0\] \(a penalty's weight"):
        compose_config([f"task={task}", "sim=mujoco", "task.stumble=1"])
    lower = compose_config([f"task={task}", "sim=mujoco", "task.stumble=-1", "task.stumble_ratio=2"])
    assert make_task(task, **lower.task.knobs).rewards["penalty_feet_stumble"].params["ratio"] == 2.0
    with pytest.raises(ValueError, match=r"task.stumble_ratio must be in \[1, 100\]"):
        compose_config([f"task={task}", "sim=mujoco", "task.stumble_ratio=0.5"])


@pytest.mark.parametrize(
    ("task", "sim"), [("go1_walk_rough", "mujoco"), ("go1_walk_rough", "mjwarp"), ("g1_walk_rough", "mujoco")]
)
def test_a_robot_standing_on_level_ground_does_not_stumble(task: str, sim: str) -> None:
    """Row 0 is level: the default pose held for half a second loads every foot from below."""
    quiet = {"terrain_level": 0, "randomization": Randomization(), "obs_noise": False, "stumble": -1.0}
    env = make_functional_env(task, sim=sim, num_envs=2, device="cpu", **quiet)
    state, rng = env.reset(rnglib.make_rng(0)), rnglib.make_rng(1)
    loaded = torch.zeros(2)
    for _ in range(25):
        rng = rnglib.advance(rng)
        state, transition = env.step(state, torch.zeros(2, env.action_dim), rng)
        assert (transition["reward_terms"]["penalty_feet_stumble"] == 0).all()
        feet = torch.stack(
            [
                state["sim", "sensordata"][:, env.ctx.sensor_slices[ground_force_sensor(part)]]
                for part in env.task.ground_force_parts
            ]
        )
        loaded = torch.maximum(loaded, feet[..., 2].abs().amin(0))
    assert (loaded > 1.0).all()  # every foot bore weight at some step: the sensors read the ground


def test_a_walk_cannot_weigh_the_stumbles_of_feet_it_has_no_geoms_for() -> None:
    weights = {**WALK.weights, "penalty_feet_stumble": -1.0}
    with pytest.raises(ValueError, match="penalty_feet_stumble needs the feet's collision geoms or bodies"):
        dataclasses.replace(WALK, robot=dataclasses.replace(go1.ROBOT, foot_geoms=()), weights=weights)
    with pytest.raises(ValueError, match="robot go1: 4 feet but foot_geoms has another count"):
        dataclasses.replace(go1.ROBOT, foot_geoms=FEET[:2])
    with pytest.raises(ValueError, match="robot g1: 2 feet but foot_bodies has another count"):
        dataclasses.replace(g1.ROBOT, foot_bodies=g1.ROBOT.foot_bodies[:1])
    with pytest.raises(ValueError, match=r"robot go1: a foot is a geom \(foot_geoms\) or a body \(foot_bodies\)"):
        dataclasses.replace(go1.ROBOT, foot_bodies=tuple(f"{leg}_calf" for leg in go1.LEGS))
