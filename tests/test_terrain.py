"""The terrain generator: deterministic from its seed, each type shaped by its row's difficulty, refused in one line
when it makes no terrain, and built into the scene so that rays and both backends see the map."""

from __future__ import annotations

import dataclasses
import itertools
import json
import re
from types import SimpleNamespace

import mujoco
import numpy as np
import pytest
import torch
from tensordict import TensorDict

from unilab.mdp.terrain import height_scan, scan_pattern
from unilab.robots import g1
from unilab.sim import SimConfig, make_backend
from unilab.terrain import TERRAIN_TYPES, TerrainConfig, generate, terrain_model
from unilab.terrain.heightmap import HeightMap, refine
from unilab.terrain.terraces import rectangles, terraces

SMALL = TerrainConfig(rows=3, tile_size=8.0, border=2.0)


def _tile(terrain, row: int, name: str) -> np.ndarray:
    cfg = terrain.config
    n, b, col = cfg.tile_samples, cfg.border_samples, cfg.types.index(name)
    return terrain.heights[b + row * n : b + (row + 1) * n, b + col * n : b + (col + 1) * n]


def test_the_same_config_gives_the_same_terrain_and_the_seed_moves_only_the_random_tiles() -> None:
    a, b = generate(SMALL), generate(SMALL)
    assert np.array_equal(a.heights, b.heights) and np.array_equal(a.origins, b.origins)
    other = generate(dataclasses.replace(SMALL, seed=1))
    for name in TERRAIN_TYPES:
        same = np.array_equal(_tile(a, 2, name), _tile(other, 2, name))
        assert same == (name != "random_rough"), name


def test_a_config_is_built_once_and_no_caller_can_change_what_the_next_one_gets() -> None:
    """A rough task reads the map for its terms and again for its scene, and a run builds its task twice."""
    from unilab.terrain.generator import _generate

    config = dataclasses.replace(SMALL, seed=7)
    first = generate(config)
    built = _generate.cache_info().misses
    first.heights[:] = 99.0  # the caller's own copy
    first.origins[:] = 99.0
    second = generate(dataclasses.replace(SMALL, seed=7))
    assert _generate.cache_info().misses == built
    assert not np.any(second.heights == 99.0) and not np.any(second.origins == 99.0)
    assert not _generate(config).heights.flags.writeable
    as_list = generate(dataclasses.replace(config, types=list(config.types)))  # unhashable: built afresh
    assert np.array_equal(as_list.heights, second.heights)


