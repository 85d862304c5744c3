"""A task's layout: the sizes a run is planned by (observation widths, action width, the physics' bytes per world)
and the one-env context and state its terms and readings are evaluated on, known from the task's compiled model
alone.

A memory check, ``unilab list`` and a viewer's clip menu need these before there is an env, and building a backend
for them (a one-env "probe") would compile the model and lay out physics a second time. Here the model comes from
``task_model``'s memo, which the env built next reuses, and the physics state is zeros of the backend's shapes: a
term's width depends on the shapes it reads, not on their values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import mujoco
import torch
from tensordict import TensorDict

from unilab.context import EnvContext
from unilab.core.spec import EnvSpec, Mirror
from unilab.envs.config import TaskConfig, place_on_device, task_model
from unilab.envs.functional import blank_state, episode_steps, mirror_maps
from unilab.managers.managers import (
    CommandManager,
    CurriculumManager,
    EventManager,
    ObservationManager,
    observation_term_dims,
)
from unilab.sim import MODEL_PARAMS
from unilab.sim.base import state_shapes

_CPU = torch.device("cpu")


class EnvView(Protocol):
    """What a task's eval readings read of an env: its task and its context (``FunctionalEnv`` and ``TaskLayout``
    both have them)."""

    task: TaskConfig
    ctx: EnvContext


@dataclass(frozen=True)
class TaskLayout:
    """A task's sizes, with the one-env context and state (physics at zeros) they were read from, on the CPU."""

    task: TaskConfig
    ctx: EnvContext
    state: TensorDict
    obs_term_dims: dict[str, dict[str, int]]
    action_dim: int
    world_bytes: int  # MuJoCo's buffer for one world's data: what each env's physics holds beside its state
    mirrors: dict[str, Mirror]

    @property
    def obs_dims(self) -> dict[str, int]:
        return {group: sum(dims.values()) for group, dims in self.obs_term_dims.items()}

    def spec(self, num_envs: int, device: torch.device) -> EnvSpec:
        """The ``EnvSpec`` an env of ``num_envs`` on ``device`` will have; not graph-capturable, since that is the
        backend's to say."""
        return EnvSpec(
            num_envs=num_envs,
            action_dim=self.action_dim,
            obs_dims=self.obs_dims,
            device=device,
            mirrors=self.mirrors,
            reward_terms=tuple(self.task.rewards),
            graph_capturable=False,
        )


def task_layout(task: TaskConfig) -> TaskLayout:
    """``task``'s layout, from its compiled model (``task_model``); raises ``ValueError`` where the task cannot be
    built (a model that does not fit its robot, an episode shorter than one control step)."""
    model = task_model(task)
    task = place_on_device(task, _CPU)
    control_dt = model.opt.timestep * task.physics.substeps
    ctx = EnvContext.from_model(model, task.robot, 1, _CPU, control_dt, episode_steps(task, control_dt))
    per_world = tuple(name for name in MODEL_PARAMS if name in task.physics.per_world)
    physics = {name: torch.zeros((1, *shape)) for name, shape in state_shapes(model, per_world).items()}
    managers = CommandManager(task.commands), EventManager(task.events), CurriculumManager(task.curricula)
    state = blank_state(physics, ctx, model.nu, *managers)
    dims = observation_term_dims(task.observations, state, ctx)
    observations = ObservationManager(task.observations, dims, _CPU)
    return TaskLayout(
        task=task,
        ctx=ctx,
        state=state,
        obs_term_dims=dims,
        action_dim=model.nu,
        world_bytes=mujoco.MjData(model).nbuffer,
        mirrors=mirror_maps(task, observations, dims),
    )
