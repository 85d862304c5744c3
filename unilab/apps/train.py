"""``train``: compose the Hydra config, build env and trainer, run, and write the run directory.

Same overrides from both entry points:
``train --algo sac --task g1_walk_flat --sim mjwarp algo.max_iterations=160 ...`` and
``python scripts/train.py algo=sac task=g1_walk_flat sim=mjwarp algo.max_iterations=160 ...``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import faulthandler
import json
import os
import re
import signal
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, NoReturn

import mujoco
import torch
from hydra import compose, initialize_config_dir
from hydra.core.config_store import ConfigStore
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.errors import HydraException
from omegaconf import OmegaConf, open_dict
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException
from tqdm import tqdm

from torchrl_ext.distributed import RankLost, Vote, World
from torchrl_ext.export import export_policy_onnx
from torchrl_ext.trainer import IterationTimer, Lap, LogPoint, OffPolicyTrainer
from unilab.apps.checkpoint import (
    CheckpointError,
    check_compatible,
    list_checkpoints,
    load_checkpoint,
    prune_checkpoints,
    save_checkpoint,
)
from unilab.apps.cli import ArgumentParser, fail
from unilab.apps.config import TaskSelection, TrainConfig, check_bools, validate
from unilab.apps.loggers import RunLogger
from unilab.apps.metrics import TailRateMeter
from unilab.apps.play import VIDEO_NAME, play
from unilab.apps.resources import check_fits, replay_row_bytes
from unilab.apps.run_dir import (
    CONFIG_FILENAME,
    LOCK_FILENAME,
    POLICY_FILENAME,
    SUMMARY_FILENAME,
    RunLock,
    RunSummary,
    environment_info,
    make_run_dir,
    write_json_atomic,
)
from unilab.apps.startup import StartupClock, process_age_s
from unilab.apps.watchdog import StallWatchdog
from unilab.envs.functional import FunctionalEnv
from unilab.motion import MotionFileError, motion_files
from unilab.sim import BACKENDS, backend_device, default_backend
from unilab.tasks.registry import get_task, list_tasks, make_functional_env, override_names

# The process's age once everything above is imported: the first start-up phase a user waits through.
IMPORTED_AFTER_S = process_age_s()
CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"  # shipped in the package, so a wheel can train
ALGOS = ("sac", "flashsac")


def experiments() -> list[str]:
    """The presets of ``configs/experiment``, chosen with ``+experiment=NAME``: a recipe's settings across groups."""
    return sorted(path.stem for path in (CONFIG_DIR / "experiment").glob("*.yaml"))


def _group(overrides: list[str], name: str) -> str | None:
    values = [o.split("=", 1)[1] for o in overrides if o.startswith(f"{name}=")]
    return values[-1] if values else None


def store_configs() -> None:
    """The typed schema as the base of the defaults list (the one source of defaults), every registered task as an
    option of Hydra's ``task`` group and its per-algorithm tuning files as options of ``tuning``, so the defaults
    list finds tasks wherever their packages live."""
    store = ConfigStore.instance()
    store.store(name="train_schema", node=TrainConfig)
    for name in list_tasks():
        store.store(group="task", name=name, node=TaskSelection(name=name))
        for algo, path in get_task(name).tuning.items():
            store.store(group="tuning", name=f"{algo}_{name}", node=OmegaConf.load(path), package="algo")


def _leaves(node: object, prefix: str = "") -> list[tuple[str, object]]:
    """``(dotted path, value)`` of a config's leaves (``algo.num_envs``)."""
    if not isinstance(node, dict) or not node:
        return [(prefix, node)]
    return [leaf for name, value in node.items() for leaf in _leaves(value, f"{prefix}.{name}" if prefix else name)]


def _leaf_keys(node: object, prefix: str = "") -> list[str]:
    return [key for key, _ in _leaves(node, prefix)]


_PACKAGE_HEADER = re.compile(r"^#\s*@package\s+(\S+)", re.MULTILINE)


