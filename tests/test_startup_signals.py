"""A stop signal at any moment of a run, start-up included, leaves a complete summary or none, never a temporary file,
and no traceback: before the loop the command ends in one line with nothing trained; from the first file the run
writes on, the signal is a stop like any other."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_train import tiny

from unilab.apps.train import main
from unilab.run import run_dir as run_dir_module
from unilab.run import training_run
from unilab.run.run_dir import SUMMARY_FILENAME

REPO = Path(__file__).resolve().parents[1]
QUIET = ["training.export_onnx=false", "algo.max_iterations=20"]


def _leftovers(run_dir: Path) -> list[str]:
    return [path.name for path in run_dir.iterdir() if ".tmp" in path.name] if run_dir.exists() else []


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_while_the_envs_are_built_ends_in_one_line_with_nothing_trained(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, name: str
) -> None:
    build = training_run.build_env

    def signalled(*args, **kwargs):
        os.kill(os.getpid(), getattr(signal, name))
        return build(*args, **kwargs)

    monkeypatch.setattr(training_run, "build_env", signalled)
    before = signal.getsignal(getattr(signal, name))
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", *QUIET))
    assert exit_info.value.code == 128 + getattr(signal, name)
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == f"train: stopped by {name} during start-up; nothing was trained"
    assert "Traceback" not in err
    assert not (tmp_path / "run").exists()  # the directory it made is given back
    assert signal.getsignal(getattr(signal, name)) == before  # main(argv) leaves the handlers as it found them


def test_sigterm_while_the_first_summary_is_written_leaves_a_complete_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write, writes = run_dir_module.write_atomic, []

    def signalled(path: Path, fill) -> None:
        def fill_after_signal(handle) -> None:
            if path.name == SUMMARY_FILENAME and not writes:
                writes.append(path)
                os.kill(os.getpid(), signal.SIGTERM)  # the temporary file is open, half written
            fill(handle)

        write(path, fill_after_signal)

    monkeypatch.setattr(run_dir_module, "write_atomic", signalled)
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", *QUIET))
    assert exit_info.value.code == 128 + signal.SIGTERM and writes
    run_dir = tmp_path / "run"
    data = json.loads((run_dir / SUMMARY_FILENAME).read_text())
    assert data["status"] == "interrupted" and data["stopped_by"] == "SIGTERM"
    assert data["completed_iterations"] == 0 and data["last_checkpoint"] is None
    assert not _leftovers(run_dir)


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM"])
def test_a_train_process_signalled_while_it_starts_up_ends_without_a_traceback(tmp_path: Path, name: str) -> None:
    """A real process, signalled once it says it is building its envs (imports done, the run directory taken)."""
    code = "from unilab.apps.cli import train; train()"  # as the console command: arguments from sys.argv
    child = subprocess.Popen(
        [sys.executable, "-c", code, *tiny(tmp_path, "mujoco", *QUIET)],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines = []
        for line in child.stderr:
            lines.append(line)
            if "building" in line:
                os.kill(child.pid, getattr(signal, name))
                break
        err = "".join(lines) + child.communicate(timeout=120)[1]
    finally:
        if child.poll() is None:
            child.kill()
    assert "Traceback" not in err, err
    run_dir = tmp_path / "run"
    assert not _leftovers(run_dir)
    assert child.returncode == 128 + getattr(signal, name), err
    assert f"train: stopped by {name} during start-up; nothing was trained" in err
    assert not (run_dir / SUMMARY_FILENAME).exists()
