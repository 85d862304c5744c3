"""``eval``: roll out a trained policy deterministically and score it with task-level metrics.

Training reward mixes many shaped terms; these metrics answer the questions a user asks of a policy
(does it fall, how well does it follow the command or the reference) in physical units.

Auto-reset and what is recorded: the functional env resets finished envs inside ``step``, so the state it
returns holds post-reset physics for exactly the envs that just ended. Each env is therefore scored over its
first episode only (an ``active`` mask), kinematic errors are read from the post-step state of envs that did
*not* end on that step (their state is the true post-step state), and the ending step itself contributes only
through the transition (termination cause and episode length). The terminal step's kinematics are thus left
out of the error means: a one-step omission, chosen over re-deriving terminal physics the env does not expose.

A task may name several ways to start the episodes (``EvalMetrics.starts``, e.g. tracking's ``from_start`` and
``adaptive_start``): each gets its own rollout and its own section of the summary, the first heads it and is judged
by the thresholds. ``EvalMetrics.groups`` add figures per group of envs (tracking: per clip).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from unilab.apps.args import (
    ArgumentParser,
    InputError,
    check_output,
    check_rollout_args,
    fail,
    resolve_sim_device,
    task_knob_values,
)
from unilab.apps.outputs import OutputClaims
from unilab.apps.policy import REFUSALS, policy_source
from unilab.apps.rollout import check_rollout_memory, metrics_of, task_of
from unilab.apps.suites import (
    SUITE_HELP,
    SUITES,
    TERRAIN_SUITE_HELP,
    check_terrain_suite_envs,
    suite_overrides,
    suites_of,
)
from unilab.apps.terrain_suites import TERRAIN_SUITES
from unilab.apps.verdicts import judged_groups, meets_thresholds, rate_intervals, unsettled, verdict_line
from unilab.envs.config import TaskConfig
from unilab.envs.functional import FunctionalEnv
from unilab.envs.runner import EnvRunner
from unilab.run.progress import announce, bar
from unilab.run.run_dir import write_json_atomic
from unilab.tasks.registry import build_env, list_tasks


def knobs_mark(knobs: Mapping[str, Any] | None) -> str:
    """What a summary's name adds for an eval on task knobs over the policy's own (``--knobs``): eight hex digits of
    the knobs, so that a policy judged on a variant of its task neither writes over nor is refused by its plain
    summary (the knobs themselves are the summary's ``knob_overrides``)."""
    if not knobs:
        return ""
    return "_knobs-" + hashlib.sha256(json.dumps(dict(knobs), sort_keys=True).encode()).hexdigest()[:8]


def suite_mark(suite: str, hardest_row: bool = False) -> str:
    """What a summary's name adds for ``suite``: nothing for nominal; ``_top`` after a terrain suite judged with
    every env on its hardest row (``--hardest-row``), whose figures are not those of the envs spread over the rows."""
    if suite == "nominal":
        return ""
    return f"_{suite}_top" if hardest_row and suite in TERRAIN_SUITES else f"_{suite}"


def summary_name(
    source: Path | str, suite: str = "nominal", knobs: Mapping[str, Any] | None = None, hardest_row: bool = False
) -> str:
    """The summary of one policy file under one suite (and task knobs): named after them, so the evals of a run's
    checkpoints, or of one checkpoint under several suites or variants of its task, never write one file."""
    return f"eval_summary_{Path(source).stem}{suite_mark(suite, hardest_row)}{knobs_mark(knobs)}.json"


def series_name(suite: str = "nominal", knobs: Mapping[str, Any] | None = None, hardest_row: bool = False) -> str:
    return f"eval_series{suite_mark(suite, hardest_row)}{knobs_mark(knobs)}.json"


# -- rollout ----------------------------------------------------------------------------------------------


# Whether every env's first episode has ended is read from the device every this many steps, not every step: each
# read waits for the GPU to finish the step, and between reads the host queues the next steps while the GPU runs.
ENDED_CHECK_STEPS = 50


@torch.no_grad()
def rollout(env: FunctionalEnv, policy, seed: int, capture: bool = False) -> dict[str, Any]:
    """One first episode per env; returns stacked readings, the active mask and each env's ending.

    Runs ``ctx.max_episode_steps`` steps so every env reaches at least its time-out; steps after an env's first
    episode ended are masked out rather than stopped, keeping the batch shape fixed. ``capture`` records the
    step with the policy as one CUDA graph (torch policies on CUDA only), then rewinds to the seeded start.
    """
    n, dev = env.num_envs, env.device
    metrics = metrics_of(env.task.name)
    read = metrics.readings
    runner = EnvRunner(env, lambda obs: policy(obs["policy"]), seed=seed, capture=capture)
    if capture:
        runner.reset(seed)  # the capture's warm-up stepped the envs
    groups = {name: split(env, runner.state) for name, split in metrics.groups.items()}
    # What ended each failed first episode: its failure terms (and a blown-up physics), where the env records them.
    causes = [name for name, term in env.task.terminations.items() if not term.time_out]
    ended_by = {name: torch.zeros(n, dtype=torch.bool, device=dev) for name in (*causes, "diverged")}
    running = torch.ones(n, dtype=torch.bool, device=dev)
    failed = torch.zeros(n, dtype=torch.bool, device=dev)
    length = torch.full((n,), env.ctx.max_episode_steps, dtype=torch.int64, device=dev)
    steps: list[dict[str, torch.Tensor]] = []
    actives: list[torch.Tensor] = []
    nonfinite: list[torch.Tensor] = []
    for step in bar(range(env.ctx.max_episode_steps), "rolling out", "step"):
        transition = runner.step()
        done = transition["next", "done"]
        ending = running & done
        failed |= ending & transition["next", "terminated"]
        if env.task.record_terminations:
            hits = {**transition["termination_terms"].select(*causes).to_dict(), "diverged": transition["diverged"]}
            ended_by = {name: ended | (ending & hits[name]) for name, ended in ended_by.items()}
        length = torch.where(ending, transition["episode_length"], length)
        actives.append(running & ~done)
        steps.append(read(env, runner.state))
        nonfinite.append(runner.state["task", "nonfinite_actions"].clone())
        running = running & ~done
        if (step + 1) % ENDED_CHECK_STEPS == 0 and not running.any():
            break
    # The rows up to the step that ended the last first episode, as if the loop had checked at every step.
    active = torch.stack(actives)
    ended = (~active.any(dim=1)).nonzero()
    rows = int(ended[0, 0]) + 1 if len(ended) else len(actives)
    readings = {k: torch.stack([s[k] for s in steps[:rows]]) for k in steps[0]} if steps else {}
    return {
        # env-step rows whose action was NaN or inf: the env stepped zeros in their place, so the figures alone
        # would score such a policy as if it had acted
        "nonfinite_actions": int(nonfinite[rows - 1]),
        "readings": readings,
        "active": active[:rows],
        "failed": failed,
        "length": length,
        "groups": groups,
        "ended_by": ended_by if env.task.record_terminations else {},
    }


def _score_envs(env: FunctionalEnv, data: dict[str, Any], envs: torch.Tensor) -> dict[str, Any]:
    """The task's figures over the envs ``envs`` (N,) selects; only a count where it selects none."""
    count = int(envs.sum())
    if count == 0:
        return {"num_envs": 0}
    figures = metrics_of(env.task.name).score(
        **{key: value[:, envs] for key, value in data["readings"].items()},
        active=data["active"][:, envs],
        failed=data["failed"][envs],
        episode_length=data["length"][envs],
        dt=env.ctx.dt,
    )
    if data["ended_by"]:  # of the failed episodes, how many each term ended (several may end one)
        figures["ended_by"] = {name: int((ended & envs).sum()) for name, ended in data["ended_by"].items()}
    return {"num_envs": count, **figures}


def score(env: FunctionalEnv, data: dict[str, Any]) -> dict[str, Any]:
    """The task's figures over all envs, then under each of its groupings the figures of every group."""
    every = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    result = {k: v for k, v in _score_envs(env, data, every).items() if k != "num_envs"}
    for name, groups in data["groups"].items():
        result[name] = {group: _score_envs(env, data, envs) for group, envs in groups.items()}
    return result


# -- evaluate ---------------------------------------------------------------------------------------------


def evaluate(
    checkpoint: Path | None,
    onnx: Path | None,
    task: str | None = None,
    sim: str = "mujoco",
    num_envs: int = 16,
    seed: int = 0,
    device: str = "cpu",
    episodes_s: float | None = None,
    out: Path | None = None,
    suite: str = "nominal",
    envs: dict[str, FunctionalEnv] | None = None,
    knobs: dict[str, Any] | None = None,
    hardest_row: bool = False,
) -> dict[str, Any]:
    """Score a policy on ``num_envs`` seeded first episodes and write its summary (``summary_name``).

    Observation noise is off so the score measures the policy, not the noise draw; commands and start frames
    come from the env's own reset, i.e. the training ranges, so a fixed ``seed`` gives a fixed test set. A task
    with named starts (``EvalMetrics.starts``) is scored once per start; the first heads the summary.
    ``suite`` adds a perturbation (``SUITES``) or puts the envs on one terrain type (over its rows, or with
    ``hardest_row`` all on the hardest), ``knobs`` task knobs over the policy's own (``policy_source``; the summary's
    ``knob_overrides``). ``envs`` keeps the envs built for the next call to reuse (``evaluate_series``).
    """
    source = policy_source(checkpoint, onnx, task, knobs)
    ckpt, task, overrides = source.checkpoint, source.task, source.overrides
    if episodes_s is not None:
        overrides["episode_length_s"] = float(episodes_s)
    overrides["record_terminations"] = True
    starts = metrics_of(task).starts
    setups = starts or {"reset": {}}  # a task without named starts: its env's own reset, scored once
    runs = {name: suite_overrides(task, suite, {**overrides, **args}, hardest_row) for name, args in setups.items()}
    check_terrain_suite_envs(task, suite, num_envs)
    configs = {name: task_of(task, run_overrides) for name, run_overrides in runs.items()}
    for config in configs.values():
        check_rollout_memory(config, num_envs, device, record=True)
    figures, policy = {}, None
    # Seconds per phase over every start: an eval series' cost is device time, and this says where it goes.
    spent = dict.fromkeys(("build", "rollout", "score"), 0.0)
    for name, config in configs.items():
        began = time.perf_counter()
        env = _env_for(envs, (task, suite, name, runs[name]), config, sim, num_envs, device)
        if policy is None:
            policy = source.policy(env)
        start = "" if name == "reset" else f", {name}"  # said once the policy fits: a refusal stays one line
        announce("eval", f"{suite}{start}: {num_envs} {task} envs on {sim}, one episode each")
        # A checkpoint's actor replays inside the env step's CUDA graph; onnxruntime runs on the host, step by step.
        capture = ckpt is not None and env.device.type == "cuda" and env.sim.capabilities.graph_capturable
        built = time.perf_counter()
        data = rollout(env, policy, seed, capture=capture)  # its last rows read on the host: the device is done here
        rolled = time.perf_counter()
        scored = score(env, data)
        scored_at = time.perf_counter()
        for phase, seconds in zip(spent, (built - began, rolled - built, scored_at - rolled), strict=True):
            spent[phase] += seconds
        announce(
            "eval",
            f"{suite}{start}: env and policy {built - began:.1f} s, rollout {rolled - built:.1f} s, "
            f"scoring {scored_at - rolled:.1f} s",
        )
        figures[name] = {
            **(hardest_row_first(scored) if suite in TERRAIN_SUITES else scored),
            "steps": int(data["active"].shape[0]),
            "nonfinite_actions": data["nonfinite_actions"],
            "episode_length_s": env.task.episode_length_s,
        }
    primary = next(iter(runs))
    # The primary start's own figures head the summary (thresholds, tables and series read them there); with named
    # starts its breakdowns stay in its section, beside the other starts'.
    head = {k: v for k, v in figures[primary].items() if not (starts and isinstance(v, dict))}
    path = Path(checkpoint if checkpoint is not None else onnx).resolve()
    result = {
        **head,
        **({"primary_start": primary, **figures} if starts else {}),
        "task": task,
        "sim": sim,
        "suite": suite,
        "checkpoint": str(path) if checkpoint is not None else None,
        "weights": source.weights,
        "onnx": str(path) if onnx is not None else None,
        "iteration": ckpt.get("iteration") if ckpt is not None else None,
        "train_wall_time_sec": ckpt.get("train_wall_time_sec") if ckpt is not None else None,
        "num_envs": num_envs,
        "judged_envs": head.get("judged_envs", num_envs),
        "seed": seed,
        "knob_overrides": dict(knobs or {}),
        **({"rows": "hardest" if hardest_row else "all"} if suite in TERRAIN_SUITES else {}),
        "control_dt": env.ctx.dt,
        "eval_sec": {phase: round(seconds, 3) for phase, seconds in spent.items()},
    }
    result["meets_thresholds"] = meets_thresholds(task, result)
    result["intervals"] = rate_intervals(task, result)
    result["unsettled"] = unsettled(task, result)
    target = output_path(path, out, summary_name(path, suite, knobs, hardest_row))
    write_json_atomic(target, result)
    result["summary_path"] = str(target)
    return result


def _env_for(
    envs: dict[str, FunctionalEnv] | None, what: tuple, config: TaskConfig, sim: str, num_envs: int, device: str
) -> FunctionalEnv:
    """The env built for ``what`` (task, suite, start and overrides) on this backend and device, from ``envs`` where
    it is there (the env is pure: only the policy changes), or a new one, kept there."""
    key = repr((*what, sim, num_envs, str(device)))
    if envs is not None and key in envs:
        return envs[key]
    env = build_env(config, sim=sim, num_envs=num_envs, device=device)
    if envs is not None:
        envs[key] = env
    return env


def hardest_row_first(scored: dict[str, Any]) -> dict[str, Any]:
    """A terrain suite's figures: the hardest row's head the summary and are judged (a terrain suite asks whether a
    policy masters the top difficulty); every row's stay under ``terrain_rows``, and all rows together under
    ``all_rows``."""
    rows = scored["terrain_rows"]
    hardest = rows[max(rows, key=lambda row: int(row.removeprefix("row_")))]
    overall = {k: v for k, v in scored.items() if k != "terrain_rows"}
    head = {k: v for k, v in hardest.items() if k != "num_envs"}
    return {**head, "judged_envs": hardest["num_envs"], "terrain_rows": rows, "all_rows": overall}


def output_path(source: Path | str, out: Path | None, name: str) -> Path:
    """Where eval writes ``name`` for the policy file ``source``: into ``out``, or beside the policy."""
    return (Path(out) if out is not None else Path(source).resolve().parent) / name


def evaluate_series(checkpoints: list[Path], out: Path | None = None, **kwargs: Any) -> dict[str, Any]:
    """Evaluate checkpoints of one run in iteration order; the first that meets the thresholds gives the run's
    time to threshold (``train_wall_time_sec`` is saved in every checkpoint). Writes ``eval_series.json``
    (``eval_series_<suite>.json`` under a suite other than nominal)."""
    suite, knobs, hardest_row = kwargs.get("suite", "nominal"), kwargs.get("knobs"), kwargs.get("hardest_row", False)
    targets: dict[Path, Path] = {}
    for path in checkpoints:  # one summary per checkpoint: never let a later one overwrite an earlier one
        target = output_path(path, out, summary_name(path, suite, knobs, hardest_row)).resolve()
        if target in targets:
            raise InputError(f"{targets[target]} and {path} would both write {target}: evaluate them separately")
        targets[target] = path
    envs: dict[str, FunctionalEnv] = {}  # one env per suite and start, for every checkpoint
    results = [evaluate(path, None, out=out, envs=envs, **kwargs) for path in checkpoints]
    results.sort(key=lambda result: result["iteration"])  # each checkpoint is loaded once, by ``evaluate``
    first = next((r for r in results if r["meets_thresholds"]), None)
    series = {
        "thresholds": dict(metrics_of(results[0]["task"]).thresholds),
        "results": results,
        "first_meeting_thresholds": None
        if first is None
        else {k: first[k] for k in ("checkpoint", "iteration", "train_wall_time_sec", "unsettled")},
    }
    target = output_path(checkpoints[0], out, series_name(suite, knobs, hardest_row))
    write_json_atomic(target, series)
    series["summary_path"] = str(target)
    return series


def format_table(result: dict[str, Any]) -> str:
    """The summary's figures, one a row; a start other than the primary one adds its own, prefixed by its name."""

    def figures(section: dict[str, Any]) -> list[tuple[str, float]]:
        return [
            (k, v) for k, v in section.items() if isinstance(v, float) and k not in ("episode_length_s", "control_dt")
        ]

    primary = result.get("primary_start")
    others = [k for k, v in result.items() if primary and isinstance(v, dict) and k != primary]
    rows = figures(result) + [(f"{name}.{k}", v) for name in others for k, v in figures(result[name])]
    width = max(len(k) for k, _ in rows)
    suite, n = result.get("suite", "nominal"), result["num_envs"]
    head = f"eval {result['task']}, suite {suite} ({n} envs, seed {result['seed']}, {result['steps']} steps)"
    if result.get("weights") == "average":
        head += ", the actor's average (algo.actor_average)"
    lines = [head, *(f"  {k:<{width}}  {v:10.4f}" for k, v in rows)]
    if result.get("nonfinite_actions"):
        lines.append(
            f"  {result['nonfinite_actions']} env steps had non-finite actions (NaN or inf; zeros were applied)"
        )
    lines += breakdown_lines(result)
    if "terrain_rows" in result:
        lines += row_table(result["terrain_rows"]) + breakdown_table(result["terrain_rows"])
    if metrics_of(result["task"]).thresholds:  # which groups an average over all envs may hide
        for name, verdicts in judged_groups(result["task"], result).items():
            below = [group for group, meets in verdicts.items() if not meets]
            lines.append(f"  {name}: {len(verdicts) - len(below)} of {len(verdicts)} meet the thresholds")
            lines += [f"    below: {group}" for group in below]
    return "\n".join([*lines, verdict_line(result)])


ROW_FIGURES = ("fall_rate", "lin_vel_error", "distance_walked", "fall_distance", "fall_rise")


def row_table(rows: dict[str, dict[str, Any]]) -> list[str]:
    """A line per terrain row: its envs and how they fared."""
    head = f"  {'row':<8} {'envs':>5}" + "".join(f" {name:>15}" for name in ROW_FIGURES)
    lines = [head]
    for row, figures in rows.items():
        cells = "".join(f" {figures[name]:15.4f}" if name in figures else f" {'-':>15}" for name in ROW_FIGURES)
        lines.append(f"  {row:<8} {figures['num_envs']:>5}{cells}")
    return lines


def _fell_of(kinds: dict[str, dict[str, Any]]) -> dict[str, str]:
    """``fell/envs`` of each kind of command."""
    return {kind: f"{round(f.get('fall_rate', 0.0) * f['num_envs'])}/{f['num_envs']}" for kind, f in kinds.items()}


def breakdown_lines(figures: dict[str, Any]) -> list[str]:
    """Which commands the robots that fell were following, and what ended their episodes, where the task says."""
    lines = []
    if "falls_by_command" in figures:
        fell = ", ".join(f"{kind} {cell}" for kind, cell in _fell_of(figures["falls_by_command"]).items())
        lines.append(f"  falls by command (fell/envs): {fell}")
    if "ended_by" in figures:
        lines.append(f"  falls ended by: {', '.join(f'{name} {count}' for name, count in figures['ended_by'].items())}")
    return lines


def breakdown_table(rows: dict[str, dict[str, Any]]) -> list[str]:
    """A line per terrain row: its falls by kind of command (fell/envs), then how many each termination ended."""
    scored = [figures for figures in rows.values() if "falls_by_command" in figures]
    if not scored:
        return []
    kinds, causes = list(scored[0]["falls_by_command"]), list(scored[0].get("ended_by", {}))

    def line(name: str, left: list[str], right: list[str]) -> str:
        return f"  {name:<8}" + "".join(f" {cell:>9}" for cell in left) + " |" + "".join(f" {c:>9}" for c in right)

    lines = [line("row", kinds, causes)]
    for row, figures in rows.items():
        fell, ended = _fell_of(figures.get("falls_by_command", {})), figures.get("ended_by", {})
        lines.append(line(row, [fell.get(k, "-") for k in kinds], [str(ended.get(c, "-")) for c in causes]))
    return lines


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Console command ``unilab eval``."""
    parser = ArgumentParser(prog="unilab eval", description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--checkpoint",
        type=Path,
        nargs="+",
        help="model_<it>.pt written by train; several: a series (eval_series.json)",
    )
    source.add_argument("--onnx", type=Path, help="policy.onnx written by train (run on onnxruntime's CPU provider)")
    parser.add_argument("--task", default=None, help=f"one of {', '.join(list_tasks())} (default: the run's task)")
    parser.add_argument("--sim", default="mujoco", choices=("mujoco", "mjwarp"))
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default=None, help="default: cuda for mjwarp when available, else cpu")
    parser.add_argument("--out", type=Path, default=None, help="directory for the summaries (default: beside)")
    parser.add_argument("--force", action="store_true", help="replace summaries an earlier eval wrote")
    parser.add_argument("--episode-s", type=float, default=None, help="episode length in seconds (default: task's)")
    parser.add_argument(
        "--knobs",
        nargs="+",
        default=[],
        metavar="task.KNOB=VALUE",
        help="task knobs over the policy's own (train --cfg lists a task's): the policy judged on a variant of it; "
        "its summaries' names end in _knobs-<8 hex digits of the knobs>",
    )
    parser.add_argument(
        "--suite",
        nargs="+",
        default=["nominal"],
        choices=(*SUITES, *TERRAIN_SUITES, "all"),
        metavar="SUITE",
        help=f"one or more of {', '.join((*SUITES, *TERRAIN_SUITES))}, or all (those that apply to the task); each "
        "writes eval_summary_<policy>_<suite>.json (nominal: eval_summary_<policy>.json; a series also "
        f"eval_series[_<suite>].json); {SUITE_HELP}; {TERRAIN_SUITE_HELP}",
    )
    parser.add_argument(
        "--hardest-row",
        action="store_true",
        help="put every env of a terrain suite on its hardest row, where the verdict is taken, rather than spread "
        "over the rows: the verdict then rests on all of them, not on a tenth (summaries end in _<suite>_top)",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    check_rollout_args(parser.prog, args.num_envs, args.seed)
    if args.episode_s is not None and not 0.0 < args.episode_s < math.inf:
        fail(parser.prog, f"--episode-s must be a finite number > 0, got {args.episode_s}")
    device = resolve_sim_device(parser.prog, args.sim, args.device)
    check_output(parser.prog, args.out, "--out")
    common = dict(sim=args.sim, num_envs=args.num_envs, seed=args.seed, device=device, episodes_s=args.episode_s)
    common["hardest_row"] = args.hardest_row
    try:
        common["knobs"] = task_knob_values(args.knobs)
        suites = list(dict.fromkeys(args.suite))
        if "all" in args.suite:
            first = args.checkpoint[0] if args.checkpoint else None
            suites = suites_of(policy_source(first, args.onnx if first is None else None, args.task).task)
        if args.hardest_row and not set(suites) & set(TERRAIN_SUITES):
            terrain = ", ".join(TERRAIN_SUITES)
            raise InputError(f"--hardest-row places the envs of a terrain suite ({terrain}); none was asked")
        planned = planned_outputs(args.checkpoint or [args.onnx], args.out, suites, common["knobs"], args.hardest_row)
        claims = OutputClaims(planned, args.force, "--force")
        with claims:
            results = {suite: _evaluate_suite(parser.prog, args, suite, common) for suite in suites}
    except InputError as exc:
        fail(parser.prog, exc)
    return results[suites[0]] if len(suites) == 1 else results


def planned_outputs(
    sources: list[Path],
    out: Path | None,
    suites: list[str],
    knobs: Mapping[str, Any] | None = None,
    hardest_row: bool = False,
) -> list[Path]:
    """Every file an eval of ``sources`` (several: a series) under ``suites`` and ``knobs`` will write, so that all
    of them are taken before the first rollout."""
    targets = []
    for suite in suites:
        targets += [output_path(source, out, summary_name(source, suite, knobs, hardest_row)) for source in sources]
        if len(sources) > 1:
            targets.append(output_path(sources[0], out, series_name(suite, knobs, hardest_row)))
    return targets


def _evaluate_suite(prog: str, args: argparse.Namespace, suite: str, common: dict[str, Any]) -> dict[str, Any]:
    """One suite of ``unilab eval``: the summary (or series) of the policy under it, printed and returned."""
    try:
        if args.checkpoint is not None and len(args.checkpoint) > 1:
            series = evaluate_series(args.checkpoint, out=args.out, task=args.task, suite=suite, **common)
            for result in series["results"]:
                wall = result["train_wall_time_sec"]
                print(f"iteration {result['iteration']}, {wall if wall is None else round(wall)} s of training:")
                print(format_table(result))
            print(f"first meeting the thresholds: {series['first_meeting_thresholds']}")
            print(f"summary: {series['summary_path']}")
            return series
        checkpoint = args.checkpoint[0] if args.checkpoint is not None else None
        result = evaluate(checkpoint, args.onnx, task=args.task, out=args.out, suite=suite, **common)
    except REFUSALS as exc:
        fail(prog, exc)
    print(format_table(result))
    print(f"summary: {result['summary_path']}")
    return result
