"""MuJoCo Warp backend: all worlds in one ``mjw.Data``, stepping the caller's torch tensors in place.

Each operation points the ``mjw.Data`` fields that make up the physics state at the
caller's tensors (``wp.from_torch``, no copy), runs the Warp kernels, and points them
back at the backend's own arrays. So the state lives in the caller's TensorDict, and a
CUDA graph recorded around an operation holds the tensors it was given.

Works on a CUDA device (the training path) and on Warp's CPU device (tests). On CUDA the
kernels launch on torch's current stream and may be recorded inside
``torch.cuda.graph``: the Warp launches are then bracketed with
``wp.capture_begin(external=True)`` so Warp joins torch's capture instead of starting
its own, and the solver's convergence loop becomes a conditional graph node instead of
a host sync per iteration.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp

from unilab.core import warp_ahead
from unilab.sim import hfield_fix, kernels_ahead
from unilab.sim.base import (
    CARRIED,
    DERIVED,
    Capabilities,
    SimBackend,
    SimConfig,
    SimState,
    subtree_matrix,
)
from unilab.sim.warp_model import (
    SOLVER_LIMITS,
    build_model_kernels,
    device_model,
    init_warp,
    kernels_built,
    per_world_fields,
    record_built,
    refresh,
    scratch_data,
    step_and_refresh,
)

# The flag mujoco_warp sets in a world's ``Data.overflow`` when a height-field collision found more contacts than
# its collider keeps.
HFIELD_CAP = int(mjw.OverflowType.HFIELD)


@functools.cache
def _note_cpu_kernels() -> None:
    """Once per process: the first CPU run spends tens of seconds compiling, which would otherwise look like a hang."""
    print(
        "mjwarp on the CPU: the first run compiles its kernels (about 40 s), later runs load them "
        f"from {wp.config.kernel_cache_dir}",
        file=sys.stderr,
    )


class _Build:
    """``work`` run once on a daemon thread (an interpreter exiting mid-build does not wait for a compile);
    ``wait`` joins it and raises what it raised. ``seconds`` is how long the work took, ``waited`` how long
    ``wait`` blocked (None until it has returned)."""

    def __init__(self, work: Callable[[], None]) -> None:
        self._error: BaseException | None = None
        self.seconds = 0.0
        self.waited: float | None = None
        self._thread = threading.Thread(target=self._run, args=(work,), name="mjwarp-kernel-build", daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], None]) -> None:
        began = time.perf_counter()
        try:
            work()
        except BaseException as error:  # handed to the thread that waits
            self._error = error
        self.seconds = time.perf_counter() - began

    def wait(self) -> None:
        began = time.perf_counter()
        self._thread.join()
        self.waited = time.perf_counter() - began
        if self._error is not None:
            raise self._error


# Kernel builds running beside the caller, of any backend: Warp's current device and stream are process-wide
# settings, so no Warp work may start while one runs.
_BUILDS: list[_Build] = []


def _wait_for_builds() -> None:
    while _BUILDS:
        _BUILDS.pop(0).wait()


# Warp's view of each torch stream the backends have run on, kept for the process's life. Warp knows a stream, and a
# graph capture open on it, by its handle, and deleting any wrapper of that handle makes Warp forget both. A wrapper
# made per step and freed late (by the collector, or with an object that held it) could so end a capture that a later
# step's wrapper had joined, and the solver's loop then failed to resume it ("resume_capture called on unknown
# stream"; PPO's rollout of the rough walk, recorded whole, did every time it started warm).
_WARP_STREAMS: dict[tuple[int, int], wp.Stream] = {}


def _warp_stream(stream: torch.cuda.Stream) -> wp.Stream:
    """The one Warp stream over torch's ``stream``: made on its first use, never deleted."""
    key = (stream.device_index, stream.cuda_stream)  # every device's legacy default stream has handle 0
    if key not in _WARP_STREAMS:
        _WARP_STREAMS[key] = wp.stream_from_torch(stream)
    return _WARP_STREAMS[key]


