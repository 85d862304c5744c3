"""``play``: render a trained policy to an mp4 so a person can see what the numbers in ``eval`` mean.

Rendering backend: MuJoCo picks its OpenGL platform from ``MUJOCO_GL`` when ``mujoco`` is first imported.
``import unilab`` defaults it to ``egl`` on headless Linux (see ``unilab/__init__.py``); EGL renders offscreen both
on CPU machines (Mesa) and on GPU machines (the NVIDIA driver). If ``mujoco`` was imported first with another
platform that cannot open a context, the renderer raises an error saying so.

Layout: the batched envs all start at the world origin (each in its own physics world), so drawing them in one
scene would stack the robots on top of each other. Each rendered env therefore gets its own tile in a grid, filmed
by a free camera tracking that env's base body: every robot stays in view however far it walks, and a fall in one
tile cannot hide another robot. The state's ``qpos`` is copied into one ``MjData`` per env and ``mj_forward``
recomputes the poses to draw; rendering never feeds back into the physics.

The shipped robot models carry no meshes; their visible shape is their collision geoms (group 3), which MuJoCo
hides by default, so the scene option turns group 3 on.
"""

from __future__ import annotations

import copy
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch
from tensordict import TensorDict

from unilab.apps.args import ArgumentParser, InputError, check_output, check_rollout_args, check_room, fail
from unilab.apps.outputs import OutputClaims
from unilab.apps.policy import REFUSALS, Policy, policy_source
from unilab.apps.rollout import check_rollout_memory, metrics_of, task_of
from unilab.apps.step_edges import EDGE_RGBA, EDGE_WIDTH, step_edges, terrain_geoms
from unilab.apps.terrain_suites import TERRAIN_SUITES, terrain_of_suite
from unilab.core.files import replacing, write_atomic
from unilab.core.rng import advance, make_rng
from unilab.envs.functional import FunctionalEnv
from unilab.mdp.terrain import scan_points
from unilab.run.config import MAX_PLAY_SECONDS
from unilab.run.progress import announce, bar
from unilab.run.run_dir import VIDEO_FILENAME
from unilab.tasks.registry import build_env, list_tasks, make_task, override_names

COLLISION_GROUP = 3
CAMERA_DISTANCE, CAMERA_ELEVATION, CAMERA_AZIMUTH = 3.0, -15.0, 90.0
# On a terrain the camera stands back and looks down more, so a tile's steps and slopes around the robot fill the
# frame instead of lying edge-on towards the horizon.
TERRAIN_CAMERA_DISTANCE, TERRAIN_CAMERA_ELEVATION = 4.0, -35.0
# The terrain as a video draws it: one plain colour, lit from low and to the side. The floor's checker texture,
# mapped over a height field's hundreds of thousands of triangles, made a frame four times slower on a software
# rasteriser, and under a light from straight above every flat face, tread or platform, came out one shade: the
# stairs vanished. A low side light makes each riser light or dark against the treads.
TERRAIN_RGBA = np.array([0.55, 0.6, 0.65, 1.0], dtype=np.float32)
TERRAIN_LIGHT_DIR = np.array([0.8, 0.5, -0.45]) / np.linalg.norm([0.8, 0.5, -0.45])
TERRAIN_LIGHT_DIFFUSE, TERRAIN_HEADLIGHT_DIFFUSE, TERRAIN_HEADLIGHT_AMBIENT = 0.8, 0.15, 0.2
# What a second of H.264 video takes per pixel of frame, at the control rate (50 frames): a generous estimate, about
# a fiftieth of the raw RGB frames, so that a disk too full for the video is refused before the rendering.
VIDEO_BYTES_PER_PIXEL_SECOND = 3.0


def _offscreen_renderer(model: mujoco.MjModel, height: int, width: int) -> mujoco.Renderer:
    """A renderer on the platform MuJoCo chose when first imported (see the module docstring)."""
    try:
        return mujoco.Renderer(model, height, width)
    except Exception as exc:
        raise InputError(
            f"cannot open an offscreen OpenGL context (MUJOCO_GL={os.environ.get('MUJOCO_GL')!r}): {exc}; "
            "set MUJOCO_GL=egl (or osmesa) before anything imports mujoco (torchrl does)"
        ) from exc


def _software_gl() -> bool:
    """Whether the current GL context rasterises on the CPU (Mesa llvmpipe/softpipe), where frames are slow."""
    try:
        from OpenGL import GL

        name = (GL.glGetString(GL.GL_RENDERER) or b"").decode(errors="replace").lower()
    except Exception:
        return False
    return any(soft in name for soft in ("llvmpipe", "softpipe", "swrast"))


