"""``train``: compose the Hydra config, build env and trainer, run, and write the run directory.

Same overrides from both entry points:
``train --algo sac --task g1_walk_flat --sim mjwarp algo.max_iterations=160 ...`` and
``python scripts/train.py algo=sac task=g1_walk_flat sim=mjwarp algo.max_iterations=160 ...``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from collections import deque
from datetime import UTC, datetime
from pathlib import Path

import torch
from hydra import compose, initialize_config_dir
from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from torchrl_ext.config import TrainConfig, validate
from torchrl_ext.export import export_policy_onnx
from torchrl_ext.metrics import TailRateMeter
from torchrl_ext.run_dir import SUMMARY_FILENAME, RunSummary, environment_info, make_run_dir, write_json_atomic
from torchrl_ext.trainer import IterationTimer, Lap, LogPoint, OffPolicyTrainer
from unilab.play import play
from unilab.sim import BACKENDS, default_backend
from unilab.tasks.registry import list_tasks, make_functional_env

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
ALGOS = ("sac", "flashsac")


def _group(overrides: list[str], name: str) -> str | None:
    values = [o.split("=", 1)[1] for o in overrides if o.startswith(f"{name}=")]
    return values[-1] if values else None


def compose_config(overrides: list[str]) -> TrainConfig:
    """Hydra composition checked against the typed schema; unknown names fail here, before any work."""
    algo, task, sim = (_group(overrides, g) for g in ("algo", "task", "sim"))
    if algo is not None and algo not in ALGOS:
        raise ValueError(f"unknown algo {algo!r}; known algos: {', '.join(ALGOS)}")
    if task is not None and task not in list_tasks():
        raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(list_tasks())}")
    if sim in (None, "auto"):
        overrides = [o for o in overrides if not o.startswith("sim=")] + [f"sim={default_backend()}"]
    elif sim not in BACKENDS:
        raise ValueError(f"unknown sim {sim!r}; known backends: {', '.join(BACKENDS)}")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        composed = compose(config_name="train", overrides=overrides)
    typed = OmegaConf.merge(OmegaConf.structured(TrainConfig), composed)
    cfg: TrainConfig = OmegaConf.to_object(typed)
    validate(cfg)
    return cfg


def resolve_device(cfg: TrainConfig) -> str:
    """``training.device``, else cuda for mjwarp when CUDA is available, else cpu; a CUDA device this machine
    lacks is refused here, before any work, rather than by an assertion deep inside torch."""
    device = cfg.training.device or ("cuda" if cfg.sim.name == "mjwarp" and torch.cuda.is_available() else "cpu")
    try:
        kind = torch.device(device).type
    except RuntimeError as exc:
        raise ValueError(f"training.device={device!r} is not a torch device ({exc})") from exc
    if kind == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"training.device={device} but CUDA is not available on this machine")
    return device


def check_run_paths(cfg: TrainConfig) -> None:
    """Refuse, before any work, a checkpoint to resume that is not there, and an explicit ``training.log_dir``
    that already holds a run: a new run would overwrite its checkpoints and summary. Continuing that run
    (resuming from one of its own checkpoints) is the one way back into it."""
    resume = Path(cfg.algo.resume) if cfg.algo.resume else None
    if resume is not None and not resume.is_file():
        raise ValueError(f"algo.resume={cfg.algo.resume}: no such checkpoint file")
    if cfg.training.log_dir is None:
        return
    log_dir = Path(cfg.training.log_dir)
    continuing = resume is not None and resume.resolve().parent == log_dir.resolve()
    if (log_dir / SUMMARY_FILENAME).exists() and not continuing:
        raise ValueError(
            f"training.log_dir={log_dir} already holds a run ({SUMMARY_FILENAME}); choose a new directory, "
            f"or continue that run with algo.resume={log_dir}/model_<iteration>.pt"
        )


def run(cfg: TrainConfig) -> RunSummary:
    """Train as configured; returns the RunSummary written to the run directory."""
    launched = time.perf_counter()  # env build, compilation and capture count toward time-to-threshold
    device = resolve_device(cfg)
    check_run_paths(cfg)
    task_args = {"motion_file": cfg.task.motion_file} if cfg.task.motion_file else {}
    env = make_functional_env(
        cfg.task.name,
        sim=cfg.sim.name,
        num_envs=cfg.algo.num_envs,
        device=device,
        obs_noise=cfg.task.obs_noise,
        **task_args,
    )
    trainer = OffPolicyTrainer(env, cfg.algo)
    if cfg.algo.resume:
        trainer.load_state_dict(torch.load(cfg.algo.resume, map_location=env.device, weights_only=False))
    run_dir = make_run_dir(cfg.training.log_dir, cfg.algo.name, cfg.task.name, cfg.sim.name, root=cfg.training.log_root)
    config_dict = dataclasses.asdict(cfg)
    environment = environment_info(CONFIG_DIR.parent)
    write_json_atomic(run_dir / "run_config.json", {"config": config_dict, "environment": environment})
    writer = SummaryWriter(str(run_dir))
    meter = TailRateMeter(window=20)
    start_utc = datetime.now(UTC).isoformat()
    started = time.perf_counter()
    status, error, last_checkpoint, last_episodes = "running", None, None, {}

    def summary(status: str, at: LogPoint | None = None) -> RunSummary:
        """The run so far; ``at`` a log point, whose counts match the meter's (the host may have queued more)."""
        return RunSummary.from_meter(
            meter,
            status=status,
            algo=cfg.algo.name,
            task=cfg.task.name,
            sim=cfg.sim.name,
            num_envs=cfg.algo.num_envs,
            completed_iterations=trainer.iteration if at is None else at.iteration,
            total_env_steps=trainer.env_steps if at is None else at.env_steps,
            training_wall_time_sec=time.perf_counter() - started,
            start_time_utc=start_utc,
            end_time_utc=None if status == "running" else datetime.now(UTC).isoformat(),
            last_checkpoint=last_checkpoint,
            final_mean_reward=last_episodes.get("episode_return"),
            mean_episode_length=last_episodes.get("episode_length"),
            config=config_dict,
            environment=environment,
            error=error,
        )

    def save() -> str:
        path = run_dir / f"model_{trainer.iteration}.pt"
        # Wall time since `train` started rides along, so evaluating saved checkpoints gives time-to-threshold.
        wall = time.perf_counter() - launched
        torch.save({**trainer.state_dict(), "config": config_dict, "train_wall_time_sec": wall}, path)
        return str(path)

    def record_laps(laps: list[Lap]) -> list[tuple[float, dict[str, float]]]:
        """Resolve ``laps`` into the tail meter; returns their seconds and splits."""
        resolved = timer.resolve(laps)
        for seconds, phases in resolved:
            meter.record(cfg.algo.num_envs, seconds, phases)
        return resolved

    def log(point: LogPoint) -> None:
        nonlocal last_episodes
        laps = record_laps(point.laps)
        point.laps = []  # timed once, whatever fails below
        metrics, stats = trainer.report(point)
        if "episode_return" in stats:
            last_episodes = stats
        rate = meter.tail_env_steps_per_sec()
        scalars = {**{f"loss/{k}": v for k, v in metrics.items()}, **{f"episode/{k}": v for k, v in stats.items()}}
        if laps:  # the spread shows stalls (log points, slow steps) that the tail aggregate folds in
            ms = sorted(1000 * seconds for seconds, _ in laps)
            scalars.update({"perf/iteration_ms_min": ms[0], "perf/iteration_ms_max": ms[-1]})
            scalars["perf/iteration_ms_median"] = ms[len(ms) // 2]
        if rate is not None:
            scalars["perf/tail_env_steps_per_sec"] = rate
            bar.set_postfix(steps_per_s=f"{rate:,.0f}")
        for key, value in scalars.items():
            writer.add_scalar(key, value, point.iteration * cfg.algo.num_envs)
        summary("running", point).write(run_dir)

    def log_ready(wait: bool) -> None:
        """Log the pending points the GPU has passed (all of them with ``wait``), oldest first."""
        while pending and (wait or pending[0].ready()):
            log(pending[0])
            pending.popleft()

    summary("running").write(run_dir)
    timer = IterationTimer(env.device)
    bar = tqdm(total=cfg.algo.max_iterations, initial=trainer.iteration, disable=not cfg.training.progress, unit="it")
    # Log points are read back only once the GPU has got past them, so logging never stalls the GPU.
    pending: deque[LogPoint] = deque()
    try:
        while not trainer.ready:  # replay pre-fill: not an iteration
            trainer.collect()
        first = True
        while trainer.iteration < cfg.algo.max_iterations:
            trainer.collect()
            timer.split()
            metrics = trainer.update()
            trainer.iteration += 1
            if first:  # capture / first-update iteration: excluded from the tail rate
                timer.start()
                first = False
            else:
                timer.lap()
            bar.update(1)
            log_ready(wait=False)
            last = trainer.iteration == cfg.algo.max_iterations
            if trainer.iteration % cfg.training.log_interval == 0 or last:
                point = trainer.log_point(metrics)
                point.laps = timer.take()
                pending.append(point)
            if trainer.iteration % cfg.algo.save_interval == 0 or last:
                last_checkpoint = save()
        log_ready(wait=True)
        status = "completed"
    except KeyboardInterrupt:
        status = "interrupted"
    except Exception as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        bar.close()
        try:
            if status == "interrupted":  # what ran before the stop is still worth its log lines
                log_ready(wait=True)
            for laps in [*(point.laps for point in pending), timer.take()]:  # time every iteration that ran
                record_laps(laps)
            if status != "completed" and trainer.iteration > 0:
                last_checkpoint = save()
        except Exception as exc:  # e.g. a sticky CUDA error: keep the first error, still write the summary
            stopping = f"{type(exc).__name__}: {exc}"
            status, error = "failed", stopping if error is None else f"{error}; then, while stopping: {stopping}"
        writer.close()
        result = summary(status)
        result.write(run_dir)
    if cfg.training.export_onnx:
        export_policy_onnx(trainer.loss.actor, env.obs_dims["policy"], run_dir / "policy.onnx")
    if not cfg.training.no_play and last_checkpoint is not None:
        try:
            video = play(
                Path(last_checkpoint),
                None,
                out=run_dir,
                num_envs=cfg.training.play_envs,
                seconds=cfg.training.play_seconds,
            )
            print(f"playback: {video}")
        except Exception as exc:  # the run itself succeeded and is saved; say what failed, keep the status
            result.error = f"playback failed: {type(exc).__name__}: {exc}"
            result.write(run_dir)
            print(result.error, file=sys.stderr)
    print(f"run directory: {run_dir}")
    return result


def main(argv: list[str] | None = None) -> None:
    """Console command ``train``: ``--algo/--task/--sim`` pick the config groups; the rest are Hydra overrides."""
    parser = argparse.ArgumentParser(prog="train", description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default=None, help=f"one of {', '.join(ALGOS)} (default sac)")
    parser.add_argument("--task", default=None, help=f"one of {', '.join(list_tasks())} (default g1_walk_flat)")
    parser.add_argument("--sim", default=None, help="mjwarp or mujoco (default: mjwarp with CUDA, else mujoco)")
    args, overrides = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    for flag in [o for o in overrides if o.startswith("-")]:
        parser.error(f"unrecognised option {flag}")
    groups = [
        f"{name}={value}" for name, value in (("algo", args.algo), ("task", args.task), ("sim", args.sim)) if value
    ]
    clashing = [o for o in overrides if o.split("=", 1)[0] in ("algo", "task", "sim")]
    if groups and clashing:
        parser.error(f"give algo/task/sim either as --flags or as overrides, not both: {clashing}")
    try:
        cfg = compose_config(groups + overrides)
        resolve_device(cfg)
        check_run_paths(cfg)
    except OmegaConfBaseException as exc:  # a value of the wrong type: name the key, skip omegaconf's internals
        first_line = str(exc).strip().splitlines()[0]
        parser.error(f"{exc.full_key}: {first_line}" if getattr(exc, "full_key", None) else first_line)
    except (ValueError, HydraException) as exc:  # unknown name, impossible value, bad override syntax
        parser.error(str(exc).strip())
    summary = run(cfg)
    if summary.status != "completed":
        raise SystemExit(1)
