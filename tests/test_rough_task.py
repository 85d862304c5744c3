"""``g1_walk_rough``: the terrain curriculum moves envs up and down, spawns land on their tiles, the scan mirrors
with the robot, heights that decide falls are measured from the ground, the env keeps TorchRL's specs on both
backends, the eval's terrain suites pin one type at the hardest row, and a short training run completes."""

from __future__ import annotations

import dataclasses
import json
import math
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import mujoco
import numpy as np
import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import check_env_specs

from scripts import curriculum_odds
from tests.test_train import tiny
from unilab.apps.args import InputError
from unilab.apps.compose import compose_config
from unilab.apps.eval import hardest_row_first, row_table, series_name, summary_name
from unilab.apps.eval import main as eval_main
from unilab.apps.suites import check_terrain_suite_envs, suite_overrides, suites_of
from unilab.apps.terrain_suites import TERRAIN_SUITES
from unilab.apps.train import run
from unilab.core import rng as rnglib
from unilab.core.proportions import rate_interval
from unilab.mdp import curricula, events, rewards, terminations
from unilab.mdp.terrain import footprint, height_scan, scan_mirror_index, scan_pattern
from unilab.robots import g1, go1
from unilab.run.config import task_overrides
from unilab.tasks import walking_metrics
from unilab.tasks.g1_walk_flat.config import WALK as G1_WALK
from unilab.tasks.g1_walk_rough.config import TERRAIN
from unilab.tasks.go1_walk_rough.config import KNEE_CLEARANCE, KNEES
from unilab.tasks.registry import make_env, make_functional_env, make_task
from unilab.tasks.walking import make_walk
from unilab.terrain import TerrainConfig, generate
from unilab.terrain.generator import random_rough
from unilab.terrain.heightmap import HeightMap

SMALL = TerrainConfig(rows=4, types=("flat", "pyramid_stairs"), border=2.0)


def _levels_state(
    level: list[float], xy: list[list[float]], command: list[list[float]], steps: list[int]
) -> TensorDict:
    n = len(level)
    qpos = torch.zeros(n, 7)
    qpos[:, :2] = torch.tensor(xy)
    return TensorDict(
        {
            "env": {
                "terrain_level": torch.tensor(level),
                "velocity": torch.tensor(command),
                "episode_step": torch.tensor(steps),
            },
            "sim": {"qpos": qpos},
        },
        batch_size=[],
    )


