"""`unilab view` and the live view of training: the scene built from an MjModel, the controls, the live loop, the
training stream's log-point copies, bad input, and the page rendered in a real headless browser."""

from __future__ import annotations

import base64
import html
import json
import os
import re
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import imageio.v2 as imageio
import mujoco
import numpy as np
import pytest
import torch
from websockets.sync.client import connect

from tests.test_train import TINY
from torchrl_ext.export import export_policy_onnx
from unilab.apps import view
from unilab.apps.compose import compose_config
from unilab.apps.train import run
from unilab.core.rng import make_rng
from unilab.tasks.registry import make_functional_env
from unilab.viewer import geometry, stream
from unilab.viewer.controls import SPEEDS, Controls
from unilab.viewer.live import LiveSession, clip_names, walking_command
from unilab.viewer.scene import FILL, RobotScene, add_geom, robots_size, shown_geoms
from unilab.viewer.server import LOOPBACK, serve

# Every geom type the viewer draws, on the world body and on a moving one.
ALL_SHAPES = """
<mujoco>
  <asset>
    <hfield name="bumps" nrow="3" ncol="4" size="2 1 0.5 0.1" elevation="0 1 0 1 1 0 1 0 0 0 1 1"/>
    <mesh name="tetra" vertex="0 0 0  0.1 0 0  0 0.1 0  0 0 0.1"/>
  </asset>
  <worldbody>
    <geom type="plane" size="0 0 1"/>
    <geom type="hfield" hfield="bumps" pos="3 0 0"/>
    <body name="thing" pos="0 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.2 0.3"/>
      <geom type="sphere" size="0.1" pos="0.3 0 0"/>
      <geom type="capsule" size="0.05 0.2" pos="0 0.3 0"/>
      <geom type="ellipsoid" size="0.1 0.2 0.05" pos="0 0 0.4"/>
      <geom type="cylinder" size="0.05 0.1" pos="0.3 0.3 0"/>
      <geom type="mesh" mesh="tetra" pos="-0.3 0 0"/>
      <geom type="sphere" size="0.1" group="4"/>
    </body>
  </worldbody>
</mujoco>
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return probe.getsockname()[1]


@pytest.fixture(scope="module")
def onnx_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small untrained walking policy: the viewer needs a policy that runs, not one that walks."""
    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=1)
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(env.obs_dims["policy"], env.action_dim), torch.nn.Tanh())
    path = tmp_path_factory.mktemp("view") / "policy.onnx"
    export_policy_onnx(net, env.obs_dims["policy"], path, metadata={"task": "g1_walk_flat"})
    return path


@pytest.fixture
def server():
    server = serve(LOOPBACK, 0)
    yield server
    server.stop()


# -- geometry and scene ------------------------------------------------------------------------------------------


def test_meshes_follow_mujoco_sizes() -> None:
    vertices, faces = geometry.capsule(0.1, 0.3)
    assert np.isclose(np.abs(vertices[:, 2]).max(), 0.4, atol=1e-6)  # half-length plus the cap's radius
    assert np.isclose(np.linalg.norm(vertices[:, :2], axis=1).max(), 0.1, atol=1e-6)
    assert faces.max() < len(vertices) and faces.shape[1] == 3
    vertices, _ = geometry.cylinder(0.2, 0.5)
    assert np.isclose(np.abs(vertices[:, 2]).max(), 0.5) and np.isclose(vertices[:, 0].max(), 0.2)
    elevation = np.array([[0.0, 1.0], [0.5, 0.0]])
    vertices, faces = geometry.height_field(np.array([2.0, 1.0, 0.4, 0.1]), elevation)
    # row 0 at y = -1, column 1 at x = +2: MuJoCo's layout, elevation scaled by size[2]
    assert np.allclose(vertices[1], [2.0, -1.0, 0.4]) and np.allclose(vertices[2], [-2.0, 1.0, 0.2])
    assert len(faces) == 2
    normal = np.cross(vertices[faces[0, 1]] - vertices[faces[0, 0]], vertices[faces[0, 2]] - vertices[faces[0, 0]])
    assert normal[2] > 0  # faces +z, seen from above


