"""Domain randomisation events: ``(state, ctx, mask, rng, **params) -> {state key: tensor for all envs}``.

A policy that has only met one robot on one floor learns that robot's quirks. These events draw, per env,
the physical parameters a real robot differs in: contact friction, masses and centre of mass, motor strength
and actuation latency. The model parameters live in ``state["sim"]`` (the task lists them in
``SimConfig.per_world``, see ``unilab.tasks.randomization``), so a step stays a function of its state and a
snapshot carries the robot it was taken of. Each event draws from the model's own values in ``ctx``, never
from the state's current ones, so repeated resets do not compound; as reset events they hold for an episode,
as interval events (``EventTerm(interval_s=...)``) they change during one.
"""

from __future__ import annotations

import torch

from unilab.context import ACTION_DELAY, EnvContext, State
from unilab.core.rng import uniform


def _one_hot(ctx: EnvContext, body: str) -> torch.Tensor:
    """``(nbody,)``: 1 at ``body``, 0 elsewhere, so a per-env draw lands on one body without indexing."""
    return (torch.arange(ctx.default_body_mass.shape[0], device=ctx.device) == ctx.body_ids[body]).float()


def set_friction(
    state: State, ctx: EnvContext, mask: torch.Tensor, rng: torch.Tensor, friction_range: tuple[float, float]
) -> dict:
    """Every geom's sliding friction set to one U(friction_range) per env (torsional and rolling kept).

    MuJoCo takes a contact's friction from the geom of higher priority, or the larger of the two: with every
    geom at ``f``, every contact of the env has friction ``f``, whatever the model's own values were.
    """
    nominal = ctx.default_geom_friction.expand(ctx.num_envs, -1, -1)
    sliding = uniform(rng, 0, (ctx.num_envs, 1, 1), *friction_range).expand(-1, nominal.shape[1], 1)
    return {("sim", "geom_friction"): torch.cat((sliding, nominal[..., 1:]), dim=-1)}


def randomize_mass(
    state: State,
    ctx: EnvContext,
    mask: torch.Tensor,
    rng: torch.Tensor,
    scale_range: tuple[float, float],
    payload_range: tuple[float, float],
    payload_body: str | None,
) -> dict:
    """Each body's mass times its own U(scale_range), then U(payload_range) kg added to ``payload_body`` (none
    when it is None).

    Inertias scale with their body's mass (the mass spread as before), so a heavier link is also harder to
    turn. One event for both, since both set the masses: two would overwrite each other.
    """
    nominal = ctx.default_body_mass
    mass = nominal * uniform(rng, 0, (ctx.num_envs, nominal.shape[0]), *scale_range)
    if payload_body is not None:
        mass = mass + uniform(rng, 1, (ctx.num_envs, 1), *payload_range) * _one_hot(ctx, payload_body)
    ratio = torch.where(nominal > 0, mass / nominal.clamp_min(1e-12), 1.0)  # the world body has no mass
    return {("sim", "body_mass"): mass, ("sim", "body_inertia"): ctx.default_body_inertia * ratio.unsqueeze(-1)}


def offset_com(
    state: State, ctx: EnvContext, mask: torch.Tensor, rng: torch.Tensor, body: str, offset_range: float
) -> dict:
    """``body``'s centre of mass moved by U(+-offset_range) m along each axis of its frame."""
    shift = uniform(rng, 0, (ctx.num_envs, 1, 3), -offset_range, offset_range)
    return {("sim", "body_ipos"): ctx.default_body_ipos + shift * _one_hot(ctx, body).unsqueeze(-1)}


def scale_motor_strength(
    state: State, ctx: EnvContext, mask: torch.Tensor, rng: torch.Tensor, scale_range: tuple[float, float]
) -> dict:
    """Each motor's force, torque limit included, times its own U(scale_range): a weaker motor pushes less at
    the same error and saturates earlier (the PD gains, ``scale_pd_gains``, are drawn apart from this)."""
    strength = uniform(rng, 0, (ctx.num_envs, state["sim", "actuator_kp"].shape[-1]), *scale_range)
    return {("sim", "actuator_strength"): strength}


def randomize_action_delay(
    state: State, ctx: EnvContext, mask: torch.Tensor, rng: torch.Tensor, latency_s: tuple[float, float]
) -> dict:
    """A latency of whole physics substeps, uniform over those from ``latency_s[0]`` to ``latency_s[1]``
    (rounded to substeps), kept in ``("env", ACTION_DELAY)``: that many substeps of each control step still
    apply the previous action. The event's ``EventTerm`` declares the entry (``state={ACTION_DELAY: ((), 0.0)}``).
    """
    low, high = (round(seconds / ctx.physics_dt) for seconds in latency_s)
    delay = uniform(rng, 0, (ctx.num_envs,), float(low), float(high + 1)).floor().clamp(max=float(high))
    return {("env", ACTION_DELAY): delay}
