"""The functional env: ``reset(rng) -> state`` and ``step(state, action, rng) -> (state, transition)``.

Both are pure: the input state is never written, and the result depends only on the
arguments. The state TensorDict holds everything needed to continue bit for bit, the
physics included (``state["sim"]``: positions, velocities, solver warm start, time,
actuator gains, the model parameters the task randomises and the quantities derived
from them), so a state can be saved, restored and branched. ``step_`` is the donating
variant for the hot path: it may write the new physics state into the input state's
``sim`` tensors instead of copies, so a runner stepping one static state in a CUDA
graph allocates nothing; on the same arguments it computes exactly what ``step`` does.

One code path for every backend and for eager, compiled and graph-captured execution:
term math is torch on fixed shapes, resets are masks, randomness comes from ``rng``, and
physics enters through the opaque ops of ``unilab.sim.ops``. The returned state holds
the observation the next action is computed from (post-reset for envs that just ended);
the transition holds the true terminal observation under ``"next"``.

Inside, the step works on the state's entries (``entries``: its tensors by ``(group, name)`` in a plain dict) and
builds TensorDicts only at its edges (``assemble``, ``batch``); ``step_entries_`` is that core, which a compiled
runner traces directly. Dynamo traces every TensorDict read or write through tensordict's Python, a few hundred
bytecodes each: on the TensorDict itself the step's tracing was 84 % tensordict.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torchrl.data import Composite, Unbounded

from unilab.context import ACTION_DELAY, Entries, EnvContext, write_updates
from unilab.core import rng as rnglib
from unilab.core.spec import EnvSpec, Mirror
from unilab.envs.config import TaskConfig, place_on_device
from unilab.managers.managers import (
    CommandManager,
    CurriculumManager,
    EventManager,
    ObservationManager,
    RewardManager,
    TerminationManager,
    observation_term_dims,
)
from unilab.sim import ops
from unilab.sim.base import SimBackend

_RESET_SALT = 0x5A5A5A5  # separates post-reset observation noise from terminal observation noise
# A physics state with a speed above this (m/s or rad/s) has blown up: no robot gets there by itself.
DIVERGED_SPEED = 1.0e3
_STEP_STREAM = rnglib.stream_id("step")
_RESET_STREAM = rnglib.stream_id("reset")
_INTERVAL_STREAM = rnglib.stream_id("interval")


class FunctionalEnv:
    """Composes a task's managers over a physics backend; holds no episode state of its own."""

    def __init__(self, task: TaskConfig, sim: SimBackend) -> None:
        task = place_on_device(task, sim.device)
        self.task = task
        self.sim = sim
        self.num_envs = sim.num_worlds
        self.device = sim.device
        max_steps = episode_steps(task, sim.control_dt)
        self.ctx = EnvContext.from_model(sim.model, task.robot, sim.num_worlds, sim.device, sim.control_dt, max_steps)
        self._handle = ops.register(sim)
        self.action_dim = sim.model.nu
        self.commands = CommandManager(task.commands)
        self.events = EventManager(task.events)
        self.curricula = CurriculumManager(task.curricula)
        blank = self._blank_state()
        self.events.check(blank, self.ctx)
        # With a latency event, substep k of a control step applies the previous targets where k < the delay.
        self._substep_index = (
            torch.arange(sim.config.substeps, device=sim.device).unsqueeze(-1) if ACTION_DELAY in blank["env"] else None
        )
        self.obs_term_dims = observation_term_dims(task.observations, blank, self.ctx)
        self.observations = ObservationManager(task.observations, self.obs_term_dims, sim.device)
        self.rewards = RewardManager(task.rewards, task.penalty_scale_key)
        self.terminations = TerminationManager(task.terminations)
        self.obs_dims = {group: sum(dims.values()) for group, dims in self.obs_term_dims.items()}
        self._state_spec = self._layout(blank)
        self._physics_names = tuple(blank["sim"].keys())

    # -- state ---------------------------------------------------------------------------

    def state_spec(self) -> Composite:
        """The state's layout: every key with its shape and dtype, the same after every ``reset`` and ``step``.

        ``sim`` holds the physics (``SimBackend.state_spec``); ``env`` the per-env entries of the bookkeeping,
        commands and reset events; ``task`` the scalars and vectors shared by all envs (curricula, counters);
        ``obs`` the observation groups the next action is computed from.
        """
        return self._state_spec.clone()

    def _layout(self, blank: TensorDict) -> Composite:
        def spec_of(td: TensorDict) -> Composite:
            leaves = {key: Unbounded(value.shape, dtype=value.dtype, device=self.device) for key, value in td.items()}
            return Composite(leaves, shape=td.batch_size, device=self.device)

        groups = {name: spec_of(blank[name]) for name in ("sim", "env", "task")}
        n = self.num_envs
        obs = {group: Unbounded((n, dim), device=self.device) for group, dim in self.obs_dims.items()}
        return Composite(**groups, obs=Composite(obs, shape=(n,), device=self.device), shape=(), device=self.device)

    def _blank_state(self) -> TensorDict:
        return blank_state(
            self.sim.initial_state(), self.ctx, self.action_dim, self.commands, self.events, self.curricula
        )

    # -- the state's edges: a TensorDict outside the step, its entries inside ---------------

    @staticmethod
    def entries(state: TensorDict) -> Entries:
        """``state``'s own tensors by ``(group, name)``: what ``step_entries_`` takes."""
        return dict(state.items(include_nested=True, leaves_only=True))

    def assemble(self, entries: Entries) -> TensorDict:
        """The state TensorDict of ``entries`` (their own tensors): ``task`` shared by all envs, the other groups
        per env."""
        groups: dict[str, dict[str, torch.Tensor]] = {}
        for (group, name), value in entries.items():
            groups.setdefault(group, {})[name] = value
        dev = self.device
        return TensorDict(
            {
                group: TensorDict(values, batch_size=[] if group == "task" else [self.num_envs], device=dev)
                for group, values in groups.items()
            },
            batch_size=[],
            device=dev,
        )

    def batch(self, data: dict, device: torch.device | None = None) -> TensorDict:
        """Per-env tensors (nested dicts of them too) as a TensorDict over the envs: a transition, observations."""
        return TensorDict(data, batch_size=[self.num_envs], device=device)

    @staticmethod
    def _own_physics(entries: Entries) -> Entries:
        """``entries`` with fresh copies of the physics tensors, for the in-place sim ops to write."""
        return {key: value.clone() if key[0] == "sim" else value for key, value in entries.items()}

    def _physics(self, own: Entries) -> dict[str, torch.Tensor]:
        return {name: own["sim", name] for name in self._physics_names}

    def _delayed(self, own: Entries, targets: torch.Tensor) -> torch.Tensor:
        """``(substeps, N, nu)`` targets: the previous action's for the first ``ACTION_DELAY`` substeps of each
        env, ``targets`` after (an env just reset had action 0 before: the default pose)."""
        previous = self.task.action.func(own["env", "prev_action"], self.ctx, **self.task.action.params)
        late = (self._substep_index < own["env", ACTION_DELAY]).unsqueeze(-1)
        return torch.where(late, previous, targets)

    @staticmethod
    def _diverged(physics: dict[str, torch.Tensor]) -> torch.Tensor:
        """Envs whose physics state is non-finite or moves impossibly fast, ``(N,)`` bool, found on device."""
        qpos, qvel = physics["qpos"], physics["qvel"]
        finite = torch.isfinite(qpos).all(-1) & torch.isfinite(qvel).all(-1)
        return ~finite | (qvel.abs().amax(-1) > DIVERGED_SPEED)

    def _check_rows(self, what: str, value: torch.Tensor, shape: tuple[int, ...]) -> None:
        """Shapes are static, so this check costs nothing under ``torch.compile`` or in a CUDA graph."""
        if tuple(value.shape) != shape:
            raise ValueError(f"{what} must have shape {shape}, got {tuple(value.shape)}")

    # -- reset ---------------------------------------------------------------------------

    def _reset_envs_(self, own: Entries, mask: torch.Tensor, rng: torch.Tensor) -> None:
        """Reset events, command resampling and bookkeeping for the masked envs; physics last.

        Writes into ``own``, which the caller holds alone, physics tensors included.
        """
        physics = self._physics(own)
        rng = rnglib.fold(rng, _RESET_STREAM)
        self.events.reset_(own, self.ctx, mask, rng)
        self.commands.resample_(own, self.ctx, mask, rng)
        zeros = torch.zeros_like(own["env", "action"])
        write_updates(
            own,
            {
                ("env", "action"): zeros,
                ("env", "prev_action"): zeros,
                ("env", "episode_step"): torch.zeros_like(own["env", "episode_step"]),
            },
            mask,
        )
        # Positions go through the reset op; anything else an event set (actuator gains) is adopted here.
        self._adopt_physics(own, physics, skip=("qpos", "qvel"))
        ops.sim_reset_(self._handle, physics, mask, own["sim", "qpos"], own["sim", "qvel"])
        write_updates(own, {("sim", name): value for name, value in physics.items()})

    @staticmethod
    def _adopt_physics(own: Entries, physics: dict[str, torch.Tensor], skip: tuple[str, ...] = ()) -> None:
        """Terms return new tensors for the physics entries they set; write those into the owned ``physics``
        tensors (the ones ``step_`` donates), so the state keeps its storage."""
        for name, owned in physics.items():
            value = own["sim", name]
            if name not in skip and value is not owned:
                owned.copy_(value)

    def _check_mask(self, mask: torch.Tensor) -> None:
        if mask.dtype != torch.bool:
            raise ValueError(f"mask must be a bool tensor, got {mask.dtype}")
        self._check_rows("mask", mask, (self.num_envs,))

    def _observe(self, own: Entries, rng: torch.Tensor, salt: int) -> dict[str, torch.Tensor]:
        """The observation groups of ``own``; ``salt`` tells a step's terminal observations (0) from those after a
        reset (``_RESET_SALT``), whose noise must differ."""
        return self.observations.compute(own, self.ctx, rng, self.task.obs_noise, salt=salt)

    def reset(self, rng: torch.Tensor) -> TensorDict:
        """All envs from scratch; the state carries their first observations under ``"obs"``."""
        own = self.entries(self._blank_state())
        mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._reset_envs_(own, mask, rng)
        own.update({("obs", group): value for group, value in self._observe(own, rng, _RESET_SALT).items()})
        return self.assemble(own)

    def reset_where(self, state: TensorDict, mask: torch.Tensor, rng: torch.Tensor) -> TensorDict:
        """Reset only the masked envs (others keep their state and observation); ``state`` is not written."""
        self._check_mask(mask)
        own = self._own_physics(self.entries(state))
        self._reset_envs_(own, mask, rng)
        write_updates(
            own, {("obs", group): value for group, value in self._observe(own, rng, _RESET_SALT).items()}, mask
        )
        return self.assemble(own)

    # -- step ----------------------------------------------------------------------------

    def step(self, state: TensorDict, action: torch.Tensor, rng: torch.Tensor) -> tuple[TensorDict, TensorDict]:
        """Apply ``action`` (N, nu) for one control step, auto-resetting finished envs; ``state`` is not written.

        Actions are clipped to [-1, 1], the action spec. Non-finite action rows are replaced by zeros and
        counted in ``state["task", "nonfinite_actions"]`` (checked at host boundaries, never here). An env whose
        physics blew up (non-finite, or faster than ``DIVERGED_SPEED``) ends its episode as terminated with reward
        0 and an all-zero terminal observation, is reset like any other, and is counted in
        ``state["task", "diverged_envs"]``; the other envs go on untouched.
        """
        own, transition = self.step_entries_(self._own_physics(self.entries(state)), action, rng)
        return self.assemble(own), self.batch(transition)

    def step_(self, state: TensorDict, action: torch.Tensor, rng: torch.Tensor) -> tuple[TensorDict, TensorDict]:
        """``step`` that donates ``state``: the new physics state is written into ``state["sim"]``'s tensors,
        which the returned state shares. ``state`` must not be used afterwards, except through the result."""
        own, transition = self.step_entries_(self.entries(state), action, rng)
        return self.assemble(own), self.batch(transition)

    def step_entries_(self, entries: Entries, action: torch.Tensor, rng: torch.Tensor) -> tuple[Entries, dict]:
        """``step_`` on the state's ``entries``, what a compiled runner traces: the new state's entries (the
        physics tensors the given ones, written in place; ``entries`` itself is not changed) and the transition as
        nested dicts of per-env tensors (``batch`` makes it a TensorDict)."""
        self._check_rows("action", action, (self.num_envs, self.action_dim))
        ctx = self.ctx
        step_rng = rnglib.fold(rng, _STEP_STREAM)
        bad = ~torch.isfinite(action).all(dim=-1)
        action = torch.where(bad.unsqueeze(-1), 0.0, action).clamp(-1.0, 1.0)
        # The one copy of the entries: from here on this method and the managers write into it.
        own = dict(entries)
        write_updates(
            own,
            {
                ("env", "prev_action"): own["env", "action"],
                ("env", "action"): action,
                ("task", "nonfinite_actions"): own["task", "nonfinite_actions"] + bad.sum(),
            },
        )
        self.commands.advance_(own, ctx)
        if self.events.intervals:
            physics = self._physics(own)
            self.events.interval_(own, ctx, rnglib.fold(rng, _INTERVAL_STREAM))
            self._adopt_physics(own, physics)
            write_updates(own, {("sim", name): value for name, value in physics.items()})
        targets = self.task.action.func(action, ctx, **self.task.action.params)
        if self._substep_index is not None:
            targets = self._delayed(own, targets)
        physics = self._physics(own)
        ops.sim_step_(self._handle, physics, targets)
        write_updates(own, {("env", "episode_step"): own["env", "episode_step"] + 1})

        diverged = self._diverged(physics)
        hits = self.terminations.hits(own, ctx)
        terminated, truncated = self.terminations.combine(hits, ctx)
        terminated = terminated | diverged
        truncated = truncated & ~diverged
        done = terminated | truncated
        reward, components = self.rewards.compute(own, ctx)
        next_obs = self._observe(own, step_rng, salt=0)
        # Nothing computed from a blown-up state may reach a learner: its rows become zeros.
        reward = torch.where(diverged, 0.0, reward)
        components = {name: torch.where(diverged, 0.0, value) for name, value in components.items()}
        next_obs = {group: torch.where(diverged.unsqueeze(-1), 0.0, value) for group, value in next_obs.items()}
        write_updates(own, {("task", "diverged_envs"): own["task", "diverged_envs"] + diverged.sum()})
        episode_length = own["env", "episode_step"]
        self.curricula.update_(own, ctx, done, terminated)

        self._reset_envs_(own, done, rng)
        reset_obs = self._observe(own, step_rng, _RESET_SALT)
        d = done.unsqueeze(-1)
        own.update({("obs", group): torch.where(d, reset_obs[group], next_obs[group]) for group in next_obs})
        transition = {
            "next": {**next_obs, "reward": reward, "terminated": terminated, "truncated": truncated, "done": done},
            "reward_terms": components,
            "episode_length": episode_length,
            "action_nonfinite": bad,
            "diverged": diverged,
        }
        if self.task.record_terminations:
            transition["termination_terms"] = hits
        return own, transition

    # -- data for learners -----------------------------------------------------------------

    def mirrors(self) -> dict[str, Mirror]:
        """Left-right mirror maps of every observation group and of the action (``observation_mirrors``)."""
        return mirror_maps(self.task, self.observations, self.obs_term_dims)

    def policy_io(self) -> dict[str, object]:
        """What a deployment needs to feed the policy and drive the robot, without this code: the actor's
        observation layout (term -> [start, end) columns), the joint order, the action term and its parameters,
        the default joint positions and the control period."""
        layout, start = {}, 0
        for name, width in self.obs_term_dims["policy"].items():
            layout[name] = [start, start + width]
            start += width
        params = {k: v for k, v in self.task.action.params.items() if isinstance(v, int | float | str | bool)}
        return {
            "observation": layout,
            "joint_names": list(self.task.robot.joint_names),
            "action_term": self.task.action.func.__name__,
            "action_params": params,
            "default_joint_pos": self.ctx.default_joint_pos.tolist(),
            "control_dt": self.ctx.dt,
        }

    def spec(self) -> EnvSpec:
        """What a learner may rely on: shapes, mirrors, device; nothing of the env's internals."""
        return EnvSpec(
            num_envs=self.num_envs,
            action_dim=self.action_dim,
            obs_dims=dict(self.obs_dims),
            device=self.device,
            mirrors=self.mirrors(),
            reward_terms=tuple(self.task.rewards),
            graph_capturable=self.device.type == "cuda" and self.sim.capabilities.graph_capturable,
        )