def test_every_geom_type_becomes_a_node(server) -> None:
    model = mujoco.MjModel.from_xml_string(ALL_SHAPES)
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "thing")
    assert len(shown_geoms(model, body)) == 6  # the group-4 sphere is hidden, as MuJoCo's viewer hides it
    for geom in [*shown_geoms(model, 0), *shown_geoms(model, body)]:
        handle = add_geom(server.scene, f"/test/geom{geom}", model, geom)
        assert np.allclose(handle.position, model.geom_pos[geom])


def test_the_robot_scene_moves_bodies_to_their_kinematics(server) -> None:
    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=2)
    model = env.sim.model
    scene = RobotScene(server, model, num_robots=2)
    assert scene.bodies == [b for b in range(1, model.nbody) if shown_geoms(model, b)] and len(scene.bodies) > 10
    qpos = np.tile(model.qpos0, (2, 1))
    qpos[1, 0] += 1.0  # the second robot one metre ahead
    scene.show(qpos)
    data = mujoco.MjData(model)
    data.qpos[:] = qpos[1]
    mujoco.mj_kinematics(model, data)
    pelvis = scene.frames[1][0]
    assert np.allclose(pelvis.position, data.xpos[scene.bodies[0]] + scene.offsets[1], atol=1e-5)
    assert np.allclose(pelvis.wxyz, data.xquat[scene.bodies[0]], atol=1e-5)
    assert scene.offsets[0, 1] != scene.offsets[1, 1]  # side by side on the flat floor


def test_on_a_terrain_the_robots_stay_on_their_tiles_and_the_page_looks_at_the_first(server) -> None:
    env = make_functional_env("g1_walk_rough", sim="mujoco", num_envs=2)
    scene = RobotScene(server, env.sim.model, num_robots=2)
    qpos = env.reset(make_rng(0))["sim", "qpos"].numpy()
    scene.show(qpos)
    assert not scene.offsets.any()
    assert np.allclose(server.initial_camera.look_at, scene.frames[0][0].position, atol=1e-5)


@pytest.mark.parametrize("task", ["g1_walk_flat", "go1_walk_flat"])
def test_a_new_page_frames_the_robot_by_its_size(server, task: str) -> None:
    """The page opens looking at the robot's base from where its largest dimension fills ``FILL`` of the view's
    height: the Go1, a third of the G1's size, is seen from a third of the distance."""
    env = make_functional_env(task, sim="mujoco", num_envs=1)
    scene = RobotScene(server, env.sim.model, num_robots=1)
    scene.show(env.reset(make_rng(0))["sim", "qpos"].numpy())
    camera = server.initial_camera
    assert np.allclose(camera.look_at, scene.frames[0][0].position, atol=1e-5)
    size = robots_size(env.sim.model, scene.datas, scene.offsets)
    distance = np.linalg.norm(np.subtract(camera.position, camera.look_at))
    assert np.isclose(size / (2 * distance * np.tan(camera.fov / 2)), FILL)
    assert {"g1_walk_flat": 1.2, "go1_walk_flat": 0.5}[task] < size < {"g1_walk_flat": 1.6, "go1_walk_flat": 0.8}[task]


# -- controls and the live loop -----------------------------------------------------------------------------------


def test_control_handlers() -> None:
    controls = Controls()
    controls.on_speed(100.0)
    assert controls.speed == SPEEDS[1]
    controls.on_speed(0.0)
    assert controls.speed == SPEEDS[0]
    controls.on_reset()
    controls.on_reset()
    assert controls.take_reset() and not controls.take_reset()  # two clicks before a step: one reset
    controls.on_command(2, 0.5)
    controls.on_play(False)
    controls.on_clip(3)
    assert controls.command == [0.0, 0.0, 0.5] and not controls.playing and controls.clip == 3
    assert controls.take_reset()  # a new clip starts from its first frame


