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
import math
import sys
from pathlib import Path
from typing import Any

import mujoco
import torch
from tensordict import TensorDict

from torchrl_ext.checkpoint import CheckpointError, load_checkpoint
from torchrl_ext.resources import InsufficientMemoryError, check_fits
from torchrl_ext.run_dir import write_json_atomic
from unilab.cli import fail
from unilab.envs.functional import FunctionalEnv
from unilab.envs.runner import EnvRunner
from unilab.mdp import tracking
from unilab.mdp.rng import make_rng
from unilab.motion import MotionFileError
from unilab.tasks.registry import list_tasks, make_functional_env

SUMMARY_NAME = "eval_summary.json"
SERIES_NAME = "eval_series.json"
# Issue 6's acceptance thresholds per task: metric -> (comparison, bound).
THRESHOLDS: dict[str, dict[str, tuple[str, float]]] = {
    "g1_walk_flat": {"fall_rate": ("<=", 0.05), "lin_vel_error": ("<=", 0.25)},
    "g1_motion_tracking": {"survival_rate": (">=", 0.90), "body_pos_error": ("<=", 0.10)},
}
LINVEL_SENSOR, GYRO_SENSOR = "pelvis_local_linvel", "torso_gyro"
TRACKING_REWARD = "motion_body_pos"  # its params carry the device-placed motion, anchor and tracked bodies


# -- pure metrics -----------------------------------------------------------------------------------------


def _active_mean(values: torch.Tensor, active: torch.Tensor) -> float:
    """Mean over active (step, env) cells; NaN when nothing was active so an empty eval cannot pass as perfect."""
    count = active.sum()
    if count == 0:
        return math.nan
    return float((values * active).sum() / count)


def _episode_lengths(episode_length: torch.Tensor, dt: float) -> dict[str, float]:
    steps = float(episode_length.float().mean())
    return {"mean_episode_length": steps, "mean_episode_length_s": steps * dt}


def walk_metrics(
    commands: torch.Tensor,
    lin_vel_xy: torch.Tensor,
    yaw_rate: torch.Tensor,
    active: torch.Tensor,
    fell: torch.Tensor,
    episode_length: torch.Tensor,
    dt: float,
) -> dict[str, float]:
    """Velocity-tracking scores from (T, N) trajectories.

    ``commands`` (T, N, 3) is (vx, vy, wz) in the pelvis frame, matching ``lin_vel_xy`` (T, N, 2) from the
    pelvis-local velocity sensor and ``yaw_rate`` (T, N) from the torso gyro, the same signals the rewards use.
    ``fell`` (N,) marks envs whose first episode ended by a failure termination rather than the time-out.
    """
    active = active.bool()
    lin = torch.linalg.vector_norm(commands[..., :2] - lin_vel_xy, dim=-1)
    yaw = (commands[..., 2] - yaw_rate).abs()
    return {
        "fall_rate": float(fell.float().mean()),
        "lin_vel_error": _active_mean(lin, active),
        "yaw_rate_error": _active_mean(yaw, active),
        **_episode_lengths(episode_length, dt),
    }