def test_the_curriculum_moves_far_walkers_up_short_walkers_and_fallers_down_and_nobody_below_the_first_row() -> None:
    terrain = generate(SMALL)
    origins = torch.from_numpy(terrain.origins)
    # Envs walk column i % 2 (flat, stairs); each starts from its tile's centre.
    level = [1.0, 1.0, 0.0, 2.0, 3.0, 1.0, 1.0, 2.0]
    start = [origins[int(row), i % 2, :2] for i, row in enumerate(level)]
    moved = [[4.5, 0.0], [1.0, 0.0], [0.0, 0.0], [1.5, 0.0], [0.0, 5.0], [0.0, 0.0], [5.0, 0.0], [2.0, 0.0]]
    xy = [(s + torch.tensor(m)).tolist() for s, m in zip(start, moved, strict=True)]
    command = [
        [0.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.5, 0.0, 0.5],  # a circle of 1 m radius: after 20 s it is 2 |sin 5| = 1.92 m from where it began
        [1.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [1.0, 0.0, 0.0],
        [0.1, 0.0, 0.0],
    ]
    steps = [1000, 1000, 300, 1000, 1000, 1000, 400, 300]  # 1000 steps is the whole episode; fewer, it ended early
    state = _levels_state(level, xy, command, steps)
    done = torch.tensor([True, True, True, True, True, False, True, True])
    failed = torch.tensor([False, False, True, False, False, False, True, True])
    ctx = SimpleNamespace(num_envs=8, max_episode_steps=1000)
    out = curricula.terrain_levels(state, ctx, done, failed, origins, 8.0, "velocity", 20.0)
    # 0: 4.5 m > 4, up; 1: 1 m of the 20 m its command leads to, less than half: down; 2: fell, clamped at row 0;
    # 3: 1.5 m of the circle's 1.92 m, more than half: stays (judged by speed alone, 1.5 m of 10 m, it went down);
    # 4: off its tile from the last row: past it (the spawn redraws it); 5: not done, unchanged; 6: fell after
    # crossing its tile: up; 7: fell, though it walked as far as its slow command asked: down.
    new = [2.0, 0.0, 0.0, 2.0, 4.0, 1.0, 2.0, 1.0]
    assert out[("env", "terrain_level")].tolist() == new
    shown = torch.tensor(new).clamp(max=3.0)
    assert float(out[("task", "terrain_level_mean")]) == pytest.approx(float(shown.mean()))
    assert float(out[("task", "terrain_level_std")]) == pytest.approx(float(shown.std(correction=0)))


def test_the_curriculum_gives_each_terrain_type_its_own_mean_level() -> None:
    """Columns flat, pit, pit, stairs, and a slope no env walks: envs 0-7 walk columns i % 4; the pit's envs are
    counted over both its columns, and the slope, with none, reads 0."""
    terrain = generate(dataclasses.replace(SMALL, types=("flat", "pyramid_stairs_inv", "pyramid_stairs_inv", "flat")))
    origins = torch.from_numpy(terrain.origins)
    level = [0.0, 1.0, 2.0, 3.0, 1.0, 3.0, 3.0, 0.0]
    xy = [origins[int(row), i % 4, :2].tolist() for i, row in enumerate(level)]
    state = _levels_state(level, xy, [[0.0, 0.0, 0.0]] * 8, [1000] * 8)
    done = torch.zeros(8, dtype=torch.bool)  # nobody moves: the means are of the levels as they stand
    names = ("flat", "pyramid_stairs_inv", "pyramid_slope")
    out = curricula.terrain_levels(
        state, SimpleNamespace(num_envs=8, max_episode_steps=1000), done, done, origins, 8.0, "velocity", 20.0,
        type_of_column=torch.tensor([0, 1, 1, 0]), type_names=names,
    )  # fmt: skip
    flat, pit = [0.0, 3.0, 1.0, 0.0], [1.0, 2.0, 3.0, 3.0]  # envs 0, 3, 4, 7 and 1, 2, 5, 6
    assert float(out[("task", "terrain_level_flat")]) == pytest.approx(sum(flat) / 4)
    assert float(out[("task", "terrain_level_pyramid_stairs_inv")]) == pytest.approx(sum(pit) / 4)
    assert float(out[("task", "terrain_level_pyramid_slope")]) == 0.0


def test_the_level_sums_count_each_kind_and_do_not_depend_on_the_order_of_the_envs() -> None:
    """Per kind: its envs, the sum of their levels and of the squares, by hand; shuffling the envs changes no bit
    (the sums are whole numbers, so the scatter's adds may come in any order)."""
    levels = torch.tensor([0.0, 3.0, 1.0, 9.0, 2.0, 2.0, 0.0])
    kind = torch.tensor([0, 2, 0, 2, 2, 0, 0])
    sums = curricula.level_sums(levels, kind, 3)
    assert sums.dtype == torch.float64
    assert sums.tolist() == [[4.0, 3.0, 5.0], [0.0, 0.0, 0.0], [3.0, 14.0, 94.0]]
    order = torch.randperm(7, generator=torch.Generator().manual_seed(0))
    assert torch.equal(curricula.level_sums(levels[order], kind[order], 3), sums)


def test_the_curriculum_compiled_by_inductor_gives_the_eager_levels_and_statistics() -> None:
    """The levels' statistics come from a scatter, not from reductions to scalars: Inductor compiles it and gives
    the eager step's levels and statistics."""
    terrain = generate(dataclasses.replace(SMALL, types=("flat", "pyramid_stairs_inv", "pyramid_stairs_inv", "flat")))
    origins = torch.from_numpy(terrain.origins)
    level = [0.0, 1.0, 2.0, 3.0, 1.0, 3.0, 3.0, 0.0]
    xy = [(origins[int(row), i % 4, :2] + torch.tensor([4.5 * (i % 2), 0.0])).tolist() for i, row in enumerate(level)]
    state = _levels_state(level, xy, [[1.0, 0.0, 0.0]] * 8, [1000] * 8)
    done = torch.tensor([True, True, False, True, True, True, False, True])
    ctx = SimpleNamespace(num_envs=8, max_episode_steps=1000)
    args = (origins, 8.0, "velocity", 20.0)
    params = {"type_of_column": torch.tensor([0, 1, 1, 0]), "type_names": ("flat", "pyramid_stairs_inv")}
    eager = curricula.terrain_levels(state, ctx, done, ~done, *args, **params)
    compiled = torch.compile(curricula.terrain_levels, fullgraph=True)(state, ctx, done, ~done, *args, **params)
    assert eager.keys() == compiled.keys()
    for key, value in eager.items():
        torch.testing.assert_close(compiled[key], value, msg=str(key))
    # The odd envs stand 4.5 m off their tile's centre (up a row), the even ones on it (down); 2 and 6 go on.
    assert eager[("env", "terrain_level")].tolist() == [0.0, 2.0, 2.0, 4.0, 0.0, 4.0, 3.0, 1.0]
    shown = torch.tensor([0.0, 2.0, 2.0, 3.0, 0.0, 3.0, 3.0, 1.0])  # past the last row counted as the last
    assert float(eager[("task", "terrain_level_std")]) == pytest.approx(float(shown.std(correction=0)))
    assert float(eager[("task", "terrain_level_pyramid_stairs_inv")]) == pytest.approx((2 + 2 + 3 + 3) / 4)


@pytest.mark.parametrize("task", ["g1_walk_rough", "go1_walk_rough"])
def test_a_rough_walk_logs_a_mean_level_for_each_terrain_type(task: str) -> None:
    columns = ["flat", "pyramid_stairs_inv", "pyramid_stairs_inv"]
    env = make_functional_env(task, sim="mujoco", num_envs=6, terrain_columns=columns)
    state = env.step(env.reset(rnglib.make_rng(0)), torch.zeros(6, env.action_dim), rnglib.make_rng(1))[0]
    levels = {key: float(value) for key, value in state["task"].items() if key.startswith("terrain_level_")}
    assert set(levels) == {"terrain_level_mean", "terrain_level_std", "terrain_level_flat",
                           "terrain_level_pyramid_stairs_inv"}  # fmt: skip
    assert levels["terrain_level_mean"] == pytest.approx(
        (levels["terrain_level_flat"] + 2 * levels["terrain_level_pyramid_stairs_inv"]) / 3
    )


def test_the_commanded_displacement_is_the_chord_of_the_commanded_arc() -> None:
    command = torch.tensor(
        [[1.0, 0.0, 0.0], [0.6, -0.8, 0.0], [0.5, 0.0, 0.5], [1.0, 0.0, 2 * math.pi / 20], [0, 0, 1]]
    )
    chord = curricula.commanded_displacement(command, 20.0)
    expected = [20.0, 20.0, 2 * abs(math.sin(5.0)), 0.0, 0.0]  # straight, straight, r = 1 m circle, a full turn
    assert chord.tolist() == pytest.approx(expected, abs=1e-5)


def test_spawns_start_low_redraw_a_mastered_grid_and_stand_on_their_tile() -> None:
    terrain = generate(SMALL)
    ground, origins = terrain.height_map(), torch.from_numpy(terrain.origins)
    n = 64
    qpos = torch.zeros(n, 7)
    qpos[:, 2] = 0.75
    level = torch.cat([torch.full((32,), -1.0), torch.full((32,), 4.0)])  # never placed; past the last row
    state = TensorDict({"env": {"terrain_level": level}, "sim": {"qpos": qpos}}, batch_size=[])
    ctx = SimpleNamespace(num_envs=n)
    mask = torch.ones(n, dtype=torch.bool)
    out = events.spawn_on_terrain(state, ctx, mask, rnglib.make_rng(3), ground, origins, max_init_level=1)
    new = out[("env", "terrain_level")]
    assert set(new[:32].tolist()) == {0.0, 1.0}  # fresh envs in rows 0..max_init_level
    assert set(new[32:].tolist()) == {0.0, 1.0, 2.0, 3.0}  # a mastered grid restarts anywhere
    root = out[("sim", "qpos")]
    column = torch.arange(n) % 2
    assert torch.equal(root[:, :2], origins[new.long(), column, :2])
    assert torch.allclose(root[:, 2], 0.75 + ground(root[:, 0], root[:, 1]) + 0.02)
    pinned = events.spawn_on_terrain(state, ctx, mask, rnglib.make_rng(3), ground, origins, 1, level=3)
    assert set(pinned[("env", "terrain_level")].tolist()) == {3.0}


def test_spread_spawns_put_every_row_and_column_under_the_same_number_of_envs() -> None:
    terrain = generate(SMALL)  # 4 rows, 2 columns
    ground, origins = terrain.height_map(), torch.from_numpy(terrain.origins)
    n = 16
    state = TensorDict({"env": {"terrain_level": torch.full((n,), -1.0)}, "sim": {"qpos": torch.zeros(n, 7)}}, [])
    ctx, rng = SimpleNamespace(num_envs=n), rnglib.make_rng(0)
    out = events.spawn_on_terrain(state, ctx, None, rng, ground, origins, max_init_level=1, level="all")
    rows = out[("env", "terrain_level")].long()
    tiles = rows * 2 + torch.arange(n) % 2
    assert torch.bincount(tiles).tolist() == [2] * 8
    assert rows[:2].tolist() == [3, 3]  # the hardest row first: a few envs still judge it


def _step_ahead(x_step: float, height: float) -> HeightMap:
    """A 4 m map sampled every 5 cm, level, with a step of ``height`` up from ``x_step`` (along +x) on."""
    xs = (torch.arange(81) - 40) * 0.05
    heights = torch.where(xs >= x_step - 1e-6, height, 0.0).expand(81, 81).contiguous()
    return HeightMap(heights, 0.05)


def test_the_scan_reads_a_step_up_ahead_of_the_robot_and_turns_with_it() -> None:
    ground = _step_ahead(0.5, 0.12)
    pattern = scan_pattern()  # 17 along x (-0.8 to 0.8 m) by 11 across
    ctx = SimpleNamespace(body_ids={"pelvis": 0})
    scans = {}
    for name, quat in {"+x": [1.0, 0.0, 0.0, 0.0], "-x": [0.0, 0.0, 0.0, 1.0]}.items():  # yaw 0 and yaw pi
        sim = {"xpos": torch.tensor([[[0.0, 0.0, 0.75]]]), "xquat": torch.tensor([[quat]])}
        state = TensorDict({"sim": sim}, batch_size=[])
        scans[name] = height_scan(state, ctx, ground, pattern, "pelvis", clip=1.5)[0].reshape(11, 17)
    ahead = scans["+x"]
    # The columns 0.5 m and more ahead read the step's top, 0.12 m nearer the pelvis; the rest read the ground.
    assert torch.allclose(ahead[:, 13:], torch.full((11, 4), 0.63))
    assert torch.allclose(ahead[:, :13], torch.full((11, 13), 0.75))
    # Turned round, the robot has the step behind it: the same readings, back to front.
    assert torch.allclose(scans["-x"], ahead.flip(-1), atol=1e-6)


def test_the_swing_height_counts_from_the_highest_ground_within_the_feet_reach() -> None:
    ground = _step_ahead(0.0, 0.12)  # the riser rises from x = -0.05 to x = 0 (one cell of the map)
    foot = torch.tensor([[-0.1, 0.0, 0.10]])  # 10 cm above the lower tread, 5 cm short of the riser's foot
    ctx = SimpleNamespace(sensor=lambda data, name: data[:, {"left": slice(0, 3)}[name]])
    state = TensorDict({"env": {"phase": torch.tensor([[0.0]])}, "sim": {"sensordata": foot}}, batch_size=[])
    params = {"phase": "phase", "foot_pos_sensors": ("left",), "swing_height": 0.09, "sigma": 0.04, "ground": ground}
    # At phase 0 the clock asks for the full swing height, 0.09 m.
    plain = rewards.feet_phase_height_exp(state, ctx, **params)
    reach = rewards.feet_phase_height_exp(state, ctx, **params, around=footprint(0.15))
    # Over the lower tread alone the foot is 0.10 m up; within 15 cm it meets the step's top, 0.12 m: 0.02 m under.
    assert plain.item() == pytest.approx(math.exp(-((0.10 - 0.09) ** 2) / 0.04), rel=1e-5)
    assert reach.item() == pytest.approx(math.exp(-((-0.02 - 0.09) ** 2) / 0.04), rel=1e-5)
    points = footprint(0.15)
    assert points.shape == (9, 2) and torch.allclose(points.norm(dim=-1)[1:], torch.full((8,), 0.15))


def test_the_scan_mirror_takes_each_point_to_its_reflection_across_the_sagittal_plane() -> None:
    pattern = scan_pattern()
    mirrored = pattern[list(scan_mirror_index())]
    assert torch.allclose(mirrored, pattern * torch.tensor([1.0, -1.0]), atol=1e-6)


def test_falls_are_measured_from_the_ground_and_the_terrain_edge_truncates() -> None:
    ground = HeightMap(torch.full((11, 11), 0.6), 1.0)  # a 10 m map, 0.6 m up
    qpos = torch.zeros(3, 7)
    qpos[:, :3] = torch.tensor([[0.0, 0.0, 1.3], [0.0, 0.0, 0.8], [4.5, 0.0, 1.3]])
    state = TensorDict({"sim": {"qpos": qpos}}, batch_size=[])
    low = terminations.root_height_below(state, None, 0.3, ground=ground)
    assert low.tolist() == [False, True, False]  # 0.2 m above the ground, though 0.8 m above z = 0
    assert terminations.off_terrain(state, None, ground, margin=1.0).tolist() == [False, False, True]


def test_crossing_its_tile_truncates_an_episode_which_the_curriculum_then_moves_up() -> None:
    origins = torch.from_numpy(generate(SMALL).origins)
    level = [0.0, 1.0, 2.0]
    start = [origins[int(row), i % 2, :2] for i, row in enumerate(level)]
    xy = [(s + torch.tensor(m)).tolist() for s, m in zip(start, [[3.9, 0.0], [3.0, -3.0], [0.0, 4.1]], strict=True)]
    state = _levels_state(level, xy, [[1.0, 0.0, 0.0]] * 3, [200, 300, 250])
    crossed = terminations.crossed_tile(state, None, origins, 8.0)
    assert crossed.tolist() == [False, True, True]  # 3.9 m, 4.24 m and 4.1 m from the centre
    ctx = SimpleNamespace(num_envs=3, max_episode_steps=1000)
    out = curricula.terrain_levels(
        state, ctx, crossed, torch.zeros(3, dtype=torch.bool), origins, 8.0, "velocity", 20.0
    )
    assert out[("env", "terrain_level")].tolist() == [0.0, 2.0, 3.0]  # the first is not done


def test_the_crossing_ends_episodes_only_while_the_curriculum_moves_the_rows() -> None:
    training = make_task("g1_walk_rough")
    assert training.terminations["crossed_tile"].time_out  # a truncation: the robot did well
    for level in (9, "all"):
        assert "crossed_tile" not in make_task("g1_walk_rough", terrain_level=level).terminations
    assert "crossed_tile" not in make_task("g1_walk_flat").terminations


def test_the_rough_walk_builds_its_terrain_into_the_scene_with_the_scan_in_both_groups() -> None:
    env = make_functional_env("g1_walk_rough", sim="mujoco", num_envs=4)
    model = env.sim.model
    names = [model.geom(i).name for i in range(model.ngeom) if model.geom(i).name.startswith("terrain_")]
    pieces = {"_".join(name.split("_")[:3]) for name in names}  # a stair piece is boxes named terrain_<r>_<c>_<k>
    assert len(pieces) == (TERRAIN.rows + 2) * (TERRAIN.cols + 2)  # tiles and border pieces
    stairs = [name for name in names if name.count("_") == 3]
    assert stairs and model.nhfield > 0  # the stairs of boxes, the slopes and the random surface height fields
    assert env.obs_dims == {"policy": 100 + 187, "critic": 103 + 187}
    mirrors = env.mirrors()
    assert len(mirrors["policy"].index) == 287 and len(mirrors["critic"].index) == 290
    state = env.reset(rnglib.make_rng(0))
    # A robot standing on its spawn reads its pelvis height, about 0.77 m, over its own (level) tile centre.
    scan = state["obs", "critic"][:, -187:]
    assert torch.all((scan.mean(-1) - 0.77).abs() < 0.1)
    assert torch.all((state["env", "terrain_level"] >= 0) & (state["env", "terrain_level"] <= 3))


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_the_rough_walk_keeps_torchrls_specs(sim: str) -> None:
    small = dataclasses.replace(TERRAIN, rows=2, border=2.0)
    env = make_env("g1_walk_rough", sim=sim, num_envs=2, terrain=small)
    check_env_specs(env)
    assert env.mj_model is env.core.sim.model and env.mj_model.nhfield > 0  # the scene, terrain included


def test_the_terrain_suites_spread_the_envs_of_one_type_over_every_row() -> None:
    assert suites_of("g1_walk_rough")[-len(TERRAIN_SUITES) :] == list(TERRAIN_SUITES)
    assert not set(TERRAIN_SUITES) & set(suites_of("g1_walk_flat"))
    overrides = suite_overrides("g1_walk_rough", "stairs_up", {"obs_noise": False})
    assert overrides["terrain_columns"] == ("pyramid_stairs",) and overrides["terrain_level"] == "all"
    task = make_task("g1_walk_rough", **overrides)
    assert task.events["terrain_spawn"].params["level"] == "all"
    assert task.terrain.types == ("pyramid_stairs",)
    # A run trained on columns of its own is judged on the suite's alone.
    trained_on = {"terrain_columns": ["flat", "pyramid_stairs_inv", "pyramid_stairs_inv"]}
    judged = make_task("go1_walk_rough", **suite_overrides("go1_walk_rough", "stairs_down", trained_on))
    assert judged.terrain.types == ("pyramid_stairs_inv",)
    with pytest.raises(InputError, match="flat floor"):
        suite_overrides("g1_walk_flat", "slope", {})


def test_the_hardest_row_puts_every_env_of_a_terrain_suite_on_the_top_row_and_only_there(
    capsys: pytest.CaptureFixture,
) -> None:
    top = suite_overrides("g1_walk_rough", "stairs_down", {"obs_noise": False}, hardest_row=True)
    assert top["terrain_level"] == TERRAIN.rows - 1 and top["terrain_columns"] == ("pyramid_stairs_inv",)
    assert "terrain_level" not in suite_overrides("g1_walk_rough", "push", {}, hardest_row=True)
    assert summary_name("run/model_8.pt", "slope", None, hardest_row=True) == "eval_summary_model_8_slope_top.json"
    assert summary_name("run/model_8.pt", "push", None, hardest_row=True) == "eval_summary_model_8_push.json"
    assert series_name("nominal", None, hardest_row=True) == "eval_series.json"
    with pytest.raises(SystemExit):
        eval_main(["--checkpoint", "missing.pt", "--task", "g1_walk_rough", "--suite", "push", "--hardest-row"])
    assert "--hardest-row places the envs of a terrain suite" in capsys.readouterr().err


@pytest.mark.parametrize("level", [10, -1, 2.5, "top", True])
def test_a_row_the_terrain_does_not_have_is_refused(level: object) -> None:
    with pytest.raises(ValueError, match="terrain_level must be a row of the terrain, 0 to 9, or 'all', got"):
        make_task("g1_walk_rough", terrain_level=level)


def test_a_terrain_suite_without_an_env_for_each_type_at_the_hardest_row_is_refused() -> None:
    with pytest.raises(InputError, match="suite slope judges 2 terrain types at the hardest row"):
        check_terrain_suite_envs("g1_walk_rough", "slope", 1)
    check_terrain_suite_envs("g1_walk_rough", "slope", 2)
    check_terrain_suite_envs("g1_walk_rough", "nominal", 1)


def test_a_terrain_suite_is_judged_at_the_hardest_row_and_keeps_every_row() -> None:
    rows = {f"row_{r}": {"num_envs": 2, "fall_rate": r / 10, "lin_vel_error": 0.1} for r in range(3)}
    scored = {"fall_rate": 0.1, "lin_vel_error": 0.1, "terrain_rows": rows}
    result = hardest_row_first(scored)
    assert result["fall_rate"] == 0.2 and "num_envs" not in result and result["terrain_rows"] is rows
    assert result["all_rows"] == {"fall_rate": 0.1, "lin_vel_error": 0.1}
    table = row_table(rows)
    assert len(table) == 4 and table[-1].split() == ["row_2", "2", "0.2000", "0.1000", "-", "-", "-"]


def test_three_iterations_of_training_on_rough_ground_complete_and_eval_on_the_stairs(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    summary = run(compose_config(tiny(tmp_path, "mujoco", "task=g1_walk_rough", "algo.max_iterations=3")))
    data = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert data["status"] == "completed" == summary.status and data["completed_iterations"] == 3
    checkpoint = tmp_path / "run" / "model_3.pt"
    argv = ["--checkpoint", str(checkpoint), "--num-envs", "20", "--episode-s", "0.2", "--suite", "all"]
    results = eval_main(argv)
    assert list(results) == suites_of("g1_walk_rough")
    stairs = results["stairs_up"]
    assert stairs["suite"] == "stairs_up" and stairs["distance_walked"] >= 0.0
    # 20 envs on one type of 10 rows: two a row, the hardest row's figures at the head
    assert [row["num_envs"] for row in stairs["terrain_rows"].values()] == [2] * 10
    hardest = stairs["terrain_rows"]["row_9"]
    assert stairs["fall_rate"] == hardest["fall_rate"]
    # the verdict's rates are shares of the hardest row's two robots, and their interval is that wide
    assert stairs["judged_envs"] == 2 and results["nominal"]["judged_envs"] == 20
    low, high = rate_interval(stairs["fall_rate"], 2)
    assert stairs["intervals"] == {"fall_rate": [round(low, 6), round(high, 6)]} and stairs["unsettled"] == [
        "fall_rate"
    ]
    # which commands the hardest row's robots followed, and what ended the episodes of those that fell
    assert stairs["falls_by_command"] == hardest["falls_by_command"] and stairs["ended_by"] == hardest["ended_by"]
    assert sum(kind["num_envs"] for kind in hardest["falls_by_command"].values()) == 2
    assert list(hardest["ended_by"]) == ["tilt", "fall", "diverged"]
    assert sum(hardest["ended_by"].values()) >= round(2 * hardest["fall_rate"])
    printed = capsys.readouterr().out
    assert "  row        forward  backward  sideways   turning  standing |      tilt      fall  diverged" in printed
    assert [row["num_envs"] for row in results["slope"]["terrain_rows"].values()] == [2] * 10
    assert sum(row["num_envs"] for row in results["nominal"]["terrain_rows"].values()) == 20
    assert (tmp_path / "run" / "eval_summary_model_3_stairs_up.json").is_file()
    # Every env on the hardest row: the verdict on all 20, in a summary of its own beside the spread one's.
    top = eval_main([*argv[:6], "--suite", "stairs_up", "--hardest-row"])
    assert [row["num_envs"] for row in top["terrain_rows"].values()] == [0] * 9 + [20]
    assert top["judged_envs"] == 20 and top["rows"] == "hardest" and stairs["rows"] == "all"
    assert top["summary_path"].endswith("eval_summary_model_3_stairs_up_top.json")
    assert json.loads((tmp_path / "run" / "eval_summary_model_3_stairs_up.json").read_text())["judged_envs"] == 2


def _algo_differences(rough: str, flat: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each walk's SAC settings where the rough walk's differ from the flat walk's."""
    configs = [compose_config(["algo=sac", f"task={task}", "sim=mjwarp"]).algo for task in (rough, flat)]
    rough_algo, flat_algo = (dataclasses.asdict(algo) for algo in configs)
    differ = [key for key in flat_algo if rough_algo[key] != flat_algo[key]]
    return {key: rough_algo[key] for key in differ}, {key: flat_algo[key] for key in differ}


def test_the_rough_walk_s_sac_is_the_flat_walk_s_with_six_updates_a_longer_run_an_average_and_its_own_physics() -> None:
    rough, flat = _algo_differences("g1_walk_rough", "g1_walk_flat")
    assert (rough, flat) == (
        {"updates_per_step": 6, "max_iterations": 24000, "actor_average": 0.0003},
        {"updates_per_step": 8, "max_iterations": 5000, "actor_average": 0.0},
    )
    knobs = compose_config(["algo=sac", "task=g1_walk_rough", "sim=mjwarp"]).task.knobs
    physics = {knob: knobs[knob] for knob in ("solver_iterations", "ls_iterations", "nconmax", "njmax")}
    assert physics == {"solver_iterations": 10, "ls_iterations": 20, "nconmax": 64, "njmax": 400}
    tuned = make_task(
        "g1_walk_rough", **task_overrides(compose_config(["algo=sac", "task=g1_walk_rough", "sim=mjwarp"]))
    )
    assert tuned.rewards["penalty_feet_stumble"].weight == -1.0 and knobs["stumble"] == -1.0
    model = mujoco.MjModel.from_xml_path(str(g1.SCENE))
    names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, geom) or "" for geom in range(model.ngeom)]
    robot = [name for name in names if name.endswith("_collision")]
    on_boxes = [name for name in robot if re.fullmatch(knobs["box_geoms"], name)]
    assert (len(robot), len(on_boxes)) == (41, 25)
    assert {"left_foot2_collision", "left_foot_sphere1_collision", "right_hand_collision"} <= set(on_boxes)
    assert not {"left_foot3_collision", "left_hip_collision", "right_shoulder_yaw_collision"} & set(on_boxes)
    ppo = compose_config(["algo=ppo", "task=g1_walk_rough", "sim=mjwarp"]).task.knobs
    assert (ppo["solver_iterations"], ppo["nconmax"], ppo["njmax"], ppo["box_geoms"], ppo["stumble"]) == (
        None,
        160,
        900,
        None,
        0.0,
    )


def test_the_go1_s_rough_sac_is_its_flat_walk_s_with_six_updates_a_longer_run_an_averaged_actor_and_stumbles() -> None:
    rough, flat = _algo_differences("go1_walk_rough", "go1_walk_flat")
    assert (rough, flat) == (
        {"updates_per_step": 6, "max_iterations": 30000, "actor_average": 0.0003},
        {"updates_per_step": 8, "max_iterations": 5000, "actor_average": 0.0},
    )
    tuned = compose_config(["algo=sac", "task=go1_walk_rough", "sim=mjwarp"])
    stumble = make_task("go1_walk_rough", **task_overrides(tuned)).rewards["penalty_feet_stumble"]
    assert (stumble.weight, stumble.params["ratio"]) == (-1.0, 2.0)
    for algo in ("ppo", "flashsac"):
        assert compose_config([f"algo={algo}", "task=go1_walk_rough", "sim=mjwarp"]).task.knobs["stumble"] == 0.0


def test_falls_on_terrain_are_placed_where_the_robot_last_stood() -> None:
    position = torch.tensor([[[0.0, 0.0, 0.75], [5.0, 5.0, 0.75]], [[1.0, 0.0, 0.8], [5.0, 6.0, 0.75]]])
    position = torch.cat([position, torch.tensor([[[2.0, 0.0, 0.3], [5.0, 7.0, 0.75]]])])  # (T=3, N=2, 3)
    active = torch.tensor([[True, True], [True, True], [False, True]])  # env 0 fell on its third step
    figures = walking_metrics.score(
        commands=torch.zeros(3, 2, 3),
        lin_vel_xy=torch.zeros(3, 2, 2),
        yaw_rate=torch.zeros(3, 2),
        active=active,
        failed=torch.tensor([True, False]),
        episode_length=torch.tensor([3, 3]),
        dt=0.02,
        position=position,
    )
    assert figures["fall_rate"] == 0.5
    assert figures["fall_distance"] == pytest.approx(1.0) and figures["fall_rise"] == pytest.approx(0.05)
    standing = walking_metrics.score(
        **{
            **dict(commands=torch.zeros(3, 2, 3), lin_vel_xy=torch.zeros(3, 2, 2)),
            "yaw_rate": torch.zeros(3, 2),
            "active": active,
            "failed": torch.tensor([False, False]),
            "episode_length": torch.tensor([3, 3]),
            "dt": 0.02,
            "position": position,
        }
    )
    assert "fall_distance" not in standing and "fall_rise" not in standing


def test_a_perfect_walker_climbs_the_rough_walks_curriculum_and_its_arc_ends_where_the_chord_says() -> None:
    command = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.2, 0.5], [0.3, -0.4, -0.8], [0.8, 0.0, 2 * math.pi / 20]])
    ends = curriculum_odds.arc_end(command, torch.tensor([0.0, 1.0, -2.0, 3.0]), 20.0)
    chord = curricula.commanded_displacement(command, 20.0)
    assert torch.allclose(ends.norm(dim=-1), chord, atol=1e-4)  # two derivations of one arc
    assert torch.allclose(ends[0], torch.tensor([20.0, 0.0]))
    result = curriculum_odds.odds("g1_walk_rough", 20_000)
    # Half the commands walk straight and reach 4 m; a walker that follows them is almost never moved down.
    assert result["up"] > 0.5 and result["down"] < 0.02
    # Crossing its tile ends most straight walkers' episodes early; the turning ones walk their 20 s.
    assert 5.0 < result["episode_s"] < 16.0
    settled = result["settled"]
    assert sum(settled) == pytest.approx(1.0) and settled[-1] == max(settled)


