"""``unilab bench train``: the canonical ``train`` runs, each in a process of its own as a user starts it, repeated
and interleaved, and their tail rates and start-ups summarised."""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

from unilab.apps.args import InputError
from unilab.apps.workloads import CANONICAL_OVERRIDES, CANONICAL_WORKLOADS
from unilab.core.cache_dirs import CACHES, ROOT_VARIABLE, size_bytes


def cold_environment(root: Path) -> dict[str, str]:
    """This process's environment for a run whose every compiled artefact goes under the empty ``root``: the cache
    variables a user set are dropped with the rest, so nothing compiled before is found."""
    placed = {variable for _, variable in CACHES.values()}
    return {**{k: v for k, v in os.environ.items() if k not in placed}, ROOT_VARIABLE: str(root)}


class PlannedRun(NamedTuple):
    """One run of a bench: its repeat, workload and variant (None without), its run folder's name, and where its
    caches are: ``start`` None for the caches as they are, "cold" for an empty root of its own, "warm" for the root
    the workload's last cold run filled."""

    repeat: int
    workload: str
    variant: str | None
    folder: str
    start: str | None


def held_runs(
    workloads: list[str], repeats: int, variants: dict[str, list[str]] | None, log_root: Path, warm: int = 0
) -> list[str]:
    """The folders of this bench's runs that ``log_root`` already holds."""
    planned = planned_runs(workloads, repeats, variants, cold=warm > 0, warm=warm)
    return [run.folder for run in planned if (log_root / run.folder).exists()]


def planned_runs(
    workloads: list[str],
    repeats: int,
    variants: dict[str, list[str]] | None,
    cold: bool = False,
    warm: int = 0,
) -> list[PlannedRun]:
    """Each run in the order they start: every repeat runs each workload once per variant, so a drifting machine
    affects all alike; then, after cold runs, ``warm`` repeats of the same in the roots they filled."""

    def rounds(count: int, start: str | None, suffix: str) -> list[PlannedRun]:
        return [
            PlannedRun(
                repeat, name, variant, f"{name}{'' if variant is None else '_' + variant}{suffix}_{repeat}", start
            )
            for repeat in range(count)
            for name in workloads
            for variant in (variants or {None: []})
        ]

    return rounds(repeats, "cold" if cold else None, "") + rounds(warm, "warm", "_warm")


def bench_train(
    workloads: list[str],
    repeats: int,
    sim: str,
    overrides: list[str],
    log_root: Path,
    cold: bool = False,
    variants: dict[str, list[str]] | None = None,
    warm: int = 0,
) -> list[dict]:
    """Each repeat runs every workload once (interleaved, so a drifting machine affects all alike), each in its
    own process as a user would start it; ``overrides`` come after the canonical ones and win. ``variants`` (a
    name and its overrides, applied after ``overrides``) run each workload once per variant, interleaved too, so
    two settings are compared on the same machine in the same state. ``cold``: each run with a cache root of its
    own, empty (Warp's kernels and the driver's code for them, Inductor's and Triton's, and the bytecode where it
    goes there); the operating system's file cache stays warm. ``warm`` (with ``cold``): then as many repeats
    again, each workload (and variant) in the root its last cold run filled, as a user's later runs start. The
    roots are removed once their runs are done."""
    if warm and not cold:
        raise InputError("--warm runs start from the caches that --cold runs filled: give --cold too")
    rows = []
    named: dict[str | None, list[str]] = dict(variants or {None: []})  # None: the run without a variant
    taken = held_runs(workloads, repeats, variants, log_root, warm)
    if taken:  # a row must come from its own run: an earlier run's summary there would stand in for a failed one
        raise InputError(f"--log-root {log_root} already holds {', '.join(taken)}; give it an empty folder")
    filled: dict[tuple[str, str | None], Path] = {}  # each workload's (and variant's) last cold root, kept for warm
    try:
        for run in planned_runs(workloads, repeats, variants, cold, warm):
            root = cache_root(run, filled, keep=warm > 0)
            rows.append(bench_run(run, root, [*overrides, *named[run.variant]], sim, log_root))
            if run.start == "cold" and not warm:
                shutil.rmtree(root, ignore_errors=True)
    finally:
        for root in filled.values():
            shutil.rmtree(root, ignore_errors=True)
    return rows


