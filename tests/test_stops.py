"""Which signals end a run and which leave it alone: a scheduler's warning ends it with its work saved, a hangup that
``nohup`` ignored stays ignored, and a suspended process is not a stalled one."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
import torch
from test_run_safety import _signal_in_update
from test_train import tiny

from unilab.apps.compose import compose_config
from unilab.apps.train import main, run
from unilab.run import native_handlers
from unilab.run.signals import StopSignals
from unilab.run.watchdog import STALL_EXIT_CODE, StallWatchdog

QUIET = ["training.export_onnx=false"]


@pytest.mark.parametrize("name", ["SIGUSR1", "SIGUSR2"])
def test_a_schedulers_warning_signal_ends_the_run_with_its_work_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    """SLURM's ``--signal`` sends SIGUSR1 ahead of a job's end; its default action kills with nothing saved."""
    _signal_in_update(monkeypatch, 3, getattr(signal, name))
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", "algo.max_iterations=50", "algo.save_interval=1000", *QUIET))
    assert exit_info.value.code == 128 + getattr(signal, name)
    data = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert data["status"] == "interrupted" and data["stopped_by"] == name
    assert torch.load(data["last_checkpoint"], weights_only=True)["iteration"] == data["completed_iterations"] == 3


def test_a_hangup_ignored_at_start_stays_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``nohup train ... &``: the logout's SIGHUP must not end the run that nohup protected."""
    previous = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        _signal_in_update(monkeypatch, 3, signal.SIGHUP)
        summary = run(compose_config(tiny(tmp_path, "mujoco", "algo.max_iterations=6", *QUIET)))
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN  # and the run left it so
    finally:
        signal.signal(signal.SIGHUP, previous)
    assert summary.status == "completed" and summary.stopped_by is None and summary.completed_iterations == 6


def _wait_until(predicate, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def test_a_suspended_process_is_not_a_stalled_one() -> None:
    """Ctrl-Z then ``fg``: every thread was stopped, so the clock jumps for the watchdog too. The jump is simulated
    by a clock that leaps 100 s ahead; real time since the beat stays far under the timeout."""
    leap = [0.0]
    exits: list[int] = []
    fired = threading.Event()

    def record_exit(code: int) -> None:
        exits.append(code)
        fired.set()

    def clock() -> float:
        return time.monotonic() + leap[0]

    with StallWatchdog(5.0, None, lambda message: None, exit=record_exit, clock=clock) as watchdog:
        watchdog.beat()
        leap[0] = 100.0  # the process was suspended for 100 s
        assert _wait_until(lambda: watchdog._suspended > 90.0, 10.0)  # its next poll saw the gap
        assert not fired.is_set()
        assert fired.wait(30.0)  # starved for real: still a stall
    assert exits == [STALL_EXIT_CODE]


@pytest.mark.parametrize("timeout", ["1e-9", "4.9"])
def test_a_stall_timeout_shorter_than_a_checkpoint_write_is_refused(tmp_path: Path, timeout: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", f"training.stall_timeout_s={timeout}"))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1
    assert "training.stall_timeout_s must be in [5, 86400] (a checkpoint write on a slow disk" in err


def test_a_handler_installed_natively_behind_pythons_back_is_found_and_put_back() -> None:
    """A native library's ``signal()`` leaves Python's table as it was; reading the kernel's entry finds it."""
    libc = ctypes.CDLL(None)
    with StopSignals() as signals:
        libc.signal(signal.SIGUSR2, ctypes.c_void_p(native_handlers.IGNORE))
        assert signals.reclaim() == []  # Python's table still names the stop handler
        assert signals.reclaim(native=True) == ["SIGUSR2's handler had been replaced by ignoring the signal; put back"]
        os.kill(os.getpid(), signal.SIGUSR2)
        assert signals.received == "SIGUSR2"
        assert signals.reclaim(native=True) == []
