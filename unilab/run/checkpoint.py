"""Checkpoints: written atomically, read without running code, checked against the config before use.

A checkpoint holds only tensors and plain Python values (dicts, lists, numbers, strings, None), so ``torch.load``
with ``weights_only=True`` reads it: a file from somewhere else cannot execute anything when it is loaded, and a
file that needs more than that is refused rather than trusted.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import torch

from unilab.core.files import write_atomic
from unilab.run.config import TrainConfig, schema
from unilab.train.learner import ACTOR_AVERAGE
from unilab.train.registry import ALGORITHMS
from unilab.train.settings import shape_keys

CHECKPOINT_PATTERN = re.compile(r"model_(\d+)\.pt")
REQUIRED_KEYS = ("loss", "optim", "iteration", "env_steps", "config", "train_wall_time_sec", "loop_wall_time_sec")


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: missing, unreadable, refused by the safe loader, or made for another
    config. The message is one line naming the file."""


def checkpoint_iteration(path: Path) -> int | None:
    """The iteration in a ``model_<iteration>.pt`` name; None for any other file."""
    match = CHECKPOINT_PATTERN.fullmatch(Path(path).name)
    return int(match.group(1)) if match else None


def list_checkpoints(run_dir: Path) -> list[tuple[int, Path]]:
    """``(iteration, path)`` of the run's checkpoints, oldest first."""
    found = [(checkpoint_iteration(p), p) for p in Path(run_dir).glob("model_*.pt")]
    return sorted((it, p) for it, p in found if it is not None)


def nonfinite_tensors(tree: Any, prefix: str = "") -> list[str]:
    """The dotted names of the floating-point tensors in ``tree`` (nested dicts and lists) holding a NaN or an
    infinity: a checkpoint with one acts as zeros in eval (non-finite actions are replaced) and breaks a resume."""
    if isinstance(tree, torch.Tensor):
        return [prefix] if tree.is_floating_point() and not bool(torch.isfinite(tree).all()) else []
    items = tree.items() if isinstance(tree, dict) else enumerate(tree) if isinstance(tree, list | tuple) else ()
    return [name for key, value in items for name in nonfinite_tensors(value, f"{prefix}.{key}".lstrip("."))]


def save_checkpoint(state: dict[str, Any], path: Path) -> Path:
    write_atomic(path, lambda handle: torch.save(state, handle))
    return Path(path)