def test_steering_sets_the_walking_command(server, onnx_path: Path) -> None:
    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=2, obs_noise=False)
    assert walking_command(env).ranges == ((-0.6, 1.0), (-0.4, 0.4), (-0.8, 0.8)) and not clip_names(env.task)
    from unilab.apps.policy import onnx_policy

    controls = Controls(steer=True, command=[0.7, 0.0, -0.3])
    session = LiveSession(
        env, onnx_policy(onnx_path, env, "g1_walk_flat"), RobotScene(server, env.sim.model, 2), controls
    )
    session.step()
    session.step()
    assert torch.allclose(session.state["env", "velocity"], torch.tensor([[0.7, 0.0, -0.3]] * 2))
    assert session.steps == 2 and session.qpos().shape == (2, env.sim.model.nq)


def test_the_loop_pauses_resets_and_stops(server, onnx_path: Path) -> None:
    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=1, obs_noise=False)
    from unilab.apps.policy import onnx_policy

    controls = Controls(playing=False)
    session = LiveSession(
        env, onnx_policy(onnx_path, env, "g1_walk_flat"), RobotScene(server, env.sim.model, 1), controls
    )
    stop = threading.Event()
    thread = threading.Thread(target=session.run, args=(stop,))
    thread.start()
    time.sleep(0.3)
    assert session.steps == 0  # paused
    controls.on_speed(SPEEDS[1])
    controls.on_play(True)
    time.sleep(0.5)
    controls.on_reset()
    time.sleep(0.2)
    stop.set()
    thread.join(timeout=5)
    assert not thread.is_alive() and session.steps > 0 and not controls.reset_requested and session.error is None


