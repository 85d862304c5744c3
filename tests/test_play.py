"""`unilab play` and `plot_curves`: real offscreen renders and plots from a tiny trained run."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import imageio.v2 as imageio
import matplotlib.image as mpimg
import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch

from tests.test_train import TINY
from torchrl_ext import export
from unilab.apps import curves, play
from unilab.apps.args import InputError
from unilab.apps.compose import compose_config
from unilab.apps.eval import main as eval_main
from unilab.apps.terrain_suites import TERRAIN_SUITES, terrain_of_suite
from unilab.apps.train import run
from unilab.core.rng import make_rng
from unilab.robots import g1
from unilab.run.run_dir import VIDEO_FILENAME
from unilab.tasks.g1_walk_rough.config import TERRAIN
from unilab.tasks.registry import make_functional_env, make_task
from unilab.terrain import TerrainConfig, generate, terrain_model

W, H = 160, 96  # small frames keep software-rasterised renders well under a second


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny training run shared by the tests: it is the costly part and only read afterwards."""
    run_dir = tmp_path_factory.mktemp("play") / "run"
    run(compose_config(["sim=mujoco", *TINY, "algo.max_iterations=3", f"training.log_dir={run_dir}"]))
    return run_dir


def read_frames(path: Path) -> list[np.ndarray]:
    reader = imageio.get_reader(str(path))
    try:
        return [reader.get_data(i) for i in range(reader.count_frames())]
    finally:
        reader.close()


def test_grid_shape_is_wide_and_fits_every_tile() -> None:
    assert play.grid_shape(1) == (1, 1)
    assert play.grid_shape(4) == (2, 2)
    assert play.grid_shape(5) == (2, 3)
    for n in range(1, 17):
        rows, cols = play.grid_shape(n)
        assert rows * cols >= n and cols >= rows


def test_a_video_starts_episodes_as_eval_scores_them() -> None:
    tracking = play.shown_overrides("g1_motion_tracking", {"obs_noise": False}, seconds=30.0)
    assert tracking["start"] == "first_frame" and tracking["episode_length_s"] == 30.0 and not tracking["obs_noise"]
    env = make_functional_env("g1_motion_tracking", sim="mujoco", num_envs=2, **tracking)
    state = env.reset(make_rng(0))
    assert torch.equal(state["env", "motion"][:, 0], torch.zeros(2))  # the one clip's first frame, not a sampled one
    walking = play.shown_overrides("g1_walk_flat", {}, seconds=2.0)
    assert "start" not in walking and walking["episode_length_s"] == 20.0  # the task's own, longer than asked


def test_render_rollout_writes_a_readable_non_blank_video(tmp_path: Path) -> None:
    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4, device="cpu", obs_noise=False)

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return torch.zeros(obs.shape[0], env.action_dim)

    path = play.render_rollout(env, policy, tmp_path / "v.mp4", num_envs=4, steps=5, width=W, height=H)
    assert path.is_file() and path.stat().st_size > 0
    frames = read_frames(path)
    assert len(frames) == 6  # the reset frame plus one per control step
    assert frames[0].shape == (H, W, 3)
    assert frames[-1].std() > 5  # not one flat colour: robots and floor were drawn
    meta = imageio.get_reader(str(path)).get_meta_data()
    assert meta["fps"] == pytest.approx(1.0 / env.ctx.dt)


