"""How a training run stops: at the end of an iteration, after a signal, in step on every rank."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

from torchrl_ext.distributed import Vote
from unilab.run.native_handlers import describe, native_handler


class Interrupted(KeyboardInterrupt):
    """A stop signal during start-up, before the loop could take it as a stop: the preparation unwinds (the run
    directory's lock given back, no summary written, so none is left half-done) and the command ends in one line."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class StopSignals:
    """SIGINT, SIGTERM, SIGHUP, SIGUSR1 and SIGUSR2 all ask the loop to stop at the end of the current iteration,
    which is then saved. SIGUSR1 is what a scheduler sends ahead of a job's time limit (SLURM's ``--signal``); its
    default action would kill the process with nothing saved.

    Stopping between iterations means the final checkpoint holds a consistent trainer, never one caught halfway
    through an update. Signals that arrive while stopping are reported and otherwise ignored, so the final
    checkpoint and summary are always finished (every file is also written atomically, so even SIGKILL leaves the
    previous version whole). Handlers can only be set from the main thread; elsewhere Ctrl-C keeps Python's
    KeyboardInterrupt, which the loop also treats as a stop.

    A signal the process was started ignoring stays ignored: ``nohup`` ignores SIGHUP so that a closed terminal or
    an SSH logout leaves the run alone, and a shell ignores SIGINT for a background job.

    A command installs them before its start-up, ``raising``: until ``defer``, a signal raises ``Interrupted``, since
    there is no iteration to finish and nothing to save yet; after the loop (``interrupt``) it does so again, so that
    playback can be cut short. With ``ignore_after`` the signals are left ignored when the block ends, so that one
    arriving while the command exits, its run saved, cannot cut the exit short.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)

    def __init__(self, raising: bool = False, ignore_after: bool = False) -> None:
        self.received: str | None = None
        self.raising = raising
        self._ignore_after = ignore_after
        self._previous: dict[int, Any] = {}
        self._native: dict[int, int | None] = {}  # the kernel's entry for each, as installed

    @property
    def installed(self) -> bool:
        """Whether the handlers are in place (a block of this object is open on the main thread)."""
        return bool(self._previous)

    def defer(self) -> None:
        """Start-up is over: from now on a signal asks the loop to stop after its iteration."""
        self.raising = False

    def interrupt(self) -> None:
        """The run's files are written: from now on a signal raises ``Interrupted`` where the process is."""
        self.raising = True

    def _handle(self, signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
        if self.raising:
            self.received = name
            raise Interrupted(name)
        if self.received is None:
            self.received = name
            message = f"{name}: stopping after this iteration, then saving a checkpoint and the summary"
        else:
            message = f"{name}: already stopping ({self.received}); the final files are being written"
        # os.write, not print: the signal may land inside a buffered write to stderr (the progress bar), and a
        # second buffered write from the handler would raise a reentrancy error into the training loop.
        with contextlib.suppress(OSError):  # no stderr (a daemon) is no reason to break the stop
            os.write(2, f"\n{message}\n".encode())

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for signum in self.SIGNALS:
                if signal.getsignal(signum) is not signal.SIG_IGN:
                    self._previous[signum] = signal.signal(signum, self._handle)
                    self._native[signum] = native_handler(signum)
        return self

    def reclaim(self, native: bool = False) -> list[str]:
        """Put this block's handlers back where something replaced them since it opened, and say what had: a library
        may install its own on first use (torchrl's memory-mapped storage does, for SIGTERM), and one that ends the
        process would leave a stopped run with nothing saved. ``native`` also reads the kernel's entries, which a
        native library can change without Python's table knowing (a few microseconds a signal). Main thread only,
        like the handlers themselves."""
        if not self._previous or threading.current_thread() is not threading.main_thread():
            return []
        notes = []
        for signum in self._previous:
            current, installed = signal.getsignal(signum), self._native.get(signum)
            if current != self._handle:
                replaced = _named(current)
            elif native and installed is not None and (address := native_handler(signum)) not in (None, installed):
                replaced = describe(address)
            else:
                continue
            signal.signal(signum, self._handle)
            self._native[signum] = native_handler(signum)
            notes.append(f"{signal.Signals(signum).name}'s handler had been replaced by {replaced}; put back")
        return notes

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, signal.SIG_IGN if self._ignore_after else handler)
        self._previous.clear()
        self._native.clear()

    def agreed(self, vote: Vote, check_point: bool) -> bool:
        """Whether to stop now. Alone, as soon as a signal arrived. With several ranks, only at check points, once
        all ranks have voted that one of them received a signal (``Vote``: a check point later), so every rank stops
        after the same iteration; a rank takes that signal as its own, so every rank reports it."""
        if vote.world.size > 1 and not check_point:
            return False
        signum = vote.cast(signal.Signals[self.received].value if self.received else 0)
        if signum and self.received is None:
            self.received = signal.Signals(signum).name
        return signum > 0


def _named(handler: object) -> str:
    """A signal handler as a person would look it up: its module and name, or what the constant means."""
    if handler == signal.SIG_DFL:
        return "the default action (ending the process)"
    if handler == signal.SIG_IGN:
        return "ignoring the signal"
    if handler is None:
        return "a handler installed outside Python"
    return f"{getattr(handler, '__module__', '?')}.{getattr(handler, '__qualname__', repr(handler))}"
