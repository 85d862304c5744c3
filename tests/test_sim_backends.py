"""Both physics backends load G1, step a state they are given, reset it by mask, and agree with each other."""

from __future__ import annotations

import math
import subprocess
import sys
import time
from pathlib import Path

import mujoco
import pytest
import torch

from unilab.robots import g1
from unilab.sim import BACKENDS, MODEL_PARAMS, STATE_FIELDS, SimBackend, SimCapacityError, SimConfig, make_backend

NUM_WORLDS = 4


def initial_state(backend: SimBackend, num_worlds: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stand pose at staggered heights and forward speeds, so every world differs."""
    qpos = torch.tensor(backend.model.key_qpos[0], dtype=torch.float32).repeat(num_worlds, 1)
    qpos[:, 2] += torch.linspace(0.0, 0.05, num_worlds)
    qvel = torch.zeros(num_worlds, backend.model.nv)
    qvel[:, 0] = torch.linspace(-0.3, 0.3, num_worlds)
    return qpos, qvel


def pd_targets(backend: SimBackend, k: int, num_worlds: int) -> torch.Tensor:
    """Stand pose plus a slow sinusoid on every joint: enough motion to make contacts come and go."""
    q0 = torch.tensor(backend.model.key_ctrl[0], dtype=torch.float32)
    return (q0 + 0.3 * math.sin(2 * math.pi * k / 25)).repeat(num_worlds, 1)


def start(backend: SimBackend, num_worlds: int) -> dict[str, torch.Tensor]:
    """A fresh state with every world at ``initial_state``."""
    state = backend.initial_state()
    qpos, qvel = initial_state(backend, num_worlds)
    backend.reset_(state, torch.ones(num_worlds, dtype=torch.bool), qpos, qvel)
    return state


def run(backend: SimBackend, state: dict[str, torch.Tensor], steps: int, first: int = 0) -> dict[str, torch.Tensor]:
    for k in range(first, first + steps):
        backend.step_(state, pd_targets(backend, k, backend.num_worlds))
    return state


def clone(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {name: value.clone() for name, value in state.items()}


def assert_states_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    for name in STATE_FIELDS:
        assert torch.equal(a[name], b[name]), name


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> SimBackend:
    return make_backend(request.param, g1.load_model(), NUM_WORLDS, device="cpu")


def test_unknown_backend_is_named() -> None:
    with pytest.raises(ValueError, match=r"unknown physics backend 'bullet'.*mjwarp, mujoco"):
        make_backend("bullet", g1.load_model(), 2)


def test_impossible_world_count() -> None:
    with pytest.raises(ValueError, match="num_worlds must be >= 1, got 0"):
        make_backend("mujoco", g1.load_model(), 0)


def test_state_carries_the_declared_fields(backend: SimBackend) -> None:
    state = backend.initial_state()
    m = backend.model
    assert tuple(state) == STATE_FIELDS
    for name, shape in backend.state_spec().items():
        assert state[name].shape == (NUM_WORLDS, *shape) and state[name].dtype == torch.float32, name
    assert state["qpos"].shape == (NUM_WORLDS, m.nq) and state["xquat"].shape == (NUM_WORLDS, m.nbody, 4)
    torch.testing.assert_close(state["actuator_kp"][0], torch.tensor(m.actuator_gainprm[:, 0], dtype=torch.float32))


def test_steps_write_the_state_with_model_shapes(backend: SimBackend) -> None:
    state = start(backend, NUM_WORLDS)
    before = state["qpos"].clone()
    run(backend, state, 5)
    assert torch.isfinite(state["qpos"]).all() and torch.isfinite(state["sensordata"]).all()
    assert not torch.equal(before, state["qpos"])
    assert state["qacc_warmstart"].abs().sum() > 0, "the solver's warm start is carried in the state"
    torch.testing.assert_close(state["time"], torch.full((NUM_WORLDS,), 5 * backend.control_dt), atol=1e-5, rtol=0)
    # Derived quantities describe the current qpos: the pelvis body sits at the free joint's position.
    torch.testing.assert_close(state["xpos"][:, 1], state["qpos"][:, :3], atol=1e-5, rtol=0)


def test_a_step_depends_only_on_its_state(backend: SimBackend) -> None:
    """A saved state, stepped after the backend has stepped another state, continues bit for bit."""
    a = run(backend, start(backend, NUM_WORLDS), 3)
    saved = clone(a)
    run(backend, a, 4, first=3)
    other = run(backend, start(backend, NUM_WORLDS), 7)  # the backend's own buffers now hold something else
    assert not torch.equal(other["qpos"], saved["qpos"])
    run(backend, saved, 4, first=3)
    assert_states_equal(saved, a)


def test_masked_reset_touches_exactly_the_masked_worlds(backend: SimBackend) -> None:
    state = run(backend, start(backend, NUM_WORLDS), 3)
    snapshot = clone(state)
    mask = torch.tensor([True, False, True, False])
    new_qpos = torch.tensor(backend.model.key_qpos[0], dtype=torch.float32).repeat(NUM_WORLDS, 1)
    new_qpos[:, 0] = torch.arange(NUM_WORLDS, dtype=torch.float32) + 10.0
    new_qvel = torch.full((NUM_WORLDS, backend.model.nv), 0.25)
    backend.reset_(state, mask, new_qpos, new_qvel)
    for key, old in snapshot.items():
        assert torch.equal(state[key][~mask], old[~mask]), f"{key} of an unmasked world changed"
    torch.testing.assert_close(state["qpos"][mask], new_qpos[mask])
    torch.testing.assert_close(state["qvel"][mask], new_qvel[mask])
    torch.testing.assert_close(state["xpos"][mask, 1, 0], new_qpos[mask, 0])
    assert not state["qacc_warmstart"][mask].any() and not state["time"][mask].any()


@pytest.mark.parametrize("name", BACKENDS)
def test_worlds_stepped_together_equal_each_stepped_alone(name: str) -> None:
    together = make_backend(name, g1.load_model(), 3, device="cpu")
    state = start(together, 3)
    qpos, qvel = initial_state(together, 3)
    single = make_backend(name, g1.load_model(), 1, device="cpu")
    alone = []
    for i in range(3):
        one = single.initial_state()
        single.reset_(one, torch.ones(1, dtype=torch.bool), qpos[i : i + 1], qvel[i : i + 1])
        alone.append(one)
    for k in range(10):
        together.step_(state, pd_targets(together, k, 3))
        for one in alone:  # one backend, three states stepped in turn
            single.step_(one, pd_targets(single, k, 1))
    for i, one in enumerate(alone):
        torch.testing.assert_close(state["qpos"][i], one["qpos"][0], atol=1e-6, rtol=0)
        torch.testing.assert_close(state["qvel"][i], one["qvel"][0], atol=1e-5, rtol=0)


def test_backends_agree_over_50_control_steps() -> None:
    """mjwarp (float32) follows C MuJoCo (float64) from the same state and PD targets.

    Observed gaps after 50 control steps (150 substeps, robots falling onto the floor):
    ~5e-6 m in qpos and ~7e-5 in qvel. The tolerances leave a 20-40x margin for
    float32 round-off growing through contact events, while a wrong gain, sensor or
    integrator setting shows up as errors of 1e-2 and more within a few steps.
    """
    pair = {name: make_backend(name, g1.load_model(), NUM_WORLDS, device="cpu") for name in BACKENDS}
    states = {name: run(b, start(b, NUM_WORLDS), 50) for name, b in pair.items()}
    warp_, ref = states["mjwarp"], states["mujoco"]
    torch.testing.assert_close(warp_["qpos"], ref["qpos"], atol=2e-4, rtol=0)
    torch.testing.assert_close(warp_["qvel"], ref["qvel"], atol=3e-3, rtol=0)
    torch.testing.assert_close(warp_["xpos"], ref["xpos"], atol=2e-4, rtol=0)
    torch.testing.assert_close(warp_["sensordata"], ref["sensordata"], atol=3e-3, rtol=0)
    # The trajectory was not trivial: some robots fell well below the stand height.
    assert ref["qpos"][:, 2].min() < 0.5


def test_wrong_shape_ctrl_is_named(backend: SimBackend) -> None:
    with pytest.raises(ValueError, match=r"ctrl must have shape \(4, 29\).*got \(4, 28\)"):
        backend.step_(backend.initial_state(), torch.zeros(NUM_WORLDS, 28))


def test_malformed_state_is_named(backend: SimBackend) -> None:
    state = backend.initial_state()
    del state["qacc_warmstart"]
    with pytest.raises(ValueError, match="physics state has no 'qacc_warmstart' field"):
        backend.step_(state, pd_targets(backend, 0, NUM_WORLDS))
    state = backend.initial_state()
    state["qvel"] = state["qvel"][:, :10]
    with pytest.raises(ValueError, match=r"field 'qvel' must be float32 \(4, 35\)"):
        backend.step_(state, pd_targets(backend, 0, NUM_WORLDS))


def test_bad_reset_mask_is_named(backend: SimBackend) -> None:
    qpos, qvel = initial_state(backend, NUM_WORLDS)
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        backend.reset_(backend.initial_state(), torch.ones(NUM_WORLDS), qpos, qvel)


def test_per_world_gains_change_only_their_world(backend: SimBackend) -> None:
    reference = start(backend, NUM_WORLDS)
    weak = clone(reference)
    for name in ("actuator_kp", "actuator_kv"):
        weak[name][1] *= 0.5
    run(backend, reference, 5)
    run(backend, weak, 5)
    same = [0, 2, 3]
    assert torch.equal(weak["qpos"][same], reference["qpos"][same])
    assert (weak["qpos"][1] - reference["qpos"][1]).abs().max() > 1e-3


def test_mjwarp_overflow_is_counted_and_raised() -> None:
    tight = make_backend("mjwarp", g1.load_model(), 2, device="cpu", config=SimConfig(nconmax=2, njmax=20))
    run(tight, start(tight, 2), 1)
    counts = tight.overflow_counts()
    assert counts["contacts"] > 0 and counts["constraints"] > 0
    with pytest.raises(SimCapacityError, match="nconmax"):
        tight.check_capacity()


def test_mujoco_overflow_is_counted_and_raised() -> None:
    spec = mujoco.MjSpec.from_file(str(g1.SCENE))
    spec.memory = 60_000  # bytes of arena: too little for the constraints of a standing G1
    tight = make_backend("mujoco", spec.compile(), 2, config=SimConfig())
    run(tight, start(tight, 2), 1)
    assert tight.overflow_counts()["constraints"] > 0
    with pytest.raises(SimCapacityError):
        tight.check_capacity()


def test_default_capacity_holds_a_standing_robot(backend: SimBackend) -> None:
    run(backend, start(backend, NUM_WORLDS), 10)
    backend.check_capacity()


def test_both_backends_keep_the_fullest_their_buffers_have_been() -> None:
    """The peaks are C MuJoCo's own counts, taken by hand: the most contacts of all worlds together and of rows of
    one world after any substep. MuJoCo Warp's agree with them on the same steps, and neither ever falls."""
    model, steps = g1.load_model(), 12
    reference = make_backend("mujoco", model, 1)  # for the start and the targets the backends get
    worlds = [mujoco.MjData(model) for _ in range(NUM_WORLDS)]
    qpos, qvel = initial_state(reference, NUM_WORLDS)
    for i, data in enumerate(worlds):
        data.qpos[:], data.qvel[:] = qpos[i].double().numpy(), qvel[i].double().numpy()
    contacts = rows = 0
    for k in range(steps):
        targets = pd_targets(reference, k, NUM_WORLDS).double().numpy()
        for _ in range(SimConfig().substeps):
            for i, data in enumerate(worlds):
                data.ctrl[:] = targets[i]
                mujoco.mj_step(model, data)
            contacts = max(contacts, sum(data.ncon for data in worlds))
            rows = max(rows, max(data.nefc for data in worlds))
    assert contacts > NUM_WORLDS and rows > 0  # the feet are on the ground
    for name in BACKENDS:
        sim = make_backend(name, model, NUM_WORLDS, device="cpu")
        state = start(sim, NUM_WORLDS)
        seen = []
        for k in range(steps):
            run(sim, state, 1, first=k)
            seen.append(sim.peak_tensor().tolist())
        for column in (0, 1):
            assert [peak[column] for peak in seen] == sorted(peak[column] for peak in seen)
        assert seen[-1] == [contacts, rows], name


def test_models_with_state_the_backend_does_not_carry_are_refused() -> None:
    spec = mujoco.MjSpec.from_file(str(g1.SCENE))
    spec.worldbody.add_body(name="target", mocap=True)
    with pytest.raises(ValueError, match="does not carry mocap bodies"):
        make_backend("mujoco", spec.compile(), 1)


@pytest.mark.gpu
def test_captured_step_replays_like_eager() -> None:
    """One control step recorded in a torch CUDA graph gives the eager trajectory.

    Contact and solver kernels accumulate with atomics, so two GPU runs differ in the last
    bits and falling robots amplify that; a short horizon keeps the comparison sharp.
    """
    backend = make_backend("mjwarp", g1.load_model(), 64, device="cuda")
    qpos, qvel = initial_state(backend, 64)
    everyone = torch.ones(64, dtype=torch.bool, device="cuda")
    eager, graphed = backend.initial_state(), backend.initial_state()
    for state in (eager, graphed):
        backend.reset_(state, everyone, qpos.cuda(), qvel.cuda())
    ctrl = pd_targets(backend, 0, 64).cuda()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        backend.step_(graphed, ctrl)  # warm-up: loads kernels outside the capture
    torch.cuda.current_stream().wait_stream(side)
    backend.step_(eager, ctrl)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        backend.step_(graphed, ctrl)
    # Capture records without running: the graphed world is still one step in.
    for k in range(1, 5):
        target = pd_targets(backend, k, 64).cuda()
        backend.step_(eager, target)  # the same backend, another state, between replays
        ctrl.copy_(target)
        graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(graphed["qpos"], eager["qpos"], atol=1e-4, rtol=0)
    torch.testing.assert_close(graphed["sensordata"], eager["sensordata"], atol=1e-3, rtol=0)
    backend.check_capacity()


@pytest.mark.gpu
def test_a_stream_wrapper_freed_late_does_not_end_a_capture(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warp forgets a stream, and the capture open on it, when any Warp wrapper of that stream is deleted. Here the
    wrappers of earlier steps are kept alive and released during a later step's capture, as the collector may release
    one held in a cycle. A wrapper freed at the end of its own step would prove nothing: its capture has ended by then.
    The backend's wrapper of the stream must not be among those released, or the solver's loop cannot resume the
    capture and the recording fails."""
    import mujoco_warp as mjw
    import warp as wp

    backend = make_backend("mjwarp", g1.load_model(), 64, device="cuda")
    qpos, qvel = initial_state(backend, 64)
    state = backend.initial_state()
    backend.reset_(state, torch.ones(64, dtype=torch.bool, device="cuda"), qpos.cuda(), qvel.cuda())
    ctrl = pd_targets(backend, 0, 64).cuda()
    made: list[wp.Stream] = []
    wrap, step = wp.stream_from_torch, mjw.step

    def kept_wrap(stream: torch.cuda.Stream) -> wp.Stream:
        made.append(wrap(stream))
        return made[-1]

    def step_after_a_release(m: mjw.Model, d: mjw.Data) -> None:
        del made[:-1]  # all but this step's own wrapper
        step(m, d)

    monkeypatch.setattr(wp, "stream_from_torch", kept_wrap)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        backend.step_(state, ctrl)  # warm-up: loads kernels outside the capture
    torch.cuda.current_stream().wait_stream(side)
    monkeypatch.setattr(mjw, "step", step_after_a_release)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(2):
            backend.step_(state, ctrl)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.isfinite(state["qpos"]).all()


@pytest.fixture(scope="module")
def fresh_mjwarp_cpu_process() -> subprocess.CompletedProcess:
    """A fresh process (module loads are per process) that builds an mjwarp backend on the CPU, steps it once and
    builds a second one. One process serves the two tests below: each fresh process pays Warp's module loads again.
    It prints whether every ``STEP_MODULES`` module has kernels, had its CPU variant loaded by the construction,
    and was left with the same variants by the step."""
    code = (
        "import torch, warp as wp\n"
        "from unilab.robots import g1\n"
        "from unilab.sim import make_backend\n"
        "from unilab.core.warp_ahead import STEP_MODULES\n"
        "sim = make_backend('mjwarp', g1.load_model(), 1, device='cpu')\n"
        "modules = [wp.get_module(name) for name in STEP_MODULES]\n"
        "before = [set(m.execs) for m in modules]\n"
        "sim.step_(sim.initial_state(), torch.zeros(1, sim.model.nu))\n"
        "print(all(m.kernels for m in modules), all(before), before == [set(m.execs) for m in modules])\n"
        "make_backend('mjwarp', g1.load_model(), 1, device='cpu')\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)


def test_mjwarp_on_the_cpu_says_it_compiles_once_and_hides_the_no_driver_warning(
    fresh_mjwarp_cpu_process: subprocess.CompletedProcess,
) -> None:
    stderr = fresh_mjwarp_cpu_process.stderr
    assert "CUDA driver" not in stderr
    assert stderr.count("the first run compiles its kernels") == 1


def test_mjwarp_loads_the_step_modules_before_the_first_step_and_the_step_uses_them(
    fresh_mjwarp_cpu_process: subprocess.CompletedProcess,
) -> None:
    """After construction every ``STEP_MODULES`` module has its CPU variant loaded, a step loads no other variant
    of them, and each name still holds mujoco_warp kernels."""
    assert fresh_mjwarp_cpu_process.stdout.split() == ["True", "True", "True"]


# Slow on the CPU: two fresh processes, each paying Warp's module loads (the GPU tests run the CUDA case).
@pytest.mark.parametrize(
    "device", [pytest.param("cpu", marks=pytest.mark.slow), pytest.param("cuda", marks=pytest.mark.gpu)]
)
def test_mjwarp_kernel_build_leaves_the_first_step_no_module_to_load(device: str) -> None:
    """In a fresh process: once ``begin_kernel_build`` has run (the next physics call waits for it), a step of
    two worlds loads no Warp module that was not loaded before it; without the build the same step loads the
    solver's per-model modules. The build steps one scratch world, so this also checks that those kernels do not
    depend on the number of worlds."""
    code = (
        "import sys, torch\n"
        "from warp._src.context import user_modules\n"
        "from unilab.robots import g1\n"
        "from unilab.sim import make_backend, mjwarp\n"
        "sim = make_backend('mjwarp', g1.load_model(), 2, device=sys.argv[2])\n"
        "state = sim.initial_state()\n"
        "if sys.argv[1] == 'build':\n"
        "    mjwarp.kernels_built = lambda *args: False  # build whatever a run before recorded\n"
        "    sim.begin_kernel_build()\n"
        "    mjwarp._wait_for_builds()\n"
        "loaded = lambda: {(name, key) for name, module in user_modules.items() for key in module.execs}\n"
        "before = loaded()\n"
        "sim.step_(state, torch.zeros(2, sim.model.nu, device=sys.argv[2]))\n"
        "print(len(loaded() - before))\n"
    )
    new_loads = {
        mode: int(
            subprocess.run(
                [sys.executable, "-c", code, mode, device], capture_output=True, text=True, timeout=600, check=True
            ).stdout.split()[-1]
        )
        for mode in ("build", "lazy")
    }
    assert new_loads["build"] == 0
    assert new_loads["lazy"] > 0


def test_a_kernel_build_leaves_the_backend_stepping_as_before(build_records: Path) -> None:
    """The scratch step writes only its own ``mjw.Data``: a backend that ran a build steps bit for bit like one
    that did not (C MuJoCo's kernels on Warp's CPU device are deterministic)."""
    trajectories = []
    for build in (True, False):
        backend = make_backend("mjwarp", g1.load_model(), NUM_WORLDS, device="cpu")
        state = start(backend, NUM_WORLDS)
        if build:
            backend.begin_kernel_build()
        for k in range(3):
            backend.step_(state, pd_targets(backend, k, NUM_WORLDS))
        trajectories.append((state["qpos"].clone(), state["qvel"].clone()))
    torch.testing.assert_close(trajectories[0], trajectories[1], atol=0, rtol=0)


def test_a_kernel_build_says_how_long_it_took_and_how_long_its_caller_waited(build_records: Path) -> None:
    """Once the next physics call has waited for it, the build reports its own seconds and the wait; before, and on
    a backend that builds nothing beside its caller, nothing."""
    backend = make_backend("mjwarp", g1.load_model(), 1, device="cpu")
    state = backend.initial_state()
    assert backend.kernel_build_seconds() == {}
    backend.begin_kernel_build()
    began = time.perf_counter()
    backend.step_(state, torch.zeros(1, backend.model.nu))
    stepped = time.perf_counter() - began
    report = backend.kernel_build_seconds()
    assert set(report) == {"build", "waited"} and report["build"] > 0
    assert 0 <= report["waited"] <= stepped  # the step's own wait, inside it
    assert make_backend("mujoco", g1.load_model(), 1).kernel_build_seconds() == {}


def test_a_failed_kernel_build_is_raised_by_the_next_physics_call(
    monkeypatch: pytest.MonkeyPatch, build_records: Path
) -> None:
    backend = make_backend("mjwarp", g1.load_model(), 1, device="cpu")
    state = backend.initial_state()

    def broken() -> None:
        raise RuntimeError("the scratch step failed")

    monkeypatch.setattr(backend, "_step_scratch", broken)
    backend.begin_kernel_build()
    with pytest.raises(RuntimeError, match="the scratch step failed"):
        backend.step_(state, torch.zeros(1, backend.model.nu))
    backend.step_(state, torch.zeros(1, backend.model.nu))  # raised once; the backend still steps
    assert not build_records.exists()  # and nothing was recorded as built


def test_a_model_whose_kernels_a_build_recorded_is_not_built_again(build_records: Path) -> None:
    """The second backend of one model and settings starts no build (its first step loads the kernels); another
    setting makes other kernels, and is built."""
    reports = []
    for config in (SimConfig(), SimConfig(), SimConfig(njmax=SimConfig().njmax + 8)):
        backend = make_backend("mjwarp", g1.load_model(), 1, device="cpu", config=config)
        state = backend.initial_state()
        backend.begin_kernel_build()
        backend.step_(state, torch.zeros(1, backend.model.nu))
        reports.append(set(backend.kernel_build_seconds()))
    assert reports == [{"build", "waited"}, set(), {"build", "waited"}]
    assert len(list(build_records.iterdir())) == 2


def test_the_record_names_the_settings_that_make_the_kernels(
    monkeypatch: pytest.MonkeyPatch, build_records: Path
) -> None:
    """A record is found for the model, settings and Warp code generation it was written under, and not once one
    of them differs."""
    import warp as wp

    from unilab.sim import warp_model

    model = g1.load_model()
    warp_model.record_built(model, SimConfig(), "cpu")
    assert warp_model.kernels_built(model, SimConfig(), "cpu")
    assert not warp_model.kernels_built(model, SimConfig(nconmax=SimConfig().nconmax + 1), "cpu")
    heavier = g1.load_model()
    heavier.body_mass[1] += 1.0
    assert not warp_model.kernels_built(heavier, SimConfig(), "cpu")
    monkeypatch.setattr(wp.config, "optimization_level", 1)
    assert not warp_model.kernels_built(model, SimConfig(), "cpu")


def test_a_cache_that_cannot_hold_the_record_builds_every_time(build_records: Path) -> None:
    build_records.parent.mkdir(parents=True, exist_ok=True)
    build_records.write_text("a file where the records' folder would be")
    for _ in range(2):
        backend = make_backend("mjwarp", g1.load_model(), 1, device="cpu")
        state = backend.initial_state()
        backend.begin_kernel_build()
        backend.step_(state, torch.zeros(1, backend.model.nu))
        assert set(backend.kernel_build_seconds()) == {"build", "waited"}


# -- per-world model parameters and per-substep targets ------------------------------------------------------


def randomized(backend: SimBackend) -> dict[str, torch.Tensor]:
    """A started state whose worlds each have their own friction, masses, centre of mass, inertias and strength."""
    state = start(backend, NUM_WORLDS)
    spread = torch.linspace(0.0, 1.0, NUM_WORLDS)
    torso = backend.model.body(g1.TORSO_BODY).id
    state["geom_friction"][:, :, 0] = (0.3 + 0.9 * spread).unsqueeze(-1)
    state["body_mass"][:, torso] += 3.0 * spread
    state["body_inertia"][:, torso] *= (1.0 + 0.4 * spread).unsqueeze(-1)
    state["body_ipos"][:, torso, 0] += 0.05 * (spread - 0.5)
    state["actuator_strength"] *= (0.8 + 0.4 * spread).unsqueeze(-1)
    backend.reset_(state, torch.ones(NUM_WORLDS, dtype=torch.bool), *initial_state(backend, NUM_WORLDS))
    return state


def latency_targets(backend: SimBackend, k: int) -> torch.Tensor:
    """(substeps, worlds, nu): world i applies the previous step's targets for its first i substeps."""
    previous, new = pd_targets(backend, k - 1, NUM_WORLDS), pd_targets(backend, k, NUM_WORLDS)
    late = torch.arange(backend.config.substeps).view(-1, 1, 1) < torch.arange(NUM_WORLDS).view(1, -1, 1)
    return torch.where(late, previous, new)


@pytest.fixture(scope="module", params=BACKENDS)
def per_world_backend(request: pytest.FixtureRequest) -> SimBackend:
    config = SimConfig(per_world=MODEL_PARAMS)
    return make_backend(request.param, g1.load_model(), NUM_WORLDS, device="cpu", config=config)


def test_per_world_parameters_start_at_the_model_values(per_world_backend: SimBackend) -> None:
    state, m = per_world_backend.initial_state(), per_world_backend.model
    assert tuple(state) == STATE_FIELDS + MODEL_PARAMS
    torch.testing.assert_close(state["geom_friction"][2], torch.tensor(m.geom_friction, dtype=torch.float32))
    torch.testing.assert_close(state["body_mass"][1], torch.tensor(m.body_mass, dtype=torch.float32))
    assert state["actuator_strength"].eq(1.0).all()


@pytest.mark.parametrize("name", MODEL_PARAMS)
def test_a_per_world_parameter_changes_only_its_world(per_world_backend: SimBackend, name: str) -> None:
    reference = start(per_world_backend, NUM_WORLDS)
    changed = clone(reference)
    torso = per_world_backend.model.body(g1.TORSO_BODY).id
    if name == "geom_friction":
        changed[name][1, :, 0] = 0.05  # the feet slide
    elif name == "body_ipos":
        changed[name][1, torso] += 0.05
    elif name == "actuator_strength":
        changed[name][1] = 0.5
    else:
        changed[name][1, torso] *= 1.5
    everyone = torch.ones(NUM_WORLDS, dtype=torch.bool)
    for state in (reference, changed):
        per_world_backend.reset_(state, everyone, *initial_state(per_world_backend, NUM_WORLDS))
    run(per_world_backend, reference, 8)
    run(per_world_backend, changed, 8)
    same = [0, 2, 3]
    assert torch.equal(changed["qpos"][same], reference["qpos"][same])
    assert (changed["qpos"][1] - reference["qpos"][1]).abs().max() > 1e-4, name


def test_per_world_parameters_on_the_model_fields_leave_a_nominal_state_unchanged() -> None:
    """Carrying the parameters per world, at their model values, steps exactly as sharing them."""
    config = SimConfig(per_world=MODEL_PARAMS)
    for name in BACKENDS:
        shared = make_backend(name, g1.load_model(), NUM_WORLDS, device="cpu")
        carried = make_backend(name, g1.load_model(), NUM_WORLDS, device="cpu", config=config)
        a, b = run(shared, start(shared, NUM_WORLDS), 5), run(carried, start(carried, NUM_WORLDS), 5)
        for field in ("qpos", "qvel", "subtree_com", "sensordata"):
            torch.testing.assert_close(a[field], b[field], atol=1e-6, rtol=0, msg=f"{name} {field}")


def test_masses_and_centres_of_mass_place_the_subtree_com_as_mujoco_does() -> None:
    """The backends update body_subtreemass from per-world masses; MuJoCo's own constants, recomputed on a model
    with those masses and centres of mass, give the same subtree centres of mass."""
    backend = make_backend("mujoco", g1.load_model(), NUM_WORLDS, config=SimConfig(per_world=MODEL_PARAMS))
    state = randomized(backend)
    model = g1.load_model()
    data = mujoco.MjData(model)
    for i in (1, 3):
        model.body_mass[:] = state["body_mass"][i].numpy()
        model.body_ipos[:] = state["body_ipos"][i].numpy()
        mujoco.mj_setConst(model, data)
        data.qpos[:] = state["qpos"][i].numpy()
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        expected = torch.tensor(data.subtree_com, dtype=torch.float32)
        torch.testing.assert_close(state["subtree_com"][i], expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize("name", BACKENDS)
def test_targets_given_per_substep_and_all_equal_step_as_held_targets(name: str) -> None:
    backend = make_backend(name, g1.load_model(), NUM_WORLDS, device="cpu")
    held, per_substep = start(backend, NUM_WORLDS), start(backend, NUM_WORLDS)
    for k in range(4):
        targets = pd_targets(backend, k, NUM_WORLDS)
        backend.step_(held, targets)
        backend.step_(per_substep, targets.expand(backend.config.substeps, -1, -1).clone())
    assert_states_equal(held, per_substep)


def test_backends_agree_with_per_world_parameters_and_per_substep_targets() -> None:
    """Every world with its own parameters and its own latency, over 10 control steps.

    Observed gaps: ~9e-7 m in qpos, ~1e-5 in qvel. Setting any one of the parameters back to the model's value
    moves qpos by 4e-3 to 6e-2 in these steps, so a parameter one backend ignored would show. Longer runs part:
    a stick-slip or contact event decided by float32 rounding (the state is float32 between control steps)
    sends one world elsewhere after 10 to 15 steps, C MuJoCo against itself in float64 included.
    """
    config = SimConfig(per_world=MODEL_PARAMS)
    pair = {name: make_backend(name, g1.load_model(), NUM_WORLDS, device="cpu", config=config) for name in BACKENDS}
    states = {name: randomized(b) for name, b in pair.items()}
    for k in range(1, 11):
        for name, b in pair.items():
            b.step_(states[name], latency_targets(b, k))
    warp_, ref = states["mjwarp"], states["mujoco"]
    torch.testing.assert_close(warp_["qpos"], ref["qpos"], atol=2e-5, rtol=0)
    torch.testing.assert_close(warp_["qvel"], ref["qvel"], atol=5e-4, rtol=0)
    torch.testing.assert_close(warp_["subtree_com"], ref["subtree_com"], atol=1e-5, rtol=0)
    torch.testing.assert_close(warp_["sensordata"], ref["sensordata"], atol=2e-4, rtol=0)


def test_wrong_shape_per_substep_ctrl_is_named(backend: SimBackend) -> None:
    with pytest.raises(ValueError, match=r"ctrl must have shape \(4, 29\)"):
        backend.step_(backend.initial_state(), torch.zeros(2, NUM_WORLDS, 29))


def test_a_height_fields_dropped_contacts_are_counted_not_raised() -> None:
    """A wide box lying on a level height field touches more of its prisms than mujoco_warp's collider keeps per
    geom pair: the steps where that happens are counted beside the buffers' overflows, and the run goes on."""
    xml = """<mujoco><asset><hfield name="h" nrow="20" ncol="20" size="1 1 0.1 0.1"/></asset>
    <worldbody><geom type="hfield" hfield="h"/>
    <body pos="0 0 0.075"><freejoint/><geom type="box" size="0.8 0.8 0.02" mass="1"/></body></worldbody></mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    model.hfield_data[:] = 0.5
    backend = make_backend("mjwarp", model, 2, device="cpu", config=SimConfig(substeps=1, nconmax=200, njmax=800))
    state = backend.initial_state()
    for _ in range(20):
        backend.step_(state, torch.zeros(2, 0))
    counts = backend.overflow_counts()
    assert counts["height_field"] > 0 and counts["contacts"] == counts["constraints"] == 0
    backend.check_capacity()  # counted, not fatal
    assert torch.all((state["qpos"][:, 2] > 0.06) & (state["qpos"][:, 2] < 0.08))  # the box rests on the field


def test_mjwarp_counts_the_solver_s_iteration_limit_instead_of_printing_it() -> None:
    """With one solver iteration a standing G1 never converges: mujoco_warp would print a line per world and
    physics step (from the kernel, on the process's stdout); the backend counts the control steps instead."""
    code = (
        "from unilab.robots import g1\n"
        "from unilab.sim import SimConfig, make_backend\n"
        "import torch\n"
        "model = g1.load_model()\n"
        "model.opt.iterations = model.opt.ls_iterations = 1\n"
        "sim = make_backend('mjwarp', model, 2, device='cpu', config=SimConfig(substeps=2))\n"
        "state = sim.initial_state()\n"
        "for _ in range(3):\n"
        "    sim.step_(state, state['qpos'][:, 7:].clone())\n"
        "print('limited', sim.solver_limit_steps())\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    assert int(proc.stdout.split("limited ")[1]) > 0
    assert "iterations limit reached" not in proc.stdout + proc.stderr


def test_an_unknown_broadphase_is_named_and_each_backend_says_its_own(backend: SimBackend) -> None:
    refusal = r"SimConfig\.broadphase must be one of nxn, sap_tile, sap_segmented, got 'bvh'"
    with pytest.raises(ValueError, match=refusal):
        SimConfig(broadphase="bvh")
    # MuJoCo Warp picks all pairs for a model this small; C MuJoCo has a pair search of its own only
    assert backend.broadphase_name() == ("nxn" if backend.name == "mjwarp" else None)


@pytest.mark.slow
@pytest.mark.parametrize("broadphase", ["sap_tile", "sap_segmented"])
def test_a_sweep_and_prune_broadphase_finds_the_pairs_all_pairs_find(broadphase: str) -> None:
    """The pair search decides only which pairs the narrow phase tests: the contacts, and so the steps, are those of
    the search over all pairs (up to the order the contacts are found in, which the solver's sums see)."""
    model, steps = g1.load_model(), 6
    sims = {
        name: make_backend("mjwarp", model, NUM_WORLDS, device="cpu", config=SimConfig(broadphase=name))
        for name in ("nxn", broadphase)
    }
    assert sims[broadphase].broadphase_name() == broadphase
    states = {name: run(sim, start(sim, NUM_WORLDS), steps) for name, sim in sims.items()}
    assert sims["nxn"].peak_tensor().tolist() == sims[broadphase].peak_tensor().tolist()
    for field in ("qpos", "qvel"):
        torch.testing.assert_close(states[broadphase][field], states["nxn"][field], atol=1e-3, rtol=1e-3)
