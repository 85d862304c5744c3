"""Physics backends behind one interface; ``make_backend`` selects one by name."""

from __future__ import annotations

from pathlib import Path

import mujoco
import torch

from unilab.sim.base import (
    BROADPHASES,
    MODEL_PARAMS,
    STATE_FIELDS,
    Capabilities,
    SimBackend,
    SimCapacityError,
    SimConfig,
    SimError,
    SimState,
    state_shapes,
)

BACKENDS = ("mjwarp", "mujoco")
# Where each backend can hold its worlds: the device types, and how an error message names them.
_DEVICES = {"mjwarp": (("cuda", "cpu"), "a CUDA device or on the CPU"), "mujoco": (("cpu",), "the CPU")}

__all__ = [
    "BACKENDS",
    "BROADPHASES",
    "MODEL_PARAMS",
    "STATE_FIELDS",
    "Capabilities",
    "SimBackend",
    "SimCapacityError",
    "SimConfig",
    "SimError",
    "SimState",
    "backend_device",
    "default_backend",
    "load_model",
    "make_backend",
    "state_shapes",
]


def default_backend() -> str:
    """mjwarp where CUDA is available, the C MuJoCo host bridge otherwise."""
    return "mjwarp" if torch.cuda.is_available() else "mujoco"


def backend_device(name: str, device: str | torch.device | None = None, label: str | None = None) -> torch.device:
    """Where ``make_backend(name, ..., device)`` puts its worlds: ``device``, by default CUDA for mjwarp when
    available, else the CPU. ``ValueError`` for a name that is no torch device, a CUDA device this machine lacks, or
    a device of a type the backend cannot hold its worlds on, so a command can refuse it before any work; the
    message opens with ``label``, how the user spelt the setting (``training.device=cuda``, ``--device cuda``)."""
    if device is None:
        device = "cuda" if name == "mjwarp" and torch.cuda.is_available() else "cpu"
    label = label or f"device {device}"
    try:
        resolved = torch.device(device)
    except RuntimeError as exc:
        raise ValueError(f"{label}: not a torch device ({exc})") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{label}: CUDA is not available on this machine")
    types, where = _DEVICES[name]
    if resolved.type not in types:
        hint = "; use sim='mjwarp' for GPUs" if name == "mujoco" else ""
        raise ValueError(f"{label}: the {name} backend runs on {where}, not on {resolved}{hint}")
    return resolved


def load_model(path: str | Path, config: SimConfig | None = None) -> mujoco.MjModel:
    """Compile an MJCF scene and apply the solver overrides of ``config``."""
    model = mujoco.MjModel.from_xml_path(str(path))
    (config or SimConfig()).apply(model)
    return model


def make_backend(
    name: str,
    model: mujoco.MjModel,
    num_worlds: int,
    device: str | torch.device | None = None,
    config: SimConfig | None = None,
) -> SimBackend:
    """Build ``num_worlds`` worlds of ``model`` on the named backend, with ``config``'s solver overrides.

    ``device`` defaults to CUDA for mjwarp when available, else the CPU.
    """
    if name not in BACKENDS:
        raise ValueError(f"unknown physics backend {name!r}; known backends: {', '.join(BACKENDS)}")
    if num_worlds < 1:
        raise ValueError(f"num_worlds must be >= 1, got {num_worlds}")
    config = config or SimConfig()
    config.apply(model)
    device = backend_device(name, device)
    if device.type == "cuda" and device.index is None:  # tensors report their device with its index
        device = torch.device("cuda", torch.cuda.current_device())
    if name == "mjwarp":
        from unilab.sim.mjwarp import MjWarpBackend

        return MjWarpBackend(model, num_worlds, device, config)
    from unilab.sim.mujoco_cpu import MujocoBackend

    return MujocoBackend(model, num_worlds, device, config)
