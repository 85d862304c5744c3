"""A training run: checked and built by ``TrainingRun.prepare``, then ``run`` drives the loop and writes the run
directory (config, summary, logs, checkpoints, ONNX policy); the ``train`` command plays the final policy back.

The loop is the same on every rank; rank 0 alone writes the run directory. Every rank steps ``num_envs`` envs per
iteration in lockstep with the others (the update block's all-reduces hold them together), so rank 0 counts
``world.size`` times its own env steps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from tqdm import tqdm

from torchrl_ext.distributed import Vote, World
from unilab.core import startup_gc
from unilab.core.cache_dirs import configure
from unilab.core.files import DiskFullError
from unilab.envs.functional import FunctionalEnv
from unilab.envs.layout import task_layout
from unilab.envs.runner import NonFiniteError
from unilab.run.checkpoint import CheckpointError, nonfinite_tensors, prune_checkpoints, save_checkpoint
from unilab.run.config import TrainConfig, task_overrides
from unilab.run.loggers import RunLogger
from unilab.run.metrics import TailRateMeter
from unilab.run.precompile import step_file
from unilab.run.preflight import check_inputs, check_memory, load_resume, resolve_device
from unilab.run.progress import announce
from unilab.run.run_claim import Claim, claim_for_world
from unilab.run.run_dir import (
    CONFIG_FILENAME,
    POLICY_FILENAME,
    STACKS_FILENAME,
    Progress,
    RunRecord,
    RunSummary,
    environment_info,
    write_json_atomic,
)
from unilab.run.signals import StopSignals
from unilab.run.startup import StartupClock, cache_line, process_age_s
from unilab.run.watchdog import StallWatchdog
from unilab.tasks.registry import build_env, make_task
from unilab.train.loop import IterationTimer, Lap, LogPoint, NonFiniteValueError, Trainer
from unilab.train.off_policy import OffPolicyTrainer
from unilab.train.on_policy import OnPolicyTrainer
from unilab.train.prewarm import UpdatePrewarm

if TYPE_CHECKING:  # viser loads only for a run that serves a page
    from unilab.viewer.stream import TrainingStream

# The process's age once everything a run needs is imported: the first start-up phase a user waits through.
IMPORTED_AFTER_S = process_age_s()
TAIL_WINDOW = 20  # iterations the tail rate is taken over


@dataclass
class LoopState:
    """What the loop carries from one iteration to the next, beside the trainer's own state."""

    meter: TailRateMeter  # the timed iterations, for the tail rate
    timer: IterationTimer
    vote: Vote  # the ranks' agreement to stop
    start_iteration: int  # the trainer's iteration as the run was built (past 0 when resumed)
    steps_per_iteration: int  # env steps of every rank together
    # Log points are read back only once the GPU has got past them, so logging never stalls the GPU.
    pending: deque[LogPoint] = field(default_factory=deque)
    stopping: bool = False  # every rank agreed to stop
    started: float = 0.0  # perf_counter as the loop began


@dataclass
class Outputs:
    """Where the loop reports as it goes: opened with the run's first file, when a signal has become a stop, and
    closed by ``_finish``."""

    bar: tqdm
    logger: RunLogger | None  # rank 0's
    viewer: TrainingStream | None  # with ``training.viewer``, rank 0's