class MjWarpBackend(SimBackend):
    name = "mjwarp"
    capabilities = Capabilities(graph_capturable=True)

    def __init__(self, model: mujoco.MjModel, num_worlds: int, device: torch.device, config: SimConfig) -> None:
        super().__init__(model, num_worlds, device, config)
        _wait_for_builds()
        wp.config.log_level = wp.LOG_WARNING  # INFO prints a line for every kernel module loaded
        hfield_fix.install()  # before the first kernel is built
        init_warp()
        self._wp_device = str(device)  # cpu, or cuda:N: make_backend resolves the index
        if device.type == "cpu":
            _note_cpu_kernels()
        if warp_ahead.started():  # a cold kernel cache: this model's own kernels are compiled in a side process too
            kernels_ahead.start(model, num_worlds, config, self._wp_device)
        per_world = per_world_fields(self.params)
        with wp.ScopedDevice(self._wp_device):
            self._m = device_model(model, num_worlds, config)
            self._d = mjw.make_data(model, nworld=num_worlds, nconmax=config.nconmax, njmax=config.njmax)
        waited = warp_ahead.wait()  # for the side process compiling the step modules, where the command started one
        if waited is not None:
            self.startup["warp_ahead"] = waited
        began = time.perf_counter()
        warp_ahead.load_step_modules(self._wp_device)
        self.startup["warp_load"] = time.perf_counter() - began
        d = self._d
        # Torch views of the per-world model arrays, written from the state before each step.
        self._model_views = {field: wp.to_torch(getattr(self._m, field)) for field in per_world}
        self._gainprm, self._biasprm = self._model_views["actuator_gainprm"], self._model_views["actuator_biasprm"]
        if "actuator_strength" in self.params:
            self._forcerange0 = self._model_views["actuator_forcerange"][0].clone()
        if "body_mass" in self.params:
            # float64 sums, so a world at the model's masses gets the model's own float32 subtree masses
            self._subtree = torch.as_tensor(subtree_matrix(model), dtype=torch.float64, device=device)
        self._nacon, self._nefc = wp.to_torch(d.nacon), wp.to_torch(d.nefc)
        # [contact overflows, constraint overflows, height-field caps], accumulated on device, read at host boundaries.
        self._overflow = torch.zeros(3, dtype=torch.int64, device=device)
        self._solver_limits = torch.zeros((), dtype=torch.int64, device=device)
        # The most contacts of all worlds together, and of constraint rows per world, after any substep; a world's
        # own maximum is kept on the device and reduced only when read.
        self._peak_contacts = torch.zeros(1, dtype=torch.int64, device=device)
        self._peak_rows = torch.zeros(num_worlds, dtype=torch.int64, device=device)
        # Per world, sticky until cleared: read and cleared after each control step (the solver's limits, and the
        # height fields' caps where the model has height fields).
        self._flags = wp.to_torch(d.overflow)
        self._read_flags = SOLVER_LIMITS | (HFIELD_CAP if model.nhfield else 0)
        self._njmax = config.njmax
        self._naconmax = d.naconmax
        self._kernel_build: _Build | None = None
        self._side_wait: float | None = None  # how long the build waited for ``kernels_ahead``'s side process

    def begin_kernel_build(self) -> None:
        """Build, on a thread beside the caller, the solver kernels that mujoco_warp makes for this model's sizes
        the first time a step launches them; the next call that steps, resets or builds a backend waits for it.

        mujoco_warp creates these kernels inside the step, so they cannot be preloaded by name like
        ``warp_ahead.STEP_MODULES``: the thread first runs a step of a one-world scratch ``mjw.Data`` with its
        launches recorded, not made (``unilab.sim.kernel_prebuild``), which creates the kernels and names them, then
        compiles them side by side, one per core, and steps the scratch data once for real on a Warp stream of its
        own, which builds anything the recording missed. Stepped as they come, they compiled one after another (on
        an H200 with an empty cache, about 130 s for the rough walk's scene). Warp compiles outside the GIL, so this
        overlaps host work that makes no physics calls, such as tracing a compiled env step. The kernels depend on
        the model's sizes and solver settings, not on the number of worlds, so the real step then builds none.

        Where a build recorded this model's kernels in Warp's kernel cache (``kernels_built``), nothing runs: the
        first step loads them, and the recording, the hashing of the kernels' modules and the scratch step would only
        take the interpreter from the caller's tracing (on a 2-core CPU 0.45-0.6 s of the flat walk's first compiled
        step, 0.6-1.1 s of the rough walk's). ADR 41.
        """
        _wait_for_builds()
        if kernels_built(self.model, self.config, self._wp_device):
            return
        self._kernel_build = _Build(self._build)
        _BUILDS.append(self._kernel_build)

    def kernel_build_seconds(self) -> dict[str, float]:
        build = self._kernel_build
        if build is None or build.waited is None:
            return {}
        report = {"build": round(build.seconds, 3), "waited": round(build.waited, 3)}
        if self._side_wait is not None:  # of ``build``, the wait for the side process that compiled the kernels
            report["side_process"] = round(self._side_wait, 3)
        return report

    def _build(self) -> None:
        """The kernels of a recorded scratch step compiled side by side, then a real scratch step for anything the
        recording missed. Where a side process compiles them (``kernels_ahead``), this waits for it first and then
        loads them from the cache. The recording swaps Warp's launch for the whole process, which is safe here:
        every physics call of a backend waits for the builds first, and no other code launches Warp kernels."""
        self._side_wait = kernels_ahead.wait()
        build_model_kernels(self._m, self.model, self.config, self._wp_device)
        self._step_scratch()
        record_built(self.model, self.config, self._wp_device)

    def _step_scratch(self) -> None:
        with wp.ScopedDevice(self._wp_device):
            stream = wp.Stream(self._wp_device) if self.device.type == "cuda" else None
            with wp.ScopedStream(stream):
                step_and_refresh(self._m, scratch_data(self.model, self.config))
                if stream is not None:  # the scratch arrays are freed on return
                    wp.synchronize_stream(stream)

    @contextmanager
    def _on_torch_stream(self) -> Iterator[None]:
        """Run Warp work on torch's current stream, joining a torch graph capture if one is open."""
        if self.device.type != "cuda":
            with wp.ScopedDevice(self._wp_device):
                yield
            return
        stream = _warp_stream(torch.cuda.current_stream(self.device))
        capturing = torch.cuda.is_current_stream_capturing()
        with wp.ScopedDevice(self._wp_device), wp.ScopedStream(stream, sync_enter=False):
            if capturing:
                wp.capture_begin(stream=stream, external=True)
            try:
                yield
            finally:
                if capturing:
                    wp.capture_end(stream=stream)

    @contextmanager
    def _bound(self, tensors: Mapping[str, torch.Tensor]) -> Iterator[None]:
        """Point the ``mjw.Data`` fields named in ``tensors`` at those tensors for the duration.

        A tensor Warp cannot alias (non-contiguous, say) is copied into the backend's own array and back.
        """
        d = self._d
        own = {name: getattr(d, name) for name in tensors}
        staged = []
        try:
            for name, value in tensors.items():
                array = own[name]
                if value.numel() == 0:
                    continue
                if value.is_contiguous():
                    setattr(d, name, wp.from_torch(value, dtype=array.dtype))
                else:
                    mirror = wp.to_torch(array)
                    mirror.copy_(value)
                    staged.append((value, mirror))
            yield
            for value, mirror in staged:
                value.copy_(mirror)
        finally:
            for name, array in own.items():
                setattr(d, name, array)

    def _write_gains(self, state: SimState) -> None:
        # A MuJoCo <position> actuator computes gain*ctrl + bias0 + bias1*q + bias2*qdot.
        kp, kv = state["actuator_kp"], state["actuator_kv"]
        if "actuator_strength" in self.params:  # the whole force scales, and with it the force limit
            strength = state["actuator_strength"]
            kp, kv = kp * strength, kv * strength
            self._model_views["actuator_forcerange"].copy_(self._forcerange0 * strength.unsqueeze(-1))
        self._gainprm[..., 0].copy_(kp)
        self._biasprm[..., 1].copy_(-kp)
        self._biasprm[..., 2].copy_(-kv)

    def _write_params(self, state: SimState) -> None:
        """The per-world body and geom parameters, from the state into the model (nothing when none vary)."""
        for name in ("geom_friction", "body_mass", "body_ipos", "body_inertia"):
            if name in self.params:
                self._model_views[name].copy_(state[name])
        if "body_mass" in self.params:
            self._model_views["body_subtreemass"].copy_(state["body_mass"].double() @ self._subtree)

    def _step(self, state: SimState, ctrl: torch.Tensor) -> None:
        _wait_for_builds()
        self._write_gains(state)
        self._write_params(state)
        fields = {name: state[name] for name in CARRIED + DERIVED}
        per_substep = ctrl.dim() == 3
        with self._bound({**fields, "ctrl": ctrl[0] if per_substep else ctrl}), self._on_torch_stream():
            for k in range(self.config.substeps):
                if per_substep and k:  # _bound restores the backend's own array on exit
                    self._d.ctrl = wp.from_torch(ctrl[k], dtype=self._d.ctrl.dtype)
                mjw.step(self._m, self._d)
                self._overflow[0] += (self._nacon[0] > self._naconmax).long()
                self._overflow[1] += (self._nefc > self._njmax).any().long()
                torch.maximum(self._peak_contacts, self._nacon, out=self._peak_contacts)
                torch.maximum(self._peak_rows, self._nefc, out=self._peak_rows)
            # A flag stays set until cleared: one read covers every substep.
            self._solver_limits += (self._flags & SOLVER_LIMITS).ne(0).any().long()
            if self._read_flags & HFIELD_CAP:
                self._overflow[2] += (self._flags & HFIELD_CAP).ne(0).any().long()
            self._flags.bitwise_and_(~self._read_flags)
            refresh(self._m, self._d)

    def _forward(self, state: SimState, mask: torch.Tensor) -> None:
        # Recomputing every world is cheaper than selecting some, and gives the others the values they had.
        _wait_for_builds()
        self._write_params(state)  # centres of mass and masses place xipos and subtree_com
        with self._bound({name: state[name] for name in ("qpos", "qvel", *DERIVED)}), self._on_torch_stream():
            refresh(self._m, self._d)

    def overflow_tensor(self) -> torch.Tensor:
        return self._overflow

    def solver_limit_tensor(self) -> torch.Tensor:
        return self._solver_limits

    def broadphase_name(self) -> str:
        return mjw.BroadphaseType(int(self._m.opt.broadphase)).name.lower()

    def peak_tensor(self) -> torch.Tensor:
        return torch.cat([self._peak_contacts, self._peak_rows.amax().reshape(1)])
