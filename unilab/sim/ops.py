"""Physics as opaque torch ops, so ``torch.compile(fullgraph=True)`` traces an env step around it.

The ops declare the state tensors they write (``mutates_args``) and have no-op fake
implementations; the compiler then orders them correctly and never looks inside. A
backend is registered once and named by an integer handle, since ops take only tensors
and scalars. If the compiler hands an op copies instead of the backend's own buffers,
the kernel syncs them in and out, so results are right either way (and free when they
are the buffers, as in eager mode and CUDA graphs).
"""

from __future__ import annotations

import torch

from unilab.sim.base import SimBackend

STATE_FIELDS = ("qpos", "qvel", "xpos", "xquat", "cvel", "subtree_com", "site_xpos", "sensordata")
_MUTATED = tuple(f"out_{name}" for name in STATE_FIELDS)
_BACKENDS: dict[int, SimBackend] = {}


def register(backend: SimBackend) -> int:
    handle = id(backend)
    _BACKENDS[handle] = backend
    return handle


def state_views(backend: SimBackend) -> dict[str, torch.Tensor]:
    return {name: getattr(backend, name) for name in STATE_FIELDS}


def _sync_in(backend: SimBackend, outs: tuple[torch.Tensor, ...]) -> None:
    for name, arg in zip(STATE_FIELDS, outs, strict=True):
        buf = getattr(backend, name)
        if arg.data_ptr() != buf.data_ptr():
            buf.copy_(arg)


def _sync_out(backend: SimBackend, outs: tuple[torch.Tensor, ...]) -> None:
    for name, arg in zip(STATE_FIELDS, outs, strict=True):
        buf = getattr(backend, name)
        if arg.data_ptr() != buf.data_ptr():
            arg.copy_(buf)


@torch.library.custom_op("unilab::sim_step", mutates_args=_MUTATED)
def sim_step(
    handle: int,
    ctrl: torch.Tensor,
    out_qpos: torch.Tensor,
    out_qvel: torch.Tensor,
    out_xpos: torch.Tensor,
    out_xquat: torch.Tensor,
    out_cvel: torch.Tensor,
    out_subtree_com: torch.Tensor,
    out_site_xpos: torch.Tensor,
    out_sensordata: torch.Tensor,
) -> None:
    """One control step with PD targets ``ctrl``; writes the new state into the ``out_*`` tensors."""
    backend = _BACKENDS[handle]
    outs = (out_qpos, out_qvel, out_xpos, out_xquat, out_cvel, out_subtree_com, out_site_xpos, out_sensordata)
    _sync_in(backend, outs)
    backend.set_ctrl(ctrl, check=False)
    backend.step()
    _sync_out(backend, outs)


@sim_step.register_fake
def _(handle, ctrl, *outs) -> None:
    return None


@torch.library.custom_op("unilab::sim_reset", mutates_args=_MUTATED)
def sim_reset(
    handle: int,
    mask: torch.Tensor,
    qpos: torch.Tensor,
    qvel: torch.Tensor,
    kp: torch.Tensor,
    kv: torch.Tensor,
    out_qpos: torch.Tensor,
    out_qvel: torch.Tensor,
    out_xpos: torch.Tensor,
    out_xquat: torch.Tensor,
    out_cvel: torch.Tensor,
    out_subtree_com: torch.Tensor,
    out_site_xpos: torch.Tensor,
    out_sensordata: torch.Tensor,
) -> None:
    """Masked reset to ``qpos``/``qvel`` with actuator gains ``kp``/``kv`` for every world."""
    backend = _BACKENDS[handle]
    outs = (out_qpos, out_qvel, out_xpos, out_xquat, out_cvel, out_subtree_com, out_site_xpos, out_sensordata)
    _sync_in(backend, outs)
    backend.set_actuator_gains(kp, kv)
    backend.reset_worlds(mask, qpos, qvel)
    _sync_out(backend, outs)


@sim_reset.register_fake
def _(handle, mask, qpos, qvel, kp, kv, *outs) -> None:
    return None
