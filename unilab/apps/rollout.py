"""What every command that rolls a policy out in a task needs before it builds the env: the task's metrics and
whether the rollout fits in memory."""

from __future__ import annotations

from typing import Any

import mujoco
import torch
from tensordict import TensorDict

from unilab.apps.args import InputError
from unilab.apps.resources import check_fits
from unilab.core.rng import make_rng
from unilab.envs.functional import FunctionalEnv
from unilab.tasks.metrics import episode_lengths
from unilab.tasks.registry import get_task, make_functional_env
from unilab.tasks.task import EvalMetrics


def metrics_of(task: str) -> EvalMetrics:
    """The task's own eval metrics; a task that declares none is scored by survival and episode length."""
    return get_task(task).metrics or SURVIVAL


def _no_readings(env: FunctionalEnv, state: TensorDict) -> dict[str, torch.Tensor]:
    return {}


def _survival(active: torch.Tensor, failed: torch.Tensor, episode_length: torch.Tensor, dt: float) -> dict[str, float]:
    return {"survival_rate": 1.0 - float(failed.float().mean()), **episode_lengths(episode_length, dt)}


SURVIVAL = EvalMetrics(_no_readings, _survival)


def check_rollout_memory(task: str, overrides: dict[str, Any], num_envs: int, device: str, record: bool) -> None:
    """Refuse, before building anything, an env count whose physics state (and, with ``record``, the readings a
    rollout keeps for every step) cannot fit in the device's free memory. A one-env probe gives the sizes."""
    try:
        probe = make_functional_env(task, sim="mujoco", num_envs=1, device="cpu", **overrides)
    except ValueError as exc:  # the task's own checks of its arguments, e.g. an episode shorter than one step
        raise InputError(str(exc)) from None
    parts = {"envs": num_envs * mujoco.MjData(probe.sim.model).nbuffer}
    if record:
        read = metrics_of(task).readings
        readings = read(probe, probe.reset(make_rng(0, probe.device)))
        per_step = sum(value.numel() * value.element_size() for value in readings.values())
        parts["recorded steps"] = probe.ctx.max_episode_steps * num_envs * per_step
    check_fits(parts, torch.device(device), "lower --num-envs")
