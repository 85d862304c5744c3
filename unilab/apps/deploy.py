"""``unilab deploy``: a trained policy on its way to a robot.

- ``unilab deploy check POLICY``: the deployment runtime (``unilab.deploy``) drives the robot in C MuJoCo, not the
  training stack, over randomised episodes with sensor noise, actuation latency and control-rate jitter, and
  reports survival, tracking, the worst joint-limit and torque margins, the runtime's time per control step and a
  verdict against the task's thresholds; ``deploy_check_<policy>.json`` beside the policy (or in ``--out``).
- ``unilab deploy export --checkpoint CHECKPOINT``: ``policy.onnx`` with the runtime's metadata, and its scene
  beside it, from a checkpoint (``train`` writes both at the end of a run).

``check`` imports no torch: everything it refuses, it refuses in one line before MuJoCo or onnxruntime has loaded.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from unilab.apps.args import ArgumentParser, InputError, check_output, fail
from unilab.apps.outputs import OutputClaims
from unilab.core import proportions
from unilab.core.files import write_atomic

CHECK_PROG, EXPORT_PROG = "unilab deploy check", "unilab deploy export"
RATES = ("fall_rate", "survival_rate")  # the check's figures that are shares of its episodes
USAGE = (
    "usage: unilab deploy {check,export} ...\n\n"
    "  check POLICY                 run an exported policy on the torch-free runtime in C MuJoCo, with noise,\n"
    "                               latency and jitter, and judge it against the task's thresholds\n"
    "  export --checkpoint CKPT     write policy.onnx with the runtime's metadata (and its scene) from a checkpoint"
)


def check_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=CHECK_PROG, description="Sim-to-sim check of an exported policy on the runtime.")
    parser.add_argument("policy", type=Path, help="policy.onnx written by train or by unilab deploy export")
    parser.add_argument("--episodes", type=int, default=16, help="randomised episodes (default 16)")
    parser.add_argument("--seconds", type=float, default=None, help="length of each (default: the task's episode)")
    parser.add_argument("--noise-scale", type=float, default=1.0, help="times the noise each reading trained under")
    parser.add_argument(
        "--latency-ms",
        type=float,
        nargs=2,
        default=None,
        metavar=("LOW", "HIGH"),
        help="actuation latency drawn per episode (default: the range training drew, else 0 10)",
    )
    parser.add_argument("--jitter-ms", type=float, default=1.0, help="reads up to this early or late (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scene", type=Path, default=None, help="an MJB scene in place of the one beside the policy")
    parser.add_argument("--out", type=Path, default=None, help="directory for the summary (default: beside)")
    parser.add_argument("--force", action="store_true", help="replace a summary an earlier check wrote")
    return parser


def summary_path(policy: Path, out: Path | None) -> Path:
    return (out if out is not None else policy.parent) / f"deploy_check_{policy.stem}.json"


def format_report(result: dict[str, Any]) -> str:
    """The figures a reader looks for first, and the verdict with what it judged."""
    margin, torque, step = result["joint_limit_margin"], result["torque_margin"], result["step_time_us"]
    judged = ", ".join(
        f"{metric} {result[metric]:.4f}{_interval_text(result, metric)} (needs {op} {bound:g})"
        for metric, (op, bound) in result["thresholds"].items()
    )
    lines = [
        f"{result['task']}: {result['episodes']} episodes of {result['seconds']:g} s in C MuJoCo",
        f"  conditions          {result['conditions']}",
        f"  survival_rate       {result['survival_rate']:.4f}",
        f"  lin_vel_error       {result['lin_vel_error']:.4f} m/s",
        f"  yaw_rate_error      {result['yaw_rate_error']:.4f} rad/s",
        f"  joint_limit_margin  {margin['rad']:+.4f} rad ({margin['joint']})",
        f"  torque_margin       {torque['fraction']:.4f} of the limit ({torque['joint']})",
        f"  runtime step        median {step['median']:.0f} us, p99 {step['p99']:.0f} us",
        f"  verdict: {'PASS' if result['meets_thresholds'] else 'FAIL'} ({judged or 'no thresholds declared'})",
    ]
    lines[-1] += proportions.unsettled_text(result["unsettled"], "run more episodes")
    if result["nonfinite_actions"]:
        lines.append(f"  non-finite actions: {result['nonfinite_actions']} (replaced by the default pose; fails)")
    return "\n".join(lines)


def _interval_text(result: dict[str, Any], metric: str) -> str:
    interval = result["intervals"].get(metric)
    return "" if interval is None else proportions.interval_text(interval, result["episodes"], "episodes")


def judge_rates(result: dict[str, Any]) -> None:
    """Each judged rate's 95 % interval over the episodes (``intervals``), and those whose bound it holds
    (``unsettled``): with 16 episodes no verdict on a 5 % bound is settled."""
    judged = [metric for metric in result["thresholds"] if metric in RATES]
    result["intervals"] = proportions.rate_intervals(result, judged, result["episodes"])
    result["unsettled"] = proportions.unsettled(result["intervals"], result["thresholds"])


def run_check(args: argparse.Namespace) -> dict[str, Any]:
    """The check ``args`` ask for, written to its summary; every refusal is a ``DeployError``."""
    from unilab.deploy import Policy
    from unilab.deploy.check import load_scene, run
    from unilab.deploy.episodes import Conditions

    policy = Policy(args.policy)
    model = load_scene(policy, args.scene)
    trained = policy.metadata.check.latency_s
    latency = args.latency_ms or [1e3 * s for s in trained or Conditions().latency_s]
    conditions = Conditions(
        episodes=args.episodes,
        seconds=args.seconds,
        noise_scale=args.noise_scale,
        latency_s=(latency[0] / 1e3, latency[1] / 1e3),
        jitter_s=args.jitter_ms / 1e3,
        seed=args.seed,
    )
    result = run(policy, model, conditions)
    result["conditions"] = (
        f"noise x{conditions.noise_scale:g}, latency {latency[0]:g}-{latency[1]:g} ms, "
        f"jitter +-{args.jitter_ms:g} ms, seed {conditions.seed}"
    )
    result["policy"] = str(args.policy.resolve())
    judge_rates(result)
    return result


def check(argv: list[str]) -> dict[str, Any]:
    """``unilab deploy check``: the report printed and written; refusals in one line, before any episode."""
    from unilab.deploy import DeployError

    args = check_parser().parse_args(argv)
    if not args.policy.is_file():
        fail(CHECK_PROG, f"policy not found: {args.policy}")
    check_output(CHECK_PROG, args.out, "--out")
    target = summary_path(args.policy, args.out)
    try:
        with OutputClaims([target], args.force, "--force"):
            result = run_check(args)
            text = json.dumps(result, indent=2) + "\n"
            write_atomic(target, lambda handle: handle.write(text.encode()))
    except (DeployError, InputError) as exc:
        fail(CHECK_PROG, exc)
    print(format_report(result))
    print(f"summary: {target}")
    return result


def export_parser() -> ArgumentParser:
    parser = ArgumentParser(prog=EXPORT_PROG, description="policy.onnx with the runtime's metadata, from a checkpoint.")
    parser.add_argument("--checkpoint", type=Path, required=True, help="model_<it>.pt written by train")
    parser.add_argument("--out", type=Path, default=None, help="the policy file (default: policy.onnx beside it)")
    parser.add_argument("--force", action="store_true", help="replace a policy file that is there")
    return parser


def _commit(checkpoint: Path) -> str:
    """The commit the run was trained at, from the run's config beside the checkpoint, where it is."""
    try:
        return str(json.loads((checkpoint.parent / "run_config.json").read_text())["environment"]["git_commit"])
    except (OSError, ValueError, KeyError, TypeError):
        return "unknown"


