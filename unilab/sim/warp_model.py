"""A model on MuJoCo Warp's device as the backend steps it, and the kernels mujoco_warp makes for it.

Shared by the backend (``unilab.sim.mjwarp``) and the side process that compiles a model's own kernels while a run
starts (``unilab.sim.kernels_ahead``): both must make the model alike, or the side process compiles kernels the
backend never loads.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

import mujoco
import mujoco_warp as mjw
import warp as wp

from unilab.core.cache_dirs import drop_corrupt_warp_modules
from unilab.sim.base import MODEL_PARAMS, SimConfig, saved_model
from unilab.sim.kernel_prebuild import launched_kernels, load_variants

GAIN_FIELDS = ("actuator_gainprm", "actuator_biasprm")
# The mjw.Model fields a per-world parameter of the state sets (SimConfig.per_world).
PARAM_FIELDS = {
    "geom_friction": ("geom_friction",),
    "body_mass": ("body_mass", "body_subtreemass"),
    "body_ipos": ("body_ipos",),
    "body_inertia": ("body_inertia",),
    "actuator_strength": ("actuator_forcerange",),
}
# The flags of a solve that stopped at its iteration limit. mujoco_warp prints a line for every world and physics
# step where that happens (thousands of lines in a Go1 run on a GPU); the backend turns the print off and counts the
# control steps instead (``solver_limit_steps``).
SOLVER_LIMITS = int(mjw.OverflowType.ITERATIONS | mjw.OverflowType.LS_ITERATIONS)
_NO_DRIVER = "Could not find or load the NVIDIA CUDA driver"
# Under Warp's kernel cache, one empty file per model whose own kernels a build has put there (``record_built``):
# clearing the cache clears the records with it.
BUILT_RECORDS = "unilab-built-models"


def init_warp() -> None:
    """``wp.init()``, minus the native warning Warp prints on machines without a CUDA driver (where only its
    CPU device is wanted, that is no news); anything else it prints still reaches stderr."""
    with tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            wp.init()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        lines = captured.read().decode(errors="replace").splitlines(keepends=True)
    sys.stderr.write("".join(line for line in lines if _NO_DRIVER not in line))
    _check_kernel_cache()


@functools.cache
def _check_kernel_cache() -> None:
    """Once per process, before the first module loads: a corrupt module in Warp's kernel cache would fail its first
    launch with Warp's own error, run after run; removed, it is compiled again."""
    drop_corrupt_warp_modules(Path(wp.config.kernel_cache_dir))


def per_world_fields(params: tuple[str, ...]) -> tuple[str, ...]:
    """The ``mjw.Model`` fields each world has its own of: the gains, and those of the parameters ``params``."""
    return GAIN_FIELDS + tuple(field for name in params for field in PARAM_FIELDS[name])


def device_model(model: mujoco.MjModel, num_worlds: int, config: SimConfig) -> mjw.Model:
    """``model`` on Warp's current device as the backend steps it. Gains, and the parameters the task varies, are
    per world so that tasks can randomise them; every other model field stays shared (leading dimension 1). The
    per-model kernels are made from this, so a side process that compiles them builds the same."""
    params = tuple(name for name in MODEL_PARAMS if name in config.per_world)
    m = mjw.put_model(model, batch_sizes={field: num_worlds for field in per_world_fields(params)})
    m.opt.warn_overflow = int(m.opt.warn_overflow) & ~SOLVER_LIMITS
    # Two boxes collide through C MuJoCo's box-box routine, as on the C MuJoCo backend. Left alone, mujoco_warp sends
    # them through its general convex collision (GJK and EPA), whose contacts are not C MuJoCo's, and whose kernel was
    # the slowest of the Go1's rough walk to compile (its trunk against the stairs' boxes). ADR 40.
    m.opt.disableflags = int(m.opt.disableflags) | int(mjw.DisableBit.NATIVECCD)
    if config.broadphase is not None:
        m.opt.broadphase = mjw.BroadphaseType[config.broadphase.upper()]
    return m


def scratch_data(model: mujoco.MjModel, config: SimConfig) -> mjw.Data:
    return mjw.make_data(model, nworld=1, nconmax=config.nconmax, njmax=config.njmax)


def step_and_refresh(m: mjw.Model, d: mjw.Data) -> None:
    mjw.step(m, d)
    refresh(m, d)


def build_model_kernels(m: mjw.Model, model: mujoco.MjModel, config: SimConfig, device: str) -> None:
    """Compile (or load from Warp's cache) the kernels mujoco_warp makes for ``m``'s sizes and solver settings,
    side by side: those a recorded step of a one-world scratch ``mjw.Data`` launches (``launched_kernels``)."""
    with wp.ScopedDevice(device):
        d = scratch_data(model, config)
        variants = launched_kernels(lambda: step_and_refresh(m, d), device)
    load_variants(variants, device)


def refresh(m: mjw.Model, d: mjw.Data) -> None:
    """Bring poses, velocities and sensors up to the current qpos/qvel.

    ``mjw.step`` leaves them at the start of its last substep; tasks observe the state the policy acts from, so
    the position and velocity stages are recomputed.
    """
    mjw.kinematics(m, d)
    mjw.com_pos(m, d)
    mjw.sensor_pos(m, d)
    mjw.com_vel(m, d)
    mjw.sensor_vel(m, d)


def _built_record(model: mujoco.MjModel, config: SimConfig, device: str) -> Path:
    """The record of ``model``'s own kernels built for ``device`` under ``config``: named by a digest of what makes
    them (the model, the backend's settings, the device's architecture, Warp's and mujoco_warp's versions, Warp's
    code generation settings, and this package's code that shapes them). A digest that differs where the kernels do
    not (another terrain's heights) costs a build, never a wrong kernel."""
    digest = hashlib.sha256(saved_model(model))
    arch = "cpu" if device == "cpu" else f"sm_{wp.get_device(device).arch}"
    made_by = (Path(__file__), Path(__file__).with_name("hfield_fix.py"))
    # Warp's code generation, which ``bench physics --warp-opt`` and ``sim.warp_output`` set for the process
    codegen = (wp.config.mode, wp.config.optimization_level, wp.config.cuda_output)
    for part in (json.dumps(dataclasses.asdict(config)), arch, wp.config.version, mjw.__version__, repr(codegen)):
        digest.update(part.encode())
    for source in made_by:
        digest.update(source.read_bytes())
    return _records_dir() / digest.hexdigest()


def _records_dir() -> Path:
    return Path(wp.config.kernel_cache_dir) / BUILT_RECORDS


def kernels_built(model: mujoco.MjModel, config: SimConfig, device: str) -> bool:
    """Whether a build recorded ``model``'s own kernels as in Warp's kernel cache (``record_built``). Where the cache
    has lost a module since, the first step that launches it compiles it: slower, never wrong."""
    return _built_record(model, config, device).exists()


def record_built(model: mujoco.MjModel, config: SimConfig, device: str) -> None:
    """Record that ``model``'s own kernels are in Warp's kernel cache; where the cache cannot be written, nothing is
    recorded and the next run builds them beside its caller again."""
    record = _built_record(model, config, device)
    with contextlib.suppress(OSError):
        record.parent.mkdir(parents=True, exist_ok=True)
        record.touch()
