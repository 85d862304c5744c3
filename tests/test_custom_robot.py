"""The custom-robot tutorial (docs/custom_robot.md), followed step by step: its package written from the page's
code blocks, the robot's own test run, the walking task registered, checked by TorchRL and trained."""

from __future__ import annotations

import importlib
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest
from torchrl.envs.utils import check_env_specs

import unilab
from unilab.apps.compose import compose_config
from unilab.apps.train import run
from unilab.tasks import registry

TUTORIAL = Path(__file__).resolve().parents[1] / "docs" / "custom_robot.md"
BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)
FILE_HEADER = re.compile(r"^(?:# (\S+\.py)|<!-- (\S+\.xml) -->)$")


def tutorial_files() -> dict[str, str]:
    """The page's files: each code block whose first line names its path (``# path`` or ``<!-- path -->``)."""
    files = {}
    for _, body in BLOCK.findall(TUTORIAL.read_text()):
        named = FILE_HEADER.match(body.partition("\n")[0])
        if named:
            files[named.group(1) or named.group(2)] = body
    return files


def snippets(language: str) -> list[str]:
    """The page's code blocks in ``language`` that are not files: what a user types."""
    return [body for lang, body in BLOCK.findall(TUTORIAL.read_text()) if lang == language and not body.startswith("#")]


def _forget() -> None:
    for name in [m for m in sys.modules if m in ("my_robots", "test_dog") or m.startswith("my_robots.")]:
        del sys.modules[name]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The tutorial's project written from the page and importable; the package and its registration are forgotten
    after the test."""
    root = tmp_path / "my-robots"
    for path, text in tutorial_files().items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    (root / "my_robots" / "__init__.py").touch()
    monkeypatch.syspath_prepend(str(root))
    monkeypatch.setattr(registry, "_registered", {})
    _forget()
    yield root
    _forget()


def test_the_page_gives_every_file_of_the_project() -> None:
    assert set(tutorial_files()) == {
        "my_robots/dog/dog.xml",
        "my_robots/dog/scene.xml",
        "my_robots/dog/__init__.py",
        "my_robots/dog_walk.py",
        "tests/test_dog.py",
    }


def test_the_robots_own_test_passes(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(project / "tests"))
    module: ModuleType = importlib.import_module("test_dog")
    tests = [getattr(module, name) for name in dir(module) if name.startswith("test_")]
    assert len(tests) == 2
    for test in tests:
        test()


def test_the_dog_walks_through_torchrls_checks_and_train(project: Path, tmp_path: Path) -> None:
    (register,) = snippets("python")
    exec(register, {})  # register_task and check_env_specs, as the page has them
    assert "dog_walk" in unilab.list_tasks()
    env = unilab.make_env("dog_walk", sim="mujoco", num_envs=2)
    check_env_specs(env)
    assert env.observation_spec["policy"].shape == (2, 3 + 3 + 8 + 8 + 8 + 3 + 8)
    overrides = [
        "task=dog_walk",
        "sim=mujoco",
        "algo.num_envs=4",
        "algo.batch_size=32",
        "algo.replay_buffer_n=16",
        "algo.learning_starts=2",
        "algo.max_iterations=3",
        "algo.actor_hidden=[16]",
        "algo.critic_hidden=[16]",
        "training.no_play=true",
        "training.progress=false",
        f"training.log_dir={tmp_path / 'run'}",
    ]
    summary = run(compose_config(overrides))
    assert summary.status == "completed" and summary.completed_iterations == 3
    assert json.loads((tmp_path / "run" / "run_summary.json").read_text())["task"] == "dog_walk"
    assert (tmp_path / "run" / "policy.onnx").is_file()  # ONNX export takes the new robot too
