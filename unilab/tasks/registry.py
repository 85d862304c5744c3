"""Task registry: the task packages under ``unilab.tasks``, tasks registered at run time, and tasks other
distributions declare under the ``unilab.tasks`` entry-point group.

A task package holds everything of its task (env config, own terms, eval metrics, per-algorithm tuning) and
exposes it as ``TASK``, a ``Task``; nothing else names it. A distribution that ships a task declares, in its
``pyproject.toml``::

    [project.entry-points."unilab.tasks"]
    my_task = "my_package.my_task:TASK"
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import pkgutil
from collections.abc import Callable, Iterable, Mapping, Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from unilab.envs.config import TaskConfig, task_model
from unilab.sim import default_backend, make_backend
from unilab.tasks.task import EvalMetrics, Task

if TYPE_CHECKING:  # the envs load where one is built: finding a task and its knobs (``train --help``) needs neither
    from unilab.envs.functional import FunctionalEnv
    from unilab.envs.torchrl_env import UniLabEnv

ENTRY_POINT_GROUP = "unilab.tasks"
_registered: dict[str, Task] = {}
_discovered: dict[str, Task] | None = None


def register_task(
    name: str | Task,
    make_config: Callable[..., TaskConfig] | None = None,
    *,
    tuning: Mapping[str, str | Path | Sequence[str | Path]] | None = None,
    metrics: EvalMetrics | None = None,
) -> Task:
    """Make a task known to ``make_env``, ``train task=<name>``, ``eval`` and ``play``; returns its ``Task``.

    Pass a ``Task``, or its name and config factory (and optionally per-algorithm tuning YAMLs, a file or a list
    of files applied in order, and eval metrics). Registering a name again replaces the earlier task.
    """
    if isinstance(name, Task):
        task = name
    elif make_config is None:
        raise ValueError(f"register_task({name!r}): give the task's config factory")
    else:
        files = {algo: _paths(given) for algo, given in (tuning or {}).items()}
        task = Task(name, make_config, tuning=files, metrics=metrics)
    missing = [str(path) for paths in task.tuning.values() for path in paths if not path.is_file()]
    if missing:
        raise ValueError(f"task {task.name}: no tuning file {', '.join(missing)}")
    _registered[task.name] = task
    return task


def _paths(given: str | Path | Sequence[str | Path]) -> tuple[Path, ...]:
    return (Path(given),) if isinstance(given, str | Path) else tuple(Path(path) for path in given)


def _discover() -> dict[str, Task]:
    """The task packages under ``unilab.tasks`` and the entry points, loaded once."""
    global _discovered
    if _discovered is None:
        import unilab.tasks as package

        found: dict[str, Task] = {}
        for info in pkgutil.iter_modules(package.__path__):
            if info.ispkg:
                task = importlib.import_module(f"{package.__name__}.{info.name}").TASK
                found[task.name] = task
        for point in entry_points(group=ENTRY_POINT_GROUP):
            task = point.load()
            if not isinstance(task, Task):
                raise TypeError(f"entry point {point.name} = {point.value} is not a unilab Task")
            found[task.name] = task
        _discovered = found
    return _discovered


def _all() -> dict[str, Task]:
    return {**_discover(), **_registered}


def list_tasks() -> list[str]:
    return sorted(_all())


def get_task(name: str) -> Task:
    tasks = _all()
    if name not in tasks:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(sorted(tasks))}")
    return tasks[name]


def _override_kinds(name: str) -> tuple[set[str], set[str]]:
    """The two kinds of override ``make_task(name, ...)`` takes: its factory's arguments, and the ``TaskConfig``
    fields."""
    arguments = set(inspect.signature(get_task(name).make_config).parameters)
    return arguments, {f.name for f in dataclasses.fields(TaskConfig)}


def override_names(name: str) -> set[str]:
    """The overrides ``make_task(name, ...)`` takes: its factory's arguments and the ``TaskConfig`` fields."""
    accepted, fields = _override_kinds(name)
    return accepted | fields | {"reward_weights"}