def check_file_bools(choices: dict[str, str | None]) -> None:
    """``check_bools`` for the config files a composition chose (Hydra's ``choices``: group -> option), as they are
    written: the merge into the schema converts 2 or 'yes' to true there as it does on the command line. A file of
    the config directory puts its keys under its group unless its ``# @package`` header says else; the task's
    tuning file puts them under ``algo``, where ``store_configs`` stores it."""
    # (file, where its keys go, whether a ``# @package`` header in it decides that instead)
    files = [(CONFIG_DIR / group / f"{option}.yaml", group, True) for group, option in choices.items() if option]
    tuning = get_task(choices["task"]).tuning.get(choices["algo"]) if choices.get("task") else None
    if tuning is not None:
        files.append((Path(tuning), "algo", False))
    for path, package, by_header in files:
        if not path.is_file():  # the schema, or a group this project keeps in the ConfigStore
            continue
        text = path.read_text()
        header = _PACKAGE_HEADER.search(text) if by_header else None
        package = header.group(1) if header else package
        node = OmegaConf.to_container(OmegaConf.create(text), resolve=False)
        try:
            check_bools(_leaves(node, "" if package == "_global_" else package))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None


def schema_keys() -> list[str]:
    """Every key a user may set."""
    return _leaf_keys(OmegaConf.to_container(OmegaConf.structured(TrainConfig)))


def unknown_key_message(key: str) -> str:
    key = key.lstrip("+")
    close = difflib.get_close_matches(key, schema_keys(), n=1, cutoff=0.8)
    return f"unknown key {key}" + (f"; did you mean {close[0]}?" if close else "")


def compose_config(overrides: list[str]) -> TrainConfig:
    """Hydra composition checked against the typed schema; unknown names fail here, before any work."""
    algo, task, sim = (_group(overrides, g) for g in ("algo", "task", "sim"))
    experiment = _group(overrides, "+experiment")
    if experiment is not None and experiment not in experiments():
        raise ValueError(f"unknown experiment {experiment!r}; known experiments: {', '.join(experiments())}")
    if algo is not None and algo not in ALGOS:
        raise ValueError(f"unknown algo {algo!r}; known algos: {', '.join(ALGOS)}")
    if task is not None and task not in list_tasks():
        raise ValueError(f"unknown task {task!r}; known tasks: {', '.join(list_tasks())}")
    if sim in (None, "auto"):
        overrides = [o for o in overrides if not o.startswith("sim=")] + [f"sim={default_backend()}"]
    elif sim not in BACKENDS:
        raise ValueError(f"unknown sim {sim!r}; known backends: {', '.join(BACKENDS)}")
    store_configs()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base=None):
        composed = compose(config_name="train", overrides=overrides, return_hydra_config=True)
    with open_dict(composed):
        choices = OmegaConf.to_container(composed.pop("hydra").runtime.choices)
    check_file_bools(choices)
    unknown = sorted(set(_leaf_keys(OmegaConf.to_container(composed))) - set(schema_keys()))
    if unknown:
        raise ValueError(unknown_key_message(unknown[0]))
    # The values as the user typed them (compose has checked their syntax, and converted them to the schema's types).
    given = OverridesParser.create().parse_overrides(overrides)
    check_bools((o.key_or_group, o.value()) for o in given if not o.is_delete())
    typed = OmegaConf.merge(OmegaConf.structured(TrainConfig), composed)
    cfg: TrainConfig = OmegaConf.to_object(typed)
    check_task_keys(cfg)
    validate(cfg)
    return cfg


def check_task_keys(cfg: TrainConfig) -> None:
    """``task.*`` keys set for a task that does not take them. The schema holds the keys of every task (``train
    --cfg`` lists them all, those left unset as null) since tasks are registered at run time; which of them a task
    takes, its factory's arguments and ``TaskConfig``'s fields say (``override_names``)."""
    accepted = override_names(cfg.task.name)
    stray = [key for key in task_overrides(cfg) if key not in accepted]
    if stray:
        own = [f"task.{f.name}" for f in dataclasses.fields(TaskSelection) if f.name in accepted - {"name"}]
        raise ValueError(
            f"task.{stray[0]} does not apply to task {cfg.task.name!r}; its task keys are {', '.join(own)} "
            "(train --cfg lists the keys of every task)"
        )


