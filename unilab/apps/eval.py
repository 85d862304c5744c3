"""``eval``: roll out a trained policy deterministically and score it with task-level metrics.

Training reward mixes many shaped terms; these metrics answer the questions a user asks of a policy
(does it fall, how well does it follow the command or the reference) in physical units.

Auto-reset and what is recorded: the functional env resets finished envs inside ``step``, so the state it
returns holds post-reset physics for exactly the envs that just ended. Each env is therefore scored over its
first episode only (an ``active`` mask), kinematic errors are read from the post-step state of envs that did
*not* end on that step (their state is the true post-step state), and the ending step itself contributes only
through the transition (termination cause and episode length). The terminal step's kinematics are thus left
out of the error means: a one-step omission, chosen over re-deriving terminal physics the env does not expose.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
from pathlib import Path
from typing import Any

import mujoco
import torch
from tensordict import TensorDict

from unilab.apps.checkpoint import CheckpointError, load_checkpoint
from unilab.apps.cli import check_rollout_args, fail
from unilab.apps.resources import InsufficientMemoryError, check_fits
from unilab.apps.run_dir import write_json_atomic
from unilab.core.rng import make_rng
from unilab.envs.functional import FunctionalEnv
from unilab.envs.runner import EnvRunner
from unilab.managers.terms import EventTerm
from unilab.mdp import events
from unilab.motion import MotionFileError
from unilab.sim import load_model
from unilab.tasks.metrics import episode_lengths
from unilab.tasks.registry import get_task, list_tasks, make_functional_env, make_task
from unilab.tasks.task import EvalMetrics

SUMMARY_NAME = "eval_summary.json"
SERIES_NAME = "eval_series.json"


def metrics_of(task: str) -> EvalMetrics:
    """The task's own eval metrics; a task that declares none is scored by survival and episode length."""
    return get_task(task).metrics or SURVIVAL


def _no_readings(env: FunctionalEnv, state: TensorDict) -> dict[str, torch.Tensor]:
    return {}


def _survival(active: torch.Tensor, failed: torch.Tensor, episode_length: torch.Tensor, dt: float) -> dict[str, float]:
    return {"survival_rate": 1.0 - float(failed.float().mean()), **episode_lengths(episode_length, dt)}


SURVIVAL = EvalMetrics(_no_readings, _survival)


# -- rollout ----------------------------------------------------------------------------------------------


@torch.no_grad()
def rollout(env: FunctionalEnv, policy, seed: int, capture: bool = False) -> dict[str, Any]:
    """One first episode per env; returns stacked readings, the active mask and each env's ending.

    Runs ``ctx.max_episode_steps`` steps so every env reaches at least its time-out; steps after an env's first
    episode ended are masked out rather than stopped, keeping the batch shape fixed. ``capture`` records the
    step with the policy as one CUDA graph (torch policies on CUDA only), then rewinds to the seeded start.
    """
    n, dev = env.num_envs, env.device
    read = metrics_of(env.task.name).readings
    runner = EnvRunner(env, lambda obs: policy(obs["policy"]), seed=seed, capture=capture)
    if capture:
        runner.reset(seed)  # the capture's warm-up stepped the envs
    running = torch.ones(n, dtype=torch.bool, device=dev)
    failed = torch.zeros(n, dtype=torch.bool, device=dev)
    length = torch.full((n,), env.ctx.max_episode_steps, dtype=torch.int64, device=dev)
    steps: list[dict[str, torch.Tensor]] = []
    actives: list[torch.Tensor] = []
    for _ in range(env.ctx.max_episode_steps):
        transition = runner.step()
        done = transition["next", "done"]
        ending = running & done
        failed |= ending & transition["next", "terminated"]
        length = torch.where(ending, transition["episode_length"], length)
        actives.append(running & ~done)
        steps.append(read(env, runner.state))
        running = running & ~done
        if not running.any():
            break
    readings = {k: torch.stack([s[k] for s in steps]) for k in steps[0]} if steps else {}
    return {"readings": readings, "active": torch.stack(actives), "failed": failed, "length": length}


def score(env: FunctionalEnv, data: dict[str, Any]) -> dict[str, float]:
    return metrics_of(env.task.name).score(
        **data["readings"], active=data["active"], failed=data["failed"], episode_length=data["length"], dt=env.ctx.dt
    )


