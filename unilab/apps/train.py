"""``train``: the command. Composes the config from flags and overrides, prepares the run, trains, and says what
to look at next; a user's mistake ends it with one line (exit 2) before any work."""

from __future__ import annotations

import contextlib
import faulthandler
import shlex
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from hydra.errors import HydraException
from omegaconf import OmegaConf
from omegaconf.errors import ConfigAttributeError, ConfigKeyError, OmegaConfBaseException

from torchrl_ext.distributed import RankLost
from unilab.apps import early_update
from unilab.apps.args import fail, shell_command
from unilab.apps.catalog import cuda_available
from unilab.apps.compose import compose_config, resumed_groups
from unilab.apps.early import check_train, split_train_args, train_parser
from unilab.core.files import DiskFullError
from unilab.envs.runner import NonFiniteError
from unilab.run.config import TrainConfig, settings_fields, unknown_key_message
from unilab.run.run_dir import POLICY_FILENAME, RunSummary
from unilab.run.signals import Interrupted, StopSignals
from unilab.tasks.registry import override_names

if TYPE_CHECKING:  # the training stack (ONNX export, the trainer) loads once a run starts: --help and --cfg skip it
    from unilab.run.training_run import TrainingRun


def run(cfg: TrainConfig) -> RunSummary:
    """Train as configured and play the final policy back; returns the RunSummary written to the run directory."""
    from unilab.run.training_run import TrainingRun

    training = TrainingRun.prepare(cfg)
    return finish(training, training.run())


def finish(training: TrainingRun, summary: RunSummary) -> RunSummary:
    """A video of the final policy of a completed run, unless ``training.no_play`` (a stop skips it: a scheduler's
    SIGTERM comes with a grace period that rendering could outlast); then where the run's files are."""
    done = summary.status == "completed" and training.progress.last_checkpoint is not None
    if done and not training.cfg.training.no_play:
        playback(training, summary)
    if training.world.leader:
        print(f"run directory: {training.run_dir}")
    return summary


def playback(training: TrainingRun, summary: RunSummary) -> None:
    """The video; a failure is reported in the summary, and the run keeps its status."""
    from unilab.apps.play import play

    cfg = training.cfg
    try:
        video = play(
            Path(training.progress.last_checkpoint),
            None,
            out=training.run_dir,
            num_envs=cfg.training.play_envs,
            seconds=cfg.training.play_seconds,
        )
        print(f"playback: {video}")
    except Exception as exc:  # the run itself succeeded and is saved; say what failed, keep the status
        summary.error = f"playback failed: {type(exc).__name__}: {exc}"
        summary.write(training.run_dir)
        print(summary.error, file=sys.stderr)


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


def resume_command(arguments: list[str], checkpoint: str, run_dir: Path) -> str:
    """The command that continues a stopped run in its own directory: the same arguments, with ``algo.resume`` at
    its last checkpoint and ``training.log_dir`` at its directory (a run that did not complete may be continued
    there from its latest checkpoint)."""
    kept = [a for a in arguments if a.lstrip("+").split("=", 1)[0] not in ("algo.resume", "training.log_dir")]
    return shlex.join([shell_command("train"), *kept, f"algo.resume={checkpoint}", f"training.log_dir={run_dir}"])