def resolve_device(cfg: TrainConfig, world: World) -> str:
    """``training.device``, else cuda for mjwarp when CUDA is available, else cpu; a CUDA device this machine
    lacks, or a device the backend cannot hold its worlds on, is refused here, before any work, rather than by an
    assertion deep inside torch or the env build. Under torchrun each rank takes its own GPU, cuda:LOCAL_RANK."""
    device = cfg.training.device
    if device is not None:
        try:
            parsed = torch.device(device)
        except RuntimeError as exc:
            raise ValueError(f"training.device={device!r} is not a torch device ({exc})") from exc
        if parsed.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"training.device={device} but CUDA is not available on this machine")
    parsed = backend_device(cfg.sim.name, device)  # refuses a device the backend cannot hold its worlds on
    device = str(parsed)
    if parsed.type != "cuda" or world.size == 1:
        return device
    if parsed.index is not None:
        raise ValueError(
            f"training.device={device} names one GPU, but each of the {world.size} ranks uses cuda:LOCAL_RANK; "
            "set training.device=cuda or leave it unset"
        )
    if world.local_rank >= torch.cuda.device_count():
        raise ValueError(
            f"LOCAL_RANK={world.local_rank} but this machine has {torch.cuda.device_count()} CUDA devices; "
            "start at most one rank per GPU (torchrun --nproc_per_node)"
        )
    return f"cuda:{world.local_rank}"


def check_inputs(cfg: TrainConfig) -> None:
    """Files the config names must exist; checked first so a typo costs nothing."""
    if cfg.algo.resume and not Path(cfg.algo.resume).is_file():
        raise ValueError(f"algo.resume={cfg.algo.resume}: no such checkpoint file")
    if cfg.task.motion_file:
        try:
            motion_files(cfg.task.motion_file)
        except (FileNotFoundError, MotionFileError) as exc:
            raise ValueError(f"task.motion_file={cfg.task.motion_file}: {exc}") from None


def task_overrides(cfg: TrainConfig) -> dict[str, Any]:
    overrides: dict[str, Any] = {"obs_noise": cfg.task.obs_noise}
    if cfg.task.motion_file:
        overrides["motion_file"] = cfg.task.motion_file
    if cfg.task.episode_length_s is not None:
        overrides["episode_length_s"] = cfg.task.episode_length_s
    if cfg.task.failure_look_back is not None:
        overrides["failure_look_back"] = cfg.task.failure_look_back
    return overrides


def check_memory(cfg: TrainConfig, probe: FunctionalEnv, device: str, world: World) -> None:
    """Replay buffer, update minibatches and per-env physics state against the free memory of the device they live
    on; ``probe`` is a one-env build of the task, which gives the observation sizes without allocating the run.
    On the CPU every rank of this machine allocates its own share from the same memory."""
    a = cfg.algo
    row = replay_row_bytes(probe.obs_dims, probe.action_dim)
    sharing = world.local_size if torch.device(device).type == "cpu" else 1
    parts = {
        "replay": a.replay_buffer_n * a.num_envs * row * sharing,
        "update minibatches": a.batch_size * a.updates_per_step * row * sharing,
        "envs": a.num_envs * mujoco.MjData(probe.sim.model).nbuffer * sharing,
    }
    remedy = "lower algo.num_envs, algo.replay_buffer_n or algo.batch_size"
    if sharing > 1:
        remedy += f" (each of the {sharing} ranks on this machine needs its own)"
    check_fits(parts, torch.device(device), remedy)


def _summary_status(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / SUMMARY_FILENAME).read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None


def check_log_dir(run_dir: Path, resume: Path | None, resume_iteration: int | None) -> None:
    """Refuse a directory that already holds a run (a summary or checkpoints), unless this run continues it from
    its latest checkpoint and it did not complete. Anything else would overwrite later work: resuming an older
    checkpoint there, or a completed run, is refused rather than redirected, and the message says where to go."""
    checkpoints = list_checkpoints(run_dir)
    has_summary = (run_dir / SUMMARY_FILENAME).exists()
    if not checkpoints and not has_summary:
        # No run, but files under the names a run writes (a user's own, or a run's leftovers): never replace them.
        written = [name for name in (CONFIG_FILENAME, POLICY_FILENAME, VIDEO_NAME) if (run_dir / name).exists()]
        if written:
            raise ValueError(
                f"training.log_dir={run_dir} holds {', '.join(written)}, which a run would overwrite; "
                "choose a new directory"
            )
        return
    held = ", ".join([SUMMARY_FILENAME] * has_summary + [path.name for _, path in checkpoints[-3:]])
    status = _summary_status(run_dir)
    inside = resume is not None and resume.resolve().parent == run_dir.resolve()
    if not inside:
        hint = ""
        if checkpoints and status != "completed":
            hint = f", or continue that run with algo.resume={checkpoints[-1][1]}"
        raise ValueError(f"training.log_dir={run_dir} already holds a run ({held}); choose a new directory{hint}")
    new_dir = "resume into a new directory (leave training.log_dir unset, or name an empty one)"
    later = [path.name for it, path in checkpoints if it > (resume_iteration or 0)]
    if later:
        raise ValueError(
            f"refusing to resume {resume.name} into training.log_dir={run_dir}: it holds later checkpoints "
            f"({', '.join(later)}) that the resumed run would overwrite; {new_dir}"
        )
    if status == "completed":
        raise ValueError(
            f"refusing to resume {resume.name} into training.log_dir={run_dir}: that run completed and its "
            f"{SUMMARY_FILENAME} would be overwritten; {new_dir}"
        )


