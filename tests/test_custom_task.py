"""The custom-task tutorial (docs/custom_task.md), followed step by step: its package written from the page's
code blocks, the task registered, checked by TorchRL and trained through ``train``; and the entry-point route
with the page's ``pyproject.toml``."""

from __future__ import annotations

import importlib
import json
import re
import sys
import tomllib
from importlib.metadata import EntryPoint
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torchrl.envs.utils import check_env_specs

import unilab
from unilab.apps.compose import compose_config
from unilab.apps.train import run
from unilab.tasks import registry

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "custom_task.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
FILE_HEADER = re.compile(r"^# (\S+\.(?:py|yaml|toml))(, continued)?$")


def tutorial_files() -> dict[str, str]:
    """The page's files: each code block whose first line is ``# <path>`` (``, continued``: more of that file)."""
    files: dict[str, str] = {}
    for _, body in BLOCK.findall(TUTORIAL.read_text()):
        first, _, rest = body.partition("\n")
        named = FILE_HEADER.match(first)
        if named:
            path = named.group(1)
            files[path] = files.get(path, "") + (rest if named.group(2) else body)
    return files


def snippets(language: str) -> list[str]:
    """The page's code blocks in ``language`` that are not files: what a user types."""
    return [
        body for lang, body in BLOCK.findall(TUTORIAL.read_text()) if lang == language and not body.startswith("# ")
    ]


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks registered in a test are gone after it."""
    monkeypatch.setattr(registry, "_registered", {})


@pytest.fixture
def stand(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clean_registry: None) -> ModuleType:
    """The tutorial's package ``my_tasks``, written from the page into a temporary project and importable; it is
    forgotten after the test."""
    project = tmp_path / "my-tasks"
    for path, text in tutorial_files().items():
        target = project / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (project / "my_tasks" / "__init__.py").touch()
    monkeypatch.syspath_prepend(str(project))
    for name in [m for m in sys.modules if m == "my_tasks" or m.startswith("my_tasks.")]:
        monkeypatch.delitem(sys.modules, name)
    module = importlib.import_module("my_tasks.g1_stand")
    yield module
    for name in [m for m in sys.modules if m == "my_tasks" or m.startswith("my_tasks.")]:
        del sys.modules[name]


def test_the_page_gives_every_file_of_the_package() -> None:
    assert set(tutorial_files()) == {
        "my_tasks/g1_stand/config.py",
        "my_tasks/g1_stand/__init__.py",
        "my_tasks/g1_stand/sac.yaml",
        "pyproject.toml",
    }
    project = tomllib.loads(tutorial_files()["pyproject.toml"])
    assert project["project"]["entry-points"]["unilab.tasks"] == {"g1_stand": "my_tasks.g1_stand:TASK"}
    assert project["tool"]["setuptools"]["package-data"] == {"my_tasks.g1_stand": ["*.yaml"]}


# -- the tutorial, checked --------------------------------------------------------------------------------------


def test_a_registered_task_passes_torchrl_checks_and_trains(
    tmp_path: Path, stand: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    register, check = snippets("python")
    monkeypatch.chdir(tmp_path)  # the tuning path is the package's, wherever the user stands
    exec(register, {})
    assert "g1_stand" in unilab.list_tasks()
    exec(check, {})  # check_env_specs on the registered task

    env = unilab.make_env("g1_stand", sim="mujoco", num_envs=2, push=1.0)
    check_env_specs(env)
    assert env.observation_spec["policy"].shape == (2, 3 + 3 + 29 + 29 + 29)

    overrides = [
        "task=g1_stand",
        "sim=mujoco",
        "algo.num_envs=4",
        "algo.batch_size=32",
        "algo.replay_buffer_n=16",
        "algo.max_iterations=3",
        "algo.actor_hidden=[16]",
        "algo.critic_hidden=[16]",
        "training.no_play=true",
        "training.export_onnx=false",
        "training.progress=false",
        f"training.log_dir={tmp_path / 'run'}",
    ]
    cfg = compose_config([*overrides, "task.push=1.0"])  # the factory's knob, as the page sets it
    assert cfg.algo.gamma == 0.95 and cfg.algo.tau == 0.2  # the task's tuning for sac was applied
    assert cfg.task.knobs["push"] == 1.0
    summary = run(cfg)
    assert summary.status == "completed" and summary.completed_iterations == 3
    recorded = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert recorded["task"] == "g1_stand"


def test_a_task_named_by_an_entry_point_is_found(monkeypatch: pytest.MonkeyPatch, stand: ModuleType) -> None:
    ((name, value),) = tomllib.loads(tutorial_files()["pyproject.toml"])["project"]["entry-points"][
        "unilab.tasks"
    ].items()
    point = EntryPoint(name=name, value=value, group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [point] if group == point.group else [])
    monkeypatch.setattr(registry, "_discovered", None)
    task = registry.get_task("g1_stand")
    assert task.make_config is stand.make_stand_config and [path.is_file() for path in task.tuning["sac"]] == [True]
    assert {"g1_walk_flat", "g1_motion_tracking", "g1_stand"} <= set(unilab.list_tasks())


def test_an_entry_point_that_is_not_a_task_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    point = EntryPoint(name="broken", value="unilab.tasks.registry:make_task", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [point])
    monkeypatch.setattr(registry, "_discovered", None)
    with pytest.raises(TypeError, match=r"entry point broken = .* is not a unilab Task"):
        unilab.list_tasks()


def test_interval_pushes_fire_on_their_timer_and_donation_matches(stand: ModuleType) -> None:
    from unilab.core.rng import advance, make_rng
    from unilab.tasks.registry import make_functional_env

    unilab.register_task("g1_stand", stand.make_stand_config)
    pushed = make_functional_env("g1_stand", sim="mujoco", num_envs=3, push=0.5, push_every_s=(0.04, 0.04))
    calm = make_functional_env("g1_stand", sim="mujoco", num_envs=3, push=0.0, push_every_s=(0.04, 0.04))
    rng = make_rng(0)
    a, b = pushed.reset(rng), calm.reset(rng)
    assert a["env", "shove_timer"].tolist() == pytest.approx([0.04] * 3)
    zero = torch.zeros(3, 29)
    # The start event draws from the same stream, with range 0 for the calm env: align the two starts.
    b = b.update({"sim": a["sim"].clone(), "obs": a["obs"].clone()})
    a1, _ = pushed.step(a, zero, advance(rng, 1))
    b1, _ = calm.step(b, zero, advance(rng, 1))
    assert a1["env", "shove_timer"].tolist() == pytest.approx([0.02] * 3)
    assert torch.equal(a1["sim", "qvel"], b1["sim", "qvel"])  # not fired yet
    a2, _ = pushed.step(a1, zero, advance(rng, 2))
    b2, _ = calm.step(b1, zero, advance(rng, 2))
    assert a2["env", "shove_timer"].tolist() == pytest.approx([0.04] * 3)  # fired and rearmed
    assert (a2["sim", "qvel"][:, :2] - b2["sim", "qvel"][:, :2]).abs().max() > 0.05
    donated, _ = pushed.step_(a1.clone(), zero, advance(rng, 2))
    for key in a2.keys(True, True):
        assert torch.equal(donated[key], a2[key]), key