def export(argv: list[str]) -> Path:
    """``unilab deploy export``: the checkpoint's actor as a policy file, with its metadata and scene."""
    args = export_parser().parse_args(argv)
    if not args.checkpoint.is_file():
        fail(EXPORT_PROG, f"checkpoint not found: {args.checkpoint}")
    out = args.out if args.out is not None else args.checkpoint.parent / "policy.onnx"
    check_output(EXPORT_PROG, out, "--out", suffix=".onnx")
    if out.exists() and not args.force:
        fail(EXPORT_PROG, f"{out} already exists: --force replaces it")
    try:  # a robot's computer has the runtime alone: exporting needs the stack the policy was trained with
        from unilab.apps.policy import REFUSALS, policy_source
        from unilab.run.deploy_export import export_policy, scene_path
        from unilab.tasks.registry import make_functional_env
    except ModuleNotFoundError as exc:
        fail(EXPORT_PROG, f"needs the training stack, and {exc.name} is not installed here: export where it is")
    try:
        source = policy_source(args.checkpoint, None, None)
        env = make_functional_env(source.task, sim="mujoco", num_envs=1, device="cpu", **source.overrides)
        origin = {
            "task": source.task,
            "algo": source.config.algo.name,
            "commit": _commit(args.checkpoint),
            "motion_file": source.config.task.motion_file or "",
        }
        export_policy(source.policy(env), env, out, origin)
    except REFUSALS as exc:
        fail(EXPORT_PROG, exc)
    print(f"policy: {out}\nscene: {scene_path(out)}")
    return out


def main(argv: list[str] | None = None) -> Any:
    """Console command ``unilab deploy``."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stdout if argv else sys.stderr)
        if not argv:
            raise SystemExit(2)
        return None
    commands = {"check": check, "export": export}
    if argv[0] not in commands:
        fail("unilab deploy", f"unknown command {argv[0]!r}; commands: check, export")
    return commands[argv[0]](argv[1:])
