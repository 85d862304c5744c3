"""A model's own MuJoCo Warp kernels compiled in a side process, from the moment its backend is built.

mujoco_warp makes kernels per model (its sizes, collision pairs and solver settings) inside the step, and the
backend compiles them on threads beside the env step's tracing (``MjWarpBackend.begin_kernel_build``). On a fresh
machine that build is long (on an H100, 33-45 s for the G1, against 25-32 s alone) and starts late, once the env is
reset: SAC's flat walk then waited 5.6-8.8 s for it at the end of its warm-up. Its threads also share the run's
interpreter, whose tracing and Inductor's compile hold the lock that Warp's code generation needs. A side process
started as the backend is built compiles the same kernels into Warp's kernel cache, with an interpreter of its own
and from seconds earlier; the backend's build then waits for it (``wait``) and loads them from the cache.

It starts only where Warp's kernel cache was cold when the command began (``warp_ahead.started``): a warm cache
has the kernels, and the side process would only cost the build its wait. What it fails to compile, the backend's
build compiles, as without it.

``python -m unilab.sim.kernels_ahead MODEL SETTINGS NUM_WORLDS DEVICE`` is the side process: MODEL a saved MjModel,
SETTINGS the ``SimConfig`` as JSON, both in a folder it removes once read.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import tempfile
from pathlib import Path

import mujoco
import warp as wp

from unilab.core import side_process, startup_gc
from unilab.sim import hfield_fix, warp_model
from unilab.sim.base import SimConfig

# How long a backend's build waits for the side process: tens of seconds on a fresh machine; far longer is a compiler
# that hangs, and the build then compiles the kernels itself.
WAIT_LIMIT_S = 300.0
# The side process this process started, if any. Only its first backend's model gets one: a command that builds
# more (eval's suites) would otherwise have each build wait for a process that starts up to find little left to
# compile.
_side = side_process.Pending("kernels_ahead")


def start(model: mujoco.MjModel, num_worlds: int, config: SimConfig, device: str) -> bool:
    """Start the side process that compiles ``model``'s own kernels for ``device`` as a backend of ``num_worlds``
    worlds under ``config`` makes them; returns whether it started (once a process). Where it cannot (no room for
    its input files, a model MuJoCo will not save), the backend's build compiles the kernels, as without it."""
    if _side.started:
        return False
    _side.started = True  # once a process, whether or not it can start
    folder = None
    try:
        folder = Path(tempfile.mkdtemp(prefix="unilab-kernels-"))
        mujoco.mj_saveModel(model, str(folder / "model.mjb"), None)
        (folder / "settings.json").write_text(json.dumps(dataclasses.asdict(config)))
        inputs = [str(folder / "model.mjb"), str(folder / "settings.json")]
        _side.launch([sys.executable, "-m", __name__, *inputs, str(num_worlds), device])
    except (OSError, ValueError):
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        return False
    return True


def wait(limit_s: float = WAIT_LIMIT_S) -> float | None:
    """Wait for the side process this process started, once; the seconds waited, or None where there was none to
    wait for. Its exit status is not read: what it failed to compile, the caller compiles. One still running after
    ``limit_s`` is killed, with a line saying so."""
    late = f"the model's Warp kernels were not compiled beside the run within {limit_s:g} s; compiling them here"
    return _side.join(limit_s, late)


def build(model_path: Path, settings_path: Path, num_worlds: int, device: str) -> None:
    """The side process's work (its output goes nowhere): the backend's per-model kernels, built as it builds them."""
    startup_gc.hold()  # the kernels' recording allocates as a start-up does (unilab.core.startup_gc)
    model = mujoco.MjModel.from_binary_path(str(model_path))
    settings = json.loads(settings_path.read_text())
    shutil.rmtree(model_path.parent, ignore_errors=True)
    config = SimConfig(**{**settings, "per_world": tuple(settings["per_world"])})
    wp.config.log_level = wp.LOG_WARNING
    hfield_fix.install()
    warp_model.init_warp()
    with wp.ScopedDevice(device):
        m = warp_model.device_model(model, num_worlds, config)
    warp_model.build_model_kernels(m, model, config, device)


if __name__ == "__main__":
    build(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
