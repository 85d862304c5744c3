"""What every command that rolls a policy out in a task needs before it builds the env: the task's metrics and
whether the rollout fits in memory."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from unilab.apps.args import InputError
from unilab.envs.config import TaskConfig
from unilab.envs.layout import EnvView, task_layout
from unilab.run.resources import check_fits
from unilab.tasks.metrics import episode_lengths, share
from unilab.tasks.registry import get_task, make_task
from unilab.tasks.task import EvalMetrics


def metrics_of(task: str) -> EvalMetrics:
    """The task's own eval metrics; a task that declares none is scored by survival and episode length."""
    return get_task(task).metrics or SURVIVAL


def _no_readings(env: EnvView, state: TensorDict) -> dict[str, torch.Tensor]:
    return {}


def _survival(active: torch.Tensor, failed: torch.Tensor, episode_length: torch.Tensor, dt: float) -> dict[str, float]:
    return {"survival_rate": share(~failed), **episode_lengths(episode_length, dt)}


SURVIVAL = EvalMetrics(_no_readings, _survival)


def task_of(task: str, overrides: dict[str, Any]) -> TaskConfig:
    """The task a rollout runs, made once: its layout is read before its envs are built from it."""
    try:
        return make_task(task, **overrides)
    except ValueError as exc:  # the task's own checks of its arguments
        raise InputError(str(exc)) from None


def check_rollout_memory(config: TaskConfig, num_envs: int, device: str, record: bool) -> None:
    """Refuse, before building anything, an env count whose physics state (and, with ``record``, the readings a
    rollout keeps for every step) cannot fit in the device's free memory; the task's layout gives the sizes."""
    try:
        layout = task_layout(config)
    except ValueError as exc:  # e.g. an episode shorter than one control step
        raise InputError(str(exc)) from None
    parts = {"envs": num_envs * layout.world_bytes}
    if record:
        readings = metrics_of(config.name).readings(layout, layout.state)
        per_step = sum(value.numel() * value.element_size() for value in readings.values())
        parts["recorded steps"] = layout.ctx.max_episode_steps * num_envs * per_step
    check_fits(parts, torch.device(device), "lower --num-envs")
