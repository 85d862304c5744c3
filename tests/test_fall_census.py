"""``scripts/fall_census.py``: a term switched off in the env is judged by hand, and the bodies that touch the
terrain are found by MuJoCo's collision detection, feet left out."""

from __future__ import annotations

import dataclasses
import math

import mujoco
import numpy as np
import pytest
import torch

from scripts.fall_census import RISER_LOOKBACK, Census, census, fall_terms, main, touching
from tests.deploy_policies import export_tiny
from unilab.robots import go1
from unilab.tasks.randomization import Randomization
from unilab.tasks.registry import build_env, make_task
from unilab.terrain.heightmap import HeightMap


def _pose(bend: dict[str, float]):
    action = torch.tensor([bend.get(go1.part(joint), 0.0) for joint in go1.JOINT_NAMES])
    return lambda obs: action.expand(obs.shape[0], -1)


def test_a_standing_go1_touches_with_its_feet_alone_and_a_kneeling_one_with_its_knees() -> None:
    task = make_task("go1_walk_rough", terrain_level=0, randomization=Randomization(), falls="knees")  # row 0: level
    judged = {"touchdown": task.terminations["touchdown"]}
    kept = {name: term for name, term in task.terminations.items() if name not in judged}
    # Started at rest with the nominal gains: a robot shoved at up to 0.5 m/s by its reset may stumble to its knees.
    events = dict(task.events)
    events["root_pose"] = dataclasses.replace(
        events["root_pose"], params={**events["root_pose"].params, "root_vel_range": 0.0}
    )
    events["pd_gains"] = dataclasses.replace(events["pd_gains"], params={"scale_range": (1.0, 1.0)})
    task = dataclasses.replace(task, terminations=kept, events=events)
    env = build_env(task, sim="mujoco", num_envs=3, device="cpu")
    standing = census(env, _pose({}), judged, ".*foot.*", steps=60)
    assert (standing.terms["touchdown"] < 0).all()
    assert all((first < 0).all() for first in standing.bodies.values())
    # Thighs forward and calves unfolded as far as an action reaches: the hind knees go down, and the episodes go on.
    kneeling = census(env, _pose({"thigh": -1.0, "calf": 1.0}), judged, ".*foot.*", steps=60)
    fired, knees = kneeling.terms["touchdown"], kneeling.bodies
    assert (fired >= 0).all()
    for calf in ("RR_calf", "RL_calf"):
        # The knee rule fires 2 cm above the ground, before the calf's capsule touches it.
        assert (knees[calf] >= fired).all()
    # Kneeling on the hind legs, the trunk stays off the ground and the 60 steps end before any episode does.
    assert kneeling.lines()[2].endswith("were still going when the census stopped")
    assert "trunk touched the terrain in 0; the env's other terms ended 0; 0 walked on" in kneeling.lines()[2]


def test_what_became_of_the_episodes_a_term_would_have_ended() -> None:
    # Six envs: the term fires in the first five. Env 0's trunk touches the ground (before the term: still down);
    # env 1 is ended later by a term the env kept; env 2 runs to its time limit; env 3 off its tile at step 40
    # (truncated too); env 4 is still going; env 5, never judged, is counted nowhere.
    result = Census(
        steps=50,
        down=("trunk", "FR_hip"),
        terms={"touchdown": torch.tensor([10, 5, 7, 3, 30, -1])},
        bodies={
            "trunk": torch.tensor([8, -1, -1, -1, -1, 2]),
            "FR_hip": torch.tensor([-1, -1, -1, -1, -1, -1]),
            "FR_calf": torch.tensor([-1, 5, -1, -1, -1, -1]),
        },
        term_with_contact={"touchdown": torch.tensor([True, True, False, False, False, False])},
        ended=torch.tensor([12, 20, 49, 40, -1, 9]),
        terminated=torch.tensor([True, True, False, False, False, True]),
    )
    assert result.lines()[1:4] == [
        "  term touchdown            would end    5 episodes; 2 of them with a body on the ground then",
        "    of those, trunk or FR_hip touched the terrain in 1; the env's other terms ended 1; 2 walked on to the "
        "time limit or off their tile; 1 were still going when the census stopped",
        "  trunk or FR_hip touched the terrain in 2 episodes: a rule on their contact's falls",
    ]


