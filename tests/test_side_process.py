"""A side process's life as the start-up split reports it: its own length, not the command's wait for it."""

from __future__ import annotations

import sys
import time

from unilab.core import side_process


def test_a_side_process_joined_after_it_ended_reports_how_long_it_ran() -> None:
    """The command waits for a side process only once its own work is done; by then the process may long have
    ended, and the wait says nothing of how long it ran."""
    origin = time.time()
    process = side_process.launch("nap", [sys.executable, "-c", "import time; time.sleep(0.3)"])
    time.sleep(3.0)  # the command's own work
    assert side_process.join(process, limit_s=10.0) < 1.0
    life = side_process.take_lifetimes(origin)["nap"]
    assert 0.0 <= life["began_s"] < 1.0
    assert 0.3 <= life["seconds"] < 2.9  # not the 3 s to the join


def test_a_side_process_still_running_has_no_length_until_it_ends() -> None:
    origin = time.time()
    process = side_process.launch("stuck", [sys.executable, "-c", "import time; time.sleep(60)"])
    assert side_process.take_lifetimes(origin)["stuck"]["seconds"] is None
    side_process.join(process, limit_s=0.2)  # past its limit: killed
    assert side_process.take_lifetimes(origin)["stuck"]["seconds"] < 10.0  # reported again, now with its length


def test_a_pending_side_process_is_kept_under_its_module_s_name() -> None:
    pending = side_process.Pending("quick")
    pending.launch([sys.executable, "-c", "pass"])
    assert pending.join(10.0, "late") is not None
    assert side_process.take_lifetimes(time.time())["quick"]["seconds"] is not None
    assert "quick" not in side_process.take_lifetimes(time.time())  # reported once: a later run's report is its own