@dataclass
class TrainingRun:
    """A run that passed every check and is built, ready for its first iteration."""

    cfg: TrainConfig
    env: FunctionalEnv
    trainer: Trainer
    claim: Claim
    world: World
    launched: float  # perf_counter at the start of ``prepare``
    startup: StartupClock  # seconds per start-up phase; the loop adds the pre-fill and the first iteration
    wall_before: float  # seconds since ``train`` started, carried over from the resumed checkpoint
    loop_before: float  # seconds of training loop, likewise
    record: RunRecord  # what every summary restates
    loop: LoopState
    progress: Progress = field(default_factory=Progress)
    signals: StopSignals = field(default_factory=StopSignals)  # installed by the command, else by ``run``

    @property
    def run_dir(self) -> Path:
        return self.claim.run_dir

    @classmethod
    def prepare(
        cls, cfg: TrainConfig, signals: StopSignals | None = None, update_started: subprocess.Popen | None = None
    ) -> TrainingRun:
        """Everything a user can get wrong, checked in order of cost, then the env and trainer built; raises
        ``ValueError`` (one line) for bad input, before the first iteration. ``signals``: the command's, installed
        before its start-up (``StopSignals.raising``); ``update_started``: the side process compiling the update that
        the command started for this run, if any (``unilab.apps.early_update``)."""
        launched = time.perf_counter()  # env build, compilation and capture count toward time-to-threshold
        clock = StartupClock(IMPORTED_AFTER_S)
        caches = configure()  # the command placed them before its imports; a run started from Python, here
        world = World.from_env()  # every rank runs every check below, so bad input fails on each before any work
        device = resolve_device(cfg, world)
        check_inputs(cfg)
        if cfg.training.viewer and world.leader:
            from unilab.viewer.server import LOOPBACK, check_port  # viser, only for a run that serves a page

            check_port(LOOPBACK, cfg.training.viewer_port)
        ckpt = load_resume(cfg)
        task = make_task(cfg.task.name, **task_overrides(cfg))
        layout = task_layout(task)
        check_memory(cfg, layout, device, world)
        world.start(torch.device(device), cfg.training.dist_timeout_s)
        clock.device = torch.device(device)
        try:
            claim = claim_for_world(cfg, world, None if ckpt is None else ckpt["iteration"])
        except BaseException:
            world.close()
            raise
        # Alone on its device, a run's update compiles in a side process meanwhile (unilab.train.prewarm).
        alone = world.size == 1
        spec = layout.spec(cfg.algo.num_envs, torch.device(device))
        prewarm = UpdatePrewarm.start(cfg.algo, spec, update_started) if alone else None
        try:
            clock.mark("checks")
            if world.leader:
                announce("train", cache_line(caches))
                announce("train", f"building {cfg.algo.num_envs} {cfg.task.name} envs on {cfg.sim.name} ({device})")
            if cfg.sim.warp_output is not None:  # read as each Warp module is built: before the env's are
                import warp

                warp.config.cuda_output = cfg.sim.warp_output
            env = build_env(task, sim=cfg.sim.name, num_envs=cfg.algo.num_envs, device=device)
            clock.mark("env_build", parts=env.sim.startup)
            if world.leader:
                captured = " (torch.compile, CUDA graph capture)" if torch.device(device).type == "cuda" else ""
                announce("train", f"building the {cfg.algo.name} trainer{captured}")
            trainer_class = OnPolicyTrainer if cfg.algo.on_policy else OffPolicyTrainer
            trainer = trainer_class(env, cfg.algo, world, step_file=step_file(cfg, device, env.sim.model))
            clock.mark("trainer_build", parts=trainer.runner.startup)
            if prewarm is not None:
                prewarm.wait()
                clock.mark("update_prewarm")
            if ckpt is not None:
                _resume(trainer, ckpt, cfg.algo.resume)
            record = _record(cfg, world)
        except BaseException:
            if prewarm is not None:
                prewarm.stop()
            claim.release()
            world.close()
            raise
        loop = LoopState(
            meter=TailRateMeter(window=TAIL_WINDOW),
            timer=IterationTimer(env.device),
            vote=Vote(world),
            start_iteration=trainer.iteration,
            steps_per_iteration=trainer.steps_per_iteration * world.size,
        )
        return cls(
            cfg=cfg,
            env=env,
            trainer=trainer,
            claim=claim,
            world=world,
            launched=launched,
            startup=clock,
            wall_before=ckpt["train_wall_time_sec"] if ckpt is not None else 0.0,
            loop_before=ckpt["loop_wall_time_sec"] if ckpt is not None else 0.0,
            record=record,
            loop=loop,
            signals=signals or StopSignals(),
        )

    def run(self) -> RunSummary:
        """Train to ``algo.max_iterations`` or a stop; returns the summary written to the run directory. The run
        directory's lock and the process group are released when it returns."""
        try:
            return self._run()
        finally:
            if self.claim.lock is not None:
                self.claim.lock.release()
            self.world.close()

    # -- the loop -------------------------------------------------------------------------------------------

    def _run(self) -> RunSummary:
        # From the first file on until the final checkpoint, summary and policy are written, a signal asks for a stop
        # (even one in the middle of the first summary's write); what the command does next (playback) can be
        # interrupted.
        with contextlib.nullcontext() if self.signals.installed else self.signals:
            self.signals.defer()
            result = self._train()
            self.signals.interrupt()
        return result

    def _train(self) -> RunSummary:
        """The run directory's first files, the loop and the final files, whatever ends the loop."""
        cfg, world, progress = self.cfg, self.world, self.progress
        outputs = self._begin()
        self._publish(self._summary("running"))
        stacks = self.run_dir / STACKS_FILENAME if world.leader else None
        with StallWatchdog(cfg.training.stall_timeout_s, stacks, self._stalled) as watchdog:
            try:
                self._iterate(watchdog, outputs)
                completed = self.trainer.iteration >= cfg.algo.max_iterations
                progress.status = "completed" if completed else "interrupted"
            except KeyboardInterrupt:  # Ctrl-C off the main thread, where no handler turns it into a stop
                progress.status = "interrupted"
            except Exception as exc:
                progress.status, progress.error = "failed", f"{type(exc).__name__}: {exc}"
                progress.poisoned = isinstance(exc, NonFiniteError)
                raise
            finally:
                result = self._finish(outputs)
        return result

    def _begin(self) -> Outputs:
        """The config on disk and the outputs opened, as the loop starts."""
        cfg, world = self.cfg, self.world
        if world.leader:
            write_json_atomic(
                self.run_dir / CONFIG_FILENAME,
                {"config": self.record.config, "environment": self.record.environment},
            )
        logger = RunLogger(cfg.training.logger, self.run_dir) if world.leader else None
        self.progress.start_time_utc = datetime.now(UTC).isoformat()
        self.loop.started = time.perf_counter()
        bar = tqdm(
            total=cfg.algo.max_iterations,
            initial=self.trainer.iteration,
            disable=not (cfg.training.progress and world.leader),
            unit="it",
        )
        viewer = None
        if cfg.training.viewer and world.leader:
            from unilab.viewer.server import LOOPBACK
            from unilab.viewer.stream import TrainingStream

            viewer = TrainingStream(self.env, LOOPBACK, cfg.training.viewer_port)
            print(
                f"viewer: {viewer.url} (over SSH: ssh -L {cfg.training.viewer_port}:localhost:"
                f"{cfg.training.viewer_port} <this host>)"
            )
        return Outputs(bar, logger, viewer)

    def _iterate(self, watchdog: StallWatchdog, outputs: Outputs) -> None:
        """The replay pre-fill (off-policy only), then iterations until the last or a stop agreed by every rank. An
        iteration is ``collect`` (one env step, or a whole rollout) and ``update``."""
        cfg, trainer, loop = self.cfg, self.trainer, self.loop
        loop.stopping = self.signals.agreed(loop.vote, check_point=False)
        while not trainer.ready and not loop.stopping:  # replay pre-fill: not an iteration
            trainer.collect()
            loop.stopping = self.signals.agreed(loop.vote, check_point=False)
        self.startup.mark("prefill", trainer.take_capture_split())  # an off-policy trainer's replay write
        first, native_checked = True, False
        while trainer.iteration < cfg.algo.max_iterations and not loop.stopping:
            trainer.collect()
            loop.timer.split()
            metrics = trainer.update()
            trainer.iteration += 1
            watchdog.beat()  # the first beat arms it: compiles and captures are behind us
            if first:  # capture / first-update iteration: excluded from the tail rate
                kept = trainer.runner.kept_split()  # an uncaptured runner (PPO's) loaded or saved its step just now
                parts = {k: v for k, v in kept.items() if k not in self.startup.phases} | trainer.take_capture_split()
                self.startup.mark("first_iteration", parts)
                self.startup.take_compile_split()
                # every physics call so far waited for the kernels built beside the tracing: their figures are final
                self.startup.kernel_build = trainer.runner.env.sim.kernel_build_seconds()
                self.startup.take_side_processes()
                if self.world.leader:
                    outputs.bar.write(f"train: {self.startup.line()}", file=sys.stderr)
                startup_gc.release()  # start-up's objects are allocated; the timed iterations collect as usual
                loop.timer.start()
                first = False
            else:
                loop.timer.lap()
            outputs.bar.update(1)
            self._log_ready(outputs, wait=False)
            last = trainer.iteration == cfg.algo.max_iterations
            at_log = trainer.iteration % cfg.training.log_interval == 0 or last
            if at_log:
                point = trainer.log_point(metrics)
                point.laps = loop.timer.take()
                loop.pending.append(point)
                if outputs.viewer is not None:  # a copy queued behind this env step, read back at a later log
                    outputs.viewer.capture(trainer.runner.state["sim", "qpos"], trainer.iteration, trainer.env_stream)
            if self.world.leader and (trainer.iteration % cfg.algo.save_interval == 0 or last):
                self.progress.last_checkpoint = self._save()
            # What compiling, capturing or logging installed: the kernel's entries after the first iteration and at
            # log points, Python's table every iteration.
            for note in self.signals.reclaim(native=at_log or not native_checked):
                outputs.bar.write(f"train: {note}", file=sys.stderr)
            native_checked = True
            loop.stopping = self.signals.agreed(loop.vote, check_point=at_log)
        self._log_ready(outputs, wait=True)

    def _finish(self, outputs: Outputs) -> RunSummary:
        """After the loop, however it ended: every iteration timed, a final checkpoint where the run stopped short,
        the ranks' weights compared, and the summary written. A failure here is reported beside the first one."""
        progress, trainer, loop = self.progress, self.trainer, self.loop
        outputs.bar.close()
        try:
            if progress.status == "interrupted":  # what ran before the stop is still worth its log lines
                self._log_ready(outputs, wait=True)
            for laps in [*(point.laps for point in loop.pending), loop.timer.take()]:  # time every iteration
                self._record_laps(laps)
            saving = progress.status != "completed" and not progress.poisoned
            if self.world.leader and saving and trainer.iteration > loop.start_iteration:
                progress.last_checkpoint = self._save()
            if progress.status == "completed" or loop.stopping:  # every rank is here; after a failure one may not be
                self._compare_weights()
            if self.cfg.training.export_onnx and self.world.leader and progress.status != "failed":
                self._export()  # before the summary: a run whose policy could not be written has not completed
        except Exception as exc:  # e.g. a sticky CUDA error: keep the first error, still write the summary
            late = f"{type(exc).__name__}: {exc}"
            progress.status = "failed"
            progress.error = late if progress.error is None else f"{progress.error}; then, while stopping: {late}"
        if outputs.logger is not None:
            outputs.logger.close()
        if outputs.viewer is not None:
            outputs.viewer.close()
        result = self._summary(progress.status)
        try:
            self._publish(result)
        except DiskFullError as exc:  # nothing more can be saved; say so rather than lose the reason too
            print(f"train: error: {exc}", file=sys.stderr)
        return result

    def _compare_weights(self) -> None:
        digests = self.world.gather_digests(self.trainer.learner.shared_tensors())
        self.progress.digest = digests[0]
        self.progress.in_sync = len(set(digests)) == 1 if self.world.size > 1 else None
        if self.progress.in_sync is False:
            self.progress.error = f"ranks ended with different weights (digests by rank: {', '.join(digests)})"

    # -- what the loop writes ------------------------------------------------------------------------------

    def _loop_seconds(self) -> float:
        return self.loop_before + time.perf_counter() - self.loop.started

    def _summary(self, status: str, at: LogPoint | None = None) -> RunSummary:
        """The run so far; ``at`` a log point, whose counts match the meter's (the host may have queued more)."""
        trainer = self.trainer
        return RunSummary.of(
            status,
            self.record,
            self.progress,
            self.loop.meter,
            self.startup,
            iterations=trainer.iteration if at is None else at.iteration,
            env_steps=(trainer.env_steps if at is None else at.env_steps) * self.world.size,
            loop_seconds=self._loop_seconds(),
            stopped_by=self.signals.received,
        )

    def _publish(self, result: RunSummary) -> None:
        if self.world.leader:
            result.write(self.run_dir)

    def _stalled(self, message: str) -> None:
        """On the watchdog's thread, with the main thread blocked on the device: host state only."""
        self.progress.error = message
        self._publish(self._summary("failed"))

    def _save(self) -> str:
        """The trainer as ``model_<iteration>.pt``, once nothing it learnt from was NaN or infinite and none of its
        own tensors is; else ``NonFiniteValueError`` and nothing written (the previous checkpoint stays the last)."""
        report = self.trainer.report_now()  # waits for the device, as the write below would
        self.progress.health.update(report.health)
        self.trainer.check(report)
        # Wall time since `train` started rides along (continued across resumes), so evaluating saved
        # checkpoints gives time-to-threshold.
        state = {
            **self.trainer.state_dict(),
            "config": self.record.config,
            "train_wall_time_sec": self.wall_before + time.perf_counter() - self.launched,
            "loop_wall_time_sec": self._loop_seconds(),
        }
        broken = nonfinite_tensors(state)
        if broken:  # with every reward, observation and loss finite: an overflow inside the update itself
            raise NonFiniteValueError(
                f"the learner's state turned NaN or infinite in {', '.join(broken[:3])} by iteration "
                f"{self.trainer.iteration}; the run stopped without saving it"
            )
        path = save_checkpoint(state, self.run_dir / f"model_{self.trainer.iteration}.pt")
        prune_checkpoints(self.run_dir, self.cfg.training.keep_checkpoints, path)
        return str(path)

    def _record_laps(self, laps: list[Lap]) -> list[tuple[float, dict[str, float]]]:
        """Resolve ``laps`` into the tail meter; returns their seconds and splits."""
        resolved = self.loop.timer.resolve(laps)
        for seconds, phases in resolved:
            self.loop.meter.record(self.loop.steps_per_iteration, seconds, phases)
        return resolved

    def _log_ready(self, outputs: Outputs, wait: bool) -> None:
        """Log the pending points the GPU has passed (all of them with ``wait``), oldest first."""
        pending = self.loop.pending
        while pending and (wait or pending[0].ready()):
            self._log(pending[0], outputs)
            pending.popleft()

    def _log(self, point: LogPoint, outputs: Outputs) -> None:
        laps = self._record_laps(point.laps)
        point.laps = []  # timed once, whatever fails below
        if outputs.viewer is not None:
            outputs.viewer.publish()
        report = self.trainer.read(point)
        self.progress.health.update(report.health)  # before the check, so the summary counts what it names
        self.trainer.check(report)
        metrics, stats, counts = report.metrics, report.episodes, report.health
        if "episode_return" in stats:
            self.progress.last_episodes = stats
        rate = self.loop.meter.tail_env_steps_per_sec()
        scalars = {**{f"loss/{k}": v for k, v in metrics.items()}, **{f"episode/{k}": v for k, v in stats.items()}}
        scalars.update({f"health/{k}": v for k, v in counts.items()})
        if laps:  # the spread shows stalls (log points, slow steps) that the tail aggregate folds in
            ms = sorted(1000 * seconds for seconds, _ in laps)
            scalars.update({"perf/iteration_ms_min": ms[0], "perf/iteration_ms_max": ms[-1]})
            scalars["perf/iteration_ms_median"] = ms[len(ms) // 2]
        if rate is not None:
            scalars["perf/tail_env_steps_per_sec"] = rate
            outputs.bar.set_postfix(steps_per_s=f"{rate:,.0f}")
        if outputs.logger is not None:
            outputs.logger.log_scalars(scalars, point.iteration * self.loop.steps_per_iteration)
        self._publish(self._summary("running", point))

    def _export(self) -> None:
        from unilab.run.deploy_export import export_policy  # ONNX's runtime loads only for a run that exports

        origin = run_origin(self.cfg, self.record.environment)
        export_policy(self.trainer.deployed_actor(), self.env, self.run_dir / POLICY_FILENAME, origin)


def _record(cfg: TrainConfig, world: World) -> RunRecord:
    """What the run is, taken once: the environment's figures cost a ``git`` call."""
    return RunRecord(
        algo=cfg.algo.name,
        task=cfg.task.name,
        sim=cfg.sim.name,
        num_envs=cfg.algo.num_envs,
        world_size=world.size,
        config=dataclasses.asdict(cfg),
        environment=environment_info(),
    )


def _resume(trainer: Trainer, ckpt: dict, path: str) -> None:
    """The trainer continued from a checkpoint; one that does not fit the config is refused in one line."""
    try:
        trainer.load_state_dict(ckpt)
    except (RuntimeError, KeyError, ValueError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"checkpoint {path} does not fit the config: {reason}") from None


def run_origin(cfg: TrainConfig, environment: dict[str, Any]) -> dict[str, str]:
    """Where an exported policy came from, for its metadata: the task (its motion file and knobs), algorithm and
    commit."""
    return {
        "task": cfg.task.name,
        "algo": cfg.algo.name,
        "commit": str(environment.get("git_commit")),
        "motion_file": cfg.task.motion_file or "",
        "task_knobs": json.dumps(cfg.task.knobs, sort_keys=True),
    }