# -- policies ---------------------------------------------------------------------------------------------


class EvalError(ValueError):
    """A user-facing problem with the eval inputs (bad path, unreadable checkpoint)."""


def checkpoint_policy(ckpt: dict, env: FunctionalEnv):
    """The deterministic actor of a checkpoint, rebuilt from its saved config.

    Only the actor's weights are loaded: the rest of a learner (FlashSAC's per-env noise and reward normaliser)
    is shaped by the training ``num_envs`` and would not fit an eval with another env count.
    """
    from omegaconf import OmegaConf

    from torchrl_ext.learners import LEARNERS
    from unilab.apps.config import TrainConfig

    cfg: TrainConfig = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TrainConfig), ckpt["config"]))
    learner = LEARNERS[cfg.algo.name](env.spec(), cfg.algo)
    actor = learner.loss.actor
    prefix = "actor."
    weights = {k[len(prefix) :]: v for k, v in ckpt["loss"].items() if k.startswith(prefix)}
    try:
        actor.load_state_dict(weights)
    except RuntimeError as exc:  # weights edited by hand or from another version: name the problem, not torch's
        raise EvalError(
            f"the checkpoint's actor weights do not fit its own config: {str(exc).splitlines()[0]}"
        ) from None
    actor.eval()
    return actor


def onnx_policy(path: Path, device: torch.device):
    """An onnxruntime CPU session wrapped to take and return torch tensors on the env's device."""
    import onnxruntime as ort

    from torchrl_ext.export import INPUT_NAME, OUTPUT_NAME

    if not path.is_file():
        raise EvalError(f"onnx policy not found: {path}")
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise EvalError(f"cannot load onnx policy {path}: {type(exc).__name__}: {exc}") from exc

    def policy(obs: torch.Tensor) -> torch.Tensor:
        out = session.run([OUTPUT_NAME], {INPUT_NAME: obs.detach().float().cpu().numpy()})[0]
        return torch.as_tensor(out, device=device)

    return policy


def _onnx_origin(path: Path) -> dict | None:
    """The task an exported policy was trained on, from the metadata ``train`` writes into ``policy.onnx``."""
    from torchrl_ext.export import read_metadata

    if not path.is_file():
        raise EvalError(f"onnx policy not found: {path}")
    try:
        metadata = read_metadata(path)
    except Exception as exc:
        raise EvalError(f"cannot read onnx policy {path}: {type(exc).__name__}: {exc}") from exc
    if "task" not in metadata:
        return None
    return {"task": {"name": metadata["task"], "motion_file": metadata.get("motion_file") or None}}


# -- evaluate ---------------------------------------------------------------------------------------------


def policy_source(
    checkpoint: Path | None, onnx: Path | None, task: str | None
) -> tuple[dict | None, str, dict[str, Any]]:
    """The loaded checkpoint (None for ONNX), the task to run and its env overrides (noise off, the run's motion file).

    The task defaults to the one the policy was trained on: from the checkpoint's config, or from the
    ``run_config.json`` beside an ONNX file.
    """
    if (checkpoint is None) == (onnx is None):
        raise EvalError("give exactly one of a checkpoint or an onnx policy")
    ckpt = load_checkpoint(Path(checkpoint)) if checkpoint is not None else None
    config = ckpt["config"] if ckpt is not None else _onnx_origin(Path(onnx))
    saved_task: dict[str, Any] = (config or {}).get("task", {})
    task = task or saved_task.get("name")
    if task is None:
        raise EvalError(f"no task given and none recorded in {onnx}; pass --task")
    if task not in list_tasks():
        raise EvalError(f"unknown task {task!r}; known tasks: {', '.join(list_tasks())}")
    overrides: dict[str, Any] = {"obs_noise": False}
    if saved_task.get("name") == task and saved_task.get("motion_file"):
        if not Path(saved_task["motion_file"]).is_file():
            raise EvalError(f"the motion file the policy was trained on is gone: {saved_task['motion_file']}")
        overrides["motion_file"] = saved_task["motion_file"]
    return ckpt, task, overrides


