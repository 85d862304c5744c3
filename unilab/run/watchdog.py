"""Turns a stalled training loop into an error within a bounded time.

A wedged GPU does not raise: the host blocks inside the next graph launch or event wait, and the
process would sit there until someone kills it, with its run summary still saying ``running``. The
loop beats at every iteration; a daemon thread that sees no beat for ``timeout_s`` records what it
can without touching the device (the summary, every thread's stack) and ends the process, since the
blocked main thread can neither be interrupted nor trusted to reach its own cleanup.

A suspended process is not a stalled one: after Ctrl-Z or SIGSTOP and then ``fg``, every thread resumes together
and the clock has jumped. The watchdog itself was not running through that gap, so the time it cannot account for
(far more than its poll interval) is taken off the wait it measures.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from unilab.core.files import write_atomic

STALL_EXIT_CODE = 3
# A poll that returns this much later than asked means this thread did not run: the process was suspended.
SUSPENDED_AFTER_S = 2.0


class StallWatchdog:
    """Ends the process when ``beat`` has not been called for ``timeout_s`` seconds.

    ``on_stall(message)`` runs on the watchdog thread first: it must not wait for the device. The thread
    stacks go to ``stacks_path`` so the stall can be located afterwards.
    """

    def __init__(
        self,
        timeout_s: float,
        stacks_path: Path | None,
        on_stall: Callable[[str], None],
        exit: Callable[[int], None] = os._exit,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout_s = timeout_s
        self.stacks_path = stacks_path
        self.on_stall = on_stall
        self._exit = exit
        self._clock = clock
        self._last: float | None = None  # armed by the first beat: start-up (compiles, captures) is not timed
        self._suspended = 0.0  # seconds the process spent suspended since the last beat
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="unilab-stall-watchdog", daemon=True)

    def beat(self) -> None:
        self._last = self._clock()
        self._suspended = 0.0

    def __enter__(self) -> StallWatchdog:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        poll = min(1.0, self.timeout_s / 4)
        polled = self._clock()
        while not self._stop.wait(poll):
            now = self._clock()
            if now - polled > poll + SUSPENDED_AFTER_S:
                self._suspended += now - polled - poll
            polled = now
            last = self._last
            if last is None or now - last - self._suspended < self.timeout_s:
                continue
            message = f"no training iteration completed in {self.timeout_s:g} s: the GPU or another rank is stuck"
            if self.stacks_path is not None:
                write_stacks(self.stacks_path)
                message += f" (thread stacks: {self.stacks_path})"
            try:
                self.on_stall(message)
            finally:
                print(f"train: error: {message}", file=sys.stderr, flush=True)
                self._exit(STALL_EXIT_CODE)
            return


def write_stacks(path: Path) -> None:
    """Every Python thread's stack, the main thread's first: that is where the loop is blocked. Written beside the
    target and renamed over it, so a link planted under its name is replaced, never followed."""
    frames = sys._current_frames()
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    main = threading.main_thread().ident
    text = "".join(
        f"Thread {names.get(ident, ident)} (most recent call last):\n"
        + "".join(traceback.format_stack(frames[ident]))
        + "\n"
        for ident in sorted(frames, key=lambda ident: ident != main)
    )
    write_atomic(path, lambda handle: handle.write(text.encode()))
