"""A stalled training loop ends in an error within a bounded time, with its summary and thread stacks written."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.test_train import tiny
from unilab.run.watchdog import STALL_EXIT_CODE, StallWatchdog

REPO = Path(__file__).resolve().parents[1]


def test_watchdog_fires_only_once_armed_and_starved(tmp_path: Path) -> None:
    exits: list[int] = []
    messages: list[str] = []
    fired = threading.Event()

    def record_exit(code: int) -> None:
        exits.append(code)
        fired.set()

    stacks = tmp_path / "stacks.txt"
    with StallWatchdog(1.0, stacks, messages.append, exit=record_exit) as watchdog:
        time.sleep(1.5)  # never beaten: start-up is not timed
        assert not fired.is_set()
        for _ in range(20):  # beaten in time (a loaded machine may oversleep, so with a wide margin)
            watchdog.beat()
            time.sleep(0.1)
        assert not fired.is_set()
        assert fired.wait(10.0)  # starved
    assert exits == [STALL_EXIT_CODE]
    assert len(messages) == 1 and "no training iteration completed in 1 s" in messages[0]
    dump = stacks.read_text()
    assert str(stacks) in messages[0] and dump.startswith("Thread MainThread") and "fired.wait" in dump


# The 12th update blocks forever, as an update replay on a wedged GPU would.
STALLING_RUN = """
import sys, threading
from unilab.train.off_policy import OffPolicyTrainer
from unilab.apps.train import main
update = OffPolicyTrainer.update
def stalling_update(self):
    if self.iteration == 11:
        threading.Event().wait()
    return update(self)
OffPolicyTrainer.update = stalling_update
main(sys.argv[1:])
"""


def test_a_stalled_run_ends_with_an_error_and_keeps_what_it_saved(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    overrides = tiny(tmp_path, "mujoco", "algo.max_iterations=50", "training.stall_timeout_s=5")
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", STALLING_RUN, *overrides], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == STALL_EXIT_CODE, done.stderr[-2000:]
    assert time.monotonic() - started < 100
    errors = [line for line in done.stderr.splitlines() if line.startswith("train: error:")]
    assert len(errors) == 1 and "no training iteration completed in 5 s" in errors[0]
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert summary["status"] == "failed" and "no training iteration completed" in summary["error"]
    assert summary["completed_iterations"] == 11
    assert (run_dir / "model_10.pt").exists()
    assert "stalling_update" in (run_dir / "stall_stacks.txt").read_text()


# The 4th update dereferences a null pointer, as a crash inside a native library would.
CRASHING_RUN = """
import ctypes, sys
from unilab.train.off_policy import OffPolicyTrainer
from unilab.apps.train import main
update = OffPolicyTrainer.update
def crashing_update(self):
    if self.iteration == 3:
        ctypes.string_at(0)
    return update(self)
OffPolicyTrainer.update = crashing_update
main()  # as the console command runs it (reads sys.argv)
"""


def test_a_crash_in_native_code_names_the_call_and_keeps_what_was_saved(tmp_path: Path) -> None:
    overrides = tiny(tmp_path, "mujoco", "algo.max_iterations=50", "algo.save_interval=2")
    done = subprocess.run(
        [sys.executable, "-c", CRASHING_RUN, *overrides], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode < 0 or done.returncode > 128  # died of the signal
    assert "Fatal Python error: Segmentation fault" in done.stderr and "crashing_update" in done.stderr
    assert (tmp_path / "run" / "model_2.pt").exists()