def check_memory(task: str, overrides: dict[str, Any], num_envs: int, device: str, record: bool) -> None:
    """Refuse, before building anything, an env count whose physics state (and, with ``record``, the readings a
    rollout keeps for every step) cannot fit in the device's free memory. A one-env probe gives the sizes."""
    probe = make_functional_env(task, sim="mujoco", num_envs=1, device="cpu", **overrides)
    parts = {"envs": num_envs * mujoco.MjData(probe.sim.model).nbuffer}
    if record:
        read = metrics_of(task).readings
        readings = read(probe, probe.reset(make_rng(0, probe.device)))
        per_step = sum(value.numel() * value.element_size() for value in readings.values())
        parts["recorded steps"] = probe.ctx.max_episode_steps * num_envs * per_step
    check_fits(parts, torch.device(device), "lower --num-envs")


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
    summary_name: str = SUMMARY_NAME,
    suite: str = "nominal",
) -> dict[str, Any]:
    """Score a policy on ``num_envs`` seeded first episodes and write ``summary_name`` (``eval_summary.json``).

    Observation noise is off so the score measures the policy, not the noise draw; commands and start frames
    come from the env's own reset, i.e. the training ranges, so a fixed ``seed`` gives a fixed test set.
    ``suite`` adds a perturbation (``SUITES``) to those conditions.
    """
    ckpt, task, overrides = policy_source(checkpoint, onnx, task)
    if episodes_s is not None:
        overrides["episode_length_s"] = float(episodes_s)
    overrides = suite_overrides(task, suite, overrides)
    if suite != "nominal":  # beside the nominal summary, not over it
        summary_name = summary_name.replace(".json", f"_{suite}.json")
    check_memory(task, overrides, num_envs, device, record=True)
    env = make_functional_env(task, sim=sim, num_envs=num_envs, device=device, **overrides)
    policy = checkpoint_policy(ckpt, env) if ckpt is not None else onnx_policy(Path(onnx), env.device)
    # A checkpoint's actor replays inside the env step's CUDA graph; onnxruntime runs on the host, step by step.
    capture = ckpt is not None and env.device.type == "cuda" and env.sim.capabilities.graph_capturable
    data = rollout(env, policy, seed, capture=capture)
    source = Path(checkpoint if checkpoint is not None else onnx).resolve()
    result = {
        **score(env, data),
        "task": task,
        "sim": sim,
        "suite": suite,
        "checkpoint": str(source) if checkpoint is not None else None,
        "onnx": str(source) if onnx is not None else None,
        "iteration": ckpt.get("iteration") if ckpt is not None else None,
        "train_wall_time_sec": ckpt.get("train_wall_time_sec") if ckpt is not None else None,
        "num_envs": num_envs,
        "seed": seed,
        "steps": int(data["active"].shape[0]),
        "episode_length_s": env.task.episode_length_s,
        "control_dt": env.ctx.dt,
    }
    result["meets_thresholds"] = meets_thresholds(task, result)
    target = (Path(out) if out is not None else source.parent) / summary_name
    write_json_atomic(target, result)
    result["summary_path"] = str(target)
    return result


# Perturbations an eval can add to the training conditions, each a change to the task config.
SUITES = ("nominal", "push", "finer_physics")
PUSH_SPEED = 1.0  # m/s, drawn U(-1, 1) per horizontal axis
PUSH_EVERY_S = (2.0, 4.0)


