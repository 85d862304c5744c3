"""Which directory a training run writes, and the rules that keep it from overwriting other work.

A run claims its directory under a lock before anything is written there: a new one, or an explicit one that holds
no run, or the run this one resumes from its latest checkpoint. Anything else is refused in one line that says where
to go instead.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import NamedTuple

from torchrl_ext.distributed import World
from unilab.run.checkpoint import list_checkpoints
from unilab.run.config import TrainConfig
from unilab.run.run_dir import (
    CONFIG_FILENAME,
    LOCK_FILENAME,
    POLICY_FILENAME,
    SCALARS_DIRNAME,
    STACKS_FILENAME,
    SUMMARY_FILENAME,
    VIDEO_FILENAME,
    RunLock,
    make_run_dir,
)


class Claim(NamedTuple):
    """A run directory held by this process."""

    run_dir: Path
    lock: RunLock | None  # held by rank 0 alone, the one rank that writes the run directory
    created: bool  # by this claim, so a run that never starts removes it again

    def release(self) -> None:
        """Give the directory up before the run started: unlock it, and remove it if this claim made it."""
        if self.lock is not None:
            self.lock.release()
        if self.created:  # leave no empty directory behind for a run that never started
            (self.run_dir / LOCK_FILENAME).unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                self.run_dir.rmdir()


def _summary_status(run_dir: Path) -> str | None:
    try:
        return json.loads((run_dir / SUMMARY_FILENAME).read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None


# The statuses of a run that stopped short of its last iteration: the ones a resume may continue in place.
UNFINISHED = ("running", "interrupted", "failed")
# The files a run writes under fixed names, each replaced by rename (the lock aside, opened without following links).
RUN_FILES = (SUMMARY_FILENAME, CONFIG_FILENAME, POLICY_FILENAME, VIDEO_FILENAME, STACKS_FILENAME)


def planted_links(run_dir: Path) -> list[Path]:
    """Links under the names a run writes that a writer outside this project would follow (TorchRL's CSV logger
    appends to ``scalars/<name>.csv``); this project's own files are replaced by rename or opened without following
    links, whatever is planted."""
    links = [run_dir / name for name in (*RUN_FILES, SCALARS_DIRNAME) if (run_dir / name).is_symlink()]
    scalars = run_dir / SCALARS_DIRNAME
    if scalars.is_dir() and not scalars.is_symlink():
        for folder, dirs, files in os.walk(scalars):  # a linked folder is listed, never entered
            links += sorted(Path(folder, name) for name in (*dirs, *files) if Path(folder, name).is_symlink())
    return links


def check_log_dir(run_dir: Path, resume: Path | None, resume_iteration: int | None) -> None:
    """Refuse a directory that already holds a run (a summary or checkpoints), unless this run continues it from
    its latest checkpoint and it did not complete. Anything else would overwrite later work: resuming an older
    checkpoint there, or a completed run, is refused rather than redirected, and the message says where to go."""
    for name in RUN_FILES:
        if (run_dir / name).exists() and not (run_dir / name).is_file():
            raise ValueError(
                f"training.log_dir={run_dir}: {name} is not a file (a directory or a special file), where a run "
                "writes one; remove it or choose a new directory"
            )
    links = planted_links(run_dir)
    if links:
        raise ValueError(
            f"training.log_dir={run_dir} holds symbolic links where a run writes ({', '.join(map(str, links[:3]))}); "
            "a run never writes through a link: remove them or choose a new directory"
        )
    checkpoints = list_checkpoints(run_dir)
    has_summary = (run_dir / SUMMARY_FILENAME).exists()
    if not checkpoints and not has_summary:
        # No run, but files under the names a run writes (a user's own, or a run's leftovers): never replace them.
        written = [name for name in (CONFIG_FILENAME, POLICY_FILENAME, VIDEO_FILENAME) if (run_dir / name).exists()]
        if written:
            raise ValueError(
                f"training.log_dir={run_dir} holds {', '.join(written)}, which a run would overwrite; "
                "choose a new directory"
            )
        return
    held = ", ".join([SUMMARY_FILENAME] * has_summary + [path.name for _, path in checkpoints[-3:]])
    status = _summary_status(run_dir)
    # A run that stopped, failed or crashed (its summary still says running) continues; one with no summary (deleted,
    # or a crash before the first) too. A summary whose status is unreadable or unknown says nothing of the sort.
    unfinished = status in UNFINISHED or not has_summary
    inside = resume is not None and resume.resolve().parent == run_dir.resolve()
    if not inside:
        hint = ""
        if checkpoints and unfinished:
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
    if not unfinished:
        raise ValueError(
            f"refusing to resume {resume.name} into training.log_dir={run_dir}: its {SUMMARY_FILENAME} has status "
            f"{status!r}, not one of a run that stopped short ({', '.join(UNFINISHED)}); {new_dir}"
        )


def claim_run_dir(cfg: TrainConfig, resume_iteration: int | None) -> Claim:
    """The run directory, locked for this process. The checks on what an explicit directory holds run under the
    lock, so two processes cannot both pass them."""
    try:
        return _claim_run_dir(cfg, resume_iteration)
    except OSError as exc:  # a read-only disk, a file where the directory should be: the user's to fix
        where = cfg.training.log_dir or cfg.training.log_root
        raise ValueError(f"cannot create or lock the run directory under {where}: {exc}") from None


def _claim_run_dir(cfg: TrainConfig, resume_iteration: int | None) -> Claim:
    if cfg.training.log_dir is None:
        run_dir = make_run_dir(None, cfg.algo.name, cfg.task.name, cfg.sim.name, root=cfg.training.log_root)
        return Claim(run_dir, RunLock(run_dir), created=True)
    run_dir = Path(cfg.training.log_dir)
    created = not run_dir.exists()
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = RunLock(run_dir)
    try:
        check_log_dir(run_dir, Path(cfg.algo.resume) if cfg.algo.resume else None, resume_iteration)
    except BaseException:
        lock.release()
        raise
    return Claim(run_dir, lock, created)


def claim_for_world(cfg: TrainConfig, world: World, resume_iteration: int | None) -> Claim:
    """Rank 0 claims the run directory (``claim_run_dir``) and tells the other ranks where it is; a refusal reaches
    every rank, so each ends with a one-line error instead of waiting on rank 0. Only rank 0 holds the lock."""
    claimed, refusal = None, None
    if world.leader:
        try:
            claimed = claim_run_dir(cfg, resume_iteration)
        except ValueError as exc:
            refusal = exc
    where = world.broadcast_object(None if claimed is None else str(claimed.run_dir))
    if refusal is not None:
        raise refusal
    if where is None:
        raise ValueError("rank 0 could not claim the run directory (its error says why)")
    return claimed if claimed is not None else Claim(Path(where), None, created=False)
