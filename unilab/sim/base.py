"""The physics interface every backend implements, and the errors it raises.

A backend owns ``num_worlds`` copies of one MuJoCo model and exposes their state as
torch tensors of fixed storage (``qpos``, ``qvel``, ``ctrl``, body and site poses,
sensors). Envs read and write those tensors and call ``step``/``reset_worlds``; they
never touch a backend's internals, so the same env code runs on every backend.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import ClassVar

import mujoco
import torch


class SimError(RuntimeError):
    """Base class of the errors a physics backend raises."""


class SimCapacityError(SimError):
    """Contacts or constraint rows overflowed their preallocated capacity."""


@dataclass(frozen=True)
class SimConfig:
    """Physics settings a task chooses; ``None`` keeps the MJCF's value.

    ``substeps`` physics steps make one control step, with ``ctrl`` held over them.
    ``nconmax``/``njmax`` size the per-world contact and constraint buffers of
    device backends; overflow is counted (see ``SimBackend.overflow_counts``).
    """

    substeps: int = 3
    timestep: float | None = None
    iterations: int | None = None
    ls_iterations: int | None = None
    nconmax: int = 64
    njmax: int = 400

    def __post_init__(self) -> None:
        if self.substeps < 1:
            raise ValueError(f"SimConfig.substeps must be >= 1, got {self.substeps}")
        for name in ("timestep", "iterations", "ls_iterations"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"SimConfig.{name} must be positive, got {value}")
        if self.nconmax < 1 or self.njmax < 1:
            raise ValueError(f"SimConfig.nconmax and njmax must be >= 1, got {self.nconmax}, {self.njmax}")

    def apply(self, model: mujoco.MjModel) -> None:
        """Write the solver overrides into a host model (before it is copied to a device)."""
        if self.timestep is not None:
            model.opt.timestep = self.timestep
        if self.iterations is not None:
            model.opt.iterations = self.iterations
        if self.ls_iterations is not None:
            model.opt.ls_iterations = self.ls_iterations


@dataclass(frozen=True)
class Capabilities:
    """What an env may rely on: where state lives and whether ``step`` can be graph-captured."""

    device_resident: bool
    graph_capturable: bool


class SimBackend(ABC):
    """N worlds of one MuJoCo model, stepped together.

    Tensor attributes (shape ``(num_worlds, ...)``, float32, on ``device``) keep their
    storage for the backend's lifetime, so a captured graph may hold them:
    ``qpos, qvel, ctrl, xpos, xquat, cvel, subtree_com, site_xpos, sensordata``; the
    per-world actuator gains are ``actuator_kp``/``actuator_kv``. After ``step``, ``forward``
    and ``reset_worlds`` the derived quantities (poses, velocities, sensors) describe
    the current ``qpos``/``qvel``.
    """

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    model: mujoco.MjModel
    config: SimConfig
    num_worlds: int
    device: torch.device

    qpos: torch.Tensor
    qvel: torch.Tensor
    ctrl: torch.Tensor
    xpos: torch.Tensor
    xquat: torch.Tensor
    cvel: torch.Tensor
    subtree_com: torch.Tensor
    site_xpos: torch.Tensor
    sensordata: torch.Tensor
    _gainprm: torch.Tensor  # (num_worlds, nu, mjNGAIN) per-world actuator gain parameters
    _biasprm: torch.Tensor  # (num_worlds, nu, mjNBIAS)

    @property
    def actuator_kp(self) -> torch.Tensor:
        """Per-world position gains, ``(num_worlds, nu)`` (a view of the model's gain parameters)."""
        return self._gainprm[..., 0]

    @property
    def actuator_kv(self) -> torch.Tensor:
        """Per-world damping gains, ``(num_worlds, nu)`` (a copy: MuJoCo stores -kv)."""
        return -self._biasprm[..., 2]

    @property
    def control_dt(self) -> float:
        return self.model.opt.timestep * self.config.substeps

    @abstractmethod
    def step(self) -> None:
        """Advance every world by one control step (``config.substeps`` physics steps)."""

    @abstractmethod
    def forward(self) -> None:
        """Recompute poses, velocities and sensors from ``qpos``/``qvel`` without advancing time."""

    @abstractmethod
    def _after_reset(self, mask: torch.Tensor) -> None:
        """Masked worlds jumped: forget their solver warm start and recompute their derived quantities."""

    def set_ctrl(self, ctrl: torch.Tensor, *, check: bool = True) -> None:
        """Write control targets for all worlds.

        ``check`` validates finiteness, which reads the values back to the host; the
        graph-captured path passes ``check=False`` and detects bad actions on device.
        """
        expected = (self.num_worlds, self.model.nu)
        if tuple(ctrl.shape) != expected:
            raise ValueError(f"ctrl must have shape {expected} (num_worlds, nu), got {tuple(ctrl.shape)}")
        if check:
            bad = ~torch.isfinite(ctrl).all(dim=-1)
            if bad.any():
                rows = bad.nonzero().flatten().tolist()
                raise ValueError(f"ctrl has non-finite values in world rows {rows}")
        self.ctrl.copy_(ctrl)

    def set_actuator_gains(self, kp: torch.Tensor, kv: torch.Tensor) -> None:
        """Set per-world position-actuator gains (both ``(num_worlds, nu)``)."""
        expected = (self.num_worlds, self.model.nu)
        for name, value in (("kp", kp), ("kv", kv)):
            if tuple(value.shape) != expected:
                raise ValueError(f"{name} must have shape {expected}, got {tuple(value.shape)}")
        # A MuJoCo <position> actuator computes gain*ctrl + bias0 + bias1*q + bias2*qdot.
        self._gainprm[..., 0].copy_(kp)
        self._biasprm[..., 1].copy_(-kp)
        self._biasprm[..., 2].copy_(-kv)

    def reset_worlds(self, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Set ``qpos``/``qvel`` of the worlds where ``mask`` is true; other worlds keep theirs.

        Works on all worlds with ``torch.where`` (no index lists, no host sync), so it
        can sit inside a captured graph.
        """
        if tuple(mask.shape) != (self.num_worlds,) or mask.dtype != torch.bool:
            raise ValueError(
                f"mask must be a bool tensor of shape ({self.num_worlds},), got {mask.dtype} {tuple(mask.shape)}"
            )
        for name, value, view in (("qpos", qpos, self.qpos), ("qvel", qvel, self.qvel)):
            if value.shape != view.shape:
                raise ValueError(f"{name} must have shape {tuple(view.shape)}, got {tuple(value.shape)}")
        m = mask.unsqueeze(-1)
        self.qpos.copy_(torch.where(m, qpos.to(self.qpos.dtype), self.qpos))
        self.qvel.copy_(torch.where(m, qvel.to(self.qvel.dtype), self.qvel))
        self._after_reset(mask)

    @abstractmethod
    def overflow_tensor(self) -> torch.Tensor:
        """Control steps so far in which contacts / constraint rows overflowed: int64 ``[contacts, constraints]``
        on the backend's device (on a GPU backend, the live counters). Queuing a copy of it costs no host wait,
        so a log point can take one and read it after later work is queued."""

    def overflow_counts(self) -> dict[str, int]:
        """``overflow_tensor`` read to the host (waits for the device)."""
        contacts, constraints = self.overflow_tensor().tolist()
        return {"contacts": contacts, "constraints": constraints}

    def check_capacity(self, counts: dict[str, int] | None = None) -> None:
        """Raise ``SimCapacityError`` if any step so far overflowed a buffer; call at host boundaries.

        ``counts`` are ``overflow_counts`` read earlier (say, from a log point's copy); default: read now.
        """
        counts = self.overflow_counts() if counts is None else counts
        if any(counts.values()):
            raise SimCapacityError(
                f"physics buffers overflowed ({counts}); raise SimConfig.nconmax (now {self.config.nconmax}) "
                f"or njmax (now {self.config.njmax}) for {self.name}"
            )
