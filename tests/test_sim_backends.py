"""Both physics backends load G1, step it, reset by mask, and agree with each other."""

from __future__ import annotations

import math

import mujoco
import pytest
import torch

from unilab.assets import G1_FLAT_SCENE
from unilab.sim import BACKENDS, SimBackend, SimCapacityError, SimConfig, make_backend

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


def start(backend: SimBackend, num_worlds: int) -> None:
    qpos, qvel = initial_state(backend, num_worlds)
    backend.reset_worlds(torch.ones(num_worlds, dtype=torch.bool), qpos, qvel)


@pytest.fixture(scope="module", params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> SimBackend:
    return make_backend(request.param, NUM_WORLDS, device="cpu")


def test_unknown_backend_is_named() -> None:
    with pytest.raises(ValueError, match=r"unknown physics backend 'bullet'.*mjwarp, mujoco"):
        make_backend("bullet", 2)


def test_impossible_world_count() -> None:
    with pytest.raises(ValueError, match="num_worlds must be >= 1, got 0"):
        make_backend("mujoco", 0)


def test_steps_and_views_have_model_shapes(backend: SimBackend) -> None:
    start(backend, NUM_WORLDS)
    before = backend.qpos.clone()
    for k in range(5):
        backend.set_ctrl(pd_targets(backend, k, NUM_WORLDS))
        backend.step()
    m = backend.model
    assert backend.qpos.shape == (NUM_WORLDS, m.nq)
    assert backend.xpos.shape == (NUM_WORLDS, m.nbody, 3)
    assert backend.xquat.shape == (NUM_WORLDS, m.nbody, 4)
    assert backend.sensordata.shape == (NUM_WORLDS, m.nsensordata)
    assert torch.isfinite(backend.qpos).all() and torch.isfinite(backend.sensordata).all()
    assert not torch.equal(before, backend.qpos)
    # Derived quantities describe the current qpos: the pelvis body sits at the free joint's position.
    torch.testing.assert_close(backend.xpos[:, 1], backend.qpos[:, :3], atol=1e-5, rtol=0)


def test_masked_reset_touches_exactly_the_masked_worlds(backend: SimBackend) -> None:
    start(backend, NUM_WORLDS)
    for k in range(3):
        backend.set_ctrl(pd_targets(backend, k, NUM_WORLDS))
        backend.step()
    snapshot = {k: getattr(backend, k).clone() for k in ("qpos", "qvel", "xpos", "sensordata")}
    mask = torch.tensor([True, False, True, False])
    new_qpos = torch.tensor(backend.model.key_qpos[0], dtype=torch.float32).repeat(NUM_WORLDS, 1)
    new_qpos[:, 0] = torch.arange(NUM_WORLDS, dtype=torch.float32) + 10.0
    new_qvel = torch.full((NUM_WORLDS, backend.model.nv), 0.25)
    backend.reset_worlds(mask.to(backend.device), new_qpos, new_qvel)
    for key, old in snapshot.items():
        now = getattr(backend, key)
        assert torch.equal(now[~mask], old[~mask]), f"{key} of an unmasked world changed"
    torch.testing.assert_close(backend.qpos[mask], new_qpos[mask])
    torch.testing.assert_close(backend.qvel[mask], new_qvel[mask])
    torch.testing.assert_close(backend.xpos[mask, 1, 0], new_qpos[mask, 0])


@pytest.mark.parametrize("name", BACKENDS)
def test_worlds_stepped_together_equal_each_stepped_alone(name: str) -> None:
    together = make_backend(name, 3, device="cpu")
    start(together, 3)
    qpos, qvel = initial_state(together, 3)
    alone = []
    for i in range(3):
        single = make_backend(name, 1, device="cpu")
        single.reset_worlds(torch.ones(1, dtype=torch.bool), qpos[i : i + 1], qvel[i : i + 1])
        alone.append(single)
    for k in range(10):
        together.set_ctrl(pd_targets(together, k, 3))
        together.step()
        for single in alone:
            single.set_ctrl(pd_targets(single, k, 1))
            single.step()
    for i, single in enumerate(alone):
        torch.testing.assert_close(together.qpos[i], single.qpos[0], atol=1e-6, rtol=0)
        torch.testing.assert_close(together.qvel[i], single.qvel[0], atol=1e-5, rtol=0)


def test_backends_agree_over_50_control_steps() -> None:
    """mjwarp (float32) follows C MuJoCo (float64) from the same state and PD targets.

    Observed gaps after 50 control steps (150 substeps, robots falling onto the floor):
    ~5e-6 m in qpos and ~7e-5 in qvel. The tolerances leave a 20-40x margin for
    float32 round-off growing through contact events, while a wrong gain, sensor or
    integrator setting shows up as errors of 1e-2 and more within a few steps.
    """
    pair = {name: make_backend(name, NUM_WORLDS, device="cpu") for name in BACKENDS}
    for b in pair.values():
        start(b, NUM_WORLDS)
    for k in range(50):
        for b in pair.values():
            b.set_ctrl(pd_targets(b, k, NUM_WORLDS))
            b.step()
    warp_, ref = pair["mjwarp"], pair["mujoco"]
    torch.testing.assert_close(warp_.qpos, ref.qpos, atol=2e-4, rtol=0)
    torch.testing.assert_close(warp_.qvel, ref.qvel, atol=3e-3, rtol=0)
    torch.testing.assert_close(warp_.xpos, ref.xpos, atol=2e-4, rtol=0)
    torch.testing.assert_close(warp_.sensordata, ref.sensordata, atol=3e-3, rtol=0)
    # The trajectory was not trivial: some robots fell well below the stand height.
    assert ref.qpos[:, 2].min() < 0.5


def test_wrong_shape_ctrl_is_named(backend: SimBackend) -> None:
    with pytest.raises(ValueError, match=r"ctrl must have shape \(4, 29\).*got \(4, 28\)"):
        backend.set_ctrl(torch.zeros(NUM_WORLDS, 28))


def test_non_finite_ctrl_names_the_rows(backend: SimBackend) -> None:
    ctrl = torch.zeros(NUM_WORLDS, backend.model.nu)
    ctrl[1, 3] = float("nan")
    ctrl[3, 0] = float("inf")
    with pytest.raises(ValueError, match=r"non-finite values in world rows \[1, 3\]"):
        backend.set_ctrl(ctrl)


def test_bad_reset_mask_is_named(backend: SimBackend) -> None:
    qpos, qvel = initial_state(backend, NUM_WORLDS)
    with pytest.raises(ValueError, match="mask must be a bool tensor"):
        backend.reset_worlds(torch.ones(NUM_WORLDS), qpos, qvel)


def test_per_world_gains_change_only_their_world(backend: SimBackend) -> None:
    default_kp, default_kv = backend.actuator_kp.clone(), backend.actuator_kv.clone()
    start(backend, NUM_WORLDS)
    scale = torch.tensor([1.0, 0.5, 1.0, 1.0]).unsqueeze(-1)
    backend.set_actuator_gains(default_kp * scale, default_kv * scale)
    torch.testing.assert_close(backend.actuator_kp[1], default_kp[1] * 0.5)
    torch.testing.assert_close(backend.actuator_kv[1], default_kv[1] * 0.5)
    reference = make_backend(backend.name, NUM_WORLDS, device="cpu")
    start(reference, NUM_WORLDS)
    for k in range(5):
        for b in (backend, reference):
            b.set_ctrl(pd_targets(b, k, NUM_WORLDS))
            b.step()
    same = [0, 2, 3]
    torch.testing.assert_close(backend.qpos[same], reference.qpos[same], atol=1e-6, rtol=0)
    assert (backend.qpos[1] - reference.qpos[1]).abs().max() > 1e-3
    backend.set_actuator_gains(default_kp, default_kv)


def test_mjwarp_overflow_is_counted_and_raised() -> None:
    tight = make_backend("mjwarp", 2, device="cpu", config=SimConfig(nconmax=2, njmax=20))
    start(tight, 2)
    tight.set_ctrl(pd_targets(tight, 0, 2))
    tight.step()
    counts = tight.overflow_counts()
    assert counts["contacts"] > 0 and counts["constraints"] > 0
    with pytest.raises(SimCapacityError, match="nconmax"):
        tight.check_capacity()


def test_mujoco_overflow_is_counted_and_raised() -> None:
    spec = mujoco.MjSpec.from_file(str(G1_FLAT_SCENE))
    spec.memory = 60_000  # bytes of arena: too little for the constraints of a standing G1
    tight = make_backend("mujoco", 2, config=SimConfig(), model=spec.compile())
    start(tight, 2)
    tight.set_ctrl(pd_targets(tight, 0, 2))
    tight.step()
    assert tight.overflow_counts()["constraints"] > 0
    with pytest.raises(SimCapacityError):
        tight.check_capacity()


def test_default_capacity_holds_a_standing_robot(backend: SimBackend) -> None:
    start(backend, NUM_WORLDS)
    for k in range(10):
        backend.set_ctrl(pd_targets(backend, k, NUM_WORLDS))
        backend.step()
    backend.check_capacity()


@pytest.mark.gpu
def test_captured_step_replays_like_eager() -> None:
    """One control step recorded in a torch CUDA graph gives the eager trajectory.

    Contact and solver kernels accumulate with atomics, so two GPU runs differ in the last
    bits and falling robots amplify that; a short horizon keeps the comparison sharp.
    """
    eager = make_backend("mjwarp", 64, device="cuda")
    graphed = make_backend("mjwarp", 64, device="cuda")
    for b in (eager, graphed):
        qpos, qvel = initial_state(b, 64)
        b.reset_worlds(torch.ones(64, dtype=torch.bool, device="cuda"), qpos.cuda(), qvel.cuda())
        b.set_ctrl(pd_targets(b, 0, 64).cuda())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        graphed.step()  # warm-up: loads kernels outside the capture
    torch.cuda.current_stream().wait_stream(side)
    eager.step()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        graphed.step()
    # Capture records without running: the graphed world is still one step in.
    for k in range(1, 5):
        target = pd_targets(eager, k, 64).cuda()
        eager.set_ctrl(target)
        eager.step()
        graphed.ctrl.copy_(target)
        graph.replay()
    torch.cuda.synchronize()
    torch.testing.assert_close(graphed.qpos, eager.qpos, atol=1e-4, rtol=0)
    torch.testing.assert_close(graphed.sensordata, eager.sensordata, atol=1e-3, rtol=0)
    graphed.check_capacity()