def cache_root(run: PlannedRun, filled: dict[tuple[str, str | None], Path], keep: bool) -> Path | None:
    """Where ``run``'s caches go: None for the caches as they are; a new empty root for a cold run (kept in
    ``filled`` where ``keep``, the one it replaces removed); the root its workload's cold runs filled for a warm one."""
    if run.start is None:
        return None
    which = (run.workload, run.variant)
    if run.start == "warm":
        return filled[which]
    root = Path(tempfile.mkdtemp(prefix=f"unilab-cold-{run.workload}-"))
    if keep:
        earlier = filled.pop(which, None)
        if earlier is not None:
            shutil.rmtree(earlier, ignore_errors=True)
        filled[which] = root
    return root


def bench_run(run: PlannedRun, root: Path | None, overrides: list[str], sim: str, log_root: Path) -> dict:
    """One run through the ``train`` command, in a process of its own (caches under ``root`` where given), and
    its row, printed as soon as it ends."""
    run_dir = log_root / run.folder
    command = [
        sys.executable,
        "-c",
        "from unilab.apps.cli import train; train()",
        *CANONICAL_WORKLOADS[run.workload],
        "--sim",
        sim,
        *CANONICAL_OVERRIDES,
        "training.progress=false",
        f"training.log_dir={run_dir}",
        *overrides,
    ]
    proc = subprocess.run(command, capture_output=True, text=True, env=None if root is None else cold_environment(root))
    # What the caches under the root hold after the run: for a cold run, what a first run of it compiles.
    started = {} if root is None else {"cold": run.start == "cold", "cache_bytes": size_bytes(root)}
    summary_path = run_dir / "run_summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    row = {
        "bench": "train",
        "workload": run.workload,
        **({} if run.variant is None else {"variant": run.variant}),
        "repeat": run.repeat,
        "returncode": proc.returncode,
        "status": summary.get("status"),
        "tail_env_steps_per_sec": summary.get("tail_env_steps_per_sec"),
        "tail_seconds_per_iteration": summary.get("tail_seconds_per_iteration"),
        # The last iteration alone: its updates run with no env step beside them (an upper bound).
        "final_env_steps_per_sec": summary.get("final_env_steps_per_sec"),
        "training_wall_time_sec": summary.get("training_wall_time_sec"),
        "startup_sec": summary.get("startup_sec"),
        "startup_total_sec": summary.get("startup_total_sec"),
        "startup_compile": summary.get("startup_compile"),
        "startup_graphs": summary.get("startup_graphs"),
        "startup_kernel_build": summary.get("startup_kernel_build"),
        "startup_side": summary.get("startup_side"),
        "run_dir": str(run_dir),
        **started,
    }
    if proc.returncode != 0:
        row["stderr_tail"] = proc.stderr[-2000:]
    print(json.dumps(row), flush=True)
    return row


def summarize_train(rows: list[dict]) -> list[dict]:
    """Per workload (and variant), and apart for cold and warm runs where a bench had both: every run's tail rate
    and start-up, and their medians; a failed run counts as failed, not as zero. With ``--cold`` every start-up is
    a first run's; without it only a workload's first run on a machine compiles, so a warm median is a later
    call's."""
    out = []
    for name, variant, cold in dict.fromkeys((row["workload"], row.get("variant"), row.get("cold")) for row in rows):
        runs = [row for row in rows if (row["workload"], row.get("variant"), row.get("cold")) == (name, variant, cold)]
        done = [row for row in runs if row["status"] == "completed"]
        rates = [row["tail_env_steps_per_sec"] for row in done]
        startups = [row["startup_total_sec"] for row in done if row.get("startup_total_sec") is not None]
        out.append(
            {
                "bench": "train_summary",
                "workload": name,
                **({} if variant is None else {"variant": variant}),
                **({} if cold is None else {"cold": cold}),
                "runs": len(runs),
                "failed": len(runs) - len(rates),
                "tail_env_steps_per_sec": [round(rate) for rate in rates],
                "median": round(statistics.median(rates)) if rates else None,
                "startup_total_sec": [round(seconds, 1) for seconds in startups],
                "startup_median_sec": round(statistics.median(startups), 1) if startups else None,
            }
        )
    return out


# Default (--num-envs, --steps) per bench: on a GPU, training's sizes; on a CPU those take many minutes per
# measurement (C MuJoCo steps a few thousand G1 control steps a second on a small machine), so there the defaults
# are sizes that finish in seconds and still show how the rate scales.
