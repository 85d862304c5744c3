"""MuJoCo Warp's step modules compiled in a side process from a run's first moment, while the run imports its stack.

A step of any model launches kernels of the same eight mujoco_warp modules (``STEP_MODULES``). Their compiled code
depends on the mujoco_warp and Warp versions and the GPU, not on the model or the task, yet the backend can load
them only once it exists: after the imports and the env's build, with nothing else to do meanwhile. On a fresh
machine that load compiles them (their largest module's time, tens of seconds on a GPU: ADR 36), and the run
waits. A process started as the command starts, before it imports anything heavy, compiles them into Warp's kernel
cache (and the CUDA driver's, under the same root) while the run imports; the backend then waits for whatever is
left of it (``wait``) and loads the modules from the caches.

The side process shares nothing with the run but the cache root, and the run needs nothing from it: if it fails,
the backend compiles what is missing as it would have. It starts only where it can help (``start``): a CUDA
device, cores to spare, and a kernel cache without the modules' GPU code. A version change leaves the old entries
under other names, which the check takes for the modules; the run then compiles them itself, as before.

``python -m unilab.core.warp_ahead DEVICE`` is the side process. This module imports neither torch nor Warp in the
run's process: it is imported before them.
"""

from __future__ import annotations

import os
import sys
from importlib import metadata
from pathlib import Path

from unilab.core import side_process, startup_gc
from unilab.core.cache_dirs import AHEAD_MIN_CORES, usable_cores

# mujoco_warp's modules whose kernels a step launches, whatever the model. Kernels that mujoco_warp makes per model
# live in modules of their own (``MjWarpBackend.begin_kernel_build`` builds those).
STEP_MODULES = tuple(
    f"mujoco_warp._src.{name}"
    for name in ("forward", "smooth", "sensor", "passive", "derivative", "solver", "support", "constraint")
)
# What Warp writes into a module's cache folder for a GPU: CUDA binaries or PTX; on the CPU, object files.
_GPU_CODE = (".cubin", ".ptx")
_CPU_CODE = (".o",)

# How long the backend waits for the side process: its compile takes tens of seconds on a fresh machine; far longer is
# a compiler that hangs, and the backend then compiles the modules itself.
WAIT_LIMIT_S = 300.0
# The side process this process started, if any: Warp's kernel cache lacked the step modules when the command began.
_side = side_process.Pending("warp_ahead")


def kernel_cache() -> Path | None:
    """Warp's kernel cache folder as Warp will resolve it at ``wp.init`` (``$WARP_CACHE_PATH/<Warp's version>``),
    found without importing Warp; None where the variable is unset (Warp's own default: left to Warp) or Warp is not
    installed."""
    base = os.environ.get("WARP_CACHE_PATH")
    if not base:
        return None
    try:
        version = metadata.version("warp-lang")
    except metadata.PackageNotFoundError:
        return None
    return Path(os.path.realpath(base)) / version


def cached(kernel_cache: Path, device: str) -> bool:
    """Whether every step module has code for ``device``'s kind (a GPU's or the CPU's) in ``kernel_cache``."""
    suffixes = _CPU_CODE if device.startswith("cpu") else _GPU_CODE
    for name in STEP_MODULES:
        entries = kernel_cache.glob(f"wp_{name}_*/*")
        if not any(entry.suffix in suffixes for entry in entries):
            return False
    return True


def start(device: str, min_cores: int = AHEAD_MIN_CORES) -> bool:
    """Start the side process that compiles the step modules for ``device`` (a Warp device name), where the machine
    has ``min_cores`` cores or more and Warp's kernel cache lacks them; returns whether it started. Call it after
    ``cache_dirs.configure``, whose variables the side process inherits."""
    folder = kernel_cache()
    if _side.process is not None or usable_cores() < min_cores or folder is None or cached(folder, device):
        return False
    _side.launch([sys.executable, "-m", __name__, device])
    return True


def started() -> bool:
    """Whether this process started the side process, waited for or not: Warp's kernel cache was cold for the
    command's device when it began, so a model's own kernels are missing from it too (``unilab.sim.kernels_ahead``)."""
    return _side.started


def wait(limit_s: float = WAIT_LIMIT_S) -> float | None:
    """Wait for the side process this process started, once; the seconds waited, or None where there was none to
    wait for (never started, or already waited for). Its exit status is not read: what it failed to compile, the
    caller compiles. One still running after ``limit_s`` (a compiler that hangs) is killed, with a line saying so,
    and the caller compiles the modules itself."""
    late = f"Warp's step modules were not compiled beside the imports within {limit_s:g} s; compiling them here"
    return _side.join(limit_s, late)


def load_step_modules(device: str) -> None:
    """Compile (or load from Warp's cache) the ``STEP_MODULES`` on ``device``, side by side, one thread each. Warp
    compiles a module when one of its kernels is first launched, so a fresh step would compile them one after
    another (five of them took 25 of 40 s on a 2-core CPU); side by side they cost about the largest one, and a
    cached module only loads. Warp must be initialised."""
    import mujoco_warp  # noqa: F401  (defines the modules)
    import warp as wp

    modules = [wp.get_module(name) for name in STEP_MODULES]
    wp.force_load(device=device, modules=modules, max_workers=min(len(modules), os.cpu_count() or 1))


def build(device: str) -> None:
    """The side process's work (its output goes nowhere): Warp initialised, then the step modules for ``device``."""
    startup_gc.hold()  # mujoco_warp's import parses its kernels' sources (unilab.core.startup_gc)
    import warp as wp

    wp.init()
    load_step_modules(device)


if __name__ == "__main__":
    build(sys.argv[1])