STEP = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="2 2 0.1"/>
    <geom name="step" type="box" pos="0.3 0 0.05" size="0.1 0.5 0.05"/>
    <body name="leg">
      <freejoint/>
      <geom name="shin" type="capsule" fromto="0 0 0.05 0 0 0.3" size="0.01"/>
      <geom name="foot" type="sphere" size="0.02"/>
    </body>
  </worldbody>
</mujoco>
"""


UPRIGHT = (1.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize(
    ("foot", "quat", "down", "riser"),
    [
        ((0.0, 0.0, 0.019), UPRIGHT, set(), False),  # on the floor
        ((0.181, 0.0, 0.05), UPRIGHT, set(), True),  # against the step's face, 1 mm in
        ((0.3, 0.0, 0.119), UPRIGHT, set(), False),  # on its tread
        ((0.0, 0.0, 0.09), (math.sqrt(0.5), 0.0, math.sqrt(0.5), 0.0), {1}, False),  # lying on it, the foot in the air
    ],
)
def test_a_foot_against_a_steps_face_is_a_riser_strike_and_one_on_its_tread_is_not(
    foot: tuple[float, ...], quat: tuple[float, ...], down: set[int], riser: bool
) -> None:
    model = mujoco.MjModel.from_xml_string(STEP)
    qpos = np.array([*foot, *quat])
    feet = frozenset({mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "foot")})
    assert touching(model, mujoco.MjData(model), qpos, feet) == (down, riser)


def test_a_fall_soon_after_a_riser_strike_is_counted_with_it() -> None:
    # Four envs of 100 steps: env 0 falls 10 steps after a strike, env 1 falls long after its only strike, env 2
    # strikes at step 60 and runs to the end, env 3 falls at step 30 without a strike.
    risers = torch.zeros(4, 100, dtype=torch.bool)
    risers[0, 40] = risers[1, 5] = risers[2, 60] = True
    result = Census(
        steps=100,
        down=("trunk",),
        bodies={"trunk": torch.tensor([50, 5 + RISER_LOOKBACK + 10, -1, 30])},
        ended=torch.tensor([-1, -1, -1, -1]),
        risers=risers,
    )
    assert result.first_down().tolist() == [50, 40, -1, 30]
    recent = result.after_riser()
    assert recent[0].nonzero().flatten().tolist() == list(range(40, 40 + RISER_LOOKBACK + 1))
    # Steps lived: 51 + 41 + 100 + 31 = 223, of which 11 (env 0), 26 (env 1), 26 (env 2) after a strike.
    assert result.riser_line() == (
        "  a foot struck a riser (its contact's normal within 30 degrees of level) in 3 episodes; 1 of the 3 falls "
        f"came within {RISER_LOOKBACK} steps after one, as did {100 * 63 / 223:.0f} % of the steps before a fall or "
        "the episode's end"
    )


def test_the_stumble_rule_is_judged_on_the_strikes_before_a_fall() -> None:
    # Two envs of 4 steps. Env 0 strikes at steps 1 and 2 (the feet's largest ratios 3 and 1) and falls at step 2;
    # its step 3, down, is left out. Env 1 never strikes; its ratios 0.5, 6 and 0.2, with step 2's feet in the air.
    ratios = torch.tensor([[0.5, 3.0, 1.0, 9.0], [0.5, 6.0, 0.0, 0.2]])
    result = Census(
        steps=4,
        down=("trunk",),
        bodies={"trunk": torch.tensor([2, -1])},
        ended=torch.tensor([-1, -1]),
        risers=torch.tensor([[False, True, True, True], [False, False, False, False]]),
        feet_down=torch.tensor([[True, True, True, True], [True, True, False, True]]),
        stumbles={2.0: ratios > 2.0, 5.0: ratios > 5.0},
    )
    assert result.stumble_lines() == [
        "  the stumble rule at ratio 2 would count 50.0 % of the 2 steps with a riser strike and 25.0 % of the 4 other "
        "steps with a foot down, before any fall",
        "  the stumble rule at ratio 5 would count 0.0 % of the 2 steps with a riser strike and 25.0 % of the 4 other "
        "steps with a foot down, before any fall",
    ]
    assert Census(steps=4).stumble_lines() == []


def test_the_trunks_tilt_is_set_against_the_slope_of_the_ground_under_it() -> None:
    env = build_env(make_task("go1_walk_rough", terrain_level=0, randomization=Randomization()), "mujoco", 2, "cpu")
    xs = (torch.arange(201) - 100) * 1.0  # the whole terrain, 200 m across: the tiles lie tens of metres out
    incline = HeightMap((xs.expand(201, -1) * math.tan(math.radians(20.0))).contiguous(), 1.0)  # read, not stepped on
    standing = census(env, _pose({}), {}, ".*foot.*", steps=20, ground=incline)
    # On level physics the robots stand about level (a few degrees as they settle on their spawn): the ground the
    # census reads slopes 20 degrees, the trunks do not follow it.
    assert standing.sloped_steps == 2 * 20
    assert standing.slope_sum / standing.sloped_steps == pytest.approx(20.0, abs=1e-3)
    assert standing.tilt_sum / standing.sloped_steps < 10.0
    assert "the ground 20.0 degrees" in standing.lines()[-1]
    level = census(env, _pose({}), {}, ".*foot.*", steps=20, ground=HeightMap(torch.zeros(201, 201), 1.0))
    assert level.sloped_steps == 0


def test_the_census_judges_the_fall_rule_the_run_trained_under_unless_told() -> None:
    assert fall_terms(make_task("go1_walk_rough").terminations) == ["ground_contact"]
    assert fall_terms(make_task("go1_walk_rough", falls="knees").terminations) == ["touchdown"]
    assert fall_terms(make_task("g1_walk_rough").terminations) == []


def test_a_missing_checkpoint_is_one_line(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--checkpoint", str(tmp_path / "none.pt"), "--suite", "stairs_down"])
    err = capsys.readouterr().err.splitlines()
    assert err[-1].endswith(f"error: checkpoint not found: {tmp_path / 'none.pt'}")


def test_an_exported_policy_is_judged_as_its_checkpoint_would_be(tmp_path, capsys) -> None:
    """A policy file stands in for the checkpoint (a GPU run's checkpoint is too large to fetch; its export is not)."""
    path = tmp_path / "policy.onnx"
    export_tiny("go1_walk_rough", path)
    result = main(["--onnx", str(path), "--suite", "stairs_down", "--num-envs", "2", "--steps", "3"])
    assert list(result.terms) == ["ground_contact"] and result.terms["ground_contact"].shape == (2,)
    assert capsys.readouterr().out.startswith("policy.onnx, stairs_down row 9: 2 envs, 3 steps")


def test_the_stumble_rule_is_judged_where_asked(tmp_path, capsys) -> None:
    """A policy trained without the stumble term is judged with its sensors added: a reward's weight does not reach
    the policy."""
    path = tmp_path / "policy.onnx"
    export_tiny("go1_walk_rough", path)
    argv = ["--onnx", str(path), "--suite", "stairs_down", "--num-envs", "2", "--steps", "3"]
    result = main([*argv, "--stumble-ratios", "2", "5"])
    assert list(result.stumbles) == [2.0, 5.0] and result.stumbles[2.0].shape == result.feet_down.shape == (2, 3)
    assert not (result.stumbles[2.0] & ~result.feet_down).any()  # a foot counted touches the ground
    lines = capsys.readouterr().out.splitlines()
    assert sum(line.startswith("  the stumble rule at ratio ") for line in lines) == 2
    with pytest.raises(SystemExit):
        main([*argv, "--stumble-ratios", "0"])
    assert capsys.readouterr().err.splitlines()[-1].endswith("error: --stumble-ratios must be positive, got [0.0]")


def test_one_policy_file_is_given(tmp_path, capsys) -> None:
    for argv in ([], ["--checkpoint", "a.pt", "--onnx", "a.onnx"]):
        with pytest.raises(SystemExit):
            main([*argv, "--suite", "stairs_down"])
        err = capsys.readouterr().err.splitlines()
        assert "error:" in err[-1] and "--checkpoint" in err[-1] and "--onnx" in err[-1]
