"""Physics as opaque torch ops, so ``torch.compile(fullgraph=True)`` traces an env step around it.

The ops write the state tensors they are given (declared in ``mutates_args``) and have
no-op fake implementations; the compiler then orders them correctly and never looks
inside. A backend is registered once and named by an integer handle (its registration
order), since ops take only tensors and scalars. Which tensors an op writes is the caller's choice: the
functional env passes copies on its pure path and the state's own tensors on its
donating path. The per-world model parameters a backend carries (``SimBackend.params``,
which vary by task) travel as one list after the fixed fields; the ops only read them.
"""

from __future__ import annotations

import torch

from unilab.sim.base import CARRIED, DERIVED, STATE_FIELDS, SimBackend, SimState

_BACKENDS: list[SimBackend] = []


def register(backend: SimBackend) -> int:
    """The backend's handle: its place in registration order. The handle is a constant in every compiled env
    step, so it must be the same in every process that builds the same envs in the same order; an object's
    address is not, and would give the step a new compile-cache key in every process."""
    _BACKENDS.append(backend)
    return len(_BACKENDS) - 1


def _fields(state: SimState) -> list[torch.Tensor]:
    return [state[name] for name in STATE_FIELDS]


def _params(handle: int, state: SimState) -> list[torch.Tensor]:
    return [state[name] for name in _BACKENDS[handle].params]


def _state(handle: int, params: list[torch.Tensor], *fields: torch.Tensor) -> SimState:
    """The inverse of ``_fields`` and ``_params``: the op's tensors back into a named state."""
    named = dict(zip(STATE_FIELDS, fields, strict=True))
    return named | dict(zip(_BACKENDS[handle].params, params, strict=True))


@torch.library.custom_op("unilab::sim_step_", mutates_args=(*CARRIED, *DERIVED))
def _sim_step(
    handle: int,
    ctrl: torch.Tensor,
    qpos: torch.Tensor,
    qvel: torch.Tensor,
    act: torch.Tensor,
    qacc_warmstart: torch.Tensor,
    time: torch.Tensor,
    actuator_kp: torch.Tensor,
    actuator_kv: torch.Tensor,
    xpos: torch.Tensor,
    xquat: torch.Tensor,
    cvel: torch.Tensor,
    subtree_com: torch.Tensor,
    site_xpos: torch.Tensor,
    sensordata: torch.Tensor,
    params: list[torch.Tensor],
) -> None:
    fields = (qpos, qvel, act, qacc_warmstart, time, actuator_kp, actuator_kv, xpos, xquat, cvel)
    _BACKENDS[handle].step_(_state(handle, params, *fields, subtree_com, site_xpos, sensordata), ctrl)


@_sim_step.register_fake
def _(handle, ctrl, *fields) -> None:
    return None


@torch.library.custom_op("unilab::sim_reset_", mutates_args=(*CARRIED, *DERIVED))
def _sim_reset(
    handle: int,
    mask: torch.Tensor,
    new_qpos: torch.Tensor,
    new_qvel: torch.Tensor,
    qpos: torch.Tensor,
    qvel: torch.Tensor,
    act: torch.Tensor,
    qacc_warmstart: torch.Tensor,
    time: torch.Tensor,
    actuator_kp: torch.Tensor,
    actuator_kv: torch.Tensor,
    xpos: torch.Tensor,
    xquat: torch.Tensor,
    cvel: torch.Tensor,
    subtree_com: torch.Tensor,
    site_xpos: torch.Tensor,
    sensordata: torch.Tensor,
    params: list[torch.Tensor],
) -> None:
    fields = (qpos, qvel, act, qacc_warmstart, time, actuator_kp, actuator_kv, xpos, xquat, cvel)
    state = _state(handle, params, *fields, subtree_com, site_xpos, sensordata)
    _BACKENDS[handle].reset_(state, mask, new_qpos, new_qvel)


@_sim_reset.register_fake
def _(handle, mask, new_qpos, new_qvel, *fields) -> None:
    return None


def sim_step_(handle: int, state: SimState, ctrl: torch.Tensor) -> None:
    """One control step of the registered backend ``handle`` over ``state``'s tensors, in place; ``ctrl`` as
    ``SimBackend.step_`` takes it."""
    _sim_step(handle, ctrl, *_fields(state), _params(handle, state))


def sim_reset_(handle: int, state: SimState, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
    """Masked reset of ``state``'s tensors to ``qpos``/``qvel``, in place (gains and model parameters are read
    from ``state``)."""
    _sim_reset(handle, mask, qpos, qvel, *_fields(state), _params(handle, state))