def test_a_suite_the_training_conditions_already_cover_is_refused_and_left_out_of_all() -> None:
    # The rough walk is randomised with the friction, payload and latency suites' own ranges: they would equal nominal.
    for suite in ("friction", "payload", "latency"):
        with pytest.raises(InputError, match=f"suite {suite} changes nothing on g1_walk_rough"):
            suite_overrides("g1_walk_rough", suite, {})
    assert suites_of("g1_walk_rough") == ["nominal", "push", "finer_physics", *TERRAIN_SUITES]
    assert suites_of("g1_walk_flat")[:5] == ["nominal", "push", "friction", "payload", "latency"]


def test_a_walk_on_terrain_is_stated_in_typed_fields_and_a_row_needs_a_terrain() -> None:
    go1 = make_task("go1_walk_rough", falls="knees")
    # The Go1 on terrain under the knee rule: no tilt termination, a knee near the ground ends the episode, measured
    # from the ground.
    assert list(go1.terminations) == ["touchdown", "time_out", "off_terrain", "crossed_tile"]
    touchdown = go1.terminations["touchdown"].params
    assert touchdown["bodies"] == KNEES and touchdown["min_height"] == KNEE_CLEARANCE and "ground" in touchdown
    g1 = make_task("g1_walk_rough")
    assert list(g1.terminations) == ["tilt", "fall", "time_out", "off_terrain", "crossed_tile"]
    assert list(g1.events)[:3] == ["root_pose", "terrain_spawn", "pd_gains"]  # the spawn carries the drawn pose
    with pytest.raises(ValueError, match="terrain_level needs a terrain; g1_walk_flat walks on flat ground"):
        make_walk(G1_WALK, terrain_level=3)


