"""What a task package provides: its env config factory, per-algorithm tuning and eval metrics."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import torch
from tensordict import TensorDict

from unilab.envs.config import TaskConfig
from unilab.envs.functional import FunctionalEnv

Readings = Callable[[FunctionalEnv, TensorDict], dict[str, torch.Tensor]]
Score = Callable[..., dict[str, float]]
Threshold = tuple[str, float]  # (">=" or "<=", bound)


@dataclass(frozen=True)
class EvalMetrics:
    """How ``unilab eval`` scores a policy on the task.

    ``readings(env, state)`` takes the per-step signals from the post-step state (fresh tensors); ``score``
    turns their (T, N, ...) stacks into named figures, given also ``active`` (T, N), ``failed`` (N,), the
    first episodes' ``episode_length`` (N,) and ``dt``. ``thresholds`` name the figures a working policy
    must reach, as ``metric: (">=" | "<=", bound)``.
    """

    readings: Readings
    score: Score
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)


@dataclass(frozen=True)
class Task:
    """A registered task. ``make_config(**kwargs)`` builds its ``TaskConfig`` (keyword arguments are the task's
    own knobs, such as ``motion_file``); ``tuning`` maps an algorithm name to a YAML file of that algorithm's
    settings for this task (applied over the algorithm's defaults, under the command line)."""

    name: str
    make_config: Callable[..., TaskConfig]
    tuning: Mapping[str, Path] = field(default_factory=dict)
    metrics: EvalMetrics | None = None


def tuning_files(package_dir: Path) -> dict[str, Path]:
    """A task package's ``tuning/<algo>.yaml`` files, by algorithm name."""
    return {path.stem: path for path in sorted((package_dir / "tuning").glob("*.yaml"))}