def episode_steps(task: TaskConfig, control_dt: float) -> int:
    """Control steps in one of the task's episodes; an episode shorter than one step is refused."""
    steps = round(task.episode_length_s / control_dt)
    if steps < 1:
        raise ValueError(
            f"an episode of {task.episode_length_s:g} s is shorter than one control step ({control_dt:g} s)"
        )
    return steps


def blank_state(
    physics: dict[str, torch.Tensor],
    ctx: EnvContext,
    action_dim: int,
    commands: CommandManager,
    events: EventManager,
    curricula: CurriculumManager,
) -> TensorDict:
    """A state before any reset: ``physics`` and every term's initial entries. Its layout is every state's, so the
    observation terms evaluated on it give their widths."""
    n, dev = ctx.num_envs, ctx.device
    env = {
        "episode_step": torch.zeros(n, dtype=torch.int64, device=dev),
        "action": torch.zeros(n, action_dim, device=dev),
        "prev_action": torch.zeros(n, action_dim, device=dev),
        **commands.initial_state(ctx),
        **events.initial_state(ctx),
    }
    task = {
        "nonfinite_actions": torch.zeros((), dtype=torch.int64, device=dev),
        "diverged_envs": torch.zeros((), dtype=torch.int64, device=dev),
    }
    task.update(curricula.initial_state(ctx))
    return TensorDict(
        {
            "sim": TensorDict(physics, batch_size=[n], device=dev),
            "env": TensorDict(env, batch_size=[n], device=dev),
            "task": TensorDict(task, batch_size=[], device=dev),
        },
        batch_size=[],
        device=dev,
    )


def mirror_maps(
    task: TaskConfig, observations: ObservationManager, obs_term_dims: dict[str, dict[str, int]]
) -> dict[str, Mirror]:
    """Left-right mirror maps of every observation group and of the action; empty unless the task declares one for
    the action and for every observation term: mirror maps are needed only for mirror augmentation
    (``algo.use_symmetry``), which refuses a task without them."""
    terms = [term for group in task.observations.values() for term in group.values()]
    if task.action.mirror is None or any(term.mirror is None for term in terms):
        return {}
    maps = {group: observations.mirror(group, obs_term_dims[group]) for group in task.observations}
    maps["action"] = task.action.mirror
    return maps
