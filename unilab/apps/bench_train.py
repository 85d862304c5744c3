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

from unilab.apps.args import InputError
from unilab.apps.workloads import CANONICAL_OVERRIDES, CANONICAL_WORKLOADS
from unilab.core.cache_dirs import CACHES, ROOT_VARIABLE, size_bytes


def cold_environment(root: Path) -> dict[str, str]:
    """This process's environment for a run whose every compiled artefact goes under the empty ``root``: the cache
    variables a user set are dropped with the rest, so nothing compiled before is found."""
    placed = {variable for _, variable in CACHES.values()}
    return {**{k: v for k, v in os.environ.items() if k not in placed}, ROOT_VARIABLE: str(root)}


def held_runs(workloads: list[str], repeats: int, variants: dict[str, list[str]] | None, log_root: Path) -> list[str]:
    """The folders of this bench's runs that ``log_root`` already holds."""
    return [folder for *_, folder in planned_runs(workloads, repeats, variants) if (log_root / folder).exists()]


def planned_runs(
    workloads: list[str], repeats: int, variants: dict[str, list[str]] | None
) -> list[tuple[int, str, str | None, str]]:
    """Each run as (repeat, workload, variant or None, folder), in the order they start: every repeat runs each
    workload once per variant, so a drifting machine affects all alike."""
    return [
        (repeat, name, variant, f"{name}_{repeat}" if variant is None else f"{name}_{variant}_{repeat}")
        for repeat in range(repeats)
        for name in workloads
        for variant in (variants or {None: []})
    ]


def bench_train(
    workloads: list[str],
    repeats: int,
    sim: str,
    overrides: list[str],
    log_root: Path,
    cold: bool = False,
    variants: dict[str, list[str]] | None = None,
) -> list[dict]:
    """Each repeat runs every workload once (interleaved, so a drifting machine affects all alike), each in its
    own process as a user would start it; ``overrides`` come after the canonical ones and win. ``variants`` (a
    name and its overrides, applied after ``overrides``) run each workload once per variant, interleaved too, so
    two settings are compared on the same machine in the same state. ``cold``: each run with a cache root of its
    own, empty (Warp's kernels and the driver's code for them, Inductor's and Triton's, and the bytecode where it
    goes there), removed after the run; the operating system's file cache stays warm."""
    rows = []
    named: dict[str | None, list[str]] = dict(variants or {None: []})  # None: the run without a variant
    taken = held_runs(workloads, repeats, variants, log_root)
    if taken:  # a row must come from its own run: an earlier run's summary there would stand in for a failed one
        raise InputError(f"--log-root {log_root} already holds {', '.join(taken)}; give it an empty folder")
    for repeat, name, variant, folder in planned_runs(workloads, repeats, variants):
        run_dir = log_root / folder
        root = Path(tempfile.mkdtemp(prefix=f"unilab-cold-{name}-")) if cold else None
        command = [
            sys.executable,
            "-c",
            "from unilab.apps.cli import train; train()",
            *CANONICAL_WORKLOADS[name],
            "--sim",
            sim,
            *CANONICAL_OVERRIDES,
            "training.progress=false",
            f"training.log_dir={run_dir}",
            *overrides,
            *named[variant],
        ]
        proc = subprocess.run(
            command, capture_output=True, text=True, env=None if root is None else cold_environment(root)
        )
        cold_fields = {}
        if root is not None:  # what the run compiled into its empty root: the caches a first run of it fills
            cold_fields = {"cold": True, "cache_bytes": size_bytes(root)}
            shutil.rmtree(root, ignore_errors=True)
        summary_path = run_dir / "run_summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
        row = {
            "bench": "train",
            "workload": name,
            **({} if variant is None else {"variant": variant}),
            "repeat": repeat,
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
            **cold_fields,
        }
        if proc.returncode != 0:
            row["stderr_tail"] = proc.stderr[-2000:]
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def summarize_train(rows: list[dict]) -> list[dict]:
    """Per workload (and variant): every run's tail rate and start-up, and their medians; a failed run counts as
    failed, not as zero. With ``--cold`` every start-up is a first run's; without it only a workload's first run on
    a machine compiles, so a warm median is a later call's."""
    out = []
    for name, variant in dict.fromkeys((row["workload"], row.get("variant")) for row in rows):
        runs = [row for row in rows if row["workload"] == name and row.get("variant") == variant]
        done = [row for row in runs if row["status"] == "completed"]
        rates = [row["tail_env_steps_per_sec"] for row in done]
        startups = [row["startup_total_sec"] for row in done if row.get("startup_total_sec") is not None]
        out.append(
            {
                "bench": "train_summary",
                "workload": name,
                **({} if variant is None else {"variant": variant}),
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
