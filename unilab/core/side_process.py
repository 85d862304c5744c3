"""Side processes a command starts beside its own work (compiles into the caches), joined with a time limit.

Each compiles something the command would otherwise compile itself, so the command needs nothing from it but the
time it saves: it waits, within a limit past which a compiler is taken to hang, and does what is left itself.
Imports neither torch nor Warp.
"""

from __future__ import annotations

import subprocess
import time

from unilab.core.cache_dirs import notice


def join(process: subprocess.Popen, limit_s: float, late: str | None = None) -> float:
    """Seconds waited for ``process`` to end. One still running after ``limit_s`` is killed, and ``late``, where
    given, is said in one line: what the process did not finish, the caller then does itself."""
    began = time.perf_counter()
    try:
        process.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        if late is not None:
            notice(late)
    return time.perf_counter() - began


class Pending:
    """The side process a module starts for the command, joined at most once. ``started`` stays true once one has
    been started (or the module's once-a-process rule has been spent), waited for or not."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.started = False

    def launch(self, command: list[str]) -> None:
        """Start ``command`` with nothing read from it or shown: it works into the caches."""
        quiet = subprocess.DEVNULL
        self.process = subprocess.Popen(command, stdin=quiet, stdout=quiet, stderr=quiet)
        self.started = True

    def join(self, limit_s: float, late: str) -> float | None:
        """``join`` the process once; None where none is pending (never started, or already joined)."""
        if self.process is None:
            return None
        process, self.process = self.process, None
        return join(process, limit_s, late)
