"""A run writes its own files and nothing else: a link or a hard link planted in its directory under a name it
writes is refused or replaced, and the file it points at is never touched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_train import tiny

from unilab.apps.train import main
from unilab.run.watchdog import write_stacks

PRECIOUS = "precious contents\n"


@pytest.fixture
def precious(tmp_path: Path) -> Path:
    """A file outside the run directory that a planted link points at."""
    path = tmp_path / "precious.txt"
    path.write_text(PRECIOUS)
    return path


def _refused(tmp_path: Path, capsys: pytest.CaptureFixture, *extra: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", *extra))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
    return err


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_lock_file_planted_as_a_link_is_refused_and_its_target_untouched(
    tmp_path: Path, precious: Path, capsys: pytest.CaptureFixture, kind: str
) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (os.symlink if kind == "symlink" else os.link)(precious, run_dir / ".lock")
    err = _refused(tmp_path, capsys)
    expected = "is a symbolic link" if kind == "symlink" else "is a hard link to another file"
    assert f"{run_dir / '.lock'} {expected}" in err
    assert precious.read_text() == PRECIOUS


def test_a_csv_scalar_planted_as_a_link_is_refused_and_its_target_untouched(
    tmp_path: Path, precious: Path, capsys: pytest.CaptureFixture
) -> None:
    """TorchRL's CSV logger appends to ``scalars/<name>.csv`` through whatever is there."""
    folder = tmp_path / "run" / "scalars" / "loss"
    folder.mkdir(parents=True)
    (folder / "loss_critic.csv").symlink_to(precious)
    err = _refused(tmp_path, capsys, "training.logger=csv")
    assert "holds symbolic links where a run writes" in err and "loss_critic.csv" in err
    assert precious.read_text() == PRECIOUS


def test_stall_stacks_replace_a_planted_link_instead_of_following_it(tmp_path: Path, precious: Path) -> None:
    stacks = tmp_path / "stall_stacks.txt"
    stacks.symlink_to(precious)
    write_stacks(stacks)
    assert not stacks.is_symlink() and stacks.read_text().startswith("Thread MainThread")
    assert precious.read_text() == PRECIOUS