def test_the_touchdown_clearance_penalty_grades_the_bodies_height_above_the_ground() -> None:
    """Four knees 5, 3, 1 and -1 cm above a ground 0.2 m up, with a 4 cm margin: 0, 1/4, 3/4 and 5/4, summed."""
    knees = ("a", "b", "c", "d")
    ctx = SimpleNamespace(body_ids={name: i + 1 for i, name in enumerate(knees)})
    xpos = torch.zeros(2, 5, 3)
    xpos[0, 1:, 2] = 0.2 + torch.tensor([0.05, 0.03, 0.01, -0.01])
    xpos[1, 1:, 2] = 0.3  # all well clear
    state = TensorDict({"sim": {"xpos": xpos}}, batch_size=[])
    ground = HeightMap(torch.full((21, 21), 0.2), 0.1)
    deficit = rewards.bodies_clearance_deficit(state, ctx, knees, 0.04, ground)
    assert deficit.tolist() == pytest.approx([2.25, 0.0])
    assert rewards.bodies_clearance_deficit(state, ctx, knees, 0.04).tolist() == [0.0, 0.0]  # above z = 0


def test_the_go1_s_touchdown_penalty_is_a_knob_and_absent_at_zero() -> None:
    assert "penalty_touchdown_clearance" not in make_task("go1_walk_rough").rewards
    cfg = compose_config(["task=go1_walk_rough", "sim=mujoco", "task.touchdown_penalty=-10"])
    term = make_task("go1_walk_rough", **cfg.task.knobs).rewards["penalty_touchdown_clearance"]
    assert term.weight == -10.0 and term.curriculum_scaled
    assert term.params["bodies"] == KNEES and term.params["margin"] == 2 * KNEE_CLEARANCE and "ground" in term.params
    with pytest.raises(ValueError, match=r"task.touchdown_penalty must be in \[-1000, 0\] \(a penalty's weight"):
        compose_config(["task=go1_walk_rough", "sim=mujoco", "task.touchdown_penalty=5"])


