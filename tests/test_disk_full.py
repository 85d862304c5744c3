"""A write that finds no room (a full disk, a file-size limit) is reported as such, in the summary and in one line;
a run whose policy could not be written has not completed; outputs are checked for room before the work."""

from __future__ import annotations

import errno
import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_train import tiny

from unilab.apps.train import main
from unilab.core.files import DiskFullError, write_atomic
from unilab.run import deploy_export

REPO = Path(__file__).resolve().parents[1]


def test_a_write_that_ran_out_of_room_says_so(tmp_path: Path) -> None:
    """torch's serializer replaces the OSError with its own message; the reason is found in the chain."""

    def serializer(handle) -> None:
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534") from None

    target = tmp_path / "model_5.pt"
    with pytest.raises(DiskFullError, match=rf"^cannot write {target}: No space left on device \(.* MiB free there\)$"):
        write_atomic(target, serializer)
    assert list(tmp_path.iterdir()) == []  # no half-written sibling left


def _limited(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


def test_a_run_over_the_file_size_limit_ends_in_one_line_and_its_summary_says_why(tmp_path: Path) -> None:
    """Under ``ulimit -f`` the checkpoint is the first file too large; Python ignores SIGXFSZ, so writes fail."""
    argv = [sys.executable, "scripts/train.py", *tiny(tmp_path, "mujoco", "algo.max_iterations=20")]
    done = subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=300, preexec_fn=lambda: _limited(40_000)
    )
    errors = [line for line in done.stderr.splitlines() if line.startswith("train: error:")]
    assert done.returncode == 1, done.stderr[-2000:]
    assert len(errors) == 1 and "cannot write" in errors[0] and "model_10.pt: File too large" in errors[0]
    assert "Traceback" not in done.stderr
    summary = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert summary["status"] == "failed" and "File too large" in summary["error"]


def test_a_run_whose_policy_could_not_be_written_has_not_completed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    def no_room(*args, **kwargs) -> None:
        raise DiskFullError("cannot write policy.onnx: No space left on device (0.0 MiB free there)")

    monkeypatch.setattr(deploy_export, "export_policy", no_room)
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", "algo.max_iterations=4"))
    assert exit_info.value.code == 1
    assert capsys.readouterr().err.splitlines()[-1] == (
        "train: error: DiskFullError: cannot write policy.onnx: No space left on device (0.0 MiB free there)"
    )
    summary = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert summary["status"] == "failed" and "policy.onnx" in summary["error"]
    assert summary["completed_iterations"] == 4 and (tmp_path / "run" / "model_4.pt").is_file()


def test_a_log_dir_whose_summary_name_is_a_directory_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    (tmp_path / "run" / "run_summary.json").mkdir(parents=True)
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco"))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1
    assert "run_summary.json is not a file" in err


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch):
    """Every disk reports 1000 bytes free."""
    from unilab.apps import args

    real = shutil.disk_usage
    monkeypatch.setattr(args.shutil, "disk_usage", lambda path: real(path)._replace(free=1000))


def test_eval_and_play_refuse_a_full_disk_before_their_work(
    tmp_path: Path, full_disk: None, capsys: pytest.CaptureFixture
) -> None:
    from unilab.apps import eval as eval_cli
    from unilab.apps import play as play_cli

    checkpoint = tmp_path / "model_3.pt"
    checkpoint.write_bytes(b"not read: the disk is refused first")
    for command, argv in (
        (eval_cli, ["--checkpoint", str(checkpoint), "--out", str(tmp_path / "out")]),
        (eval_cli, ["--checkpoint", str(checkpoint)]),
        (play_cli, ["--checkpoint", str(checkpoint), "--out", str(tmp_path / "video.mp4")]),
        (play_cli, ["--checkpoint", str(checkpoint)]),
    ):
        with pytest.raises(SystemExit) as exit_info:
            command.main(argv)
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and len(err.splitlines()) == 1, err
        assert "only 0.0 MiB free in" in err and "this writes about" in err
    assert sorted(path.name for path in tmp_path.rglob("*")) == ["model_3.pt", "out"]
