"""Run directories and the machine-readable summary each run leaves behind.

Every run gets its own directory so that logs, checkpoints and ``run_summary.json`` from different runs never mix,
and the summary records enough about the code and machine that a throughput number can be traced back to what
produced it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import errno
import fcntl
import importlib.metadata
import json
import os
import platform
import socket
import stat
import subprocess
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from unilab.run.metrics import TailRateMeter

if TYPE_CHECKING:
    from unilab.run.startup import StartupClock
from unilab.core.files import write_atomic

SUMMARY_FILENAME = "run_summary.json"
CONFIG_FILENAME = "run_config.json"
POLICY_FILENAME = "policy.onnx"
VIDEO_FILENAME = "play_video.mp4"
LOCK_FILENAME = ".lock"
STACKS_FILENAME = "stall_stacks.txt"
SCALARS_DIRNAME = "scalars"  # training.logger=csv
RUN_STATUSES = ("running", "completed", "interrupted", "failed")
# importlib.metadata wants distribution names, which differ from the import names for some of these.
_DISTRIBUTIONS = {
    "torch": "torch",
    "warp": "warp-lang",
    "mujoco": "mujoco",
    "mujoco_warp": "mujoco-warp",
    "tensordict": "tensordict",
    "torchrl": "torchrl",
}
_GIT_TIMEOUT_S = 10.0
_REPO_ROOT = Path(__file__).resolve().parents[2]


def _timestamp() -> str:
    """Local time, because that is what a person scanning the log folder will compare against."""
    return dt.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")


def utc_now_iso() -> str:
    """UTC with an explicit offset, so start and end times compare across machines in different time zones."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def make_run_dir(log_dir: str | None, algo: str, task: str, sim: str, root: str | Path = "logs") -> Path:
    """Create the run's directory.

    An explicit ``log_dir`` is honoured as is (and may already exist, e.g. to resume). An automatic path gets a
    numeric suffix when taken, because two runs started in the same second must not write into one directory.
    """
    if log_dir is not None:
        path = Path(log_dir)
        path.mkdir(parents=True, exist_ok=True)
        return path
    base = Path(root) / algo / task / f"{_timestamp()}_{sim}"
    base.parent.mkdir(parents=True, exist_ok=True)
    return _claim_fresh_dir(base)


def _claim_fresh_dir(base: Path) -> Path:
    """``mkdir`` without ``exist_ok`` is atomic, so concurrent runs racing for a name each end up with their own."""
    candidate, suffix = base, 0
    while True:
        try:
            candidate.mkdir()
            return candidate
        except FileExistsError:
            suffix += 1
            candidate = base.with_name(f"{base.name}_{suffix}")


def _json_default(obj: Any) -> Any:
    """Let summaries hold the values a trainer naturally has at hand (paths, numpy and torch scalars)."""
    if isinstance(obj, PurePath):
        return str(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, torch.Tensor):
        value = obj.detach().cpu()
        return value.item() if value.numel() == 1 and value.dim() == 0 else value.tolist()
    if isinstance(obj, dt.date):  # datetime is a subclass of date
        return obj.isoformat()
    if isinstance(obj, set | frozenset):
        return sorted(obj, key=str)
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def write_json_atomic(path: Path, obj: dict) -> None:
    text = json.dumps(obj, indent=2, default=_json_default) + "\n"
    write_atomic(path, lambda handle: handle.write(text.encode("utf-8")))


class RunDirInUse(ValueError):
    """Another live process writes into the run directory."""


