"""Declarative term configs: a task lists these as data, managers compose them.

Every ``func`` is a pure function of ``(state, ctx, **params)`` (plus ``mask``/``rng`` for
terms that sample); it reads tensors and returns new ones, never mutating its inputs.
Adding a reward, observation or reset event to a task is one more entry in a dict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from unilab.core.spec import Mirror

TermFn = Callable[..., Any]


@dataclass(frozen=True)
class ObsTerm:
    """One block of an observation vector: ``(func(...) + U(-noise, noise)) * scale``."""

    func: TermFn
    params: Mapping[str, Any] = field(default_factory=dict)
    noise: float = 0.0
    scale: float = 1.0
    mirror: Mirror | None = None


@dataclass(frozen=True)
class RewardTerm:
    """``weight * func(...)``; the manager multiplies by the control dt and sums the terms.

    ``curriculum_scaled`` terms are also multiplied by the task's penalty scale.
    """

    func: TermFn
    weight: float
    params: Mapping[str, Any] = field(default_factory=dict)
    curriculum_scaled: bool = False


@dataclass(frozen=True)
class TerminationTerm:
    """A boolean per env; ``time_out`` terms truncate (bootstrap kept) instead of terminating."""

    func: TermFn
    params: Mapping[str, Any] = field(default_factory=dict)
    time_out: bool = False


@dataclass(frozen=True)
class CommandTerm:
    """A per-env command stored at ``("env", name)`` with ``dim`` entries.

    ``resample(state, ctx, mask, rng, **params)`` draws new values (the manager keeps them
    only where ``mask``); ``advance(value, ctx, **advance_params)``, if given, evolves the
    command each control step before physics (e.g. a gait clock).
    """

    dim: int
    resample: TermFn
    params: Mapping[str, Any] = field(default_factory=dict)
    advance: TermFn | None = None
    advance_params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EventTerm:
    """An event: ``func(state, ctx, mask, rng, **params) -> {state key: new tensor}``.

    Keys are paths such as ``("sim", "qvel")`` or ``("sim", "actuator_kp")``; the manager keeps
    the new values only in the masked envs. ``state`` declares env entries the event owns,
    as ``{name: (shape, initial value)}``. Without ``interval_s`` the event runs when an env
    resets. With ``interval_s = (low, high)`` it runs during episodes instead: each env fires
    after a time drawn from U(low, high) seconds, drawn anew at every reset and every firing
    (pushes, say).
    """

    func: TermFn
    params: Mapping[str, Any] = field(default_factory=dict)
    state: Mapping[str, tuple[tuple[int, ...], float]] = field(default_factory=dict)
    interval_s: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.interval_s is not None and not 0.0 < self.interval_s[0] <= self.interval_s[1]:
            raise ValueError(f"EventTerm.interval_s must be 0 < low <= high, got {self.interval_s}")


@dataclass(frozen=True)
class CurriculumTerm:
    """``func(state, ctx, done, terminated, **params) -> {("task", key): new scalar}`` after every step: ``done``
    marks the episodes that end, ``terminated`` those of them that failed (the rest were cut short, by the time
    limit or a truncation, and bootstrap).

    ``state`` declares the task-level entries it owns (scalars or vectors) with their initial values.
    """

    func: TermFn
    state: Mapping[str, float | torch.Tensor]
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ActionTerm:
    """Turns the policy's action (clipped to [-1, 1]) into the backend's control targets:
    ``func(action, ctx, **params) -> (N, nu)``; ``mirror`` mirrors an action left-right."""

    func: TermFn
    params: Mapping[str, Any] = field(default_factory=dict)
    mirror: Mirror | None = None