def grid_shape(num_tiles: int) -> tuple[int, int]:
    """(rows, cols) with cols >= rows: wide videos suit the 16:9 frame and most players."""
    cols = math.ceil(math.sqrt(num_tiles))
    return math.ceil(num_tiles / cols), cols


def _even(value: int) -> int:
    """H.264 in yuv420p needs even dimensions; rounding tiles down keeps the frame size the caller asked for."""
    return value - value % 2


def render_model(model: mujoco.MjModel) -> mujoco.MjModel:
    """A copy of ``model`` to draw: where it has a terrain, the terrain plain and lit from low and to the side
    (``TERRAIN_RGBA``). Physics never reads the copy, and the env's own model stays as it was."""
    model = copy.copy(model)
    terrain = terrain_geoms(model)
    if len(terrain):
        model.geom_matid[terrain] = -1
        model.geom_rgba[terrain] = TERRAIN_RGBA
        model.light_dir[:] = TERRAIN_LIGHT_DIR
        model.light_diffuse[:] = TERRAIN_LIGHT_DIFFUSE
        model.vis.headlight.diffuse[:] = TERRAIN_HEADLIGHT_DIFFUSE
        model.vis.headlight.ambient[:] = TERRAIN_HEADLIGHT_AMBIENT
    return model


MARKER_SIZE = np.array([0.015, 0.0, 0.0])
MARKER_RGBA = np.array([1.0, 0.55, 0.0, 1.0], dtype=np.float32)
IDENTITY = np.eye(3).flatten()


class TileRenderer:
    """Draws the first ``num_tiles`` envs of a state into one (height, width, 3) uint8 frame, each tile's camera
    following ``track_body`` (the robot's base)."""

    def __init__(
        self,
        model: mujoco.MjModel,
        num_tiles: int,
        width: int,
        height: int,
        track_body: str,
        fast: bool | None = None,
    ) -> None:
        if width % 2 or height % 2:
            raise ValueError(f"video width and height must be even for H.264, got {width}x{height}")
        self.rows, self.cols = grid_shape(num_tiles)
        self.tile_h, self.tile_w = _even(height // self.rows), _even(width // self.cols)
        if self.tile_h < 2 or self.tile_w < 2:
            raise ValueError(f"{width}x{height} is too small for {num_tiles} tiles")
        model = render_model(model)
        if self.tile_w > model.vis.global_.offwidth or self.tile_h > model.vis.global_.offheight:
            # The offscreen buffer is sized by the model; grow it rather than fail on a large request.
            model.vis.global_.offwidth = max(model.vis.global_.offwidth, self.tile_w)
            model.vis.global_.offheight = max(model.vis.global_.offheight, self.tile_h)
        self.model = model
        self.width, self.height = width, height
        self.datas = [mujoco.MjData(model) for _ in range(num_tiles)]
        self.renderer = _offscreen_renderer(model, self.tile_h, self.tile_w)
        if fast is None:
            fast = _software_gl()
        if fast:
            # Shadows and reflections cost ~3x the frame time on a software rasteriser and carry no information.
            self.renderer.scene.flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 0
            self.renderer.scene.flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        self.option = mujoco.MjvOption()
        self.option.geomgroup[COLLISION_GROUP] = 1
        self.camera = mujoco.MjvCamera()
        self.camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        self.camera.trackbodyid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, track_body)
        on_terrain = len(terrain_geoms(model)) > 0
        self.camera.distance = TERRAIN_CAMERA_DISTANCE if on_terrain else CAMERA_DISTANCE
        self.camera.elevation = TERRAIN_CAMERA_ELEVATION if on_terrain else CAMERA_ELEVATION
        self.camera.azimuth = CAMERA_AZIMUTH
        self.edges = step_edges(model)

    def frame(self, qpos: np.ndarray, markers: np.ndarray | None = None) -> np.ndarray:
        """``qpos`` (num_envs, nq); envs beyond the tile count are not drawn. ``markers`` (num_envs, points, 3) are
        world points drawn as small spheres in each env's tile (what a height scan reads, say)."""
        canvas = np.zeros((self.height, self.width, 3), dtype=np.uint8)
        for i, data in enumerate(self.datas):
            data.qpos[:] = qpos[i]
            mujoco.mj_forward(self.model, data)
            self.renderer.update_scene(data, camera=self.camera, scene_option=self.option)
            self._outline()
            if markers is not None:
                self._mark(markers[i])
            row, col = divmod(i, self.cols)
            y, x = row * self.tile_h, col * self.tile_w
            canvas[y : y + self.tile_h, x : x + self.tile_w] = self.renderer.render()
        return canvas

    def _outline(self) -> None:
        """Add the terrain's step edges to the scene as lines, as many as it has room for."""
        scene = self.renderer.scene
        for a, b in self.edges[: scene.maxgeom - scene.ngeom]:
            geom = scene.geoms[scene.ngeom]
            mujoco.mjv_initGeom(geom, mujoco.mjtGeom.mjGEOM_LINE, np.zeros(3), np.zeros(3), IDENTITY, EDGE_RGBA)
            mujoco.mjv_connector(geom, mujoco.mjtGeom.mjGEOM_LINE, EDGE_WIDTH, a, b)
            scene.ngeom += 1

    def _mark(self, points: np.ndarray) -> None:
        """Add ``points`` to the scene as spheres, as many as the scene has room for."""
        scene = self.renderer.scene
        for point in points[: scene.maxgeom - scene.ngeom]:
            mujoco.mjv_initGeom(
                scene.geoms[scene.ngeom], mujoco.mjtGeom.mjGEOM_SPHERE, MARKER_SIZE, point, IDENTITY, MARKER_RGBA
            )
            scene.ngeom += 1

    def close(self) -> None:
        self.renderer.close()


