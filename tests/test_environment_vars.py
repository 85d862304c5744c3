"""The environment variables the commands depend on are checked first: a bad value is one line naming it, where it
used to be a traceback from inside mujoco or Warp."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _run(command: list[str], **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *command], cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("command", "prog"),
    [
        (["scripts/train.py", "--cfg"], "train"),
        (["-c", "from unilab.apps.cli import main; main(['list'])"], "unilab list"),
    ],
)
def test_an_unknown_gl_backend_is_one_line(command: list[str], prog: str) -> None:
    done = _run(command, MUJOCO_GL="bogus")
    assert done.returncode == 2 and done.stderr.splitlines() == [
        f"{prog}: error: MUJOCO_GL='bogus' is not a backend MuJoCo knows: set egl, osmesa or glfw, or unset it"
    ]


def test_an_unusable_warp_cache_is_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    done = _run(["scripts/eval.py", "--help"], WARP_CACHE_PATH=str(blocker / "cache"))
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1
    assert done.stderr.startswith(f"unilab eval: error: WARP_CACHE_PATH {blocker / 'cache'}: cannot create")


def test_gl_turned_off_is_accepted() -> None:
    done = _run(["scripts/train.py", "--cfg", "sim=mujoco"], MUJOCO_GL="off")
    assert done.returncode == 0 and "name: sac" in done.stdout
