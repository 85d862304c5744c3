"""Side processes a command starts beside its own work (compiles into the caches), joined with a time limit.

Each compiles something the command would otherwise compile itself, so the command needs nothing from it but the
time it saves: it waits, within a limit past which a compiler is taken to hang, and does what is left itself.
Imports neither torch nor Warp.

A cold start's length is the longest of its side processes as much as its own work, and the command sees only how
long it waited for each. So each side process is watched from a thread of its own, which notes when it ended:
``take_lifetimes`` says when each began and how long it ran, and the run's start-up split reports it.
"""

from __future__ import annotations

import subprocess
import threading
import time

from unilab.core.cache_dirs import notice


class _Life:
    """A side process's start and end (``time.time()`` seconds), the end noted by a thread that only waits for it."""

    def __init__(self, process: subprocess.Popen) -> None:
        self.process = process
        self.began = time.time()
        self.ended: float | None = None
        self._watcher = threading.Thread(target=self._watch, name="unilab-side-process", daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        self.process.wait()
        self.ended = time.time()

    def seconds(self) -> float | None:
        """How long it ran; None while it runs. Once the process has been waited for (here or by ``join``), its
        watcher is only noting the time, and is waited for."""
        if self.process.poll() is not None:
            self._watcher.join()
        return None if self.ended is None else self.ended - self.began


# Each side process launched in this process, by name.
_LIVES: dict[str, _Life] = {}


def launch(name: str, command: list[str]) -> subprocess.Popen:
    """Start ``command`` with nothing read from it or shown (it works into the caches), its life kept as ``name``'s.
    ``join`` still waits for it, with its limit."""
    quiet = subprocess.DEVNULL
    process = subprocess.Popen(command, stdin=quiet, stdout=quiet, stderr=quiet)
    _LIVES[name] = _Life(process)
    return process


def take_lifetimes(origin: float) -> dict[str, dict[str, float | None]]:
    """Each side process launched in this process since the last call: when it began (``began_s``, seconds after
    ``origin``, a ``time.time()`` reading) and how long it ran (``seconds``; None for one still running, which the
    next call reports again). A second run in one process so reports only its own."""
    lives = {}
    for name, life in list(_LIVES.items()):
        seconds = life.seconds()
        lives[name] = {
            "began_s": round(life.began - origin, 3),
            "seconds": None if seconds is None else round(seconds, 3),
        }
        if seconds is not None:
            del _LIVES[name]
    return lives


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
    """The side process a module starts for the command, joined at most once, its life kept as ``name``'s.
    ``started`` stays true once one has been started (or the module's once-a-process rule has been spent), waited
    for or not."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.process: subprocess.Popen | None = None
        self.started = False

    def launch(self, command: list[str]) -> None:
        """Start ``command`` (``launch``)."""
        self.process = launch(self.name, command)
        self.started = True

    def join(self, limit_s: float, late: str) -> float | None:
        """``join`` the process once; None where none is pending (never started, or already joined)."""
        if self.process is None:
            return None
        process, self.process = self.process, None
        return join(process, limit_s, late)
