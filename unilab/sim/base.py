"""The physics interface every backend implements, and the errors it raises.

A backend is an operation over a physics state that the caller owns: a mapping of
per-world tensors laid out as ``state_spec`` says. ``step_`` and ``reset_`` write their
results into the tensors they are given and read nothing else that changes from call to
call, so two callers can hold two states and step them through one backend in any
order. Everything MuJoCo carries from one step to the next is in the state: ``qpos``,
``qvel``, ``act`` (empty for models without actuator activations), the solver's
``qacc_warmstart`` and ``time``; with them the per-world actuator gains, the model
parameters a task varies per world (``SimConfig.per_world``: friction, masses, centres
of mass, inertias, motor strength), and the quantities derived from them that tasks
read (body and site poses, velocities, sensors). The backend's own buffers (contacts,
constraint rows, solver scratch) are rebuilt inside every step.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from typing import ClassVar

import mujoco
import numpy as np
import torch

SimState = MutableMapping[str, torch.Tensor]

# What a control step carries forward, what it reads without changing, and what it derives.
CARRIED = ("qpos", "qvel", "act", "qacc_warmstart", "time")
GAINS = ("actuator_kp", "actuator_kv")
DERIVED = ("xpos", "xquat", "cvel", "subtree_com", "site_xpos", "sensordata")
STATE_FIELDS = CARRIED + GAINS + DERIVED
# Model parameters a world may carry in its state, to be varied per world (``SimConfig.per_world``); the
# others stay shared. Per-world parameters follow ``STATE_FIELDS`` in a state, in this order. All but
# ``actuator_strength`` are MuJoCo's model fields; it scales each actuator's force, limit included.
MODEL_PARAMS = ("geom_friction", "body_mass", "body_ipos", "body_inertia", "actuator_strength")


class SimError(RuntimeError):
    """Base class of the errors a physics backend raises."""


class SimCapacityError(SimError):
    """Contacts or constraint rows overflowed their preallocated capacity."""


# MuJoCo Warp's broadphases: every pair of geoms that may touch, or a sweep and prune over each world's geoms sorted
# along one axis (in tiles, or segmented over the worlds).
BROADPHASES = ("nxn", "sap_tile", "sap_segmented")


@dataclass(frozen=True)
class SimConfig:
    """Physics settings a task chooses; ``None`` keeps the MJCF's value.

    ``substeps`` physics steps make one control step, with ``ctrl`` held over them.
    ``nconmax``/``njmax`` size the per-world contact and constraint buffers of
    device backends; overflow is counted (see ``SimBackend.overflow_counts``).
    ``per_world`` names the ``MODEL_PARAMS`` each world carries in its state instead of sharing the
    model's; a backend writes them into the model before every step, so only what a task varies costs.
    ``broadphase`` picks MuJoCo Warp's pair search (``BROADPHASES``; None: its own choice by the number of geom
    pairs, all pairs below 250 000); C MuJoCo has its own and ignores it.
    """

    substeps: int = 3
    timestep: float | None = None
    iterations: int | None = None
    ls_iterations: int | None = None
    nconmax: int = 64
    njmax: int = 400
    per_world: tuple[str, ...] = ()
    broadphase: str | None = None

    def __post_init__(self) -> None:
        if self.broadphase is not None and self.broadphase not in BROADPHASES:
            raise ValueError(f"SimConfig.broadphase must be one of {', '.join(BROADPHASES)}, got {self.broadphase!r}")
        unknown = sorted(set(self.per_world) - set(MODEL_PARAMS))
        if unknown:
            raise ValueError(f"SimConfig.per_world: unknown model parameter(s) {unknown}; known: {list(MODEL_PARAMS)}")
        if self.substeps < 1:
            raise ValueError(f"SimConfig.substeps must be >= 1, got {self.substeps}")
        for name in ("iterations", "ls_iterations"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ValueError(f"SimConfig.{name} must be a whole number, got {value!r}")
        for name in ("timestep", "iterations", "ls_iterations"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"SimConfig.{name} must be positive, got {value}")
        if self.nconmax < 1 or self.njmax < 1:
            raise ValueError(f"SimConfig.nconmax and njmax must be >= 1, got {self.nconmax}, {self.njmax}")

    def sized(self, nconmax: int, njmax: int, iterations: int | None, ls_iterations: int | None) -> SimConfig:
        """These settings with the buffers sized ``nconmax`` and ``njmax`` and the solver capped (``with_solver``)."""
        return dataclasses.replace(self, nconmax=nconmax, njmax=njmax).with_solver(iterations, ls_iterations)

    def with_solver(self, iterations: int | None, ls_iterations: int | None) -> SimConfig:
        """These settings with the Newton solver's iteration caps replaced where given (None keeps the current)."""
        return dataclasses.replace(
            self,
            iterations=self.iterations if iterations is None else iterations,
            ls_iterations=self.ls_iterations if ls_iterations is None else ls_iterations,
        )

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
    """What an env may rely on: whether ``step_`` can be graph-captured."""

    graph_capturable: bool


