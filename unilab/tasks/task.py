"""What a task package provides: its env config factory, per-algorithm tuning and eval metrics."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from unilab.envs.config import TaskConfig

if TYPE_CHECKING:  # a task is declared, and its knobs read (``train --help``), without the env or tensordict loaded
    from tensordict import TensorDict

    from unilab.envs.functional import FunctionalEnv
    from unilab.envs.layout import EnvView

Readings = Callable[["EnvView", "TensorDict"], dict[str, torch.Tensor]]
Score = Callable[..., dict[str, float]]
Threshold = tuple[str, float]  # (">=" or "<=", bound)
Groups = Callable[["FunctionalEnv", "TensorDict"], Mapping[str, torch.Tensor]]


@dataclass(frozen=True)
class EvalMetrics:
    """How ``unilab eval`` scores a policy on the task.

    ``readings(env, state)`` takes the per-step signals from the post-step state (fresh tensors); ``score``
    turns their (T, N, ...) stacks into named figures, given also ``active`` (T, N), ``failed`` (N,), the
    first episodes' ``episode_length`` (N,) and ``dt``. ``thresholds`` name the figures a working policy
    must reach, as ``metric: (">=" | "<=", bound)``.

    ``starts`` names the ways eval starts episodes, each as the task arguments (``make_config`` keywords) that set
    it up; eval scores a rollout per start, and the first is the primary one: the thresholds are judged on it and
    its figures head the summary. Without ``starts`` episodes start as the env's own reset has them, scored once.
    ``groups`` split the envs by how their first episode started: ``groups[name](env, state)`` on the post-reset
    state gives ``{group: (N,) bool mask}``, and eval scores each group's envs alone, under ``name``.
    ``judged_groupings`` names the groupings whose every group must meet the thresholds too (a tracker trained on
    a library must track each clip, not the library on average); a group that no env played fails, since nothing
    shows it works. ``rates`` names the figures that are shares of the judged envs (each env one first episode),
    for which eval gives an interval and says whether the envs were enough to judge them.
    """

    readings: Readings
    score: Score
    thresholds: Mapping[str, Threshold] = field(default_factory=dict)
    starts: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    groups: Mapping[str, Groups] = field(default_factory=dict)
    judged_groupings: tuple[str, ...] = ()
    rates: tuple[str, ...] = ()


@dataclass(frozen=True)
class Task:
    """A registered task. ``make_config(**kwargs)`` builds its ``TaskConfig`` (keyword arguments are the task's
    own knobs, such as ``motion_file``); ``tuning`` maps an algorithm name to the YAML files of that algorithm's
    settings for this task, applied in order over the algorithm's defaults and under the command line. Several
    files let a task take another's tuning and state only where it departs from it (the rough walk's SAC is the
    flat walk's with physics of its own); a later file's keys win."""

    name: str
    make_config: Callable[..., TaskConfig]
    tuning: Mapping[str, tuple[Path, ...]] = field(default_factory=dict)
    metrics: EvalMetrics | None = None

    def __post_init__(self) -> None:
        for algo, paths in self.tuning.items():
            if not (isinstance(paths, tuple) and all(isinstance(path, Path) for path in paths)):
                raise TypeError(f"task {self.name}: tuning[{algo!r}] must be a tuple of paths, got {paths!r}")


def tuning_files(package_dir: Path) -> dict[str, tuple[Path, ...]]:
    """A task package's ``tuning/<algo>.yaml`` files, by algorithm name."""
    return {path.stem: (path,) for path in sorted((package_dir / "tuning").glob("*.yaml"))}