def claim_run_dir(cfg: TrainConfig, resume_iteration: int | None) -> tuple[Path, RunLock, bool]:
    """The run directory, locked for this process, and whether this call created it. The checks on what an
    explicit directory holds run under the lock, so two processes cannot both pass them."""
    try:
        return _claim_run_dir(cfg, resume_iteration)
    except OSError as exc:  # a read-only disk, a file where the directory should be: the user's to fix
        where = cfg.training.log_dir or cfg.training.log_root
        raise ValueError(f"cannot create or lock the run directory under {where}: {exc}") from None


def _claim_run_dir(cfg: TrainConfig, resume_iteration: int | None) -> tuple[Path, RunLock, bool]:
    if cfg.training.log_dir is None:
        run_dir = make_run_dir(None, cfg.algo.name, cfg.task.name, cfg.sim.name, root=cfg.training.log_root)
        return run_dir, RunLock(run_dir), True
    run_dir = Path(cfg.training.log_dir)
    created = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(run_dir)
    try:
        check_log_dir(run_dir, Path(cfg.algo.resume) if cfg.algo.resume else None, resume_iteration)
    except BaseException:
        lock.release()
        raise
    return run_dir, lock, created


def claim_for_world(cfg: TrainConfig, world: World, resume_iteration: int | None) -> tuple[Path, RunLock | None, bool]:
    """Rank 0 claims the run directory (``claim_run_dir``) and tells the other ranks where it is; a refusal reaches
    every rank, so each ends with a one-line error instead of waiting on rank 0. Only rank 0 holds the lock."""
    claimed, refusal = None, None
    if world.leader:
        try:
            claimed = claim_run_dir(cfg, resume_iteration)
        except ValueError as exc:
            refusal = exc
    where = world.broadcast_object(None if claimed is None else str(claimed[0]))
    if refusal is not None:
        raise refusal
    if where is None:
        raise ValueError("rank 0 could not claim the run directory (its error says why)")
    return claimed if claimed is not None else (Path(where), None, False)


@dataclass
class Prepared:
    """A run that passed every check and is built, ready for its first iteration."""

    cfg: TrainConfig
    env: FunctionalEnv
    trainer: OffPolicyTrainer
    run_dir: Path
    lock: RunLock | None  # held by rank 0, the one rank that writes the run directory
    world: World
    launched: float  # perf_counter at the start of ``prepare``
    startup: StartupClock  # seconds per start-up phase; the loop adds the pre-fill and the first iteration
    wall_before: float  # seconds since ``train`` started, carried over from the resumed checkpoint
    loop_before: float  # seconds of training loop, likewise


