"""``g1_walk_rough``: the terrain curriculum moves envs up and down, spawns land on their tiles, the scan mirrors
with the robot, heights that decide falls are measured from the ground, the env keeps TorchRL's specs on both
backends, the eval's terrain suites pin one type at the hardest row, and a short training run completes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import check_env_specs

from tests.test_train import tiny
from unilab.apps.args import InputError
from unilab.apps.compose import compose_config
from unilab.apps.eval import TERRAIN_SUITES, suite_overrides, suites_of
from unilab.apps.eval import main as eval_main
from unilab.apps.train import run
from unilab.core import rng as rnglib
from unilab.mdp import curricula, events, terminations
from unilab.mdp.terrain import HeightMap, scan_mirror_index, scan_pattern
from unilab.tasks.g1_walk_rough.config import TERRAIN
from unilab.tasks.registry import make_env, make_functional_env, make_task
from unilab.terrain import TerrainConfig, generate

SMALL = TerrainConfig(rows=4, types=("flat", "pyramid_stairs"), border=2.0)


def _levels_state(level: list[float], xy: list[list[float]], command: list[list[float]]) -> TensorDict:
    n = len(level)
    qpos = torch.zeros(n, 7)
    qpos[:, :2] = torch.tensor(xy)
    return TensorDict(
        {
            "env": {"terrain_level": torch.tensor(level), "velocity": torch.tensor(command)},
            "sim": {"qpos": qpos},
        },
        batch_size=[],
    )


def test_the_curriculum_moves_far_walkers_up_short_walkers_down_and_nobody_below_the_first_row() -> None:
    terrain = generate(SMALL)
    origins = torch.from_numpy(terrain.origins)
    # Envs 0-3 walk column 0 (flat), 4-5 column 1; each starts from its tile's centre.
    level = [1.0, 1.0, 0.0, 2.0, 3.0, 1.0]
    start = [origins[int(row), i % 2, :2] for i, row in enumerate(level)]
    moved = [[4.5, 0.0], [1.0, 0.0], [0.0, 0.0], [3.0, 0.0], [0.0, 5.0], [0.0, 0.0]]
    xy = [(s + torch.tensor(m)).tolist() for s, m in zip(start, moved, strict=True)]
    command = [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.5, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    state = _levels_state(level, xy, command)
    done = torch.tensor([True, True, True, True, True, False])
    ctx = SimpleNamespace(num_envs=6)
    out = curricula.terrain_levels(state, ctx, done, origins, 8.0, "velocity", 20.0)
    # 0: 4.5 m > 4 up; 1: 1 m < 10 m asked, down; 2: down, clamped at 0; 3: 3 m < 5 m asked, down;
    # 4: off its tile from the last row: past it (the spawn redraws it); 5: not done, unchanged.
    assert out[("env", "terrain_level")].tolist() == [2.0, 0.0, 0.0, 1.0, 4.0, 1.0]
    assert float(out[("task", "terrain_level_mean")]) == pytest.approx((2 + 0 + 0 + 1 + 3 + 1) / 6)


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


def test_the_rough_walk_builds_its_terrain_into_the_scene_with_the_scan_in_both_groups() -> None:
    env = make_functional_env("g1_walk_rough", sim="mujoco", num_envs=4)
    model = env.sim.model
    pieces = [model.geom(i).name for i in range(model.ngeom) if model.geom(i).name.startswith("terrain_")]
    assert len(pieces) == (TERRAIN.rows + 2) * (TERRAIN.cols + 2) and model.nhfield > 0  # tiles and border pieces
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


def test_the_terrain_suites_put_every_env_on_one_type_at_the_hardest_row() -> None:
    assert suites_of("g1_walk_rough")[-len(TERRAIN_SUITES) :] == list(TERRAIN_SUITES)
    assert not set(TERRAIN_SUITES) & set(suites_of("g1_walk_flat"))
    overrides = suite_overrides("g1_walk_rough", "stairs_up", {"obs_noise": False})
    assert overrides["terrain"].types == ("pyramid_stairs",) and overrides["terrain_level"] == TERRAIN.rows - 1
    task = make_task("g1_walk_rough", **overrides)
    assert task.events["terrain_spawn"].params["level"] == TERRAIN.rows - 1
    with pytest.raises(InputError, match="flat floor"):
        suite_overrides("g1_walk_flat", "slope", {})


def test_a_row_the_terrain_does_not_have_is_refused() -> None:
    with pytest.raises(ValueError, match="terrain_level must be a row of the terrain, 0 to 9, got 10"):
        make_task("g1_walk_rough", terrain_level=10)


def test_three_iterations_of_training_on_rough_ground_complete_and_eval_on_the_stairs(tmp_path: Path) -> None:
    summary = run(compose_config(tiny(tmp_path, "mujoco", "task=g1_walk_rough", "algo.max_iterations=3")))
    data = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert data["status"] == "completed" == summary.status and data["completed_iterations"] == 3
    checkpoint = tmp_path / "run" / "model_3.pt"
    results = eval_main(["--checkpoint", str(checkpoint), "--num-envs", "2", "--episode-s", "0.2", "--suite", "all"])
    assert list(results) == suites_of("g1_walk_rough")
    stairs = results["stairs_up"]
    assert stairs["suite"] == "stairs_up" and stairs["distance_walked"] >= 0.0
    assert (tmp_path / "run" / "eval_summary_model_3_stairs_up.json").is_file()
