"""The runtime runs without torch, refuses readings it cannot use, survives a network that gives NaN, keeps to its
control period, and its simulated robot steps the physics as training's backend did."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.deploy_policies import export_tiny
from unilab.deploy import JointTargets, Policy, Readings, ReadingsError
from unilab.deploy.check import load_scene
from unilab.deploy.loop import run_loop
from unilab.deploy.mujoco_robot import MujocoRobot

REPO = Path(__file__).resolve().parents[1]
TRAINING_STACK = ("torch", "tensordict", "torchrl", "warp", "mujoco_warp")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("deploy") / "policy.onnx"
    export_tiny("g1_walk_flat", path)
    return path


def _standing(policy: Policy) -> Readings:
    n = len(policy.joint_names)
    pose = np.asarray(policy.metadata.joints.default_pos)
    return Readings(pose, np.zeros(n), np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))


def test_the_runtime_and_its_check_import_no_torch(exported: Path) -> None:
    """A process in which the training stack cannot be imported (as on a robot without it) loads the policy, acts
    once and runs ``unilab deploy check`` on a short episode; none of the stack is in ``sys.modules`` after, and
    ``unilab deploy export``, which needs it, says so in one line."""
    code = f"""
import sys

class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {TRAINING_STACK!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)

sys.meta_path.insert(0, NotInstalled())
import numpy as np
from unilab.deploy import Policy, Readings
policy = Policy({str(exported)!r})
n = len(policy.joint_names)
targets = policy.act(Readings(np.zeros(n), np.zeros(n), np.zeros(3), np.array([1.0, 0, 0, 0])), np.zeros(3))
assert targets.position.shape == (n,) and np.isfinite(targets.position).all()
from unilab.apps.cli import main
out = {str(exported.parent / "cli")!r}
main(["deploy", "check", {str(exported)!r}, "--episodes", "1", "--seconds", "0.1", "--out", out])
print(" ".join(sorted(set(sys.modules) & set({TRAINING_STACK!r}))) or "none")
try:
    main(["deploy", "export", "--checkpoint", {str(exported)!r}, "--out", out + "/p.onnx"])
except SystemExit as exc:
    print("export exit", exc.code)
