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