def test_the_go1_s_falls_are_the_trunk_s_contact_and_the_knee_rule_a_knob() -> None:
    cfg = compose_config(["task=go1_walk_rough", "sim=mujoco", "task.touchdown_penalty=-1"])
    task = make_task("go1_walk_rough", **cfg.task.knobs)
    assert list(task.terminations) == ["ground_contact", "time_out", "off_terrain", "crossed_tile"]
    sensors = ("trunk", "FR_hip", "FL_hip", "RR_hip", "RL_hip")
    assert task.terminations["ground_contact"].params == {"sensors": tuple(f"{b}_ground_contacts" for b in sensors)}
    assert task.ground_contact_bodies == sensors
    assert task.rewards["penalty_touchdown_clearance"].params["bodies"] == KNEES  # the knees still pay, if asked
    knees = compose_config(["task=go1_walk_rough", "sim=mujoco", "task.falls=knees"])
    assert make_task("go1_walk_rough", **knees.task.knobs).ground_contact_bodies == ()  # the knee rule: no sensor
    with pytest.raises(ValueError, match=r"task.falls must be one of knees, trunk \(what ends an episode as a fall"):
        compose_config(["task=go1_walk_rough", "sim=mujoco", "task.falls=hips"])


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_the_trunk_on_the_ground_ends_an_episode_and_a_kneeling_go1_walks_on(sim: str) -> None:
    """The contact sensor as each engine fills it: one Go1 stands, one lies on its back (its trunk's box and hips 5
    mm into the level ground of row 0, its legs in the air; it comes to rest on the hips' capsules); then both kneel
    on their hind legs (thighs forward, calves unfolded as far as an action reaches), which the knee rule ends and
    the trunk rule does not."""
    env = make_functional_env("go1_walk_rough", sim=sim, num_envs=2, device="cpu", terrain_level=0)
    state = env.reset(rnglib.make_rng(0))
    dropped = state.clone()
    x, y = dropped["sim", "qpos"][1, :2]
    ground = float(generate(env.task.terrain).height_map()(x, y))
    dropped["sim", "qpos"][1, 2:7] = torch.tensor([ground + 0.045, 0.0, 1.0, 0.0, 0.0])  # turned over about x
    rng = rnglib.make_rng(1)
    _, transition = env.step(dropped, torch.zeros(2, env.action_dim), rng)
    assert transition["next", "terminated"].reshape(-1).tolist() == [False, True]
    kneel = torch.tensor([{"thigh": -1.0, "calf": 1.0}.get(go1.part(joint), 0.0) for joint in go1.JOINT_NAMES])
    knees = make_task("go1_walk_rough", terrain_level=0, falls="knees").terminations["touchdown"]
    knee_rule_fired = False
    for _ in range(60):
        rng = rnglib.advance(rng)
        state, transition = env.step(state, kneel.expand(2, -1), rng)
        assert not transition["next", "terminated"].any()
        knee_rule_fired |= bool(knees.func(state, env.ctx, **knees.params).any())
    assert knee_rule_fired