def test_tiles_show_each_env_in_its_own_state() -> None:
    model = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=1, device="cpu").sim.model
    drawer = play.TileRenderer(model, 2, W, H, "pelvis")
    try:
        standing = model.qpos0.copy()
        lying = standing.copy()
        lying[2] = 0.15  # pelvis on the floor changes what the tracking camera sees
        frame = drawer.frame(np.stack([standing, lying]))
    finally:
        drawer.close()
    left, right = frame[:, : W // 2], frame[:, W // 2 :]
    assert np.abs(left.astype(int) - right.astype(int)).mean() > 1


def test_play_from_checkpoint_writes_video_and_still(
    tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    checkpoint = next(tiny_run.glob("model_*.pt"))
    size = ["--width", str(W), "--height", str(H)]
    still = tmp_path / "still.png"
    path = play.main(
        [
            "--checkpoint",
            str(checkpoint),
            "--seconds",
            "0.1",
            "--num-envs",
            "2",
            *size,
            "--out",
            str(tmp_path),
            "--still",
            str(still),
        ]
    )
    assert path == tmp_path / VIDEO_FILENAME and path.stat().st_size > 0
    assert "play: rendering video (6 frames of 2 tiles)" in capsys.readouterr().err  # the slow phase says so
    assert read_frames(path)[0].shape == (H, W, 3)
    assert mpimg.imread(still).shape[:2] == (H, W)


def test_play_from_onnx_defaults_beside_the_policy(tiny_run: Path) -> None:
    path = play.play(None, tiny_run / "policy.onnx", seconds=0.06, num_envs=1, width=W, height=H)
    assert path == tiny_run / VIDEO_FILENAME and path.stat().st_size > 0


def test_an_exported_policy_carries_what_a_deployment_needs(tiny_run: Path, tmp_path: Path) -> None:
    from torchrl_ext.export import read_metadata

    meta = {
        key: json.loads(value) if key not in ("task", "algo", "commit", "motion_file") else value
        for key, value in read_metadata(tiny_run / "policy.onnx").items()
    }
    assert meta["task"] == "g1_walk_flat" and meta["algo"] == "sac" and len(meta["commit"]) == 40
    assert len(meta["joint_names"]) == 29 and meta["joint_names"][0] == "left_hip_pitch_joint"
    layout = meta["observation"]
    assert layout["gyro"] == [0, 3] and max(end for _, end in layout.values()) == 100
    assert meta["action_term"] == "joint_position_offsets" and meta["action_params"] == {"scale": 1.0}
    assert len(meta["default_joint_pos"]) == 29 and meta["control_dt"] == pytest.approx(0.02)
    deploy = meta["deploy"]  # the runtime's document (unilab.deploy.schema), and the scene beside it
    assert (
        deploy["version"] == 1 and deploy["task"] == "g1_walk_flat" and deploy["joints"]["names"] == meta["joint_names"]
    )
    assert deploy["check"]["scene"] == "policy.mjb" and (tiny_run / "policy.mjb").is_file()
    moved = tmp_path / "elsewhere.onnx"  # away from its run directory: the file alone says what to play
    moved.write_bytes((tiny_run / "policy.onnx").read_bytes())
    video = play.main(["--onnx", str(moved), "--seconds", "0.06", "--num-envs", "1", "--width", "64", "--height", "48"])
    assert video.stat().st_size > 0


def test_deploy_export_of_a_checkpoint_gives_what_train_exported(tiny_run: Path, tmp_path: Path) -> None:
    """``unilab deploy export`` from the run's last checkpoint: the same actor, metadata and scene as the policy the
    run exported itself, under the new file's name."""
    import onnx

    from unilab.apps.deploy import main as deploy_main
    from unilab.deploy import Policy

    out = deploy_main(["export", "--checkpoint", str(tiny_run / "model_3.pt"), "--out", str(tmp_path / "p.onnx")])
    assert out == tmp_path / "p.onnx" and (tmp_path / "p.mjb").read_bytes() == (tiny_run / "policy.mjb").read_bytes()
    exported, trained = (Policy(path).metadata for path in (out, tiny_run / "policy.onnx"))
    assert exported.check.scene == "p.mjb" and exported == dataclasses.replace(
        trained, check=dataclasses.replace(trained.check, scene="p.mjb")
    )
    meta = {e.key: e.value for e in onnx.load(str(out)).metadata_props}
    assert meta["task"] == "g1_walk_flat" and meta["algo"] == "sac" and len(meta["commit"]) == 40
    obs = np.random.default_rng(0).normal(size=(4, exported.obs_width)).astype(np.float32)
    actions = [export.run_onnx(path, obs) for path in (out, tiny_run / "policy.onnx")]
    np.testing.assert_array_equal(actions[0], actions[1])


def test_save_still_takes_the_middle_of_a_frame_list(tmp_path: Path) -> None:
    frames = [np.full((8, 10, 3), value, dtype=np.uint8) for value in (0, 100, 200)]
    path = play.save_still(frames, tmp_path / "s.png")
    assert (imageio.imread(path) == 100).all()


def test_play_cli_names_the_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.pt"
    with pytest.raises(SystemExit) as exc:
        play.main(["--checkpoint", str(missing)])
    assert exc.value.code == 2 and str(missing) in capsys.readouterr().err
    with pytest.raises(SystemExit):
        play.main(["--onnx", str(tmp_path / "nope.onnx")])
    assert "nope.onnx" in capsys.readouterr().err


def test_play_refuses_what_it_cannot_render_in_one_line(tiny_run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    checkpoint = str(tiny_run / "model_3.pt")
    with pytest.raises(SystemExit) as exc:
        play.main(["--checkpoint", checkpoint, "--num-envs", "1000000000"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "lower --num-envs" in err
    with pytest.raises(SystemExit):
        play.main(["--checkpoint", checkpoint, "--num-envs", "100000", "--width", "160", "--height", "120"])
    assert "160x120 is too small for 100000 tiles: lower --num-envs" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        play.main(["--checkpoint", checkpoint, "--seconds", "inf"])
    assert "--seconds must be a finite number > 0, got inf" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        play.main(["--checkpoint", checkpoint, "--seed", str(2**31)])
    assert f"--seed must be in [0, 2**31), got {2**31}" in capsys.readouterr().err


def test_a_video_longer_than_play_renders_is_refused_before_any_work(
    tiny_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def render(*args: object, **kwargs: object) -> None:
        raise AssertionError("rendering started")

    monkeypatch.setattr(play, "render_rollout", render)
    checkpoint = tiny_run / "model_3.pt"
    with pytest.raises(SystemExit) as exc:
        play.main(["--checkpoint", str(checkpoint), "--seconds", "1e9"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1
    assert "--seconds must be at most 600 (every frame is rendered), got 1e+09" in err
    with pytest.raises(play.InputError, match=r"seconds must be in \(0, 600\], got 601"):
        play.play(checkpoint, None, seconds=601)


@pytest.mark.parametrize("source", ["--checkpoint", "--onnx"])
def test_a_policy_of_another_task_is_refused_in_one_line(
    tiny_run: Path, source: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(tiny_run / ("model_3.pt" if source == "--checkpoint" else "policy.onnx"))
    for command in (play.main, eval_main):
        with pytest.raises(SystemExit) as exc:
            command([source, path, "--task", "g1_motion_tracking", "--num-envs", "1"])
        err = capsys.readouterr().err
        assert exc.value.code == 2 and len(err.splitlines()) == 1, err
        assert "g1_walk_flat" in err and "g1_motion_tracking" in err


def test_outputs_that_cannot_be_written_are_refused_before_any_work(
    tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a_file = tmp_path / "a_file"
    a_file.write_text("mine")
    checkpoint = ["--checkpoint", str(tiny_run / "model_3.pt")]
    cases = [
        (play.main, [*checkpoint, "--still", str(tmp_path / "x.jpg")], "must end in .png"),
        (play.main, [*checkpoint, "--out", str(tmp_path / "video.txt")], "must be a directory or end in .mp4"),
        (play.main, [*checkpoint, "--out", str(a_file / "v.mp4")], f"cannot create {a_file}"),
        (eval_main, [*checkpoint, "--out", str(a_file)], f"cannot create {a_file}"),
        (curves.main, [str(tiny_run), "--out", str(tmp_path / "c.txt")], "must end in .png"),
    ]
    for command, args, message in cases:
        with pytest.raises(SystemExit) as exc:
            command(args)
        err = capsys.readouterr().err
        assert exc.value.code == 2 and len(err.splitlines()) == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"] and a_file.read_text() == "mine"


def test_play_replaces_a_video_or_still_only_with_force(
    tiny_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    video, still = tmp_path / "earlier.mp4", tmp_path / "earlier.png"
    video.write_bytes(b"an earlier video")
    args = ["--checkpoint", str(tiny_run / "model_3.pt"), "--seconds", "0.04", "--num-envs", "1"]
    args += ["--width", str(W), "--height", str(H), "--out", str(video)]
    with pytest.raises(SystemExit) as exc:
        play.main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.splitlines() == [
        f"unilab play: error: {video} already exists: --force replaces it"
    ]
    assert video.read_bytes() == b"an earlier video"
    assert play.main([*args, "--force"]) == video and len(read_frames(video)) == 3
    still.write_bytes(b"an earlier still")
    with pytest.raises(SystemExit):
        play.main([*args, "--out", str(tmp_path / "new.mp4"), "--still", str(still)])
    assert "earlier.png already exists: --force replaces it" in capsys.readouterr().err
    assert still.read_bytes() == b"an earlier still" and not (tmp_path / "new.mp4").exists()


def test_plot_run_writes_a_png_of_the_expected_size(tiny_run: Path, tmp_path: Path) -> None:
    scalars = curves.read_scalars(tiny_run)
    assert scalars.wall_time and curves.RATE_TAG in scalars.by_tag
    assert any(tag.startswith(curves.REWARD_PREFIX) for tag in scalars.by_tag)
    default = curves.plot_run(tiny_run)
    assert default == tiny_run / curves.CURVES_NAME
    image = mpimg.imread(curves.main([str(tiny_run), "--out", str(tmp_path / "c.png")]))
    assert image.shape[:2] == (800, 1200)  # figsize 12x8 inches at 100 dpi


def test_plot_curves_cli_names_the_missing_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        curves.main([str(tmp_path / "no_run")])
    assert exc.value.code == 2 and str(tmp_path / "no_run") in capsys.readouterr().err
    with pytest.raises(SystemExit):
        curves.main([str(tmp_path)])
    assert "no TensorBoard event files or CSV scalars" in capsys.readouterr().err


def test_a_walk_on_terrain_gets_a_panel_of_its_curriculum_s_rows(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    episode = run_dir / "scalars" / "episode"
    episode.mkdir(parents=True)
    (episode / "episode_length.csv").write_text("2000000,50.0\n4000000,900.0\n")
    plain = mpimg.imread(curves.plot_run(run_dir, tmp_path / "plain.png"))
    for name, (first, last) in {"mean": (1.5, 4.0), "std": (0.5, 2.0), "pyramid_stairs_inv": (1.0, 2.5)}.items():
        (episode / f"curriculum_terrain_level_{name}.csv").write_text(f"2000000,{first}\n4000000,{last}\n")
    terrain = mpimg.imread(curves.plot_run(run_dir, tmp_path / "terrain.png"))
    assert plain.shape[:2] == (800, 1200) and terrain.shape[:2] == (800, 1800)  # a third column for the rows
    figure, ax = plt.subplots()
    curves._plot_levels(ax, curves.read_scalars(run_dir), "env steps (M)")
    lines = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
    assert lines == {"mean": [1.5, 4.0], "pyramid_stairs_inv": [1.0, 2.5]}
    (band,) = ax.collections  # the spread, mean -+ std
    assert band.get_label() == "spread (1 std)"
    assert band.get_paths()[0].get_extents().y0 == pytest.approx(1.0) and band.get_paths()[0].get_extents().y1 == 6.0
    plt.close(figure)


def test_a_csv_logged_run_is_drawn_against_env_steps_and_a_bad_row_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "scalars" / "episode").mkdir(parents=True)
    # As TorchRL's CSV logger writes them: one "step,value" row per log point, here out of order.
    (run_dir / "scalars" / "episode" / "episode_length.csv").write_text("4000000,900.0\n2000000,50.0\n")
    (run_dir / "scalars" / "episode" / "reward_alive.csv").write_text("2000000,0.2\n4000000,0.2\n")
    scalars = curves.read_scalars(run_dir)
    assert not scalars.wall_time
    assert scalars.by_tag[curves.LENGTH_TAG] == ([2e6, 4e6], [50.0, 900.0])
    assert scalars.axis([2e6, 4e6]) == ([2.0, 4.0], "env steps (M)")
    image = mpimg.imread(curves.main([str(run_dir), "--out", str(tmp_path / "c.png")]))
    assert image.shape[:2] == (800, 1200)
    (run_dir / "scalars" / "episode" / "reward_alive.csv").write_text("2000000,0.2\nstep;value\n")
    with pytest.raises(SystemExit) as exc:
        curves.main([str(run_dir), "--out", str(tmp_path / "d.png")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and len(err.splitlines()) == 1 and "reward_alive.csv: line 2 is not 'step,value'" in err
    assert not (tmp_path / "d.png").exists()


@pytest.mark.parametrize(
    ("platform", "display", "libraries", "expected"),
    [
        ("linux", None, {"EGL", "OSMesa"}, "egl"),  # a GPU driver or Mesa's EGL
        ("linux", None, {"OSMesa"}, "osmesa"),  # a CPU machine with only the software rasteriser
        ("linux", None, set(), None),
        ("linux", ":0", {"EGL"}, None),  # a desktop: MuJoCo's default (GLFW) works
        ("darwin", None, {"EGL"}, None),
    ],
)
def test_headless_gl_backend_choice(platform: str, display: str | None, libraries: set, expected: str | None) -> None:
    from unilab import headless_gl

    assert headless_gl(platform, display, lambda name: f"lib{name}.so" if name in libraries else None) == expected


def test_the_scan_points_are_drawn_where_the_scan_reads_and_a_flat_task_has_none(tmp_path: Path) -> None:
    small = dataclasses.replace(TERRAIN, rows=2, border=2.0)
    env = make_functional_env("g1_walk_rough", sim="mujoco", num_envs=1, device="cpu", terrain=small)
    state = env.reset(make_rng(0))
    points = play.scan_markers(env)(state)
    assert points.shape == (1, 187, 3)
    # Each point is on the surface the scan reads: the pelvis's height minus the critic's (noise-free) reading.
    pelvis_z = state["sim", "xpos"][0, env.ctx.body_ids["pelvis"], 2]
    torch.testing.assert_close(points[0, :, 2], pelvis_z - state["obs", "critic"][0, -187:])
    drawer = play.TileRenderer(env.sim.model, 1, W, H, "pelvis")
    try:
        qpos = state["sim", "qpos"].numpy()
        plain, marked = drawer.frame(qpos), drawer.frame(qpos, points.numpy())
    finally:
        drawer.close()
    assert np.abs(plain.astype(int) - marked.astype(int)).max() > 50  # orange dots in front of the robot
    flat = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=1, device="cpu")
    with pytest.raises(InputError, match="g1_walk_flat has no height scan to show"):
        play.scan_markers(flat)


def edge_density(tile: np.ndarray) -> float:
    """The share of pixels whose grey level steps by more than 25 to the pixel below: the lines a step's riser
    draws against its tread."""
    grey = tile.astype(int).mean(axis=-1)
    return float((np.abs(np.diff(grey, axis=0)) > 25).mean())


@pytest.mark.parametrize(("scale", "layout"), [(0.1, "tiled"), (0.05, "tiled"), (0.05, "terraced")])
def test_every_riser_and_nothing_else_is_outlined(scale: float, layout: str) -> None:
    """A pyramid of five 12 cm steps and a pit of five, as height fields or as boxes: four edges a step, each at its
    step's top; slopes of 45 degrees (a 10 cm rise from each sample to the next, the same side by side), the random
    surface and the terrain's outer edge: none."""
    base = TerrainConfig(
        rows=2, border=2.0, horizontal_scale=scale, step_height=(0.0, 0.12), slope=(0.0, 1.0), layout=layout
    )
    for types, tops in (
        (("flat", "pyramid_stairs"), [0.12, 0.24, 0.36, 0.48, 0.6]),
        (("pyramid_stairs_inv",), [-0.48, -0.36, -0.24, -0.12, 0.0]),
        (("pyramid_slope", "pyramid_slope_inv", "random_rough"), []),
    ):
        model = terrain_model(g1.SCENE, generate(dataclasses.replace(base, types=types)))
        edges = play.step_edges(model)
        assert len(edges) == 4 * len(tops), types
        heights, counts = np.unique(np.round(edges[:, :, 2], 6), return_counts=True)
        np.testing.assert_allclose(heights, tops, atol=1e-6)
        assert (counts == 8).all()  # both ends of four edges at each height
        assert np.all(np.linalg.norm(edges[:, 1] - edges[:, 0], axis=1) > 3.0)  # each a ring's whole side


def test_a_video_shows_the_stairs_a_robot_stands_among(tmp_path: Path) -> None:
    """Two robots on the hardest row of a two-row terrain: the first on the flat column, the second among pyramid
    stairs. The terrain is drawn plain under a low side light with each step's edge outlined, so each riser is a
    line against its tread; the floor's texture is not drawn on it (a frame took about three times as long with
    it), and the env's own model is left as it was."""
    small = dataclasses.replace(TERRAIN, rows=2, border=2.0)
    env = make_functional_env("g1_walk_rough", sim="mujoco", num_envs=2, device="cpu", terrain=small, terrain_level=1)
    model = env.sim.model
    textured = model.geom_matid.copy()
    drawer = play.TileRenderer(model, 2, 640, 180, "pelvis")
    try:
        frame = drawer.frame(env.reset(make_rng(0))["sim", "qpos"].numpy())
    finally:
        drawer.close()
    assert np.array_equal(model.geom_matid, textured)
    assert (drawer.model.geom_matid[play.terrain_geoms(drawer.model)] == -1).all()
    assert drawer.camera.elevation == play.TERRAIN_CAMERA_ELEVATION
    flat, stairs = edge_density(frame[:, :320]), edge_density(frame[:, 320:])
    assert stairs > 0.01 and stairs > 2 * flat, (flat, stairs)


def test_a_video_starts_a_terrain_task_s_robots_on_its_middle_row() -> None:
    rows = make_functional_env("g1_walk_rough", sim="mujoco", num_envs=1).task.terrain.rows
    assert play.terrain_start("g1_walk_rough", None) == {"terrain_level": rows // 2}
    assert play.terrain_start("g1_walk_rough", "all") == {"terrain_level": "all"}
    assert play.terrain_start("g1_walk_rough", "start") == {} == play.terrain_start("g1_walk_flat", None)
    with pytest.raises(InputError, match=rf"--terrain-level must be a row, 0 to {rows - 1}"):
        play.terrain_start("g1_walk_rough", rows)
    with pytest.raises(InputError, match="g1_walk_flat walks on a flat floor"):
        play.terrain_start("g1_walk_flat", 2)


@pytest.mark.parametrize("suite", list(TERRAIN_SUITES))
def test_a_terrain_suite_s_video_builds_that_terrain_alone(suite: str) -> None:
    base = make_task("g1_walk_rough")
    terrain = make_task("g1_walk_rough", **terrain_of_suite("g1_walk_rough", base, suite)).terrain
    assert terrain.types == TERRAIN_SUITES[suite]
    assert dataclasses.replace(terrain, types=base.terrain.types) == base.terrain  # nothing else changes


def test_a_terrain_suite_on_a_flat_task_or_an_unknown_one_is_refused() -> None:
    with pytest.raises(InputError, match="g1_walk_flat walks on a flat floor"):
        terrain_of_suite("g1_walk_flat", make_task("g1_walk_flat"), "stairs_up")
    with pytest.raises(InputError, match="unknown terrain suite 'stairs'"):
        terrain_of_suite("g1_walk_rough", make_task("g1_walk_rough"), "stairs")