def saved_model(model: mujoco.MjModel) -> bytes:
    """``model`` as MuJoCo's binary: every number of the compiled model, for a digest of it."""
    saved = np.zeros(mujoco.mj_sizeModel(model), dtype=np.uint8)
    mujoco.mj_saveModel(model, None, saved)
    return saved.tobytes()


def nominal_params(model: mujoco.MjModel) -> dict[str, np.ndarray]:
    """The model's own value of every ``MODEL_PARAMS`` entry (the per-world default)."""
    return {
        "geom_friction": model.geom_friction,
        "body_mass": model.body_mass,
        "body_ipos": model.body_ipos,
        "body_inertia": model.body_inertia,
        "actuator_strength": np.ones(model.nu),
    }


def subtree_matrix(model: mujoco.MjModel) -> np.ndarray:
    """``(nbody, nbody)``, 1 where body ``j`` (row) lies in the subtree of body ``i`` (column): masses times it
    give ``body_subtreemass``, which MuJoCo derives once from the masses and uses for ``subtree_com``, so a
    world with its own masses needs its own."""
    inside = np.eye(model.nbody)
    for j in range(1, model.nbody):  # parents come before their children
        inside[j] += inside[model.body_parentid[j]]
    return inside


def _check_unsupported_state(model: mujoco.MjModel) -> None:
    """Refuse models whose step-to-step state would live outside the fields a state carries."""
    extra = {
        "mocap bodies": model.nmocap,
        "equality constraints": model.neq,
        "user data": model.nuserdata,
        "plugins": model.nplugin,
        "actuator history": model.nhistory,
        "plasticity": model.nplastic,
        "sleeping bodies": model.opt.enableflags & mujoco.mjtEnableBit.mjENBL_SLEEP,
    }
    present = [name for name, count in extra.items() if count]
    if present:
        raise ValueError(f"the physics state does not carry {', '.join(present)}; this model has them")


def state_shapes(model: mujoco.MjModel, params: tuple[str, ...] = ()) -> dict[str, tuple[int, ...]]:
    """``SimBackend.state_spec`` of ``model`` with the per-world ``params``, known before a backend is built."""
    m = model
    spec = {
        "qpos": (m.nq,),
        "qvel": (m.nv,),
        "act": (m.na,),
        "qacc_warmstart": (m.nv,),
        "time": (),
        "actuator_kp": (m.nu,),
        "actuator_kv": (m.nu,),
        "xpos": (m.nbody, 3),
        "xquat": (m.nbody, 4),
        "cvel": (m.nbody, 6),
        "subtree_com": (m.nbody, 3),
        "site_xpos": (m.nsite, 3),
        "sensordata": (m.nsensordata,),
    }
    return spec | {name: nominal_params(m)[name].shape for name in params}


