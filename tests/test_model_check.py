"""A robot's model is held against its config when the env is built: a missing actuator, sensor or body, or a model
too large to hold, is one line naming it, before any step (and a huge one before MuJoCo spends minutes reading it)."""

from __future__ import annotations

import dataclasses
import re
import shutil
import time
from pathlib import Path

import pytest
from test_train import tiny

from unilab.apps.train import main
from unilab.envs.config import task_model
from unilab.envs.model_check import MAX_BODIES, ModelMismatchError
from unilab.tasks import registry

G1_DIR = Path(registry.__file__).resolve().parents[1] / "robots" / "g1"


def _g1_copy(tmp_path: Path, edit) -> Path:
    """The G1's scene in ``tmp_path`` with ``edit`` applied to its robot file's text; returns the scene."""
    robot = tmp_path / "g1"
    shutil.copytree(G1_DIR, robot)
    model = robot / "g1.xml"
    model.write_text(edit(model.read_text()))
    return robot / "scene_flat.xml"


def _without_actuators(count: int):
    """Drop the last ``count`` actuators (and the keyframe's ctrl, which MuJoCo sizes by them)."""

    def edit(text: str) -> str:
        lines = text.splitlines()
        actuators = [i for i, line in enumerate(lines) if line.strip().startswith("<position name=")]
        dropped = set(actuators[len(actuators) - count :])
        text = "\n".join(line for i, line in enumerate(lines) if i not in dropped)
        return re.sub(r'\sctrl="[^"]*"', "", text)

    return edit


def _walk_on(scene: Path):
    return dataclasses.replace(registry.make_task("g1_walk_flat"), scene=scene)


@pytest.mark.parametrize("dropped", [1, 29])
def test_a_model_with_fewer_actuators_than_joints_is_refused_at_build(tmp_path: Path, dropped: int) -> None:
    scene = _g1_copy(tmp_path, _without_actuators(dropped))
    with pytest.raises(ModelMismatchError, match=f"has {29 - dropped} actuators for the 29 joints its config names"):
        task_model(_walk_on(scene))


def test_an_actuator_on_another_joint_is_named(tmp_path: Path) -> None:
    swap = lambda text: text.replace('joint="left_hip_roll_joint"', 'joint="left_hip_yaw_joint"', 1)  # noqa: E731
    with pytest.raises(ModelMismatchError, match="actuator 1 drives 'left_hip_yaw_joint', not joint 'left_hip_roll"):
        task_model(_walk_on(_g1_copy(tmp_path, swap)))


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("gyro_sensor", "no_such_gyro", "has no sensor named 'no_such_gyro'"),
        ("torso_body", "no_such_torso", "has no body named 'no_such_torso'"),
        ("foot_sites", ("left_foot", "no_such_site"), "has no site named 'no_such_site'"),
        ("keyframe", "crouch", "has no keyframe named 'crouch'"),
    ],
)
def test_a_name_the_config_gives_that_the_model_lacks_is_refused(field: str, value: object, message: str) -> None:
    task = registry.make_task("g1_walk_flat")
    robot = task.robot
    if field == "foot_sites":
        value = (robot.foot_sites[0], value[1])
    task = dataclasses.replace(task, robot=dataclasses.replace(robot, **{field: value}))
    with pytest.raises(ModelMismatchError, match=re.escape(message)):
        task_model(task)


def test_a_huge_model_is_refused_before_mujoco_reads_it(tmp_path: Path) -> None:
    crowd = f'<replicate count="{MAX_BODIES + 1}" offset="0.1 0 0"><body><geom size="0.01"/></body></replicate>'
    scene = _g1_copy(tmp_path, lambda text: text.replace("<worldbody>", f"<worldbody>{crowd}", 1))
    began = time.perf_counter()
    declared = MAX_BODIES + 1 + 30  # the crowd and the G1's own bodies
    with pytest.raises(ModelMismatchError, match=f"declares {declared} bodies; a model may hold at most {MAX_BODIES}"):
        task_model(_walk_on(scene))
    assert time.perf_counter() - began < 5.0


def test_train_refuses_a_model_without_its_actuators_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    scene = _g1_copy(tmp_path, _without_actuators(1))
    monkeypatch.setattr(registry, "_registered", {})
    base = registry.get_task("g1_walk_flat").make_config
    registry.register_task("g1_walk_short", lambda **kwargs: dataclasses.replace(base(**kwargs), scene=scene))
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", "task=g1_walk_short"))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    assert "28 actuators for the 29 joints" in err and not (tmp_path / "run").exists()