def prepare(cfg: TrainConfig) -> Prepared:
    """Everything a user can get wrong, checked in order of cost, then the env and trainer built; raises
    ``ValueError`` (one line) for bad input, before the first iteration."""
    launched = time.perf_counter()  # env build, compilation and capture count toward time-to-threshold
    clock = StartupClock(IMPORTED_AFTER_S)
    world = World.from_env()  # every rank runs every check below, so bad input fails on each before any work
    device = resolve_device(cfg, world)
    check_inputs(cfg)
    ckpt = None
    if cfg.algo.resume:
        ckpt = load_checkpoint(Path(cfg.algo.resume))
        check_compatible(ckpt["config"], cfg, Path(cfg.algo.resume))
        if ckpt["iteration"] >= cfg.algo.max_iterations:
            raise ValueError(
                f"algo.resume={cfg.algo.resume} is at iteration {ckpt['iteration']}, not below "
                f"algo.max_iterations={cfg.algo.max_iterations}; raise algo.max_iterations to train on"
            )
    probe = make_functional_env(cfg.task.name, sim="mujoco", num_envs=1, device="cpu", **task_overrides(cfg))
    check_memory(cfg, probe, device, world)
    world.start(torch.device(device), cfg.training.dist_timeout_s)
    clock.device = torch.device(device)
    try:
        run_dir, lock, created = claim_for_world(cfg, world, None if ckpt is None else ckpt["iteration"])
    except BaseException:
        world.close()
        raise
    try:
        clock.mark("checks")
        env = make_functional_env(
            cfg.task.name, sim=cfg.sim.name, num_envs=cfg.algo.num_envs, device=device, **task_overrides(cfg)
        )
        clock.mark("env_build", parts=env.sim.startup)
        trainer = OffPolicyTrainer(env, cfg.algo, world)
        clock.mark("trainer_build", parts=trainer.runner.startup)
        if ckpt is not None:
            try:
                trainer.load_state_dict(ckpt)
            except (RuntimeError, KeyError, ValueError) as exc:
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise CheckpointError(f"checkpoint {cfg.algo.resume} does not fit the config: {reason}") from None
    except BaseException:
        if lock is not None:
            lock.release()
        if created:  # leave no empty directory behind for a run that never started
            (run_dir / LOCK_FILENAME).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                run_dir.rmdir()
        world.close()
        raise
    return Prepared(
        cfg=cfg,
        env=env,
        trainer=trainer,
        run_dir=run_dir,
        lock=lock,
        world=world,
        launched=launched,
        startup=clock,
        wall_before=ckpt["train_wall_time_sec"] if ckpt is not None else 0.0,
        loop_before=ckpt["loop_wall_time_sec"] if ckpt is not None else 0.0,
    )


class StopSignals:
    """SIGINT, SIGTERM and SIGHUP all ask the loop to stop at the end of the current iteration, which is then saved.

    Stopping between iterations means the final checkpoint holds a consistent trainer, never one caught halfway
    through an update. Signals that arrive while stopping are reported and otherwise ignored, so the final
    checkpoint and summary are always finished (every file is also written atomically, so even SIGKILL leaves the
    previous version whole). Handlers can only be set from the main thread; elsewhere Ctrl-C keeps Python's
    KeyboardInterrupt, which the loop also treats as a stop.
    """

    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)

    def __init__(self) -> None:
        self.received: str | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: object) -> None:
        name = signal.Signals(signum).name
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
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

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


def run(cfg: TrainConfig) -> RunSummary:
    """Train as configured; returns the RunSummary written to the run directory."""
    return train(prepare(cfg))


def train(prepared: Prepared) -> RunSummary:
    """Run the training loop of a prepared run; the run directory's lock and the process group are released when
    it returns."""
    try:
        return _train(prepared)
    finally:
        if prepared.lock is not None:
            prepared.lock.release()
        prepared.world.close()