@torch.no_grad()
def render_rollout(
    env: FunctionalEnv,
    policy: Policy,
    path: Path,
    num_envs: int = 4,
    steps: int = 800,
    seed: int = 0,
    width: int = 640,
    height: int = 360,
    fast: bool | None = None,
    markers: Callable[[TensorDict], torch.Tensor] | None = None,
) -> Path:
    """Write ``steps`` control steps of ``policy`` in ``env`` as an mp4 at the control rate (real-time playback).

    The first ``num_envs`` envs of ``env`` are drawn (all of them when it has fewer). Envs that fall are reset by
    the env's own auto-reset, so the video shows the next episode start rather than a frozen body. ``fast`` turns
    off shadows and reflections; by default it is on exactly when the GL renderer is a software rasteriser.
    ``markers(state)`` gives world points (num_envs, points, 3) drawn in every frame (``scan_markers``).
    """
    import imageio.v2 as imageio

    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    tiles = min(num_envs, env.num_envs)
    if tiles < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    fps = round(1.0 / env.ctx.dt)
    drawer = TileRenderer(env.sim.model, tiles, width, height, env.task.robot.base_body, fast)
    rng = make_rng(seed, env.device)
    state = env.reset(rng)
    # Rendered beside the target and renamed into place when complete, so a stopped render never leaves a
    # truncated video under the final name (the suffix stays last: ffmpeg picks the container from it).
    with replacing(Path(path), suffix_last=True) as tmp:
        writer = imageio.get_writer(str(tmp), fps=fps, codec="libx264", macro_block_size=1, quality=7)

        def draw(state: TensorDict) -> np.ndarray:
            points = None if markers is None else markers(state)[:tiles].cpu().numpy()
            return drawer.frame(state["sim", "qpos"][:tiles].cpu().numpy(), points)

        try:
            writer.append_data(draw(state))
            # Software rendering on a CPU takes a good fraction of a second per frame: show how far it is.
            announce("play", f"rendering video ({steps + 1} frames of {tiles} tiles) to {path}")
            for _ in bar(range(steps), "rendering", "frame"):
                rng = advance(rng)
                state, _ = env.step(state, policy(state["obs", "policy"]), rng)
                writer.append_data(draw(state))
        finally:
            writer.close()
            drawer.close()
    bad = int(state["task", "nonfinite_actions"])
    if bad:  # the env stepped zeros in their place: the video alone would not show it
        print(f"warning: {bad} env steps had non-finite actions (NaN or inf); zeros were applied", file=sys.stderr)
    return Path(path)


def scan_markers(env: FunctionalEnv) -> Callable[[TensorDict], torch.Tensor]:
    """The surface points each env's actor height scan reads, as ``render_rollout`` draws them; a task without a
    height scan is refused in one line."""
    term = env.task.observations.get("policy", {}).get("height_scan")
    if term is None:
        raise InputError(f"task {env.task.name} has no height scan to show (the tasks on terrain have one)")
    ground, pattern, body = (term.params[name] for name in ("ground", "pattern", "body"))
    return lambda state: scan_points(state, env.ctx, ground, pattern, body)


