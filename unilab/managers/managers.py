"""Managers turn a task's declared terms into pure functions over the state.

The state is a TensorDict with empty batch size whose layout ``FunctionalEnv.state_spec`` gives:
``sim`` (physics, batch ``[N]``), ``env`` (per-env entries owned by terms, batch ``[N]``), ``task``
(entries shared by all envs, such as curriculum state) and ``obs``. Inside the env step the managers and their terms
see its entries by ``(group, name)`` as a plain dict (``unilab.context.Entries``), read the same way.

The managers that compute (observations, rewards, terminations) only read the state. Those that change it (events,
commands, curricula) write their terms' updates, in turn, into entries their caller holds alone (their methods end
in ``_``, as torch's in-place ones do), so each term sees the ones before it: the env copies the entries once per
step and hands that copy to each of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

from unilab.context import Entries, EnvContext, State, StateKey, write_updates
from unilab.core import rng as rnglib
from unilab.core.spec import Mirror
from unilab.managers.terms import (
    CommandTerm,
    CurriculumTerm,
    EventTerm,
    ObsTerm,
    RewardTerm,
    TerminationTerm,
)

if TYPE_CHECKING:  # annotations only: tensordict loads torch._dynamo, about a second of `train --help`
    from tensordict import TensorDict


def observation_term_dims(
    groups: Mapping[str, Mapping[str, ObsTerm]], state: State, ctx: EnvContext
) -> dict[str, dict[str, int]]:
    """Width of every observation term, found by evaluating it once."""
    return {
        group: {name: term.func(state, ctx, **term.params).shape[-1] for name, term in terms.items()}
        for group, terms in groups.items()
    }


class ObservationManager:
    """Observation groups (e.g. ``policy``, ``critic``), each the concatenation of its terms.

    Noise and scale are applied to a whole group at once with per-column vectors built
    here: one random draw per group instead of one per noisy term.
    """

    def __init__(
        self, groups: Mapping[str, Mapping[str, ObsTerm]], dims: Mapping[str, Mapping[str, int]], device: torch.device
    ) -> None:
        self.groups = groups
        self._streams = {g: rnglib.stream_id(f"obs/{g}") for g in groups}
        # A term is pure, so one that two groups both hold (the actor's terms in the critic, without the noise, which
        # is added per group) is computed once per call: the traced step holds it once.
        self._keys = {
            (group, name): (term.func, tuple((key, id(value)) for key, value in term.params.items()))
            for group, terms in groups.items()
            for name, term in terms.items()
        }
        self._noise: dict[str, torch.Tensor | None] = {}
        self._scale: dict[str, torch.Tensor | None] = {}
        for group, terms in groups.items():
            noise = torch.cat([torch.full((dims[group][n],), t.noise) for n, t in terms.items()]).to(device)
            scale = torch.cat([torch.full((dims[group][n],), t.scale) for n, t in terms.items()]).to(device)
            self._noise[group] = noise if bool((noise > 0).any()) else None
            self._scale[group] = scale if bool((scale != 1).any()) else None

    def compute(
        self, state: State, ctx: EnvContext, rng: torch.Tensor, noise: bool, salt: int = 0
    ) -> dict[str, torch.Tensor]:
        """``(terms + U(-noise, noise)) * scale`` per group; ``salt`` separates the noise of two
        evaluations within one step (terminal and post-reset observations)."""
        out = {}
        computed: dict[tuple, torch.Tensor] = {}
        for group, terms in self.groups.items():
            parts = []
            for name, term in terms.items():
                key = self._keys[group, name]
                if key not in computed:
                    computed[key] = term.func(state, ctx, **term.params)
                parts.append(computed[key])
            x = torch.cat(parts, dim=-1)
            amplitude = self._noise[group]
            if noise and amplitude is not None:
                x = x + rnglib.uniform(rng, self._streams[group] ^ salt, tuple(x.shape), -amplitude, amplitude)
            scale = self._scale[group]
            out[group] = x * scale if scale is not None else x
        return out

    def mirror(self, group: str, dims: Mapping[str, int]) -> Mirror:
        """The group's mirror map, assembled from its terms' maps; every term must declare one."""
        index: list[int] = []
        sign: list[float] = []
        offset = 0
        for name, term in self.groups[group].items():
            if term.mirror is None:
                raise ValueError(f"observation term {group}/{name} declares no mirror map")
            if len(term.mirror.index) != dims[name]:
                raise ValueError(
                    f"mirror map of {group}/{name} has {len(term.mirror.index)} entries, term has {dims[name]}"
                )
            index += [offset + i for i in term.mirror.index]
            sign += list(term.mirror.sign)
            offset += dims[name]
        return Mirror(tuple(index), tuple(sign))


class RewardManager:
    """``reward = dt * sum_i w_i * term_i`` (curriculum-scaled terms also times the penalty scale)."""

    def __init__(self, terms: Mapping[str, RewardTerm], penalty_scale_key: StateKey | None = None) -> None:
        self.terms = terms
        self.penalty_scale_key = penalty_scale_key
        if penalty_scale_key is None and any(t.curriculum_scaled for t in terms.values()):
            raise ValueError("curriculum-scaled reward terms need a penalty_scale_key")

    def compute(self, state: State, ctx: EnvContext) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        scale = state.get(self.penalty_scale_key) if self.penalty_scale_key is not None else None
        components = {}
        for name, term in self.terms.items():
            weight = term.weight * ctx.dt
            value = term.func(state, ctx, **term.params) * weight
            components[name] = value * scale if term.curriculum_scaled else value
        reward = torch.stack(list(components.values()), dim=0).sum(dim=0)
        return reward, components


class TerminationManager:
    def __init__(self, terms: Mapping[str, TerminationTerm]) -> None:
        self.terms = terms

    def hits(self, state: State, ctx: EnvContext) -> dict[str, torch.Tensor]:
        """Each term's flags, bool ``(N,)`` by name: what ended an episode, where several could have."""
        return {name: term.func(state, ctx, **term.params) for name, term in self.terms.items()}

    def combine(self, hits: Mapping[str, torch.Tensor], ctx: EnvContext) -> tuple[torch.Tensor, torch.Tensor]:
        """(terminated, truncated) from ``hits``, each bool ``(N,)``; an env both failing and timing out is
        terminated."""
        zeros = torch.zeros(ctx.num_envs, dtype=torch.bool, device=ctx.device)
        terminated, truncated = zeros, zeros
        for name, term in self.terms.items():
            if term.time_out:
                truncated = truncated | hits[name]
            else:
                terminated = terminated | hits[name]
        return terminated, truncated & ~terminated

    def compute(self, state: State, ctx: EnvContext) -> tuple[torch.Tensor, torch.Tensor]:
        """(terminated, truncated), each bool ``(N,)``; an env both failing and timing out is terminated."""
        return self.combine(self.hits(state, ctx), ctx)


