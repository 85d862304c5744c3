"""Task registry: ``list_tasks()`` and ``make_env(name, ...)``."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any

import torch

from unilab.envs.functional import FunctionalEnv
from unilab.envs.torchrl_env import UniLabEnv
from unilab.sim import default_backend, load_model, make_backend
from unilab.tasks import g1_motion_tracking, g1_walk_flat
from unilab.tasks.config import TaskConfig

_TASKS: dict[str, Callable[..., TaskConfig]] = {
    "g1_walk_flat": g1_walk_flat.make_task,
    "g1_motion_tracking": g1_motion_tracking.make_task,
}


def list_tasks() -> list[str]:
    return sorted(_TASKS)


def make_task(name: str, **overrides: Any) -> TaskConfig:
    """The named task's config.

    ``overrides`` the task factory takes (e.g. ``motion_file``) shape how the task is built;
    the rest replace fields of the built ``TaskConfig``.
    """
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(list_tasks())}")
    factory = _TASKS[name]
    accepted = set(inspect.signature(factory).parameters)
    build = {k: v for k, v in overrides.items() if k in accepted}
    replace = {k: v for k, v in overrides.items() if k not in accepted}
    fields = {f.name for f in dataclasses.fields(TaskConfig)}
    unknown = sorted(set(replace) - fields)
    if unknown:
        raise ValueError(
            f"unknown override(s) {unknown} for task {name!r}; TaskConfig fields: {sorted(fields)}, "
            f"task arguments: {sorted(accepted)}"
        )
    return dataclasses.replace(factory(**build), **replace)


def make_functional_env(
    task: str, sim: str | None = None, num_envs: int = 16, device: str | torch.device | None = None, **overrides: Any
) -> FunctionalEnv:
    """The functional core (``reset``/``step`` over TensorDict state) for training loops."""
    config = make_task(task, **overrides)
    backend = make_backend(
        sim or default_backend(), num_envs, device=device, config=config.sim, model=load_model(config.scene, config.sim)
    )
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
    return UniLabEnv(make_functional_env(task, sim, num_envs, device, **overrides), seed=seed)