def _train(prepared: Prepared) -> RunSummary:
    """The loop, the same on every rank; rank 0 alone writes the run directory (config, summary, logs, checkpoints,
    ONNX, playback). Every rank steps ``num_envs`` envs per iteration in lockstep with the others (the update
    block's all-reduces hold them together), so rank 0 counts ``world.size`` times its own env steps."""
    cfg, env, trainer, run_dir, world = prepared.cfg, prepared.env, prepared.trainer, prepared.run_dir, prepared.world
    start_iteration = trainer.iteration
    config_dict = dataclasses.asdict(cfg)
    environment = environment_info()
    if world.leader:
        write_json_atomic(run_dir / CONFIG_FILENAME, {"config": config_dict, "environment": environment})
    logger = RunLogger(cfg.training.logger, run_dir) if world.leader else None
    steps_per_iteration = cfg.algo.num_envs * world.size
    meter = TailRateMeter(window=20)
    start_utc = datetime.now(UTC).isoformat()
    started = time.perf_counter()
    status, error, last_checkpoint, last_episodes = "running", None, None, {}
    health: dict[str, int] = {}  # the latest log point's counters
    digest, in_sync = None, None  # of the final weights, checked across ranks
    stop = StopSignals()
    vote = Vote(world)

    def loop_seconds() -> float:
        return prepared.loop_before + time.perf_counter() - started

    def summary(status: str, at: LogPoint | None = None) -> RunSummary:
        """The run so far; ``at`` a log point, whose counts match the meter's (the host may have queued more)."""
        return RunSummary.from_meter(
            meter,
            status=status,
            algo=cfg.algo.name,
            task=cfg.task.name,
            sim=cfg.sim.name,
            num_envs=cfg.algo.num_envs,
            world_size=world.size,
            completed_iterations=trainer.iteration if at is None else at.iteration,
            total_env_steps=(trainer.env_steps if at is None else at.env_steps) * world.size,
            training_wall_time_sec=loop_seconds(),
            start_time_utc=start_utc,
            end_time_utc=None if status == "running" else datetime.now(UTC).isoformat(),
            last_checkpoint=last_checkpoint,
            final_mean_reward=last_episodes.get("episode_return"),
            mean_episode_length=last_episodes.get("episode_length"),
            config=config_dict,
            environment=environment,
            error=error,
            stopped_by=stop.received,
            health=dict(health),
            weights_digest=digest,
            ranks_in_sync=in_sync,
            startup_sec=dict(prepared.startup.phases),
            startup_total_sec=prepared.startup.total(),
        )

    def publish(result: RunSummary) -> None:
        if world.leader:
            result.write(run_dir)

    def save() -> str:
        # Wall time since `train` started rides along (continued across resumes), so evaluating saved
        # checkpoints gives time-to-threshold.
        state = {
            **trainer.state_dict(),
            "config": config_dict,
            "train_wall_time_sec": prepared.wall_before + time.perf_counter() - prepared.launched,
            "loop_wall_time_sec": loop_seconds(),
        }
        path = save_checkpoint(state, run_dir / f"model_{trainer.iteration}.pt")
        prune_checkpoints(run_dir, cfg.training.keep_checkpoints, path)
        return str(path)

    def record_laps(laps: list[Lap]) -> list[tuple[float, dict[str, float]]]:
        """Resolve ``laps`` into the tail meter; returns their seconds and splits."""
        resolved = timer.resolve(laps)
        for seconds, phases in resolved:
            meter.record(steps_per_iteration, seconds, phases)
        return resolved

    def log(point: LogPoint) -> None:
        nonlocal last_episodes
        laps = record_laps(point.laps)
        point.laps = []  # timed once, whatever fails below
        metrics, stats, counts = trainer.report(point)
        health.update(counts)
        if "episode_return" in stats:
            last_episodes = stats
        rate = meter.tail_env_steps_per_sec()
        scalars = {**{f"loss/{k}": v for k, v in metrics.items()}, **{f"episode/{k}": v for k, v in stats.items()}}
        scalars.update({f"health/{k}": v for k, v in counts.items()})
        if laps:  # the spread shows stalls (log points, slow steps) that the tail aggregate folds in
            ms = sorted(1000 * seconds for seconds, _ in laps)
            scalars.update({"perf/iteration_ms_min": ms[0], "perf/iteration_ms_max": ms[-1]})
            scalars["perf/iteration_ms_median"] = ms[len(ms) // 2]
        if rate is not None:
            scalars["perf/tail_env_steps_per_sec"] = rate
            bar.set_postfix(steps_per_s=f"{rate:,.0f}")
        if logger is not None:
            logger.log_scalars(scalars, point.iteration * steps_per_iteration)
        publish(summary("running", point))

    def log_ready(wait: bool) -> None:
        """Log the pending points the GPU has passed (all of them with ``wait``), oldest first."""
        while pending and (wait or pending[0].ready()):
            log(pending[0])
            pending.popleft()

    publish(summary("running"))
    timer = IterationTimer(env.device)
    progress = cfg.training.progress and world.leader
    bar = tqdm(total=cfg.algo.max_iterations, initial=trainer.iteration, disable=not progress, unit="it")
    # Log points are read back only once the GPU has got past them, so logging never stalls the GPU.
    pending: deque[LogPoint] = deque()
    stopping = False

    def stalled(message: str) -> None:
        """On the watchdog's thread, with the main thread blocked on the device: host state only."""
        nonlocal error
        error = message
        publish(summary("failed"))

    stacks = run_dir / "stall_stacks.txt" if world.leader else None
    watchdog = StallWatchdog(cfg.training.stall_timeout_s, stacks, stalled)
    # until the final checkpoint, summary and policy are written; playback can be interrupted
    with stop, watchdog:
        try:
            stopping = stop.agreed(vote, check_point=False)
            while not trainer.ready and not stopping:  # replay pre-fill: not an iteration
                trainer.collect()
                stopping = stop.agreed(vote, check_point=False)
            prepared.startup.mark("prefill")
            first = True
            while trainer.iteration < cfg.algo.max_iterations and not stopping:
                trainer.collect()
                timer.split()
                metrics = trainer.update()
                trainer.iteration += 1
                watchdog.beat()  # the first beat arms it: compiles and captures are behind us
                if first:  # capture / first-update iteration: excluded from the tail rate
                    prepared.startup.mark("first_iteration")
                    timer.start()
                    first = False
                else:
                    timer.lap()
                bar.update(1)
                log_ready(wait=False)
                last = trainer.iteration == cfg.algo.max_iterations
                at_log = trainer.iteration % cfg.training.log_interval == 0 or last
                if at_log:
                    point = trainer.log_point(metrics)
                    point.laps = timer.take()
                    pending.append(point)
                if world.leader and (trainer.iteration % cfg.algo.save_interval == 0 or last):
                    last_checkpoint = save()
                stopping = stop.agreed(vote, check_point=at_log)
            log_ready(wait=True)
            status = "completed" if trainer.iteration >= cfg.algo.max_iterations else "interrupted"
        except KeyboardInterrupt:  # Ctrl-C off the main thread, where no handler turns it into a stop
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
                if world.leader and status != "completed" and trainer.iteration > start_iteration:
                    last_checkpoint = save()
                if status == "completed" or stopping:  # every rank is here; after a failure one may be gone
                    digests = world.gather_digests(trainer.learner.shared_tensors())
                    digest, in_sync = digests[0], (len(set(digests)) == 1 if world.size > 1 else None)
                    if in_sync is False:
                        error = f"ranks ended with different weights (digests by rank: {', '.join(digests)})"
            except Exception as exc:  # e.g. a sticky CUDA error: keep the first error, still write the summary
                late = f"{type(exc).__name__}: {exc}"
                status, error = "failed", late if error is None else f"{error}; then, while stopping: {late}"
            if logger is not None:
                logger.close()
            result = summary(status)
            publish(result)
        if cfg.training.export_onnx and world.leader:
            metadata = policy_metadata(env, cfg, environment)
            export_policy_onnx(trainer.loss.actor, env.obs_dims["policy"], run_dir / POLICY_FILENAME, metadata=metadata)
    # A stop skips playback: a scheduler's SIGTERM comes with a grace period that rendering could outlast.
    if not cfg.training.no_play and last_checkpoint is not None and status == "completed":
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
    if world.leader:
        print(f"run directory: {run_dir}")
    return result


def policy_metadata(env: FunctionalEnv, cfg: TrainConfig, environment: dict[str, Any]) -> dict[str, str]:
    """What ``policy.onnx`` carries for a deployment and for ``unilab play/eval --onnx``: the env's policy
    interface (JSON values) and where the policy came from."""
    interface = {key: json.dumps(value) for key, value in env.policy_io().items()}
    origin = {
        "task": cfg.task.name,
        "algo": cfg.algo.name,
        "commit": str(environment.get("git_commit")),
        "motion_file": cfg.task.motion_file or "",
    }
    return {**interface, **origin}


MAIN_KEYS = (
    "algo.num_envs",
    "algo.max_iterations",
    "algo.save_interval",
    "algo.seed",
    "algo.compile",
    "algo.resume",
    "task.motion_file",
    "task.obs_noise",
    "training.device",
    "training.log_dir",
    "training.no_play",
    "training.export_onnx",
    "training.keep_checkpoints",
)


def next_steps(prepared: Prepared, summary: RunSummary) -> str:
    """What to look at after a run, and on the CPU backend what the run was: a smoke run, not a trained policy."""
    cfg, run_dir = prepared.cfg, prepared.run_dir
    checkpoint = summary.last_checkpoint or f"{run_dir}/model_<iteration>.pt"
    lines = []
    if cfg.sim.name == "mujoco":
        lines.append(
            f"This was a short smoke run on the CPU ({cfg.algo.num_envs} envs, {summary.completed_iterations} "
            "iterations): it checks the whole pipeline; the policy is not expected to work yet. Policies learn in "
            "minutes on a GPU: train --sim mjwarp (docs/results.md)."
        )
    lines += [
        "next:",
        f"  tensorboard --logdir {run_dir}",
        f"  unilab eval --checkpoint {checkpoint}",
        f"  unilab play --checkpoint {checkpoint}",
    ]
    return "\n".join(lines)


def overrides_help() -> str:
    """``train --help``'s epilog: the override syntax and the keys most runs set, with their schema defaults."""
    defaults = OmegaConf.structured(TrainConfig)
    rows = [f"  {key:<28} {OmegaConf.select(defaults, key)}" for key in MAIN_KEYS]
    return "\n".join(
        [
            "overrides: key=value, e.g. algo.num_envs=2048 training.no_play=true algo.actor_hidden=[256,128]",
            "(the algo and task tuning files and the sim profile change some defaults; --cfg shows the result)",
            "",
            "main keys and their defaults:",
            *rows,
            "",
            "every key: train --cfg",
        ]
    )


def lost_rank(prog: str, exc: RankLost) -> NoReturn:
    """A run ended by another rank: one line and exit status 1. A traceback would only show where this rank
    waited; the rank that failed first logs the cause (and rank 0's run_summary.json holds this line)."""
    print(f"{prog}: error: {exc}", file=sys.stderr)
    raise SystemExit(1) from None


def main(argv: list[str] | None = None) -> None:
    """Console command ``train``: ``--algo/--task/--sim`` pick the config groups; the rest are Hydra overrides."""
    if argv is None:  # this process is the command: a crash in native code (CUDA, Warp, MuJoCo) would otherwise
        faulthandler.enable()  # end the run without a word; print every thread's Python stack first
    parser = ArgumentParser(
        prog="train",
        usage="train [--algo ALGO] [--task TASK] [--sim SIM] [--cfg] [key=value ...]",
        description="Train a policy. Every setting is a key=value override of the config (Hydra syntax).",
        epilog=overrides_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--algo", default=None, help=f"one of {', '.join(ALGOS)} (default sac)")
    parser.add_argument("--task", default=None, help=f"one of {', '.join(list_tasks())} (default g1_walk_flat)")
    parser.add_argument("--sim", default=None, help="mjwarp or mujoco (default: mjwarp with CUDA, else mujoco)")
    parser.add_argument("--cfg", action="store_true", help="print the resolved config and exit without training")
    arguments = list(sys.argv[1:] if argv is None else argv)
    for i in range(len(arguments) - 1):  # Hydra's spelling, --cfg job, means the same
        if arguments[i] == "--cfg" and arguments[i + 1] == "job":
            del arguments[i + 1]
            break
    args, overrides = parser.parse_known_args(arguments)
    for flag in [o for o in overrides if o.startswith("-")]:
        fail(parser.prog, f"unrecognised option {flag}")
    groups = [
        f"{name}={value}" for name, value in (("algo", args.algo), ("task", args.task), ("sim", args.sim)) if value
    ]
    clashing = [o for o in overrides if o.split("=", 1)[0] in ("algo", "task", "sim")]
    if groups and clashing:
        fail(parser.prog, f"give algo/task/sim either as --flags or as overrides, not both: {clashing}")
    try:
        cfg = compose_config(groups + overrides)
        if args.cfg:
            print(OmegaConf.to_yaml(OmegaConf.structured(cfg)), end="")
            return
        prepared = prepare(cfg)
    except (OmegaConfBaseException, HydraException) as exc:
        # A value of the wrong type surfaces from Hydra as a merge error around the schema's own: name the key.
        cause = exc if isinstance(exc, OmegaConfBaseException) else exc.__cause__
        if isinstance(cause, ConfigKeyError | ConfigAttributeError) and getattr(cause, "full_key", None):
            fail(parser.prog, unknown_key_message(cause.full_key))
        if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
            fail(parser.prog, f"{cause.full_key}: {str(cause).strip().splitlines()[0]}")
        fail(parser.prog, str(exc).strip().splitlines()[0])
    except ValueError as exc:  # unknown name, impossible value, bad file, too little memory
        fail(parser.prog, str(exc))
    except RankLost as exc:  # another rank never joined, or failed while this one waited at start-up
        lost_rank(parser.prog, exc)
    try:
        summary = train(prepared)
    except RankLost as exc:
        lost_rank(parser.prog, exc)
    if prepared.world.leader:
        print(next_steps(prepared, summary))
    if argv is None:  # this process is the command: its run is saved, so a late signal must not crash the exit
        for signum in StopSignals.SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
    if summary.status == "interrupted" and summary.stopped_by:  # the shell's convention for death by a signal
        raise SystemExit(128 + signal.Signals[summary.stopped_by])
    if summary.status != "completed":
        raise SystemExit(1)