class CommandManager:
    def __init__(self, terms: Mapping[str, CommandTerm]) -> None:
        self.terms = terms
        self._streams = {n: rnglib.stream_id(f"command/{n}") for n in terms}

    def initial_state(self, ctx: EnvContext) -> dict[str, torch.Tensor]:
        return {n: torch.zeros(ctx.num_envs, t.dim, device=ctx.device) for n, t in self.terms.items()}

    def resample_(self, own: Entries, ctx: EnvContext, mask: torch.Tensor, rng: torch.Tensor) -> None:
        for name, term in self.terms.items():
            rng_n = rnglib.fold(rng, self._streams[name])
            write_updates(own, {("env", name): term.resample(own, ctx, mask, rng_n, **term.params)}, mask)

    def advance_(self, own: Entries, ctx: EnvContext) -> None:
        updates = {
            ("env", name): term.advance(own["env", name], ctx, **term.advance_params)
            for name, term in self.terms.items()
            if term.advance is not None
        }
        write_updates(own, updates)


class EventManager:
    """Reset events, applied in declaration order (each sees the previous ones' results), and interval events,
    each with a per-env countdown in ``state["env", "<name>_timer"]`` (seconds)."""

    def __init__(self, terms: Mapping[str, EventTerm]) -> None:
        self.terms = terms
        self._streams = {n: rnglib.stream_id(f"event/{n}") for n in terms}
        self.intervals = {n: t for n, t in terms.items() if t.interval_s is not None}

    def initial_state(self, ctx: EnvContext) -> dict[str, torch.Tensor]:
        out = {}
        for term in self.terms.values():
            for name, (shape, value) in term.state.items():
                out[name] = torch.full((ctx.num_envs, *shape), value, device=ctx.device)
        out.update({f"{name}_timer": torch.zeros(ctx.num_envs, device=ctx.device) for name in self.intervals})
        return out

    def check(self, state: TensorDict, ctx: EnvContext) -> None:
        """Refuse, when the env is built, an event that sets an entry ``state`` does not hold (say, a model
        parameter the physics does not carry per world): each event runs once and its keys are compared."""
        held = set(state.keys(True, True))
        everyone = torch.ones(ctx.num_envs, dtype=torch.bool, device=ctx.device)
        for name, term in self.terms.items():
            for key in term.func(state, ctx, everyone, rnglib.make_rng(0, ctx.device), **term.params):
                if key not in held:
                    hint = f"; list {key[1]!r} in the task's SimConfig.per_world" if key[0] == "sim" else ""
                    raise ValueError(f"event {name!r} sets {key}, which the state does not hold{hint}")

    def _draw_timer(self, name: str, ctx: EnvContext, rng: torch.Tensor) -> torch.Tensor:
        low, high = self.intervals[name].interval_s
        return rnglib.uniform(rnglib.fold(rng, self._streams[name] ^ 1), 0, (ctx.num_envs,), low, high)

    def reset_(self, own: Entries, ctx: EnvContext, mask: torch.Tensor, rng: torch.Tensor) -> None:
        for name, term in self.terms.items():
            if name in self.intervals:
                write_updates(own, {("env", f"{name}_timer"): self._draw_timer(name, ctx, rng)}, mask)
                continue
            rng_n = rnglib.fold(rng, self._streams[name])
            write_updates(own, term.func(own, ctx, mask, rng_n, **term.params), mask)

    def interval_(self, own: Entries, ctx: EnvContext, rng: torch.Tensor) -> None:
        """Count the interval events down by one control step; fire those that reach zero, then rearm them."""
        for name, term in self.intervals.items():
            key = ("env", f"{name}_timer")
            timer = own.get(key) - ctx.dt
            fire = timer <= 0.0
            write_updates(own, term.func(own, ctx, fire, rnglib.fold(rng, self._streams[name]), **term.params), fire)
            write_updates(own, {key: torch.where(fire, self._draw_timer(name, ctx, rng), timer)})


class CurriculumManager:
    def __init__(self, terms: Mapping[str, CurriculumTerm]) -> None:
        self.terms = terms

    def initial_state(self, ctx: EnvContext) -> dict[str, torch.Tensor]:
        return {
            name: torch.as_tensor(value, dtype=torch.float32, device=ctx.device).clone()
            for term in self.terms.values()
            for name, value in term.state.items()
        }

    def update_(self, own: Entries, ctx: EnvContext, done: torch.Tensor, terminated: torch.Tensor) -> None:
        for term in self.terms.values():
            write_updates(own, term.func(own, ctx, done, terminated, **term.params))