def quat_angle(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Rotation angle between unit quaternions; |<a, b>| makes q and -q (the same rotation) agree."""
    dot = (a * b).sum(-1).abs().clamp(max=1.0)
    return 2.0 * torch.acos(dot)


def tracking_metrics(
    ref_body_pos: torch.Tensor,
    body_pos: torch.Tensor,
    ref_anchor_pos: torch.Tensor,
    anchor_pos: torch.Tensor,
    ref_anchor_quat: torch.Tensor,
    anchor_quat: torch.Tensor,
    ref_joint_pos: torch.Tensor,
    joint_pos: torch.Tensor,
    active: torch.Tensor,
    failed: torch.Tensor,
    episode_length: torch.Tensor,
    dt: float,
) -> dict[str, float]:
    """Imitation scores from (T, N, ...) trajectories.

    ``ref_body_pos`` (T, N, B, 3) should be the yaw-aligned reference the reward compares against
    (``tracking.aligned_reference_bodies``), so a policy is not charged for the heading drift the reward forgives;
    the anchor errors use the global reference, as the global anchor rewards and the failure checks do.
    ``failed`` (N,) marks envs whose first episode ended by a failure termination (not clip end or time-out).
    """
    active = active.bool()
    body = torch.linalg.vector_norm(ref_body_pos - body_pos, dim=-1).mean(-1)
    anchor = torch.linalg.vector_norm(ref_anchor_pos - anchor_pos, dim=-1)
    joints = (ref_joint_pos - joint_pos).abs().mean(-1)
    return {
        "survival_rate": 1.0 - float(failed.float().mean()),
        "body_pos_error": _active_mean(body, active),
        "anchor_pos_error": _active_mean(anchor, active),
        "anchor_ori_error": _active_mean(quat_angle(ref_anchor_quat, anchor_quat), active),
        "joint_pos_error": _active_mean(joints, active),
        **_episode_lengths(episode_length, dt),
    }


# -- per-step readings from the env state --------------------------------------------------------------------


def walk_readings(env: FunctionalEnv, state: TensorDict) -> dict[str, torch.Tensor]:
    """The signals ``walk_metrics`` needs, cloned: sim tensors are views the next step overwrites."""
    sensordata = state["sim", "sensordata"]
    return {
        "commands": state["env", "velocity"][:, :3].clone(),
        "lin_vel_xy": env.ctx.sensor(sensordata, LINVEL_SENSOR)[:, :2].clone(),
        "yaw_rate": env.ctx.sensor(sensordata, GYRO_SENSOR)[:, 2].clone(),
    }


def tracking_readings(env: FunctionalEnv, state: TensorDict) -> dict[str, torch.Tensor]:
    """Reference and robot poses at the state's frame, using the reward's own alignment and body set."""
    params = env.task.rewards[TRACKING_REWARD].params
    motion, anchor, bodies = params["motion"], params["anchor"], params["bodies"]
    frame = tracking.frame_index(state)
    ref_body_pos, _ = tracking.aligned_reference_bodies(state, motion, anchor, bodies)
    xpos, xquat = state["sim", "xpos"], state["sim", "xquat"]
    return {
        "ref_body_pos": ref_body_pos.clone(),
        "body_pos": xpos[:, bodies].clone(),
        "ref_anchor_pos": motion.body_pos_w[frame, anchor].clone(),
        "anchor_pos": xpos[:, anchor].clone(),
        "ref_anchor_quat": motion.body_quat_w[frame, anchor].clone(),
        "anchor_quat": xquat[:, anchor].clone(),
        "ref_joint_pos": motion.joint_pos[frame].clone(),
        "joint_pos": state["sim", "qpos"][:, 7:].clone(),
    }


def is_tracking(env: FunctionalEnv) -> bool:
    return TRACKING_REWARD in env.task.rewards


# -- rollout ----------------------------------------------------------------------------------------------


@torch.no_grad()
def rollout(env: FunctionalEnv, policy, seed: int, capture: bool = False) -> dict[str, Any]:
    """One first episode per env; returns stacked readings, the active mask and each env's ending.

    Runs ``ctx.max_episode_steps`` steps so every env reaches at least its time-out; steps after an env's first
    episode ended are masked out rather than stopped, keeping the batch shape fixed. ``capture`` records the
    step with the policy as one CUDA graph (torch policies on CUDA only), then rewinds to the seeded start.
    """
    n, dev = env.num_envs, env.device
    read = tracking_readings if is_tracking(env) else walk_readings
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
    readings = {k: torch.stack([s[k] for s in steps]) for k in steps[0]}
    return {"readings": readings, "active": torch.stack(actives), "failed": failed, "length": length}


def score(env: FunctionalEnv, data: dict[str, Any]) -> dict[str, float]:
    common = {"active": data["active"], "episode_length": data["length"], "dt": env.ctx.dt}
    if is_tracking(env):
        return tracking_metrics(**data["readings"], failed=data["failed"], **common)
    return walk_metrics(**data["readings"], fell=data["failed"], **common)


# -- policies ---------------------------------------------------------------------------------------------


class EvalError(ValueError):
    """A user-facing problem with the eval inputs (bad path, unreadable checkpoint)."""


def checkpoint_policy(ckpt: dict, env: FunctionalEnv):
    """The deterministic actor of a checkpoint, rebuilt from its saved config.

    Only the actor's weights are loaded: the rest of a learner (FlashSAC's per-env noise and reward normaliser)
    is shaped by the training ``num_envs`` and would not fit an eval with another env count.
    """
    from omegaconf import OmegaConf

    from torchrl_ext.config import TrainConfig
    from torchrl_ext.learners import LEARNERS

    cfg: TrainConfig = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TrainConfig), ckpt["config"]))
    learner = LEARNERS[cfg.algo.name](env, cfg.algo)
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


def _onnx_run_config(path: Path) -> dict | None:
    """The training config beside an exported policy (``run_config.json``), for its task defaults."""
    import json

    candidate = path.parent / "run_config.json"
    if candidate.is_file():
        return json.loads(candidate.read_text()).get("config")
    return None


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
    config = ckpt["config"] if ckpt is not None else _onnx_run_config(Path(onnx))
    saved_task: dict[str, Any] = (config or {}).get("task", {})
    task = task or saved_task.get("name")
    if task is None:
        raise EvalError(f"no task given and none recorded beside {onnx}; pass --task")
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
        read = tracking_readings if is_tracking(probe) else walk_readings
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
) -> dict[str, Any]:
    """Score a policy on ``num_envs`` seeded first episodes and write ``summary_name`` (``eval_summary.json``).

    Observation noise is off so the score measures the policy, not the noise draw; commands and start frames
    come from the env's own reset, i.e. the training ranges, so a fixed ``seed`` gives a fixed test set.
    """
    ckpt, task, overrides = policy_source(checkpoint, onnx, task)
    if episodes_s is not None:
        overrides["episode_length_s"] = float(episodes_s)
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


def meets_thresholds(task: str, result: dict[str, Any]) -> bool | None:
    """Whether ``result`` passes issue 6's bounds for ``task`` (None for a task without bounds)."""
    bounds = THRESHOLDS.get(task)
    if bounds is None:
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
        "thresholds": THRESHOLDS.get(results[0]["task"]),
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
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.num_envs < 1:
        fail(parser.prog, f"--num-envs must be >= 1, got {args.num_envs}")
    if args.episode_s is not None and not 0.0 < args.episode_s < math.inf:
        fail(parser.prog, f"--episode-s must be a finite number > 0, got {args.episode_s}")
    device = args.device or ("cuda" if args.sim == "mjwarp" and torch.cuda.is_available() else "cpu")
    common = dict(sim=args.sim, num_envs=args.num_envs, seed=args.seed, device=device, episodes_s=args.episode_s)
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