def test_each_type_follows_its_rows_difficulty() -> None:
    terrain = generate(SMALL)  # difficulties 0, 0.5, 1
    assert not np.any(terrain.heights[:, : SMALL.border_samples])  # the border is level ground
    for row, difficulty in enumerate((0.0, 0.5, 1.0)):
        stairs = _tile(terrain, row, "pyramid_stairs")
        levels = np.unique(stairs)
        assert len(levels) == (6 if difficulty else 1)  # the ground and five steps, the top one the platform
        assert levels.max() == pytest.approx(5 * 0.1 * difficulty, abs=1e-6)
        assert np.array_equal(_tile(terrain, row, "pyramid_stairs_inv"), -stairs)
        slope = _tile(terrain, row, "pyramid_slope")
        assert slope.max() == pytest.approx(difficulty * (4.0 - 0.25 - 1.0), abs=1e-5)  # 2.75 m at 45 degrees
        rise = np.diff(slope[40, 2:10])  # from the border's inner edge (0.25 m in) towards the platform
        assert np.allclose(rise, difficulty * SMALL.horizontal_scale, atol=1e-5)
        rough = _tile(terrain, row, "random_rough")
        assert rough.max() <= 0.02 + 0.08 * difficulty + 1e-6 and not np.any(rough[0])
    # Spawn origins: each tile's centre, on its surface.
    platform = terrain.origins[2, SMALL.types.index("pyramid_stairs")]
    assert platform[2] == pytest.approx(0.5) and terrain.origins[2, 0, 2] == 0.0
    assert np.allclose(
        terrain.origins[..., 2], terrain.height_at(terrain.origins[..., 0], terrain.origins[..., 1]), atol=1e-5
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"tile_size": float("nan")}, "terrain tile_size must be a finite length >= 0, got nan"),
        ({"border": -1.0}, "terrain border must be a finite length >= 0, got -1.0"),
        ({"horizontal_scale": 0.0}, "terrain horizontal_scale must be > 0"),
        ({"types": ("flat", "lava")}, "unknown terrain type 'lava'; known types: flat, pyramid_stairs"),
        ({"rows": 0}, "terrain needs at least one row and one type"),
        ({"rows": 1000}, "a model holds at most 16777216"),
        ({"stairs_platform": 7.0}, "terrain stairs platform and borders take 9 m of a 8 m tile"),
        ({"surface_scale": 0.15}, "terrain surface_scale 0.15 m must be a whole multiple of horizontal_scale 0.1 m"),
        ({"surface_scale": 0.05}, "terrain surface_scale 0.05 m must be a whole multiple of horizontal_scale 0.1 m"),
        ({"hfield_geoms": "foot["}, "terrain hfield_geoms 'foot[' is not a regular expression"),
        ({"box_geoms": "(shin"}, "terrain box_geoms '(shin' is not a regular expression"),
    ],
)
def test_a_grid_that_makes_no_terrain_is_refused_in_one_line(change: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        generate(dataclasses.replace(SMALL, **change))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_refining_a_grid_keeps_its_triangles() -> None:
    """One cell, split from its (-x, -y) corner to its (+x, +y) corner, refined twice: the new samples on its edges
    are their ends' means, the centre is the diagonal's midpoint (not the four corners' mean), and past the last
    sample the edge carries on."""
    coarse = np.array([[0.0, 1.0], [2.0, 4.0]])  # [y, x]
    expected = [[0.0, 0.5, 1.0, 1.0], [1.0, 2.0, 2.5, 2.5], [2.0, 3.0, 4.0, 4.0], [2.0, 3.0, 4.0, 4.0]]
    np.testing.assert_allclose(refine(coarse, 2, (4, 4)), expected)


def test_a_finer_map_steepens_the_risers_and_keeps_every_other_surface() -> None:
    """At 0.05 m a riser ramps over 5 cm instead of 10, so a 0.3 m tread keeps 0.25 m level instead of 0.2; the
    slopes and the random surface, drawn at ``surface_scale``, are the same surface as on the 0.1 m map."""
    coarse = generate(SMALL)
    fine = generate(dataclasses.replace(SMALL, horizontal_scale=0.05))
    for terrain in (coarse, fine):
        scale = terrain.config.horizontal_scale
        centre = terrain.config.tile_samples // 2
        profile = _tile(terrain, 2, "pyramid_stairs")[centre]
        runs = np.diff(np.flatnonzero(np.diff(profile)))  # samples between one riser and the next
        level = np.median(runs) * scale - scale  # the level part of an inner tread, metres
        assert level == pytest.approx(0.3 - scale, abs=1e-6)
    for name in ("pyramid_slope", "pyramid_slope_inv", "random_rough"):
        for row in range(SMALL.rows):
            tile = _tile(coarse, row, name)
            np.testing.assert_allclose(_tile(fine, row, name), refine(tile, 2, (160, 160)), atol=1e-6, rtol=0)


def test_the_scene_builds_each_piece_from_the_fewest_samples_that_make_its_surface() -> None:
    """On a 0.05 m map the stairs keep every sample; the slopes and the random surface are built from their own
    0.1 m samples, and level pieces are boxes."""
    terrain = generate(dataclasses.replace(SMALL, horizontal_scale=0.05))
    model = terrain_model(g1.SCENE, terrain)
    rows_of = {}
    for i in range(model.nhfield):
        col = int(model.hfield(i).name.split("_")[2]) - 1  # terrain_<row>_<col>, the border's pieces first
        rows_of[SMALL.types[col]] = rows_of.get(SMALL.types[col], set()) | {int(model.hfield_nrow[i])}
    assert rows_of == {
        "pyramid_stairs": {161},
        "pyramid_stairs_inv": {161},
        "pyramid_slope": {81},
        "pyramid_slope_inv": {81},
        "random_rough": {81},
    }


def _ray_heights(model: mujoco.MjModel, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Where a ray cast straight down by C MuJoCo meets the terrain, at every point ``(x, y)``."""
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    terrain_group = np.array([1, 0, 0, 0, 0, 0], dtype=np.uint8)  # the robot's geoms are group 3
    geom = np.zeros(1, dtype=np.int32)
    hits = []
    for px, py in zip(x.ravel(), y.ravel(), strict=True):
        distance = mujoco.mj_ray(
            model, data, np.array([px, py, 10.0]), np.array([0.0, 0.0, -1.0]), terrain_group, 1, -1, geom
        )
        assert model.geom(geom[0]).name.startswith("terrain")
        hits.append(10.0 - distance)
    return np.array(hits).reshape(x.shape)


@pytest.mark.parametrize(("layout", "scale"), [("tiled", 0.1), ("single", 0.1), ("tiled", 0.05), ("single", 0.05)])
def test_the_map_is_the_surface_rays_meet_everywhere(layout: str, scale: float) -> None:
    """The scene is the map in either layout, between samples and across the pieces' seams too: rays by C MuJoCo
    land on ``height_at`` at random points of every tile (the random one's cells are not planar), at every spawn
    origin and along the lines where the tiled layout's pieces meet; also where the tiled layout builds a piece
    from fewer samples than the map has."""
    terrain = generate(dataclasses.replace(SMALL, layout=layout, horizontal_scale=scale))
    model = terrain_model(g1.SCENE, terrain)
    width, depth = terrain.size
    rng = np.random.default_rng(0)
    seams = terrain.origins[0, :, 0] + SMALL.tile_size / 2  # the x of each tile's right edge
    along = rng.uniform(-depth / 2, depth / 2, (seams.size, 20))
    x = np.concatenate([rng.uniform(-width / 2, width / 2, 400), terrain.origins[..., 0].ravel()])
    y = np.concatenate([rng.uniform(-depth / 2, depth / 2, 400), terrain.origins[..., 1].ravel()])
    x = np.concatenate([x, np.repeat(seams, 20) + rng.uniform(-0.05, 0.05, seams.size * 20)])
    y = np.concatenate([y, along.ravel()])
    np.testing.assert_allclose(terrain.height_at(x, y), _ray_heights(model, x, y), atol=1e-5, rtol=0)


def test_a_mask_is_covered_by_disjoint_rectangles_and_a_ring_by_four() -> None:
    ring = np.ones((6, 7), dtype=bool)
    ring[2:4, 2:5] = False
    found = list(rectangles(ring))
    assert len(found) == 4
    covered = np.zeros_like(ring, dtype=int)
    for (i0, i1), (j0, j1) in found:
        covered[i0 : i1 + 1, j0 : j1 + 1] += 1
    assert np.array_equal(covered, ring.astype(int))  # every true cell once, no false one


def test_rectangles_come_in_the_greedy_order_one_at_a_time() -> None:
    """Each from the first uncovered cell in row order, grown along its row, then down while the rows below are all
    uncovered under it; a caller takes only as many as it needs (a level of the random surface has thousands)."""
    mask = np.array(
        [
            [1, 1, 0, 1],
            [1, 1, 0, 1],
            [1, 1, 1, 1],
        ],
        dtype=bool,
    )
    assert list(rectangles(mask)) == [((0, 2), (0, 1)), ((0, 2), (3, 3)), ((2, 2), (2, 2))]
    checkers = np.indices((400, 400)).sum(0) % 2 == 0
    assert list(itertools.islice(rectangles(checkers), 3)) == [((0, 0), (0, 0)), ((0, 0), (2, 2)), ((0, 0), (4, 4))]


def test_stairs_are_terraces_and_slopes_and_the_random_surface_are_not() -> None:
    """A pyramid of five steps: the base and one box a step; a pit of five: the base and four boxes a step (each
    level's samples a square ring); the others are not terraced."""
    terrain = generate(SMALL)
    pyramid = terraces(_tile(terrain, 2, "pyramid_stairs"))
    assert [box.top for box in pyramid] == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4, 0.5], abs=1e-6)
    assert len(terraces(_tile(terrain, 2, "pyramid_stairs_inv"))) == 1 + 5 * 4
    for name in ("pyramid_slope", "pyramid_slope_inv", "random_rough"):
        assert terraces(_tile(terrain, 2, name)) is None, name


def test_the_terraced_scene_makes_the_stairs_of_boxes_and_is_the_map_away_from_their_risers() -> None:
    """The stairs' pieces are boxes and the other pieces height fields; rays land on the map at every sample and
    at random points of every level cell (its four samples equal), and a ray between two samples of a riser meets
    the step's top on the upper half of the cell and its foot on the lower half: a vertical face at mid-cell."""
    terrain = generate(dataclasses.replace(SMALL, layout="terraced", horizontal_scale=0.05))
    model = terrain_model(g1.SCENE, terrain)
    kinds = {
        mujoco.mjtGeom(model.geom_type[g]).name for g in range(model.ngeom) if model.geom(g).name.startswith("terrain")
    }
    assert kinds == {"mjGEOM_BOX", "mjGEOM_HFIELD"}
    hfield_pieces = {model.hfield(i).name for i in range(model.nhfield)}
    stairs_cols = {SMALL.types.index("pyramid_stairs") + 1, SMALL.types.index("pyramid_stairs_inv") + 1}
    assert not any(int(name.split("_")[2]) in stairs_cols for name in hfield_pieces)
    heights, scale = terrain.heights, terrain.config.horizontal_scale
    ny, nx = heights.shape
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, ny - 1, 600), rng.integers(0, nx - 1, 600)
    at = lambda index, n: (index - (n - 1) / 2) * scale  # noqa: E731
    x, y = at(j, nx), at(i, ny)
    np.testing.assert_allclose(terrain.height_at(x, y), _ray_heights(model, x, y), atol=1e-5, rtol=0)
    level = (
        (heights[i, j] == heights[i + 1, j])
        & (heights[i, j] == heights[i, j + 1])
        & (heights[i, j] == heights[i + 1, j + 1])
    )
    fx, fy = at(j + rng.uniform(0, 1, 600), nx)[level], at(i + rng.uniform(0, 1, 600), ny)[level]
    np.testing.assert_allclose(terrain.height_at(fx, fy), _ray_heights(model, fx, fy), atol=1e-5, rtol=0)
    tile = _tile(terrain, 2, "pyramid_stairs")
    row = tile.shape[0] // 2
    riser = int(np.flatnonzero(np.diff(tile[row]))[0])  # between samples riser and riser + 1, rising inwards
    b, n, col = SMALL.border_samples * 2, terrain.config.tile_samples, SMALL.types.index("pyramid_stairs")
    gi, gj = b + 2 * n + row, b + col * n + riser
    xs = np.array([at(gj + 0.4, nx), at(gj + 0.6, nx)])
    hits = _ray_heights(model, xs, np.full(2, at(gi, ny)))
    np.testing.assert_allclose(hits, [heights[gi, gj], heights[gi, gj + 1]], atol=1e-5, rtol=0)


def test_the_height_scan_reads_what_rays_would() -> None:
    """The scan term (a lookup, no ray cast) against C MuJoCo's ``mj_ray`` on the same scene, for bodies at random
    places and headings over every type of tile: the body's height above the surface at every point of the
    yaw-turned 17 x 11 pattern."""
    terrain = generate(SMALL)
    model = terrain_model(g1.SCENE, terrain)
    width, depth = terrain.size
    rng = np.random.default_rng(1)
    n = 8
    inside = (width / 2 - 1.0, depth / 2 - 1.0)  # the whole pattern over the map
    base = np.stack([rng.uniform(-inside[0], inside[0], n), rng.uniform(-inside[1], inside[1], n)], axis=-1)
    yaw = rng.uniform(-np.pi, np.pi, n)
    z = terrain.height_at(base[:, 0], base[:, 1]) + 0.8
    quat = np.stack([np.cos(yaw / 2), np.zeros(n), np.zeros(n), np.sin(yaw / 2)], axis=-1)
    state = TensorDict(
        {
            "sim": {
                "xpos": torch.tensor(np.concatenate([base, z[:, None]], axis=-1), dtype=torch.float32)[:, None],
                "xquat": torch.tensor(quat, dtype=torch.float32)[:, None],
            }
        },
        batch_size=[],
    )
    pattern = scan_pattern()
    heights = torch.tensor(terrain.heights)
    ctx = SimpleNamespace(body_ids={"pelvis": 0})
    scan = height_scan(state, ctx, HeightMap(heights, SMALL.horizontal_scale), pattern, "pelvis", clip=10.0).numpy()
    assert scan.shape == (n, 187)
    c, s = np.cos(yaw)[:, None], np.sin(yaw)[:, None]
    px, py = pattern[:, 0].numpy()[None], pattern[:, 1].numpy()[None]
    x, y = base[:, :1] + c * px - s * py, base[:, 1:] + s * px + c * py
    np.testing.assert_allclose(scan, z[:, None] - _ray_heights(model, x, y), atol=1e-4, rtol=0)
    clipped = height_scan(state, ctx, HeightMap(heights, SMALL.horizontal_scale), pattern, "pelvis", clip=0.5)
    assert float(clipped.abs().max()) == 0.5


@pytest.mark.slow
@pytest.mark.parametrize(("layout", "level_gap"), [("tiled", 2e-2), ("solid", 1e-4)])
def test_both_backends_step_robots_on_every_type_alike(layout: str, level_gap: float) -> None:
    """The same compiled terrain model on C MuJoCo and on MuJoCo Warp, one robot standing on the centre of each tile
    of the hardest row, 30 control steps at the standing pose's targets.

    The two backends' height-field colliders make different contacts where a plane's agree (measured: qpos gaps up
    to 1.1e-2 within 10 steps on the level platforms, against ~5e-6 over 50 steps on the flat scene's plane; on the
    random surface the poses part by 0.18 while the heights stay within 3e-3). So this checks what must agree: the
    robots stand at the same heights on every tile, and on the level ones follow the same motion to 2e-2. In the
    ``solid`` layout only the random surface is a height field: the others are boxes and, for the raised pyramid's
    platform, a convex mesh, on which the motions agree to 1e-4 (measured 4e-6)."""
    terrain = generate(TerrainConfig(rows=2, tile_size=8.0, border=1.0, layout=layout))
    model = terrain_model(g1.SCENE, terrain)
    config = SimConfig(substeps=3, nconmax=64, njmax=400)
    origins = torch.as_tensor(terrain.origins[1], dtype=torch.float32)
    worlds = origins.shape[0]
    final = {}
    for name in ("mujoco", "mjwarp"):
        backend = make_backend(name, model, worlds, device="cpu", config=config)
        state = backend.initial_state()
        qpos = torch.as_tensor(model.key_qpos[0], dtype=torch.float32).repeat(worlds, 1)
        qpos[:, :3] += origins
        backend.reset_(state, torch.ones(worlds, dtype=torch.bool), qpos, torch.zeros(worlds, model.nv))
        ctrl = torch.as_tensor(model.key_ctrl[0], dtype=torch.float32).expand(worlds, -1).contiguous()
        for _ in range(30):
            backend.step_(state, ctrl)
        backend.check_capacity()
        final[name] = state["qpos"].clone()
    level = [i for i, name in enumerate(terrain.config.types) if name != "random_rough"]
    torch.testing.assert_close(final["mjwarp"][level], final["mujoco"][level], atol=level_gap, rtol=0)
    torch.testing.assert_close(final["mjwarp"][:, 2], final["mujoco"][:, 2], atol=1e-2, rtol=0)
    standing = final["mujoco"][:, 2] - origins[:, 2]  # the pelvis above its tile's surface, as on flat ground
    assert torch.all((standing > 0.6) & (standing < 0.85)), standing


def test_bench_physics_steps_robots_on_the_terrain(capsys: pytest.CaptureFixture) -> None:
    from unilab.apps import bench

    bench.main(["physics", "--terrain", "tiled", "--sim", "mujoco", "--num-envs", "3", "--steps", "2"])
    row = json.loads(capsys.readouterr().out)
    assert row["scene"] == "terrain/tiled" and row["num_envs"] == 3 and row["eager_steps_per_sec"] > 0


def test_bench_physics_can_stand_every_robot_on_one_terrain_type(monkeypatch, capsys: pytest.CaptureFixture) -> None:
    """``--tiles`` tells a terrain type's cost apart: every world stands on one of that type's tiles."""
    from unilab.apps import bench

    seen: list[torch.Tensor] = []
    stand = bench.standing
    monkeypatch.setattr(
        bench, "standing", lambda b, seed, origins=None: seen.append(origins) or stand(b, seed, origins)
    )
    args = ["--terrain", "tiled", "--tiles", "pyramid_slope", "--sim", "mujoco", "--num-envs", "3", "--steps", "1"]
    bench.main(["physics", *args])
    assert json.loads(capsys.readouterr().out)["tiles"] == "pyramid_slope"
    grid = generate(dataclasses.replace(bench.ROUGH_TERRAIN, layout="tiled"))
    column = bench.ROUGH_TERRAIN.types.index("pyramid_slope")
    torch.testing.assert_close(seen[0], torch.as_tensor(grid.origins[:, column], dtype=torch.float32))
    with pytest.raises(SystemExit):
        bench.main(["physics", "--tiles", "random_rough", "--num-envs", "2"])
    assert (
        capsys.readouterr().err.splitlines()[-1].endswith("--tiles needs --terrain (the tiles are the terrain grid's)")
    )


SOLE = r".*_foot_sphere[1-4]_collision"


def _contacts_standing_on(model: mujoco.MjModel, origin: np.ndarray) -> list[tuple[str, int]]:
    """Each contact of the G1 standing at ``origin``: its robot geom's name and the terrain geom's type."""
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    data.qpos[:3] += origin
    data.qpos[2] -= 0.002  # the soles 2 mm into the ground: every sole geom in contact
    mujoco.mj_forward(model, data)
    pairs = []
    for contact in data.contact[: data.ncon]:
        terrain, robot = sorted(contact.geom, key=lambda g: model.geom_bodyid[g])
        pairs.append((model.geom(robot).name, int(model.geom_type[terrain])))
    return pairs


def test_only_the_named_geoms_touch_the_height_fields_and_every_geom_touches_the_boxes() -> None:
    # The raised slope's platform is part of its height field: a level place to stand on one.
    config = dataclasses.replace(SMALL, types=("pyramid_slope", "pyramid_stairs"), layout="terraced")
    everything, narrowed = (
        terrain_model(g1.SCENE, generate(dataclasses.replace(config, hfield_geoms=pattern))) for pattern in (None, SOLE)
    )
    grid = generate(config)
    field = mujoco.mjtGeom.mjGEOM_HFIELD
    on_field = {name for name, kind in _contacts_standing_on(everything, grid.origins[2, 0]) if kind == field}
    assert any("sphere" in name for name in on_field) and any("sphere" not in name for name in on_field)
    narrowed_on_field = _contacts_standing_on(narrowed, grid.origins[2, 0])
    assert narrowed_on_field and {kind for _, kind in narrowed_on_field} == {field}
    spheres = {n for n in on_field if "sphere" in n}
    assert {name for name, _ in narrowed_on_field} == spheres and len(spheres) == 8
    # On the stairs' boxes the narrowed scene keeps every contact: the capsules of the sole stand there as before.
    stairs = grid.origins[2, 1]
    assert sorted(_contacts_standing_on(narrowed, stairs)) == sorted(_contacts_standing_on(everything, stairs))
    assert any("sphere" not in name for name, _ in _contacts_standing_on(narrowed, stairs))


@pytest.mark.parametrize("knob", ["hfield_geoms", "box_geoms"])
def test_a_pattern_that_names_no_robot_geom_on_the_floor_is_refused_in_one_line(knob: str) -> None:
    with pytest.raises(ValueError, match=rf"^terrain {knob} 'floor' matches no robot geom that touches the floor$"):
        terrain_model(g1.SCENE, generate(dataclasses.replace(SMALL, **{knob: "floor"})))


LEGS_AND_TRUNK = r".*_(shin|foot[26]|foot_sphere[1-4])_collision|pelvis_collision|torso_collision|head_collision"


def _robot_terrain_pairs(model: mujoco.MjModel) -> int:
    """Robot and terrain geom pairs whose contact bits let them touch: the list MuJoCo Warp's pair search walks."""
    robot = np.flatnonzero(model.geom_bodyid != 0)
    terrain = np.flatnonzero(model.geom_bodyid == 0)
    a, b = np.meshgrid(robot, terrain)
    bits = (model.geom_contype[a] & model.geom_conaffinity[b]) | (model.geom_contype[b] & model.geom_conaffinity[a])
    return int(np.count_nonzero(bits))


def test_only_the_named_geoms_touch_the_boxes_and_every_geom_still_touches_the_height_fields() -> None:
    config = dataclasses.replace(SMALL, types=("pyramid_slope", "pyramid_stairs"), layout="terraced")
    everything, narrowed = (
        terrain_model(g1.SCENE, generate(dataclasses.replace(config, box_geoms=pattern)))
        for pattern in (None, LEGS_AND_TRUNK)
    )
    grid = generate(config)
    stairs, slope = grid.origins[2, 1], grid.origins[2, 0]
    on_boxes = _contacts_standing_on(narrowed, stairs)
    assert on_boxes and {kind for _, kind in on_boxes} == {int(mujoco.mjtGeom.mjGEOM_BOX)}
    named = {name for name, _ in _contacts_standing_on(everything, stairs) if re.fullmatch(LEGS_AND_TRUNK, name)}
    assert {name for name, _ in on_boxes} == named and len(named) < len(
        {name for name, _ in _contacts_standing_on(everything, stairs)}
    )
    assert sorted(_contacts_standing_on(narrowed, slope)) == sorted(_contacts_standing_on(everything, slope))
    # 17 of the G1's 41 geoms on the floor are named: the pair search's list shrinks by the other 24's boxes.
    boxes = int(np.count_nonzero((everything.geom_bodyid == 0) & (everything.geom_type == mujoco.mjtGeom.mjGEOM_BOX)))
    assert _robot_terrain_pairs(everything) - _robot_terrain_pairs(narrowed) == 24 * boxes


def test_the_height_fields_and_the_boxes_narrowed_at_once_take_a_contact_bit_each() -> None:
    config = dataclasses.replace(SMALL, types=("pyramid_slope", "pyramid_stairs"), layout="terraced")
    model = terrain_model(g1.SCENE, generate(dataclasses.replace(config, hfield_geoms=SOLE, box_geoms=LEGS_AND_TRUNK)))
    terrain = model.geom_bodyid == 0
    field_bits = set(model.geom_contype[terrain & (model.geom_type == mujoco.mjtGeom.mjGEOM_HFIELD)])
    box_bits = set(model.geom_contype[terrain & (model.geom_type == mujoco.mjtGeom.mjGEOM_BOX)])
    assert len(field_bits) == len(box_bits) == 1 and field_bits != box_bits
    grid = generate(config)
    on_field = {name for name, _ in _contacts_standing_on(model, grid.origins[2, 0])}
    on_boxes = {name for name, _ in _contacts_standing_on(model, grid.origins[2, 1])}
    assert on_field and all(re.fullmatch(SOLE, name) for name in on_field)
    assert on_boxes and all(re.fullmatch(LEGS_AND_TRUNK, name) for name in on_boxes)


def test_bench_physics_narrows_the_geoms_on_height_fields(capsys: pytest.CaptureFixture) -> None:
    from unilab.apps import bench

    args = ["--terrain", "terraced", "--sim", "mujoco", "--num-envs", "2", "--steps", "1"]
    bench.main(["physics", *args, "--hfield-geoms", SOLE])
    assert json.loads(capsys.readouterr().out)["hfield_geoms"] == SOLE
    with pytest.raises(SystemExit):
        bench.main(["physics", *args, "--hfield-geoms", "nothing"])
    assert capsys.readouterr().err.splitlines()[-1].endswith("matches no robot geom that touches the floor")
    bench.main(["physics", *args, "--box-geoms", LEGS_AND_TRUNK])
    row = json.loads(capsys.readouterr().out)
    assert row["box_geoms"] == LEGS_AND_TRUNK and row["hfield_geoms"] is None
    with pytest.raises(SystemExit):
        bench.main(["physics", "--sim", "mujoco", "--num-envs", "2", "--steps", "1", "--box-geoms", LEGS_AND_TRUNK])
    assert (
        capsys.readouterr()
        .err.splitlines()[-1]
        .endswith("--box-geoms needs --terrain (the geoms narrowed are the terrain grid's)")
    )