class RunLock:
    """One writer per run directory, for as long as that writer's process lives.

    ``flock`` on a lock file inside the directory: the kernel drops it when the holder exits, however it exits, so
    a crashed run never leaves a stale lock behind. The holder writes its pid, host and start time into the file so
    that a refused second writer can say who holds the directory. The file itself stays: removing it would let a
    third process lock a fresh inode while the second still waits on the old one.
    """

    def __init__(self, run_dir: Path) -> None:
        self.path = Path(run_dir) / LOCK_FILENAME
        # Never through a link: the holder's line would truncate whatever a planted link points at.
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
            raise RunDirInUse(f"{self.path} is a symbolic link; a run never writes through one: remove it") from None
        held = os.fstat(fd)
        if not stat.S_ISREG(held.st_mode) or held.st_nlink != 1:
            os.close(fd)
            what = "not a regular file" if not stat.S_ISREG(held.st_mode) else "a hard link to another file"
            raise RunDirInUse(f"{self.path} is {what}; a run writes only its own files: remove it")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode("utf-8", errors="replace").strip() or "a process that gave no pid"
            os.close(fd)
            raise RunDirInUse(f"run directory {run_dir} is in use by {holder}; wait for it or choose another") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on host {socket.gethostname()} since {utc_now_iso()}\n".encode(), 0)
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _git(repo: Path, *args: str) -> str | None:
    """Any failure (no git binary, not a repository, a hang) means "unknown", never a crashed run."""
    try:
        result = subprocess.run(
            ["git", "--no-optional-locks", *args],
            cwd=repo,
            capture_output=True,
            text=True,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def git_info(repo: Path) -> dict[str, Any]:
    """Commit and dirtiness; ``--no-optional-locks`` keeps ``git status`` from touching the index of a live repo."""
    commit = _git(repo, "rev-parse", "HEAD")
    if commit is None:
        return {"git_commit": None, "git_commit_short": None, "git_dirty": None}
    status = _git(repo, "status", "--porcelain")
    return {
        "git_commit": commit,
        "git_commit_short": _git(repo, "rev-parse", "--short", "HEAD"),
        "git_dirty": None if status is None else bool(status),
    }


def package_versions() -> dict[str, str | None]:
    """Installed versions, read from metadata so that recording them never imports heavy GPU packages."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name, distribution in _DISTRIBUTIONS.items():
        try:
            versions[name] = importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def environment_info(repo: Path | None = None) -> dict[str, Any]:
    """What a throughput number depends on besides the config: code revision, library versions and hardware.

    ``repo`` defaults to the checkout this package lives in, since that is the code actually running.
    """
    cuda = torch.cuda.is_available()
    return {
        **git_info(Path(repo) if repo is not None else _REPO_ROOT),
        "versions": package_versions(),
        "cuda_available": cuda,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "gpu_name": torch.cuda.get_device_name(0) if cuda else None,
        "hostname": socket.gethostname(),
    }


def _check_status(status: str) -> None:
    if status not in RUN_STATUSES:
        raise ValueError(f"status must be one of {RUN_STATUSES}, got {status!r}")


@dataclass(frozen=True)
class RunRecord:
    """What a run is, fixed once it is built: every summary restates it."""

    algo: str
    task: str
    sim: str
    num_envs: int  # per rank
    world_size: int
    config: dict[str, Any]  # as run_config.json and every checkpoint hold it
    environment: dict[str, Any]  # ``environment_info``, taken once: it calls git


@dataclass
class Progress:
    """What the run has reached so far: what its summary reports at every log point and at the end."""

    status: str = "running"
    error: str | None = None
    start_time_utc: str = field(default_factory=utc_now_iso)  # set again as the loop starts
    last_checkpoint: str | None = None
    last_episodes: dict[str, float] = field(default_factory=dict)  # the latest log point with finished episodes
    health: dict[str, int] = field(default_factory=dict)  # the latest log point's counters
    digest: str | None = None  # of the final weights, checked across ranks
    in_sync: bool | None = None
    poisoned: bool = False  # a NaN or an infinity was found: nothing after the last checkpoint may be saved


@dataclass
class RunSummary:
    """The record a run leaves for tooling that compares runs; rewritten as the run progresses.

    ``environment`` defaults to empty rather than calling :func:`environment_info` so that rebuilding the summary
    every few iterations does not spawn git each time; fill it once at start-up.
    """

    status: str
    algo: str
    task: str
    sim: str
    num_envs: int  # per rank
    world_size: int = 1  # ranks (torchrun); env-step counts and rates below are of all ranks together
    completed_iterations: int = 0
    tail_iteration_count: int = 0
    tail_env_steps_per_sec: float | None = None
    final_env_steps_per_sec: float | None = None
    tail_seconds_per_iteration: dict[str, float] = field(default_factory=dict)
    total_env_steps: int = 0
    training_wall_time_sec: float = 0.0
    start_time_utc: str = field(default_factory=utc_now_iso)
    end_time_utc: str | None = None
    last_checkpoint: str | None = None
    final_mean_reward: float | None = None
    mean_episode_length: float | None = None
    config: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    stopped_by: str | None = None  # the signal that ended an interrupted run, e.g. SIGTERM
    # Counters since the start, as of the last log point: diverged_envs (physics blown up, reset, training went
    # on), nonfinite_actions, contact_overflows, constraint_overflows, height_field_overflows (counted, not fatal),
    # solver_limit_steps (control steps whose solver stopped at its iteration limit somewhere: a note on accuracy);
    # then the fullest the physics buffers have been: contacts_peak (all envs together; the buffer holds
    # nconmax * num_envs) and constraint_rows_peak (one env; njmax each).
    health: dict[str, int] = field(default_factory=dict)
    # At the end of a run that did not fail: a digest of the final weights and statistics, and with several ranks
    # whether every rank held the same ones (None with one rank: nothing to compare).
    weights_digest: str | None = None
    ranks_in_sync: bool | None = None
    # Seconds from the process start to the first timed iteration, by phase in the order they ran (imports: the
    # interpreter and the command's modules; config; checks; env build; trainer build less the env's reset,
    # warm-up steps (Warp kernel loads, torch.compile) and capture; the replay pre-fill; the first iteration,
    # which compiles and captures the updates), and their sum.
    startup_sec: dict[str, float] = field(default_factory=dict)
    startup_total_sec: float | None = None
    # torch.compile's part of start-up (``StartupClock.take_compile_split``): graphs compiled, Inductor cache hits
    # and misses, seconds in all, tracing, backend, Inductor's compile and its parts (lowering, scheduling, codegen,
    # kernel builds); empty when nothing was compiled.
    startup_compile: dict[str, float] = field(default_factory=dict)
    # Each frame torch.compile compiled in start-up (``unilab.run.startup.compiled_frames``): its code's name, its
    # compile's seconds and when it began, in seconds from where ``startup_sec``'s phases begin (the process start).
    startup_graphs: list[dict[str, Any]] = field(default_factory=list)
    # The physics kernels built beside the env step's tracing (mjwarp with a compiled step): the build's seconds
    # and how long the warm-up then waited for it (within ``env_warmup``); empty when none was built that way.
    startup_kernel_build: dict[str, float] = field(default_factory=dict)
    # Each side process the command started (Warp's step modules, the model's kernels, the update's compile): when it
    # began, in seconds from the process start, and how long it ran (None if still running); empty where none ran.
    startup_side: dict[str, dict[str, float | None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_status(self.status)

    @classmethod
    def of(
        cls,
        status: str,
        record: RunRecord,
        progress: Progress,
        meter: TailRateMeter,
        startup: StartupClock,
        *,
        iterations: int,
        env_steps: int,
        loop_seconds: float,
        stopped_by: str | None,
    ) -> RunSummary:
        """The summary of a run in ``status``, read from the objects that hold each figure, so none can drift from
        its source. Iteration and step totals come from the caller: the meter sees only the timed iterations, while
        a run also counts its capture iteration and its replay pre-fill."""
        return cls(
            status=status,
            algo=record.algo,
            task=record.task,
            sim=record.sim,
            num_envs=record.num_envs,
            world_size=record.world_size,
            completed_iterations=iterations,
            tail_iteration_count=meter.tail_iteration_count,
            tail_env_steps_per_sec=meter.tail_env_steps_per_sec(),
            final_env_steps_per_sec=meter.final_env_steps_per_sec(),
            tail_seconds_per_iteration=meter.tail_phase_seconds(),
            total_env_steps=env_steps,
            training_wall_time_sec=loop_seconds,
            start_time_utc=progress.start_time_utc,
            end_time_utc=None if status == "running" else dt.datetime.now(dt.UTC).isoformat(),
            last_checkpoint=progress.last_checkpoint,
            final_mean_reward=progress.last_episodes.get("episode_return"),
            mean_episode_length=progress.last_episodes.get("episode_length"),
            config=record.config,
            environment=record.environment,
            error=progress.error,
            stopped_by=stopped_by,
            health=dict(progress.health),
            weights_digest=progress.digest,
            ranks_in_sync=progress.in_sync,
            startup_sec=dict(startup.phases),
            startup_total_sec=startup.total(),
            startup_compile=dict(startup.compile),
            startup_graphs=list(startup.graphs),
            startup_kernel_build=dict(startup.kernel_build),
            startup_side=dict(startup.side),
        )

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def write(self, run_dir: Path) -> Path:
        """Atomic, so a dashboard polling the file mid-run never reads a truncated summary."""
        _check_status(self.status)
        path = Path(run_dir) / SUMMARY_FILENAME
        write_json_atomic(path, self.to_dict())
        return path