def make_task(name: str, **overrides: Any) -> TaskConfig:
    """The named task's config.

    ``overrides`` the task factory takes (e.g. ``motion_file``) shape how the task is built;
    ``reward_weights`` (term name to weight) replaces those terms' weights; the rest replace fields of the built
    ``TaskConfig``.
    """
    accepted, fields = _override_kinds(name)
    weights = overrides.pop("reward_weights", None) or {}
    build = {k: v for k, v in overrides.items() if k in accepted}
    replace = {k: v for k, v in overrides.items() if k not in accepted}
    unknown = sorted(set(replace) - fields)
    if unknown:
        raise ValueError(
            f"unknown override(s) {unknown} for task {name!r}; TaskConfig fields: {sorted(fields)}, "
            f"task arguments: {sorted(accepted)}"
        )
    task = dataclasses.replace(get_task(name).make_config(**build), **replace)
    if not weights:
        return task
    check_reward_weights(name, weights, task.rewards)
    rewards = {
        term: dataclasses.replace(t, weight=float(weights[term])) if term in weights else t
        for term, t in task.rewards.items()
    }
    return dataclasses.replace(task, rewards=rewards)


def check_reward_weights(
    name: str, weights: Mapping[str, float], terms: Iterable[str] | None = None, key: str = "reward_weights"
) -> None:
    """``ValueError`` in one line, naming ``key.<term>``, for a weight of a reward term task ``name`` lacks (its
    ``terms``, else those of its default config) or one that is not a finite number; before any weight is used.
    Without weights there is nothing to check, and the task is not built: a rough walk's build generates its terrain
    and compiles its model, and every ``train`` checks its weights before the run builds the task again."""
    if not weights:
        return
    known = list(make_task(name).rewards if terms is None else terms)
    unknown = [term for term in weights if term not in known]
    if unknown:
        raise ValueError(f"{key}.{unknown[0]}: {name} has no such reward term; its terms: {', '.join(known)}")
    for term, weight in weights.items():
        if not math.isfinite(weight):
            raise ValueError(f"{key}.{term} must be a finite number, got {weight}")


def make_functional_env(
    task: str, sim: str | None = None, num_envs: int = 16, device: str | torch.device | None = None, **overrides: Any
) -> FunctionalEnv:
    """The functional core (``reset``/``step`` over TensorDict state) for training loops."""
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    return build_env(make_task(task, **overrides), sim, num_envs, device)


def build_env(
    config: TaskConfig, sim: str | None = None, num_envs: int = 16, device: str | torch.device | None = None
) -> FunctionalEnv:
    """``num_envs`` envs of a task already made, e.g. one whose layout (``unilab.envs.layout``) was read first: its
    compiled model is reused."""
    from unilab.envs.functional import FunctionalEnv  # tensordict and torchrl: seconds on a small CPU

    backend = make_backend(sim or default_backend(), task_model(config), num_envs, device=device, config=config.physics)
    return FunctionalEnv(config, backend)


def make_env(
    task: str,
    sim: str | None = None,
    num_envs: int = 16,
    device: str | torch.device | None = None,
    seed: int = 0,
    **overrides: Any,
) -> UniLabEnv:
    """A TorchRL ``EnvBase`` running ``num_envs`` copies of ``task`` on the ``sim`` backend.

    ``sim`` defaults to mjwarp with CUDA, else the C MuJoCo backend; ``overrides`` replace
    ``TaskConfig`` fields (e.g. ``obs_noise=False``, ``episode_length_s=5.0``).
    """
    from unilab.envs.torchrl_env import UniLabEnv  # torchrl.envs: loaded where an env is built, as in build_env

    return UniLabEnv(make_functional_env(task, sim, num_envs, device, **overrides), seed=seed)