def test_a_failing_policy_ends_the_loop_with_its_error(server) -> None:
    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=1)

    def broken(obs: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("broken policy")

    session = LiveSession(env, broken, RobotScene(server, env.sim.model, 1), Controls())
    session.run(threading.Event())  # returns by itself
    assert isinstance(session.error, RuntimeError)


def test_the_command_serves_then_stops(capsys: pytest.CaptureFixture, onnx_path: Path) -> None:
    view.main(["--onnx", str(onnx_path), "--port", "0", "--seconds", "1", "--num-envs", "2"])
    out = capsys.readouterr().out
    assert "viewer: http://127.0.0.1:" in out and "ssh -L " in out and "ssh -L 0:" not in out


def test_the_clip_menu_shows_an_env_playing_that_clip() -> None:
    env = make_functional_env("g1_motion_tracking", sim="mujoco", num_envs=2, start="first_frame", obs_noise=False)
    clips = clip_names(env.task)
    assert clips and walking_command(env) is None

    class NoScene:
        num_robots = 1

    session = LiveSession(env, lambda obs: torch.zeros(len(obs), env.action_dim), NoScene(), Controls(clip=0))
    assert session.shown_envs() == [0]


# -- bad input ------------------------------------------------------------------------------------------------------


def _refused(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        view.main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_bad_input_is_one_line(capsys: pytest.CaptureFixture, onnx_path: Path, tmp_path: Path) -> None:
    assert "not found" in _refused(capsys, ["--checkpoint", str(tmp_path / "model_1.pt")])
    assert "not found" in _refused(capsys, ["--onnx", str(tmp_path / "policy.onnx")])
    assert "unknown task" in _refused(capsys, ["--onnx", str(onnx_path), "--task", "g1_fly"])
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert f"{LOOPBACK}:{port}" in _refused(capsys, ["--onnx", str(onnx_path), "--port", str(port)])


# -- the live view of training ---------------------------------------------------------------------------------------


def test_the_stream_shows_the_copy_taken_at_the_log_point() -> None:
    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=6)
    viewer = stream.TrainingStream(env, LOOPBACK, 0)
    try:
        qpos = torch.tensor(np.tile(env.sim.model.qpos0, (6, 1)), dtype=torch.float32)
        qpos[:, 0] = torch.arange(6.0)
        assert viewer.capture(qpos, iteration=10)
        qpos[:, 0] = -1.0  # the next env step overwrites the state: the copy keeps the log point's
        assert viewer.publish() and not viewer.publish()  # once per copy
        deadline = time.monotonic() + 5
        while viewer.status.content != "training: iteration 10" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert viewer.status.content == "training: iteration 10" and viewer.scene.num_robots == stream.STREAM_ENVS
        assert np.isclose(viewer.scene.frames[3][0].position[0], 3.0, atol=1e-4)
    finally:
        viewer.close()


def test_training_streams_at_log_points_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    captured: list[tuple[int, torch.Tensor]] = []
    published: list[bool] = []
    capture, publish = stream.TrainingStream.capture, stream.TrainingStream.publish

    def spy_capture(self, qpos, iteration, stream=None):
        captured.append((iteration, qpos[: len(self.host)].clone()))
        return capture(self, qpos, iteration, stream)

    def spy_publish(self):
        published.append(publish(self))
        return published[-1]

    monkeypatch.setattr(stream.TrainingStream, "capture", spy_capture)
    monkeypatch.setattr(stream.TrainingStream, "publish", spy_publish)
    port = free_port()
    overrides = [*TINY, "training.log_interval=2", "algo.max_iterations=4", f"training.log_dir={tmp_path / 'run'}"]
    run(compose_config(["sim=mujoco", *overrides, "training.viewer=true", f"training.viewer_port={port}"]))
    assert [iteration for iteration, _ in captured] == [2, 4] and published == [True, True]
    assert captured[0][1].shape == (4, 36) and not torch.equal(captured[0][1], captured[1][1])


@pytest.mark.gpu
def test_the_log_point_copy_never_syncs_the_host() -> None:
    """On CUDA the copy is queued on a stream and an event recorded: no host sync, which torch would report."""
    env = make_functional_env("g1_walk_flat", sim="mjwarp", num_envs=4, device="cuda")
    viewer = stream.TrainingStream(env, LOOPBACK, 0)
    qpos = torch.zeros(4, env.sim.model.nq, device="cuda")
    side = torch.cuda.Stream()
    try:
        torch.cuda.set_sync_debug_mode("error")
        assert viewer.capture(qpos, 1, side)
        viewer.publish()
    finally:
        torch.cuda.set_sync_debug_mode("default")
        torch.cuda.synchronize()
        viewer.close()


# -- in a real browser ------------------------------------------------------------------------------------------------


def browser() -> str | None:
    """A Chromium binary: ``UNILAB_CHROMIUM``, else Debian's ``chromium`` or another usual name on the PATH."""
    named = os.environ.get("UNILAB_CHROMIUM")
    if named:
        return named
    return next(
        (path for name in ("chromium", "chromium-browser", "google-chrome") if (path := shutil.which(name))), None
    )


# What the panel of a walking policy shows, each an element's whole text (docs/viewer.md).
CONTROLS = ("play", "reset", "speed", "walking command", "steer", "forward m/s", "sideways m/s", "turn rad/s")


def page_texts(dom: str) -> list[str]:
    """The texts of a page's elements, in order, from the DOM Chromium dumps (scripts and styles left out)."""
    body = re.sub(r"<(script|style)\b.*?</\1>", "", dom, flags=re.S).replace("<wbr>", "")
    return [html.unescape(text).strip() for text in re.split(r"<[^>]+>", body) if text.strip()]


class Page:
    """One page of a headless Chromium, driven over its DevTools protocol: the test reads the page's texts and takes
    shots in real time, for as long as it chooses. (``--dump-dom`` and ``--screenshot`` under a virtual-time budget
    could not wait for the websocket: the budget ran out in 4 s of real time whatever it named, and the first pages
    after a server started came without the panel.) Software WebGL (SwiftShader): the test machine needs no GPU."""

    def __init__(self, binary: str, profile: Path) -> None:
        flags = ["--headless", "--no-sandbox", "--disable-dev-shm-usage", "--enable-unsafe-swiftshader"]
        flags += ["--use-angle=swiftshader", f"--window-size={PAGE_W},{PAGE_H}", f"--user-data-dir={profile}"]
        flags += ["--remote-debugging-port=0", "about:blank"]
        self.log = profile.with_suffix(".log")  # a file, not a pipe: Chromium's chatter must never block it
        with self.log.open("wb") as log:
            self.process = subprocess.Popen([binary, *flags], stdout=subprocess.DEVNULL, stderr=log)
        self._calls = 0
        try:  # a page that fails to come up leaves no browser behind: the caller never gets it to close
            self.socket = connect(self._debugger_url(profile / "DevToolsActivePort"), max_size=None, open_timeout=10)
        except BaseException:
            self.close()
            raise

    def _debugger_url(self, port_file: Path) -> str:
        """The page's DevTools websocket, from the port Chromium writes to ``port_file`` once it listens."""
        deadline = time.monotonic() + 60
        while not (port_file.is_file() and port_file.read_text().strip()):
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start: {self.stderr()}")
            time.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as listing:
            return next(t for t in json.load(listing) if t["type"] == "page")["webSocketDebuggerUrl"]

    def call(self, method: str, **params: object) -> dict:
        """One DevTools command's result; events in between are skipped."""
        self._calls += 1
        self.socket.send(json.dumps({"id": self._calls, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=60))
            if message.get("id") == self._calls:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def open(self, address: str) -> None:
        self.call("Page.navigate", url=address)

    def texts(self) -> list[str]:
        html_now = self.call("Runtime.evaluate", expression="document.documentElement.outerHTML", returnByValue=True)
        return page_texts(html_now["result"].get("value", ""))  # none while the page is still being replaced

    def shot(self) -> np.ndarray:
        png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        return imageio.imread(png)[..., :3].astype(int)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")[-1500:]

    def close(self) -> None:
        if hasattr(self, "socket"):
            self.socket.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


PAGE_W, PAGE_H = 800, 600


def robot_pixels(image: np.ndarray) -> np.ndarray:
    """Where the G1's green geoms are; the page, floor and panel are not green, but the connection icon and the axes
    gizmo have green in them and are left out."""
    r, g, b = image[..., 0], image[..., 1], image[..., 2]
    robot = (g > r + 40) & (g > b + 40)
    robot[:60] = robot[-150:, :150] = False
    return robot


def test_the_page_shows_its_controls_and_the_robot_in_headless_chromium(onnx_path: Path, tmp_path: Path) -> None:
    """The panel holds every control the docs describe, and a new page frames the robot: it spans at least a
    quarter of the view's height (a fixed camera once showed the G1 at a sixth and the Go1 as a speck)."""
    binary = browser()
    if binary is None:
        pytest.skip("no Chromium browser found (apt-get install chromium, or set UNILAB_CHROMIUM)")
    session, stop, thread, address = view.start(None, onnx_path, num_envs=1, port=0, paused=True)  # standing
    server = session.scene.server
    page = None
    try:
        page = Page(binary, tmp_path / "chromium")
        page.open(address)
        # The panel and the scene reach the page over a websocket, and SwiftShader draws slowly on a busy machine:
        # read and shoot the page until both are there, or a minute has passed.
        seen = []  # the page's texts at each look, for a failure's message
        deadline = time.monotonic() + 60
        while True:
            texts, image = page.texts(), page.shot()
            robot = robot_pixels(image)
            seen.append(texts)
            if (all(c in texts for c in CONTROLS) and robot.sum() > 800) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    finally:
        if page is not None:
            page.close()
        stop.set()
        thread.join(timeout=5)
        server.stop()
    missing = [control for control in CONTROLS if control not in seen[-1]]
    looks = [len(texts) for texts in seen]
    assert missing == [], f"{len(seen)} looks, texts {looks}; the last page's: {seen[-1]}"[:3000]
    assert image.std() > 10, "the screenshot is blank"
    assert robot.sum() > 800, f"only {robot.sum()} robot-coloured pixels: the bodies did not render"
    rows = np.flatnonzero(robot.any(axis=1))
    assert rows[-1] - rows[0] > PAGE_H / 4, f"the robot spans {rows[-1] - rows[0]} of {PAGE_H} pixels"