def save_still(video_or_frames: Path | str | Sequence[np.ndarray] | np.ndarray, png_path: Path) -> Path:
    """Write the middle frame as a PNG: the first frame is the reset pose, which says nothing about the policy."""
    import imageio.v2 as imageio

    if isinstance(video_or_frames, (str, Path)):
        source = Path(video_or_frames)
        if not source.is_file():
            raise FileNotFoundError(f"video not found: {source}")
        # ffmpeg reports an unknown (infinite) length, so count first instead of iterating the reader.
        reader = imageio.get_reader(str(source))
        try:
            count = reader.count_frames()
            if count == 0:
                raise ValueError(f"no frames in {source}")
            still = reader.get_data(count // 2)
        finally:
            reader.close()
    else:
        frames = list(video_or_frames)
        if not frames:
            raise ValueError("no frames to take a still from")
        still = frames[len(frames) // 2]
    png_path = Path(png_path)
    image = np.asarray(still, dtype=np.uint8)
    write_atomic(png_path, lambda handle: imageio.imwrite(handle, image, format="PNG"))
    return png_path


def shown_overrides(task: str, overrides: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The task arguments of a video: episodes start as eval's primary start has them (tracking: each env at the
    first frame of clip ``env mod clips``), so the video shows what the headline figures score, and last at least
    ``seconds``, so time-outs do not cut the motion."""
    shown = {**overrides, **next(iter(metrics_of(task).starts.values()), {})}
    return {**shown, "episode_length_s": max(make_task(task, **shown).episode_length_s, float(seconds))}


def terrain_start(task: str, level: int | str | None) -> dict[str, Any]:
    """The task argument that places a video's robots on a terrain: ``level`` a row or ``"all"`` (as the task's
    ``terrain_level`` takes them), ``"start"`` the task's own start, None the middle row. The curriculum starts on
    its first, nearly level rows, where a video shows a robot on what looks like flat ground; the middle row's
    stairs and slopes show what the policy was trained for. Nothing for a task on a flat floor."""
    terrain = make_task(task).terrain
    if terrain is None or "terrain_level" not in override_names(task):
        if level is not None:
            raise InputError(f"task {task} walks on a flat floor; --terrain-level needs a task on terrain")
        return {}
    if level == "start":
        return {}
    level = terrain.rows // 2 if level is None else level
    if level != "all" and not (isinstance(level, int) and 0 <= level < terrain.rows):
        raise InputError(f"--terrain-level must be a row, 0 to {terrain.rows - 1}, 'all' or 'start'; got {level!r}")
    return {"terrain_level": level}


def video_path(checkpoint: Path | None, onnx: Path | None, out: Path | None) -> Path:
    """Where ``play`` writes its video: ``out`` where it ends in ``.mp4``, else ``play_video.mp4`` in ``out`` or,
    without one, beside the policy file."""
    if out is None:
        return Path(checkpoint if checkpoint is not None else onnx).parent / VIDEO_FILENAME
    out = Path(out)
    return out if out.suffix == ".mp4" else out / VIDEO_FILENAME


def play(
    checkpoint: Path | None,
    onnx: Path | None,
    out: Path | None = None,
    task: str | None = None,
    num_envs: int = 4,
    seconds: float = 16.0,
    seed: int = 0,
    width: int = 640,
    height: int = 360,
    show_scan: bool = False,
    replace: bool = True,
    terrain_level: int | str | None = None,
    terrain_suite: str | None = None,
) -> Path:
    """Render a policy on the CPU ``mujoco`` backend; returns the video path.

    ``out`` is a directory (the video is ``play_video.mp4`` inside it) or a path ending in ``.mp4``; by default the
    video goes beside the checkpoint or ONNX file. Observation noise is off and episodes start as in ``eval``
    (``shown_overrides``). ``show_scan`` draws the points the actor's height scan reads (tasks on terrain).
    ``terrain_level`` places the robots of a task on terrain (``terrain_start``: by default its middle row);
    ``terrain_suite`` builds that terrain of one eval suite's types alone (the stairs up, say), so a video shows
    what that suite scores.
    ``replace`` False refuses a video already at the target, once the policy is known to fit and before the
    rendering (``unilab play`` without ``--force``: a video is minutes of work, and its replacement is asked for,
    never done in passing); a training run replaces its own.
    """
    if not 0.0 < seconds <= MAX_PLAY_SECONDS:
        raise InputError(f"seconds must be in (0, {MAX_PLAY_SECONDS:g}], got {seconds}")
    if onnx is not None and not Path(onnx).is_file():
        raise InputError(f"onnx policy not found: {onnx}")
    source = policy_source(checkpoint, onnx, task)
    overrides = shown_overrides(source.task, source.overrides, seconds) | terrain_start(source.task, terrain_level)
    if terrain_suite is not None:
        overrides |= terrain_of_suite(source.task, make_task(source.task, **overrides), terrain_suite)
    config = task_of(source.task, overrides)
    check_rollout_memory(config, num_envs, "cpu", record=False)
    env = build_env(config, sim="mujoco", num_envs=num_envs, device="cpu")
    markers = scan_markers(env) if show_scan else None
    policy = source.policy(env)
    target = video_path(checkpoint, onnx, out)
    steps = max(1, round(seconds / env.ctx.dt))
    with OutputClaims([target], replace, "--force"):
        return render_rollout(env, policy, target, num_envs, steps, seed, width, height, markers=markers)


def main(argv: list[str] | None = None) -> Path:
    """Console command ``unilab play``."""
    parser = ArgumentParser(prog="unilab play", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--checkpoint", type=Path, help="model_<it>.pt written by train")
    source.add_argument("--onnx", type=Path, help="policy.onnx written by train")
    parser.add_argument(
        "--out", type=Path, default=None, help=f"directory or .mp4 path (default: {VIDEO_FILENAME} beside)"
    )
    parser.add_argument("--task", default=None, help=f"one of {', '.join(list_tasks())} (default: the run's task)")
    parser.add_argument("--seconds", type=float, default=16.0, help=f"video length, at most {MAX_PLAY_SECONDS:g}")
    parser.add_argument("--num-envs", type=int, default=4, help="robots shown, one tile each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--width", type=int, default=640)
    parser.add_argument("--height", type=int, default=360)
    parser.add_argument("--still", type=Path, default=None, help="also write the middle frame to this PNG")
    parser.add_argument(
        "--show-scan", action="store_true", help="draw the points the height scan reads (tasks on terrain)"
    )
    parser.add_argument(
        "--terrain-level",
        type=lambda text: int(text) if text.isdigit() else text,
        default=None,
        metavar="ROW",
        help="tasks on terrain: the row the robots start on, 'all' (spread over every tile) or 'start' (the "
        "task's own start); default: the middle row",
    )
    parser.add_argument(
        "--terrain-suite",
        choices=tuple(TERRAIN_SUITES),
        default=None,
        help="tasks on terrain: that eval suite's terrain alone (stairs_up: every tile a pyramid of stairs)",
    )
    parser.add_argument("--force", action="store_true", help="replace a video or still that exists")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    check_rollout_args(parser.prog, args.num_envs, args.seed)
    if not 0.0 < args.seconds < math.inf:
        fail(parser.prog, f"--seconds must be a finite number > 0, got {args.seconds}")
    if args.seconds > MAX_PLAY_SECONDS:  # see MAX_PLAY_SECONDS: ten minutes of video take about an hour on a CPU
        fail(
            parser.prog,
            f"--seconds must be at most {MAX_PLAY_SECONDS:g} (every frame is rendered), got {args.seconds:g}",
        )
    if args.width % 2 or args.height % 2 or args.width < 2 or args.height < 2:
        fail(parser.prog, f"--width and --height must be even and positive, got {args.width}x{args.height}")
    rows, cols = grid_shape(args.num_envs)
    if args.height // rows < 2 or args.width // cols < 2:
        fail(parser.prog, f"{args.width}x{args.height} is too small for {args.num_envs} tiles: lower --num-envs")
    if args.out is not None and args.out.suffix and args.out.suffix.lower() != ".mp4" and not args.out.is_dir():
        fail(parser.prog, f"--out {args.out} must be a directory or end in .mp4")
    is_video = args.out is not None and args.out.suffix.lower() == ".mp4"
    video_bytes = round(args.seconds * VIDEO_BYTES_PER_PIXEL_SECOND * args.width * args.height)
    check_output(parser.prog, args.out, "--out", ".mp4" if is_video else None, need_bytes=video_bytes)
    beside = Path(args.checkpoint if args.checkpoint is not None else args.onnx).parent
    if args.out is None and beside.is_dir():  # the video goes beside the policy file
        try:
            check_room(beside, video_bytes)
        except InputError as exc:
            fail(parser.prog, exc)
    check_output(parser.prog, args.still, "--still", ".png")
    if args.still is not None and args.still.exists() and not args.force:  # before the minutes of rendering
        fail(parser.prog, f"{args.still} already exists: --force replaces it")
    try:
        path = play(
            args.checkpoint,
            args.onnx,
            args.out,
            args.task,
            args.num_envs,
            args.seconds,
            args.seed,
            args.width,
            args.height,
            args.show_scan,
            replace=args.force,
            terrain_level=args.terrain_level,
            terrain_suite=args.terrain_suite,
        )
    except REFUSALS as exc:
        fail(parser.prog, exc)
    print(f"video: {path}")
    if args.still is not None:
        print(f"still: {save_still(path, args.still)}")
    return path
