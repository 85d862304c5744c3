"""Where start-up time goes, from the process start to the first timed iteration.

Start-up is what a user waits through on every run, and its parts move for different reasons (imports,
the model build, Warp's kernel loads, torch.compile, graph capture, the replay pre-fill), so each is
timed on its own. Marks synchronise the device: queued work is charged to the phase that queued it.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from unilab.core import side_process
from unilab.core.cache_dirs import CacheDir
from unilab.core.device import settle


def process_age_s() -> float | None:
    """Seconds since this process started (Linux), i.e. interpreter start-up and imports so far."""
    try:
        with open("/proc/self/stat") as stat:
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as uptime:
            up_s = float(uptime.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, up_s - started_ticks / os.sysconf("SC_CLK_TCK"))


# torch.compile's own timers (``torch._dynamo.utils.compilation_time_metrics``, seconds per call), by the name each
# figure takes here: the whole compile of each graph, Dynamo's bytecode tracing, the backend (AOTAutograd and
# Inductor), and within that Inductor's compile of the graphs its cache did not hold: the lowering to its IR, the
# scheduler's fusion, the kernels' code, and the wait for the kernels it builds in its worker processes. What the
# backend spends outside Inductor's compile is AOTAutograd's tracing and the caches' lookups: a cold start's long
# backend is told apart by these, and only the kernel builds run on more than one core.
_COMPILE_TIMERS = {
    "total": "_compile.compile_inner",
    "tracing": "bytecode_tracing",
    "backend": "OutputGraph.call_user_compiler",
    "inductor": "fx_codegen_and_compile",
    "lowering": "GraphLowering.run",
    "scheduling": "Scheduler.__init__",
    "codegen": "Scheduler.codegen",
    "kernel_builds": "async_compile.wait",
}


def compile_totals() -> dict[str, float]:
    """torch.compile's totals in this process so far: graphs compiled (``graphs``), the seconds of each timer of
    ``_COMPILE_TIMERS`` that this torch keeps, the graphs Inductor found in its cache (``cache_hits``) or
    compiled (``cache_misses``), and the same for AOTAutograd's cache, which also counts the graphs it would not
    cache (``aot_bypasses``): an Inductor hit behind an AOTAutograd miss or bypass still traces the joint graph
    again, so a warm backend phase that stays long shows here. Empty before torch.compile was first imported."""
    utils = sys.modules.get("torch._dynamo.utils")
    if utils is None:
        return {}
    metrics = utils.compilation_time_metrics
    totals: dict[str, float] = {"graphs": len(metrics.get(_COMPILE_TIMERS["total"], ()))}
    totals.update({name: sum(metrics[timer]) for name, timer in _COMPILE_TIMERS.items() if timer in metrics})
    totals["cache_hits"] = utils.counters["inductor"]["fxgraph_cache_hit"]
    totals["cache_misses"] = utils.counters["inductor"]["fxgraph_cache_miss"]
    aot = utils.counters["aot_autograd"]
    totals["aot_hits"] = aot["autograd_cache_hit"]
    totals["aot_misses"] = aot["autograd_cache_miss"]
    totals["aot_bypasses"] = aot["autograd_cache_bypass"]
    return totals


def compiled_frames(since: float, origin: float) -> list[dict[str, Any]]:
    """Each frame torch.compile compiled in this process from ``since`` on (``time.time()`` seconds), in the order
    they began: the name of its code, the seconds of its whole compile (tracing and backend) and when it began, in
    seconds after ``origin``. Totals say how long compiling took; this says which graph took it, and in which phase
    (a warm start's first update still traces its graphs). Read from Dynamo's records of its compiles; [] where this
    torch keeps none, and a record without the fields is left out."""
    utils = sys.modules.get("torch._dynamo.utils")
    records = getattr(utils, "get_compilation_metrics", lambda: [])()
    frames = []
    for record in records:
        began = getattr(record, "start_time", None)
        seconds = getattr(record, "entire_frame_compile_time_s", None)
        if began is None or seconds is None or began < since:
            continue
        name = str(getattr(record, "co_name", "?"))
        frames.append({"name": name, "seconds": round(seconds, 3), "began_s": round(began - origin, 3)})
    return sorted(frames, key=lambda frame: frame["began_s"])


class StartupClock:
    """Seconds per start-up phase, in the order they ran (``phases``)."""

    def __init__(self, imported_after_s: float | None) -> None:
        """``imported_after_s``: the process's age once the command's modules were imported. The time from the
        process start to here splits into ``imports`` (the interpreter and those imports) and ``config`` (the
        rest: parsing and composing the config; in a process that imported the command long before, that too)."""
        # Set once the run's device is known; from then on every mark waits for it.
        self.device: torch.device | None = None
        self.phases: dict[str, float] = {}
        # torch.compile's part of start-up (``take_compile_split``), counted from here on
        self.compile: dict[str, float] = {}
        # The physics backend's kernels built beside the env step's tracing (``SimBackend.kernel_build_seconds``)
        self.kernel_build: dict[str, float] = {}
        # Each frame compiled in start-up (``compiled_frames``), its start counted from where the phases start
        self.graphs: list[dict[str, Any]] = []
        # Each side process the command started (``take_side_processes``), its start counted as the graphs' are
        self.side: dict[str, dict[str, float | None]] = {}
        self._compile_before = compile_totals()
        before = process_age_s()
        if before is not None and imported_after_s is not None:
            self.phases["imports"] = round(min(imported_after_s, before), 3)
            self.phases["config"] = round(max(0.0, before - imported_after_s), 3)
        self._started = time.time()
        self._origin = self._started - sum(self.phases.values())
        self._last = time.perf_counter()

    def mark(self, phase: str, parts: dict[str, float] | None = None) -> None:
        """Close ``phase``: the time since the previous mark, once the device has finished what it queued.
        ``parts`` timed inside it are listed on their own, and ``phase`` keeps the rest."""
        if self.device is not None:
            settle(self.device)
        now = time.perf_counter()
        parts = parts or {}
        self.phases[phase] = round(now - self._last - sum(parts.values()), 3)
        self.phases.update({name: round(seconds, 3) for name, seconds in parts.items()})
        self._last = now

    def take_compile_split(self) -> None:
        """Keep torch.compile's part of start-up, as ``compile_totals`` counts it, since the clock started; nothing
        if no graph was compiled. Called when start-up ends, so that a later recompile is not counted in it.

        A warm cache saves the backend's kernel builds but never the tracing, which every process repeats: this
        split says which of the two a slow start-up spent its time on."""
        before, now = self._compile_before, compile_totals()
        split = {name: round(value - before.get(name, 0), 3) for name, value in now.items()}
        self.compile = split if split.get("graphs") else {}
        self.graphs = compiled_frames(self._started, self._origin)

    def take_side_processes(self) -> None:
        """Keep when each side process began and how long it ran (``side_process.take_lifetimes``): on a cold start the
        run waits for the longest of them, and the phases show only the waits."""
        self.side = side_process.take_lifetimes(self._origin)

    def total(self) -> float:
        return round(sum(self.phases.values()), 3)

    def line(self) -> str:
        """The split so far on one line, as a run prints it once its first iteration is done: what a user waited
        for, phase by phase (``run_summary.json``'s ``startup_sec`` has the same figures)."""
        split = ", ".join(f"{phase} {seconds:.1f}" for phase, seconds in self.phases.items())
        line = f"start-up {self.total():.1f} s: {split}"
        c = self.compile
        if c:
            graphs = f"{c['graphs']:.0f} graph{'s' if c['graphs'] != 1 else ''}"
            timers = ", ".join(f"{name} {c[name]:.1f}" for name in _COMPILE_TIMERS if name in c)
            cached = f"{c['cache_hits']:.0f} from Inductor's cache, {c['aot_hits']:.0f} from AOTAutograd's"
            line += f"; torch.compile: {graphs}, {cached}; seconds {timers}"
        if self.graphs:
            frames = ", ".join(f"{g['name']} {g['seconds']:.1f} s at {g['began_s']:.1f}" for g in self.graphs)
            line += f"; compiled {frames}"
        k = self.kernel_build
        if k:
            line += f"; physics kernels built beside the tracing in {k['build']:.1f} s, waited for {k['waited']:.1f} s"
            if "side_process" in k:
                line += f" (of the build, {k['side_process']:.1f} s for the side process compiling them)"
        if self.side:
            lives = ", ".join(
                f"{name} from {life['began_s']:.1f} s, still running"
                if life["seconds"] is None
                else f"{name} {life['seconds']:.1f} s from {life['began_s']:.1f} s"
                for name, life in self.side.items()
            )
            line += f"; side processes: {lives}"
        return line


def cache_line(dirs: list[CacheDir]) -> str:
    """Where this run's compiled kernels and graphs are kept, for the line a run prints as it starts: the one folder
    that holds them all, or each one's. Warp, once initialised, says itself where it reads (a process that started
    Warp before the caches were placed keeps Warp's default)."""
    warp = sys.modules.get("warp")
    warp_dir = getattr(getattr(warp, "config", None), "kernel_cache_dir", None)
    places = {cache.name: Path(warp_dir).parent if cache.name == "warp" and warp_dir else cache.path for cache in dirs}
    parents = {path.parent for path in places.values()}
    names = ", ".join(places)
    where = f"{parents.pop()} ({names})" if len(parents) == 1 else ", ".join(f"{n} {p}" for n, p in places.items())
    return f"compiled kernels and graphs are kept in {where} (unilab cache: their sizes; unilab cache clear)"