def suite_overrides(task: str, suite: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """``overrides`` plus the task-config changes of ``suite``:

    - ``push``: shoves of up to 1 m/s per horizontal axis every 2 to 4 s, as an interval event;
    - ``finer_physics``: half the physics step and twice the substeps (the same control period), a
      sim-to-sim check that the policy does not lean on the training step size.
    """
    if suite == "nominal":
        return overrides
    base = make_task(task, **overrides)
    if suite == "push":
        shove = EventTerm(events.push_root, {"velocity_range": PUSH_SPEED}, interval_s=PUSH_EVERY_S)
        return {**overrides, "events": {**base.events, "eval_push": shove}}
    if suite == "finer_physics":
        timestep = base.physics.timestep or load_model(base.scene).opt.timestep
        finer = dataclasses.replace(base.physics, timestep=timestep / 2, substeps=base.physics.substeps * 2)
        return {**overrides, "physics": finer}
    raise EvalError(f"unknown suite {suite!r}; known suites: {', '.join(SUITES)}")


def meets_thresholds(task: str, result: dict[str, Any]) -> bool | None:
    """Whether ``result`` passes the task's thresholds (None for a task that declares none)."""
    bounds = metrics_of(task).thresholds
    if not bounds:
        return None
    passes = {"<=": lambda v, b: v <= b, ">=": lambda v, b: v >= b}
    return all(passes[op](result[metric], bound) for metric, (op, bound) in bounds.items())


def evaluate_series(checkpoints: list[Path], out: Path | None = None, **kwargs: Any) -> dict[str, Any]:
    """Evaluate checkpoints of one run in iteration order; the first that meets the thresholds gives the run's
    time to threshold (``train_wall_time_sec`` is saved in every checkpoint). Writes ``eval_series.json``."""
    results = [
        evaluate(path, None, out=out, summary_name=f"eval_summary_{Path(path).stem}.json", **kwargs)
        for path in checkpoints
    ]
    results.sort(key=lambda result: result["iteration"])  # each checkpoint is loaded once, by ``evaluate``
    first = next((r for r in results if r["meets_thresholds"]), None)
    series = {
        "thresholds": dict(metrics_of(results[0]["task"]).thresholds),
        "results": results,
        "first_meeting_thresholds": None
        if first is None
        else {k: first[k] for k in ("checkpoint", "iteration", "train_wall_time_sec")},
    }
    target = (Path(out) if out is not None else Path(checkpoints[0]).resolve().parent) / SERIES_NAME
    write_json_atomic(target, series)
    series["summary_path"] = str(target)
    return series


def format_table(result: dict[str, Any]) -> str:
    rows = [(k, v) for k, v in result.items() if isinstance(v, float) and k not in ("episode_length_s", "control_dt")]
    width = max(len(k) for k, _ in rows)
    head = f"eval {result['task']} ({result['num_envs']} envs, seed {result['seed']}, {result['steps']} steps)"
    return "\n".join([head, *(f"  {k:<{width}}  {v:10.4f}" for k, v in rows)])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Console command ``unilab eval``."""
    parser = argparse.ArgumentParser(prog="unilab eval", description=__doc__.splitlines()[0])
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
    parser.add_argument("--out", type=Path, default=None, help="directory for eval_summary.json (default: beside)")
    parser.add_argument("--episode-s", type=float, default=None, help="episode length in seconds (default: task's)")
    parser.add_argument(
        "--suite",
        default="nominal",
        choices=SUITES,
        help="push: shoves of up to 1 m/s every 2-4 s; finer_physics: half the physics step (sim-to-sim)",
    )
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    check_rollout_args(parser.prog, args.num_envs, args.seed)
    if args.episode_s is not None and not 0.0 < args.episode_s < math.inf:
        fail(parser.prog, f"--episode-s must be a finite number > 0, got {args.episode_s}")
    device = args.device or ("cuda" if args.sim == "mjwarp" and torch.cuda.is_available() else "cpu")
    try:
        kind = torch.device(device).type
    except RuntimeError as exc:
        fail(parser.prog, f"--device {device!r} is not a torch device ({exc})")
    if kind == "cuda" and not torch.cuda.is_available():
        fail(parser.prog, f"--device {device} but CUDA is not available on this machine")
    common = dict(
        sim=args.sim, num_envs=args.num_envs, seed=args.seed, device=device, episodes_s=args.episode_s, suite=args.suite
    )
    try:
        if args.checkpoint is not None and len(args.checkpoint) > 1:
            series = evaluate_series(args.checkpoint, out=args.out, task=args.task, **common)
            for result in series["results"]:
                wall = result["train_wall_time_sec"]
                print(f"iteration {result['iteration']}, {wall if wall is None else round(wall)} s of training:")
                print(format_table(result))
            print(f"first meeting the thresholds: {series['first_meeting_thresholds']}")
            print(f"summary: {series['summary_path']}")
            return series
        checkpoint = args.checkpoint[0] if args.checkpoint is not None else None
        result = evaluate(checkpoint, args.onnx, task=args.task, out=args.out, **common)
    except (EvalError, CheckpointError, MotionFileError, InsufficientMemoryError) as exc:
        fail(parser.prog, exc)
    print(format_table(result))
    print(f"summary: {result['summary_path']}")
    return result