def next_steps(training: TrainingRun, summary: RunSummary, arguments: list[str]) -> str:
    """What to look at after a run, and on the CPU backend what the run was: a smoke run, not a trained policy.
    A run that stopped before its end, with a checkpoint, is told how to continue (``arguments``: its command
    line)."""
    cfg, run_dir = training.cfg, training.run_dir
    checkpoint = summary.last_checkpoint or f"{run_dir}/model_<iteration>.pt"
    lines = []
    if summary.status != "completed" and summary.last_checkpoint:
        lines += [
            f"The run stopped at iteration {summary.completed_iterations} of {cfg.algo.max_iterations}; "
            "to continue it:",
            f"  {resume_command(arguments, summary.last_checkpoint, run_dir)}",
        ]
    if cfg.sim.name == "mujoco":
        lines.append(
            f"This was a short smoke run on the CPU ({cfg.algo.num_envs} envs, {summary.completed_iterations} "
            "iterations): it checks the whole pipeline; the policy is not expected to work yet. Policies learn in "
            f"minutes on a GPU: {shell_command('train')} --sim mjwarp (docs/results.md)."
        )
    lines += [
        "next:",
        f"  {shell_command('tensorboard')} --logdir {run_dir}",
        f"  {shell_command('unilab')} eval --checkpoint {checkpoint}",
        f"  {shell_command('unilab')} play --checkpoint {checkpoint}",
        f"  {shell_command('unilab')} view --checkpoint {checkpoint}   # in a browser (docs/viewer.md)",
    ]
    if cfg.training.export_onnx and summary.status == "completed":  # the policy file is there
        policy = run_dir / POLICY_FILENAME
        lines.append(f"  {shell_command('unilab')} deploy check {policy}   # on the robot's runtime (docs/deploy.md)")
    limited = training.env.sim.solver_limit_steps()
    if limited:  # counted, not printed per world and step as MuJoCo Warp would
        lines.append(
            f"note: in {limited} control steps the physics solver stopped at its iteration limit "
            f"({training.env.sim.model.opt.iterations}) in some env before converging; "
            "each step goes on from the last iterate"
        )
    return "\n".join(lines)


def overrides_help(cfg: TrainConfig) -> str:
    """``train --help``'s epilog: the override syntax, the keys most runs set and then every setting of ``cfg``'s
    algorithm, each with its help and the default a run of it on this machine gets (schema < algo < task tuning < sim
    profile: what ``--cfg`` would print)."""
    accepted = {f"task.{name}" for name in override_names(cfg.task.name) | {"name"}}
    leaves = {
        key: (f, value) for key, f, value in settings_fields(cfg) if not key.startswith("task.") or key in accepted
    }

    def row(key: str) -> str:
        f, value = leaves[key]
        return f"  {key:<28} {value!s:<16} {f.metadata.get('help', '')}".rstrip()

    algo_keys = [key for key in leaves if key.startswith("algo.") and key not in (*MAIN_KEYS, "algo.name")]
    return "\n".join(
        [
            "overrides: key=value, e.g. algo.num_envs=2048 training.no_play=true algo.actor_hidden=[256,128]",
            "",
            f"main keys and their defaults for --algo {cfg.algo.name} --task {cfg.task.name} --sim {cfg.sim.name}",
            f"(on this machine, {'with' if cuda_available() else 'without'} CUDA; --algo/--task/--sim pick others):",
            *[row(key) for key in MAIN_KEYS if key in leaves],
            "",
            f"{cfg.algo.name}'s other settings:",
            *[row(key) for key in algo_keys],
            "",
            "every key that applies: train --cfg (with the same --algo/--task/--sim)",
        ]
    )


def applying_config(cfg: TrainConfig) -> dict:
    """``cfg`` as ``train --cfg`` prints it: without the ``task.*`` keys its task does not take (the schema holds
    every task's, since tasks are a registry), and with the task's own knobs (``compose_config`` gives them all) as
    ``task.<knob>`` is spelt."""
    tree = OmegaConf.to_container(OmegaConf.structured(cfg))
    accepted = override_names(cfg.task.name) | {"name"}
    tree["task"] = {key: value for key, value in tree["task"].items() if key in accepted} | cfg.task.knobs
    return tree


def lost_rank(prog: str, exc: RankLost) -> NoReturn:
    """A run ended by another rank: one line and exit status 1. A traceback would only show where this rank
    waited; the rank that failed first logs the cause (and rank 0's run_summary.json holds this line)."""
    print(f"{prog}: error: {exc}", file=sys.stderr)
    raise SystemExit(1) from None