def _unreadable(path: Path, exc: Exception) -> CheckpointError:
    """One line for a failed load. torch's own message runs to a paragraph whose advice is to turn the safety off,
    exactly what a foreign file must not get, so only the refused global or the unpickler's reason is kept."""
    text = str(exc)
    # torch words the refusal two ways: "Unsupported global: GLOBAL x" and "unsupported GLOBAL x whose module ...".
    refused = re.search(r"unsupported (?:global: )?GLOBAL (\S+)", text, re.IGNORECASE)
    if refused:
        return CheckpointError(
            f"refusing checkpoint {path}: it holds {refused.group(1)}, which is neither a tensor nor a plain value, "
            "and loading it could run code"
        )
    reason = re.search(r"WeightsUnpickler error:\s*(\S[^\n]*)", text)
    lines = [line for line in text.strip().splitlines() if line.strip() and "weights_only" not in line.lower()]
    detail = reason.group(1) if reason else (lines[0] if lines else "")
    return CheckpointError(f"cannot read checkpoint {path}: {type(exc).__name__}: {detail}")


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if path.is_dir():
        raise CheckpointError(f"{path} is a directory, not a checkpoint file (model_<iteration>.pt)")
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        raise _unreadable(path, exc) from None
    if not isinstance(ckpt, dict):
        raise CheckpointError(f"{path} is not a training checkpoint: it holds a {type(ckpt).__name__}, not a dict")
    missing = [key for key in REQUIRED_KEYS if key not in ckpt]
    if missing:
        raise CheckpointError(f"{path} is not a training checkpoint of this version: it lacks {missing}")
    if not isinstance(ckpt["config"], dict):
        raise CheckpointError(f"{path} is not a training checkpoint: its 'config' is not a dict")
    for key in ("iteration", "env_steps"):
        value = ckpt[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CheckpointError(f"{path} is not a usable checkpoint: its '{key}' is {value!r}, not a count >= 0")
    if not isinstance(ckpt["loss"], dict):
        raise CheckpointError(f"{path} is not a training checkpoint: its 'loss' is not a dict of tensors")
    _refuse_nonfinite(path, ckpt["loss"])
    if ACTOR_AVERAGE in ckpt:
        _check_average(path, ckpt[ACTOR_AVERAGE], ckpt["loss"])
    return ckpt


def _check_average(path: Path, average: Any, loss: dict[str, Any]) -> None:
    """The actor's average (``algo.actor_average``) must name the actor's own parameters, shaped as they are, and be
    finite: eval and the export run it in the actor's place."""
    if not isinstance(average, dict) or not average:
        raise CheckpointError(f"{path} is not a usable checkpoint: its '{ACTOR_AVERAGE}' is not a dict of tensors")
    for name, tensor in average.items():
        own = loss.get(f"actor.{name}")
        if not isinstance(tensor, torch.Tensor) or not isinstance(own, torch.Tensor) or tensor.shape != own.shape:
            raise CheckpointError(
                f"{path} is not a usable checkpoint: its '{ACTOR_AVERAGE}' entry {name!r} is not one of the actor's "
                "weights in its shape"
            )
    _refuse_nonfinite(path, average, ACTOR_AVERAGE)


def _refuse_nonfinite(path: Path, weights: dict[str, Any], prefix: str = "") -> None:
    broken = nonfinite_tensors(weights, prefix)
    if broken:
        raise CheckpointError(f"{path} holds non-finite weights (NaN or inf) in {', '.join(broken[:3])}")


def _describe(config: dict[str, Any], keys: list[str]) -> str:
    algo, task = config.get("algo", {}), config.get("task", {})
    shapes = ", ".join(f"algo.{key}={algo.get(key)}" for key in keys)
    return f"{algo.get('name')} on {task.get('name')}" + (f" with {shapes}" if shapes else "")


def check_compatible(saved: dict[str, Any], cfg: TrainConfig, path: Path) -> None:
    """Refuse a checkpoint made for another algo, task or network size, in terms of the config, before any work
    (loading it would fail later with a state_dict traceback, or worse, half succeed)."""
    wanted = dataclasses.asdict(cfg)
    saved_algo, saved_task = saved.get("algo", {}), saved.get("task", {})
    same_run_kind = (saved_algo.get("name"), saved_task.get("name")) == (cfg.algo.name, cfg.task.name)
    shapes = shape_keys(type(cfg.algo))  # the settings that fix the shapes of what the learner saved
    keys = [] if not same_run_kind else [k for k in shapes if saved_algo.get(k) != wanted["algo"][k]]
    if not same_run_kind or keys:
        raise CheckpointError(f"checkpoint {path} is {_describe(saved, keys)}; the config is {_describe(wanted, keys)}")


def saved_config(ckpt: dict[str, Any], path: Path) -> TrainConfig:
    """The config a checkpoint was trained with, read into this version's schema of its algorithm. Keys this version
    does not know (from another version, or another algorithm's, which a checkpoint of one flat schema holds) are left
    out: none of them shapes what it loads. A value of the wrong type, or an
    algorithm this version lacks, is refused in one line naming the file."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    algo = ckpt["config"].get("algo", {})
    name = algo.get("name") if isinstance(algo, dict) else None
    if name not in ALGORITHMS:
        raise CheckpointError(
            f"checkpoint {path} was trained with algo {name!r}, which this version lacks "
            f"(it has {', '.join(ALGORITHMS)})"
        )
    base = schema(name)
    known = _known(ckpt["config"], dataclasses.asdict(base))
    try:
        cfg: TrainConfig = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(base), known))
    except OmegaConfBaseException as exc:
        where = getattr(exc, "full_key", None) or "its config"
        reason = str(exc).strip().splitlines()[0]
        raise CheckpointError(f"checkpoint {path}: {where} is not one this version reads ({reason})") from None
    return cfg


def _known(saved: Any, schema: Any) -> Any:
    """``saved`` with only the keys ``schema`` has, at every depth; a mapping the schema leaves open (empty there: a
    task's knobs, its reward weights) is kept whole, for its task to check."""
    if not isinstance(saved, dict) or not isinstance(schema, dict) or not schema:
        return saved
    return {key: _known(value, schema[key]) for key, value in saved.items() if key in schema}


def prune_checkpoints(run_dir: Path, keep: int, just_written: Path) -> list[Path]:
    """Delete all but the ``keep`` newest checkpoints (``keep`` <= 0: keep all); ``just_written`` always stays."""
    if keep <= 0:
        return []
    doomed = [path for _, path in list_checkpoints(run_dir)[:-keep] if path != Path(just_written)]
    for path in doomed:
        path.unlink(missing_ok=True)
    return doomed