def test_a_go1_trained_under_the_knee_rule_is_judged_under_it(tmp_path: Path) -> None:
    config = tiny(tmp_path, "mujoco", "task=go1_walk_rough", "task.falls=knees", "algo.max_iterations=2")
    assert run(compose_config(config)).status == "completed"
    argv = ["--checkpoint", str(tmp_path / "run" / "model_2.pt"), "--num-envs", "20", "--episode-s", "0.2"]
    pit = eval_main([*argv, "--suite", "stairs_down"])
    assert list(pit["ended_by"]) == ["touchdown", "diverged"]  # the trunk rule, the default, is not the checkpoint's
    # Judged on a variant of its task: the knob given to eval over the checkpoint's own, and said in the summary.
    other = eval_main([*argv, "--suite", "stairs_down", "--knobs", "task.falls=trunk"])  # a summary of its own
    assert list(other["ended_by"]) == ["ground_contact", "diverged"] and other["knob_overrides"] == {"falls": "trunk"}
    assert pit["knob_overrides"] == {}


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        (["falls=knees"], "'falls=knees' is not a task knob's value: write task.<knob>=<value>"),
        (["task.falls="], "is not a task knob's value"),
        (["task.falls=hips"], r"task.falls must be one of knees, trunk"),
        (["task.reach=2"], "task.reach does not apply to task 'go1_walk_rough'"),
    ],
)
def test_a_knob_eval_cannot_take_is_refused_in_one_line(knobs: list[str], message: str, tmp_path: Path, capsys) -> None:
    config = tiny(tmp_path, "mujoco", "task=go1_walk_rough", "algo.max_iterations=1")
    assert run(compose_config(config)).status == "completed"
    capsys.readouterr()  # the run's own lines
    with pytest.raises(SystemExit) as ended:
        eval_main(["--checkpoint", str(tmp_path / "run" / "model_1.pt"), "--num-envs", "6", "--knobs", *knobs])
    assert ended.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and re.search(message, err), err


