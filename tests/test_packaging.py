"""What a wheel of this project holds: the files the commands read at run time must be package data, or `pip
install` gives a `train` that cannot find its own configs."""

from __future__ import annotations

import tomllib
from pathlib import Path

import unilab
from unilab.apps.compose import CONFIG_DIR

PACKAGE_ROOT = Path(unilab.__file__).resolve().parent
PYPROJECT = PACKAGE_ROOT.parent / "pyproject.toml"


def _shipped(path: Path) -> bool:
    """Whether ``[tool.setuptools.package-data]`` puts ``path`` in the wheel (a package's globs, relative to it)."""
    globs = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]["package-data"]
    for package, patterns in globs.items():
        base = PACKAGE_ROOT.parent.joinpath(*package.split("."))
        if base in path.parents and any(path.relative_to(base).match(pattern) for pattern in patterns):
            return True
    return False


def test_every_config_file_ships_inside_the_package() -> None:
    assert PACKAGE_ROOT in CONFIG_DIR.parents
    files = sorted(CONFIG_DIR.rglob("*.yaml"))
    assert {"train.yaml", "sim/mujoco.yaml", "experiment/motion_library.yaml"} <= {
        f.relative_to(CONFIG_DIR).as_posix() for f in files
    }
    assert [f for f in files if not _shipped(f)] == []


def test_every_algorithm_s_backend_profile_ships() -> None:
    files = sorted((PACKAGE_ROOT / "train").rglob("*.yaml"))
    assert {"sac/mujoco.yaml", "flashsac/mujoco.yaml", "ppo/mujoco.yaml"} <= {
        f.relative_to(PACKAGE_ROOT / "train").as_posix() for f in files
    }
    assert [f for f in files if not _shipped(f)] == []


def test_every_task_tuning_file_ships() -> None:
    files = sorted((PACKAGE_ROOT / "tasks").rglob("*.yaml"))
    assert files and [f for f in files if not _shipped(f)] == []


def test_every_robot_model_file_ships() -> None:
    """Each robot package's MJCF, licence, notice and provenance: a task compiles its scene from them at run time."""
    files = sorted(f for f in (PACKAGE_ROOT / "robots").rglob("*") if f.is_file() and f.suffix != ".py")
    assert {"g1/g1.xml", "go1/go1.xml", "go1/scene_flat.xml", "go1/NOTICE", "go1/LICENSE"} <= {
        f.relative_to(PACKAGE_ROOT / "robots").as_posix() for f in files
    }
    assert [f for f in files if not _shipped(f) and "__pycache__" not in f.parts] == []