"""
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-2:] == ["none", "export exit 2"], done.stdout
    # Exporting needs the training stack: where it is missing, that is one line, not a traceback.
    refusal = "unilab deploy export: error: needs the training stack, and torch is not installed here"
    assert done.stderr == refusal + ": export where it is\n"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"joint_pos": np.zeros(28)}, "joint_pos must be 29 finite values, got shape (28,)"),
        ({"gyro": np.array([0.0, np.nan, 0.0])}, "gyro must be 3 finite values, got shape (3,) with non-finite values"),
        ({"quat": np.zeros(3)}, "quat must be 4 finite values, got shape (3,)"),
    ],
    ids=["short", "nan", "quat"],
)
def test_a_reading_the_policy_cannot_use_is_refused_in_one_line(exported: Path, change: dict, message: str) -> None:
    policy = Policy(exported)
    readings = Readings(**{**_standing(policy).__dict__, **change})
    with pytest.raises(ReadingsError) as info:
        policy.act(readings, np.zeros(3))
    assert str(info.value) == message
    with pytest.raises(ReadingsError, match="command must be 3 finite values, got shape"):
        policy.act(_standing(policy))  # a walking policy needs its command


def test_a_network_giving_nan_holds_the_default_pose_and_is_counted(exported: Path, tmp_path: Path) -> None:
    model = onnx.load(str(exported))
    for tensor in model.graph.initializer:  # every weight NaN: the action is NaN whatever the observation
        tensor.CopyFrom(
            numpy_helper.from_array(np.full(numpy_helper.to_array(tensor).shape, np.nan, np.float32), tensor.name)
        )
    broken = tmp_path / "policy.onnx"
    onnx.save(model, str(broken))
    policy = Policy(broken)
    targets = policy.act(_standing(policy), np.zeros(3))
    assert policy.nonfinite_actions == 1
    np.testing.assert_array_equal(targets.position, np.asarray(policy.metadata.joints.default_pos, np.float32))


class _FakeClock:
    """Time that moves only when the loop sleeps or works."""

    def __init__(self, work_s: list[float]) -> None:
        self.now, self.work = 0.0, iter(work_s)

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class _Robot:
    def __init__(self, policy: Policy, clock: _FakeClock) -> None:
        self.policy, self.clock, self.reads, self.writes = policy, clock, [], 0

    def read(self) -> Readings:
        self.reads.append(self.clock.now)
        self.clock.now += next(self.clock.work)  # the step's work
        return _standing(self.policy)

    def write(self, targets: JointTargets) -> None:
        self.writes += 1


def test_the_loop_keeps_to_its_grid_and_counts_overruns(exported: Path) -> None:
    policy = Policy(exported)
    dt = policy.control_dt
    clock = _FakeClock([0.001, 0.001, 1.5 * dt, 0.001, 0.001])  # the third step runs past the next deadline
    robot = _Robot(policy, clock)
    stats = run_loop(policy, robot, lambda: np.zeros(3), steps=5, clock=clock, sleep=clock.sleep)
    assert robot.writes == 5 and stats.overruns == 1 and len(stats.work_s) == 5
    late = 2 * dt + 1.5 * dt  # where the overrun ended: the grid starts again there, without a burst
    np.testing.assert_allclose(robot.reads, [0.0, dt, 2 * dt, late, late + dt], atol=1e-12)


def test_without_imperfections_the_simulated_robot_steps_as_training_did(exported: Path) -> None:
    """Three physics steps of the trained length per control step, the targets held over them: the same state as
    stepping a copy of the scene by hand. A target written with latency reaches the motors when due, and the
    physics step it falls in is split there."""
    policy = Policy(exported)
    robot = MujocoRobot(load_scene(policy), policy.metadata)
    model = copy.copy(robot.model)
    qpos = model.key_qpos[0].copy()
    robot.reset(qpos, np.zeros(model.nv))
    by_hand = mujoco.MjData(model)
    by_hand.qpos[:] = qpos
    targets = policy.act(robot.read(), np.array([0.5, 0.0, 0.0]))
    robot.write(targets)
    robot.advance(policy.control_dt)
    by_hand.ctrl[:] = targets.position
    model.actuator_gainprm[:, 0], model.actuator_biasprm[:, 1], model.actuator_biasprm[:, 2] = (
        targets.kp,
        -targets.kp,
        -targets.kv,
    )
    for _ in range(3):
        mujoco.mj_step(model, by_hand)
    np.testing.assert_array_equal(robot.data.qpos, by_hand.qpos)

    robot.reset(qpos, np.zeros(model.nv), latency_s=0.01)  # 1.5 physics steps of 1/150 s
    robot.write(targets)
    robot.advance(0.009)
    np.testing.assert_array_equal(robot.data.ctrl, policy.metadata.joints.default_pos)  # not yet due
    robot.advance(policy.control_dt)
    np.testing.assert_array_equal(robot.data.ctrl, targets.position)
    assert robot.data.time == pytest.approx(policy.control_dt) and robot.model.opt.timestep == model.opt.timestep


def test_the_deploy_page_s_examples_run(exported: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulated loop of ``docs/deploy.md`` runs as written beside a policy; the robot loop's imports name real
    modules (its robot is the reader's to write)."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "deploy.md").read_text(), re.DOTALL)
    loop, simulated = (next(b for b in blocks if key in b) for key in ("run_loop", "MujocoRobot"))
    exec("\n".join(line for line in loop.splitlines() if line.startswith(("import ", "from "))), {})
    monkeypatch.chdir(exported.parent)
    names: dict = {}
    exec(simulated, names)
    assert names["robot"].data.time == pytest.approx(250 * names["policy"].control_dt)