class SimBackend(ABC):
    """N worlds of one MuJoCo model, stepped together over a caller-owned state.

    State tensors are float32, ``(num_worlds, *state_spec[name])``, on ``device``. The
    in-place operations keep the tensors' storage, so a captured CUDA graph may hold
    them; the derived quantities in a state always describe its current ``qpos``/``qvel``.
    """

    name: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    model: mujoco.MjModel
    config: SimConfig
    num_worlds: int
    device: torch.device
    params: tuple[str, ...]

    def __init__(self, model: mujoco.MjModel, num_worlds: int, device: torch.device, config: SimConfig) -> None:
        _check_unsupported_state(model)
        self.model = model
        self.config = config
        self.num_worlds = num_worlds
        self.device = device
        # The model parameters each world carries in its state (``SimConfig.per_world``), in state order.
        self.params = tuple(name for name in MODEL_PARAMS if name in config.per_world)
        # Seconds of one-off work done while building (kernel loads), by name, for start-up reports.
        self.startup: dict[str, float] = {}

    @property
    def control_dt(self) -> float:
        return self.model.opt.timestep * self.config.substeps

    def state_spec(self) -> dict[str, tuple[int, ...]]:
        """Per-world shape of every state field: ``STATE_FIELDS``, then the per-world ``params``."""
        return state_shapes(self.model, self.params)

    def initial_state(self) -> dict[str, torch.Tensor]:
        """Fresh tensors: every world at the model's ``qpos0``, at rest, with the model's actuator gains and
        parameters."""
        n, m = self.num_worlds, self.model
        state = {
            name: torch.zeros((n, *shape), dtype=torch.float32, device=self.device)
            for name, shape in self.state_spec().items()
        }
        # A MuJoCo <position> actuator computes gain*ctrl + bias0 + bias1*q + bias2*qdot, with bias2 = -kv.
        state["actuator_kp"].copy_(torch.as_tensor(m.actuator_gainprm[:, 0], dtype=torch.float32))
        state["actuator_kv"].copy_(torch.as_tensor(-m.actuator_biasprm[:, 2], dtype=torch.float32))
        nominal = nominal_params(m)
        for name in self.params:
            state[name].copy_(torch.as_tensor(nominal[name], dtype=torch.float32))
        qpos0 = torch.as_tensor(m.qpos0, dtype=torch.float32, device=self.device).expand(n, -1)
        everyone = torch.ones(n, dtype=torch.bool, device=self.device)
        self.reset_(state, everyone, qpos0, torch.zeros_like(state["qvel"]))
        return state

    def check_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Raise ``ValueError`` naming the first field that is missing or has the wrong shape, dtype or device."""
        for name, shape in self.state_spec().items():
            value = state.get(name)
            expected = (self.num_worlds, *shape)
            if value is None:
                raise ValueError(f"physics state has no {name!r} field")
            if tuple(value.shape) != expected or value.dtype != torch.float32 or value.device != self.device:
                raise ValueError(
                    f"physics state field {name!r} must be float32 {expected} on {self.device}, "
                    f"got {value.dtype} {tuple(value.shape)} on {value.device}"
                )

    def _check_rows(self, what: str, value: torch.Tensor, width: int) -> None:
        expected = (self.num_worlds, width)
        if tuple(value.shape) != expected:
            raise ValueError(f"{what} must have shape {expected}, got {tuple(value.shape)}")

    def step_(self, state: SimState, ctrl: torch.Tensor) -> None:
        """Advance every world of ``state`` by one control step (``config.substeps`` physics steps) with PD
        targets ``ctrl``, writing the result into ``state``'s tensors.

        ``ctrl`` is ``(num_worlds, nu)``, held over the substeps, or ``(substeps, num_worlds, nu)``, one row
        block per substep (how actuation latency shorter than a control step reaches the physics).
        """
        self.check_state(state)
        per_substep = (self.config.substeps, self.num_worlds, self.model.nu)
        if tuple(ctrl.shape) != per_substep:
            self._check_rows("ctrl", ctrl, self.model.nu)
        self._step(state, ctrl.contiguous())

    def reset_(self, state: SimState, mask: torch.Tensor, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """Put the worlds where ``mask`` is true at ``qpos``/``qvel``, time 0 and a cold solver start, in place.

        Other worlds keep their carried state; their derived quantities may be recomputed (from the same
        ``qpos``/``qvel``, so to the same values). Masks, not index lists: no host sync, capturable.
        """
        if tuple(mask.shape) != (self.num_worlds,) or mask.dtype != torch.bool:
            raise ValueError(
                f"mask must be a bool tensor of shape ({self.num_worlds},), got {mask.dtype} {tuple(mask.shape)}"
            )
        self.check_state(state)
        self._check_rows("qpos", qpos, self.model.nq)
        self._check_rows("qvel", qvel, self.model.nv)
        m = mask.unsqueeze(-1)
        state["qpos"].copy_(torch.where(m, qpos.to(torch.float32), state["qpos"]))
        state["qvel"].copy_(torch.where(m, qvel.to(torch.float32), state["qvel"]))
        for name in ("act", "qacc_warmstart"):
            state[name].masked_fill_(m, 0.0)
        state["time"].masked_fill_(mask, 0.0)
        self._forward(state, mask)

    def begin_kernel_build(self) -> None:
        """Start building, beside the caller, kernels that the first step would otherwise build; the next physics
        call waits for it. For a caller about to do host work that makes no physics calls (tracing a compiled
        step), so the two overlap. Nothing to build by default."""
        return

    def kernel_build_seconds(self) -> dict[str, float]:
        """Of the last ``begin_kernel_build`` once waited for: how long it took (``build``, beside the caller) and how
        long the caller then waited for it (``waited``), and where a side process compiled the kernels, how long the
        build waited for it (``side_process``); empty where nothing was built beside the caller. Not parts of one
        start-up phase but an overlap, which says whether the build or the caller's own work held it up."""
        return {}

    @abstractmethod
    def _step(self, state: SimState, ctrl: torch.Tensor) -> None:
        """``step_`` after its checks; ``ctrl`` is contiguous."""

    @abstractmethod
    def _forward(self, state: SimState, mask: torch.Tensor) -> None:
        """Recompute the derived quantities of (at least) the masked worlds from their ``qpos``/``qvel``."""

    @abstractmethod
    def overflow_tensor(self) -> torch.Tensor:
        """Control steps so far in which contacts / constraint rows overflowed the backend's buffers, and in which a
        height field's collision made more contacts than its collider keeps (it drops the rest): int64
        ``[contacts, constraints, height_field]`` on the backend's device (on a GPU backend, the live counters).
        Queuing a copy of it costs no host wait, so a log point can take one and read it after later work is queued."""

    @abstractmethod
    def peak_tensor(self) -> torch.Tensor:
        """The fullest the contact and constraint buffers have been: int64 ``[contacts, rows]``, the most contacts of
        all worlds together and the most constraint rows of one world after any physics step (substeps included),
        on the backend's device. ``SimConfig`` sizes the buffers per world (``nconmax`` on average, ``njmax`` each),
        so these say how much headroom a task's sizes leave."""

    def broadphase_name(self) -> str | None:
        """The pair search this backend's collision detection runs (a name of ``BROADPHASES``); None where the
        engine has one only (C MuJoCo)."""
        return None

    def solver_limit_tensor(self) -> torch.Tensor:
        """Control steps so far in which the constraint solver (or its line search) stopped at its iteration limit
        in some world before converging: int64, 0-d, on the backend's device. The step goes on with the last
        iterate, so this is a note on accuracy, not an error. C MuJoCo keeps no such count: 0 by default."""
        return torch.zeros((), dtype=torch.int64, device=self.device)

    def solver_limit_steps(self) -> int:
        """``solver_limit_tensor`` read to the host (waits for the device)."""
        return int(self.solver_limit_tensor())

    def overflow_counts(self) -> dict[str, int]:
        """``overflow_tensor`` read to the host (waits for the device)."""
        contacts, constraints, height_field = self.overflow_tensor().tolist()
        return {"contacts": contacts, "constraints": constraints, "height_field": height_field}

    def check_capacity(self, counts: dict[str, int] | None = None) -> None:
        """Raise ``SimCapacityError`` if any step so far overflowed a buffer; call at host boundaries.

        ``counts`` are ``overflow_counts`` read earlier (say, from a log point's copy); default: read now. Height-field
        caps are counted, not raised: the cap is the collider's own, no buffer size lifts it, and the contacts it
        keeps hold the robot up.
        """
        counts = self.overflow_counts() if counts is None else counts
        counts = {name: counts[name] for name in ("contacts", "constraints")}
        if any(counts.values()):
            raise SimCapacityError(
                f"physics buffers overflowed ({counts}); raise SimConfig.nconmax (now {self.config.nconmax}) "
                f"or njmax (now {self.config.njmax}) for {self.name}"
            )