@contextlib.contextmanager
def one_line_errors(prog: str) -> Iterator[None]:
    """A config or preparation error as one line naming the key (exit 2); another rank's loss as one (exit 1)."""
    try:
        yield
    except (OmegaConfBaseException, HydraException) as exc:
        # A value of the wrong type surfaces from Hydra as a merge error around the schema's own: name the key.
        cause = exc if isinstance(exc, OmegaConfBaseException) else exc.__cause__
        if isinstance(cause, ConfigKeyError | ConfigAttributeError) and getattr(cause, "full_key", None):
            fail(prog, unknown_key_message(cause.full_key))
        if isinstance(cause, OmegaConfBaseException) and getattr(cause, "full_key", None):
            fail(prog, f"{cause.full_key}: {str(cause).strip().splitlines()[0]}")
        fail(prog, str(exc).strip().splitlines()[0])
    except ValueError as exc:  # unknown name, impossible value, bad file, too little memory
        fail(prog, str(exc))
    except RankLost as exc:  # another rank never joined, or failed while this one waited at start-up
        lost_rank(prog, exc)


def main(argv: list[str] | None = None) -> None:
    """Console command ``train``: ``--algo/--task/--sim`` pick the config groups; the rest are Hydra overrides."""
    if argv is None:  # this process is the command: a crash in native code (CUDA, Warp, MuJoCo) would otherwise
        faulthandler.enable()  # end the run without a word; print every thread's Python stack first
    arguments = list(sys.argv[1:] if argv is None else argv)
    check_train(arguments)
    args, overrides, wants_help = split_train_args(arguments)
    parser = train_parser()
    # From here on a signal is a stop: before the loop, one line and nothing trained; in it, a saved run.
    with StopSignals(raising=True, ignore_after=argv is None) as signals:
        try:
            with one_line_errors(parser.prog):
                cfg = compose_config(resumed_groups(overrides))
                if wants_help:
                    train_parser(overrides_help(cfg)).print_help()
                    raise SystemExit(0)
                if args.cfg:
                    print(OmegaConf.to_yaml(applying_config(cfg)), end="")
                    return
                from unilab.run.training_run import TrainingRun

                training = TrainingRun.prepare(cfg, signals, early_update.take())
        except Interrupted as exc:
            stopped(parser.prog, exc, "during start-up; nothing was trained")
        summary = train_reporting(parser.prog, training, arguments)
    if summary.status == "interrupted" and summary.stopped_by:  # the shell's convention for death by a signal
        raise SystemExit(128 + signal.Signals[summary.stopped_by])
    if summary.status != "completed":
        if summary.error:
            print(f"{parser.prog}: error: {summary.error}", file=sys.stderr)
        raise SystemExit(1)


def stopped(prog: str, exc: Interrupted, when: str) -> NoReturn:
    """A signal outside the loop: one line, and the exit status of a process the signal ended."""
    print(f"{prog}: stopped by {exc.name} {when}", file=sys.stderr)
    raise SystemExit(128 + signal.Signals[exc.name]) from None


def train_reporting(prog: str, training: TrainingRun, arguments: list[str]) -> RunSummary:
    """Run ``training`` and say what to do next (``arguments``, its command line, for the command that continues
    it); what ends it early (another rank lost, a full disk, a NaN, a signal during playback) is one line and an exit
    status, with what was saved named."""
    try:
        summary = finish(training, training.run())
    except RankLost as exc:
        lost_rank(prog, exc)
    except DiskFullError as exc:  # the summary says so too, if there was room for it
        print(f"{prog}: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except NonFiniteError as exc:  # a task's term, not this code, is at fault: name it, no traceback
        last = training.progress.last_checkpoint or "none"
        print(f"{prog}: error: {exc} (the last good checkpoint: {last})", file=sys.stderr)
        raise SystemExit(1) from None
    except Interrupted as exc:
        stopped(prog, exc, f"after the run; its files are in {training.run_dir}")
    if training.world.leader:
        print(next_steps(training, summary, arguments))
    return summary
