"""Both physics backends load G1, step a state they are given, reset it by mask, and agree with each other."""

from __future__ import annotations

import math
import subprocess
import sys

import mujoco
import pytest
import torch

from unilab.assets import G1_FLAT_SCENE
from unilab.robots import g1
from unilab.sim import BACKENDS, STATE_FIELDS, SimBackend, SimCapacityError, SimConfig, make_backend

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
    spec = mujoco.MjSpec.from_file(str(G1_FLAT_SCENE))
    spec.memory = 60_000  # bytes of arena: too little for the constraints of a standing G1
    tight = make_backend("mujoco", spec.compile(), 2, config=SimConfig())
    run(tight, start(tight, 2), 1)
    assert tight.overflow_counts()["constraints"] > 0
    with pytest.raises(SimCapacityError):
        tight.check_capacity()


def test_default_capacity_holds_a_standing_robot(backend: SimBackend) -> None:
    run(backend, start(backend, NUM_WORLDS), 10)
    backend.check_capacity()


def test_models_with_state_the_backend_does_not_carry_are_refused() -> None:
    spec = mujoco.MjSpec.from_file(str(G1_FLAT_SCENE))
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


def test_mjwarp_on_the_cpu_says_it_compiles_once_and_hides_the_no_driver_warning() -> None:
    code = (
        "from unilab.robots import g1\n"
        "from unilab.sim import make_backend\n"
        "for _ in range(2):\n"
        "    make_backend('mjwarp', g1.load_model(), 1, device='cpu')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    assert "CUDA driver" not in done.stderr
    assert done.stderr.count("the first run compiles its kernels") == 1