@pytest.mark.parametrize(("task", "top", "step"), [("g1_walk_rough", 0.10, 0.02), ("go1_walk_rough", 0.06, 0.01)])
def test_the_random_surface_is_scaled_to_the_robot(task: str, top: float, step: float) -> None:
    # On the top row the surface's heights take every multiple of its step up to its top, and no more.
    cfg = make_task(task).terrain
    tile = random_rough(cfg, cfg.difficulty(cfg.rows - 1), np.random.default_rng(0))
    assert sorted({round(float(h) / step) for h in tile.flat}) == list(range(round(top / step) + 1))
    assert np.allclose(tile / step, np.round(tile / step)) and abs(tile.max() - top) < 1e-9


@pytest.mark.parametrize("task", ["g1_walk_rough", "go1_walk_rough"])
def test_the_terrain_columns_are_a_knob_and_a_kind_named_twice_gets_twice_the_tiles(task: str, capsys) -> None:
    own = make_task(task).terrain
    assert make_task(task, terrain_columns=None).terrain.types == own.types
    columns = ["flat", "pyramid_stairs_inv", "pyramid_stairs_inv"]
    cfg = compose_config([f"task={task}", "sim=mujoco", f"task.terrain_columns=[{','.join(columns)}]"])
    terrain = make_task(task, **cfg.task.knobs).terrain
    assert terrain.types == tuple(columns) and terrain.cols == 3 and terrain.rows == own.rows
    origins = generate(terrain).origins  # two pits side by side, each row as deep as the other
    np.testing.assert_array_equal(origins[:, 1, 2], origins[:, 2, 2])
    assert origins[-1, 1, 2] < origins[0, 1, 2] == origins[0, 0, 2] == 0
