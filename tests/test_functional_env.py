"""reset/step of the functional env: auto-reset, terminal observations, reproducibility, no graph breaks."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from tensordict import TensorDict

from unilab.core.rng import advance, make_rng
from unilab.envs.runner import EnvRunner, NonFiniteActionError
from unilab.tasks.registry import make_functional_env, make_task


def rollout(env, seed: int, steps: int, action_seed: int = 0):
    gen = torch.Generator().manual_seed(action_seed)
    rng = make_rng(seed)
    state = env.reset(rng)
    out = []
    for _ in range(steps):
        rng = advance(rng)
        action = torch.rand(env.num_envs, env.action_dim, generator=gen) * 2 - 1
        state, transition = env.step(state, action, rng)
        out.append((state.clone(), transition.clone()))
    return out


@pytest.fixture(scope="module")
def short_env():
    """Episodes of 0.1 s = 5 control steps, so time-outs happen within a test."""
    return make_functional_env("g1_walk_flat", sim="mujoco", num_envs=3, episode_length_s=0.1)


def test_time_out_truncates_and_auto_resets(short_env) -> None:
    steps = rollout(short_env, seed=0, steps=6, action_seed=1)
    for k, (state, transition) in enumerate(steps, start=1):
        nxt = transition["next"]
        if k < 5:
            assert not nxt["truncated"].any()
        if k == 5:
            assert (nxt["truncated"] | nxt["terminated"]).all()
            assert torch.equal(transition["episode_length"], torch.full((3,), 5))
        done = nxt["done"]
        # Envs that ended continue from a fresh episode; the transition kept the terminal obs.
        assert torch.equal(state["env", "episode_step"][done], torch.zeros(int(done.sum()), dtype=torch.int64))
        assert torch.equal(state["obs", "policy"][~done], nxt["policy"][~done])
        if done.any():
            assert not torch.allclose(state["obs", "policy"][done], nxt["policy"][done])
            assert torch.equal(state["env", "action"][done], torch.zeros(int(done.sum()), 29))


def test_terminated_is_not_truncated(short_env) -> None:
    for _, transition in rollout(short_env, seed=1, steps=6, action_seed=2):
        nxt = transition["next"]
        assert not (nxt["terminated"] & nxt["truncated"]).any()
        assert torch.equal(nxt["done"], nxt["terminated"] | nxt["truncated"])


def test_same_seed_same_run_other_seed_other_run(short_env) -> None:
    a = rollout(short_env, seed=5, steps=4)
    b = rollout(short_env, seed=5, steps=4)
    c = rollout(short_env, seed=6, steps=4)
    for (sa, ta), (sb, tb) in zip(a, b, strict=True):
        assert torch.equal(sa["obs", "policy"], sb["obs", "policy"])
        assert torch.equal(ta["next", "reward"], tb["next", "reward"])
    assert not torch.equal(a[-1][0]["obs", "policy"], c[-1][0]["obs", "policy"])


def assert_same(a, b) -> None:
    """Every leaf of two TensorDicts equal, bit for bit."""
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key


def step_rng(rng: torch.Tensor, k: int) -> torch.Tensor:
    """The rng of step ``k`` of a run that started from ``rng``."""
    return advance(rng, k)


def actions(env, seed: int) -> torch.Tensor:
    return torch.rand(env.num_envs, env.action_dim, generator=torch.Generator().manual_seed(seed)) * 2 - 1


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(("mujoco", "g1_walk_flat"), id="mujoco"),
        pytest.param(("mjwarp", "g1_walk_flat"), id="mjwarp"),
        pytest.param(("mujoco", "g1_walk_flat_rand"), id="mujoco-randomised"),
        pytest.param(("mjwarp", "g1_walk_flat_rand"), id="mjwarp-randomised"),
    ],
)
def pure_env(request):
    """Episodes of 0.1 s, so auto-resets happen within a few steps; the randomised variant carries per-env
    friction, masses, centre of mass, motor strength and latency in its state, and pushes."""
    sim, task = request.param
    return make_functional_env(task, sim=sim, num_envs=3, episode_length_s=0.1)


def test_step_never_writes_its_input_state(pure_env) -> None:
    rng = make_rng(0)
    s0 = pure_env.reset(rng)
    saved = s0.clone()
    for k in range(1, 7):  # through an auto-reset
        s1, _ = pure_env.step(s0, actions(pure_env, k), step_rng(rng, k))
        assert_same(s0, saved)
        s0, saved = s1, s1.clone()


def test_step_depends_only_on_its_arguments(pure_env) -> None:
    """A restored snapshot steps to the same state, whatever the env did in between (another branch)."""
    rng = make_rng(1)
    state = pure_env.reset(rng)
    for k in range(1, 3):
        state, _ = pure_env.step(state, actions(pure_env, k), step_rng(rng, k))
    snapshot = state.clone()
    first = [pure_env.step(state, actions(pure_env, 10), step_rng(rng, 3))]
    branch = state
    for k in range(3, 9):  # another branch, with resets, in between
        branch, _ = pure_env.step(branch, actions(pure_env, 20 + k), step_rng(rng, k))
    again = pure_env.step(snapshot, actions(pure_env, 10), step_rng(rng, 3))
    assert_same(again[0], first[0][0])
    assert_same(again[1], first[0][1])
    assert not torch.equal(branch["sim", "qpos"], again[0]["sim", "qpos"])


def test_physics_state_holds_what_continuing_needs(pure_env) -> None:
    state = pure_env.reset(make_rng(2))
    state, _ = pure_env.step(state, actions(pure_env, 0), advance(make_rng(2)))
    physics = state["sim"]
    for name in ("qpos", "qvel", "act", "qacc_warmstart", "time", "actuator_kp", "actuator_kv"):
        assert name in physics, name
    assert physics["qacc_warmstart"].abs().sum() > 0 and (physics["time"] > 0).all()


def test_donating_step_computes_what_the_pure_step_does(pure_env) -> None:
    rng = make_rng(3)
    pure = donated = pure_env.reset(rng)
    donated = donated.clone()
    resets = 0
    for k in range(1, 13):  # two episodes of 5 steps and then some: resets included
        pure, t_pure = pure_env.step(pure, actions(pure_env, k), step_rng(rng, k))
        buffers = list(donated["sim"].values())
        donated, t_donated = pure_env.step_(donated, actions(pure_env, k), step_rng(rng, k))
        assert all(a is b for a, b in zip(buffers, donated["sim"].values(), strict=True)), "step_ keeps its buffers"
        assert_same(donated, pure)
        assert_same(t_donated, t_pure)
        resets += int(t_pure["next", "done"].sum())
    assert resets > 0


def test_reset_where_touches_only_masked_envs(pure_env) -> None:
    rng = make_rng(2)
    state = pure_env.reset(rng)
    for k in range(1, 3):
        state, _ = pure_env.step(state, actions(pure_env, k), step_rng(rng, k))
    before = state.clone()
    mask = torch.tensor([False, True, False])
    after = pure_env.reset_where(state, mask, make_rng(9))
    assert_same(state, before)  # the input is not written
    for key in after.keys(True, True):
        if after[key].dim() and after[key].shape[0] == 3:  # per-env entries
            assert torch.equal(after[key][~mask], before[key][~mask]), key
    for key in (("obs", "policy"), ("env", "episode_step"), ("env", "velocity"), ("sim", "qpos"), ("sim", "time")):
        assert not torch.equal(after[key][mask], before[key][mask]), key


def test_actions_are_clipped_to_the_spec(pure_env) -> None:
    rng = make_rng(4)
    state = pure_env.reset(rng)
    big = actions(pure_env, 1) * 1e6
    state_big, t_big = pure_env.step(state, big, advance(rng))
    state_clip, t_clip = pure_env.step(state, big.clamp(-1, 1), advance(rng))
    assert_same(state_big, state_clip)
    assert_same(t_big, t_clip)
    assert state_big["env", "action"].abs().max() <= 1.0


def test_wrong_action_and_mask_shapes_are_named(pure_env) -> None:
    state = pure_env.reset(make_rng(0))
    with pytest.raises(ValueError, match=r"action must have shape \(3, 29\), got \(3, 28\)"):
        pure_env.step(state, torch.zeros(3, 28), make_rng(1))
    with pytest.raises(ValueError, match=r"mask must have shape \(3,\), got \(2,\)"):
        pure_env.reset_where(state, torch.ones(2, dtype=torch.bool), make_rng(1))
    with pytest.raises(ValueError, match=r"mask must be a bool tensor, got torch\.float32"):
        pure_env.reset_where(state, torch.ones(3), make_rng(1))


def test_non_finite_action_rows_are_counted_and_zeroed(short_env) -> None:
    rng = make_rng(0)
    state = short_env.reset(rng)
    action = torch.zeros(3, 29)
    action[2, 5] = float("nan")
    state, transition = short_env.step(state, action, advance(rng))
    assert transition["action_nonfinite"].tolist() == [False, False, True]
    assert int(state["task", "nonfinite_actions"]) == 1
    assert torch.isfinite(state["sim", "qpos"]).all()
    assert torch.equal(state["env", "action"][2], torch.zeros(29))


def test_unknown_task_and_override_are_named() -> None:
    with pytest.raises(ValueError, match=r"unknown task 'g1_run'.*g1_walk_flat"):
        make_task("g1_run")
    with pytest.raises(ValueError, match=r"unknown override\(s\) \['episode_len'\]"):
        make_task("g1_walk_flat", episode_len=3)


@pytest.mark.parametrize(
    ("sim", "task"),
    [
        ("mujoco", "g1_walk_flat"),
        ("mjwarp", "g1_walk_flat"),
        ("mjwarp", "g1_walk_flat_rand"),
        ("mujoco", "go1_walk_rough"),
    ],
)
def test_step_traces_fullgraph_with_physics_as_an_opaque_op(sim: str, task: str) -> None:
    """torch.compile(fullgraph=True) fails on any graph break, the CPU-visible form of a host sync.

    ``aot_eager`` runs Dynamo and AOTAutograd (functionalization of the physics ops'
    declared mutations) without Inductor's C++ codegen, which takes minutes on 2 cores. The randomised
    variant adds per-world model parameters to the op and per-substep targets (latency); the Go1's rough walk, the
    terms that read the terrain's height map.
    """
    env = make_functional_env(task, sim=sim, num_envs=2)
    action = torch.rand(2, env.action_dim, generator=torch.Generator().manual_seed(0)) * 2 - 1
    rng = make_rng(0)
    compiled = torch.compile(env.step, fullgraph=True, backend="aot_eager")
    state_c, trans_c = compiled(env.reset(rng), action, advance(rng))
    got = (state_c["sim", "qpos"].clone(), state_c["obs", "policy"].clone(), trans_c["next", "reward"].clone())
    state_e, trans_e = env.step(env.reset(rng), action, advance(rng))
    torch.testing.assert_close(got[0], state_e["sim", "qpos"])
    torch.testing.assert_close(got[1], state_e["obs", "policy"])
    torch.testing.assert_close(got[2], trans_e["next", "reward"])


def test_compiled_runner_traces_its_first_step_in_a_fresh_process() -> None:
    """A runner compiled from its first step must trace: tensordict resolves some implementations by an import on
    first use, which dynamo refuses. A fresh process, because one eager clone anywhere in the session would make
    this pass vacuously; ``aot_eager`` keeps it quick (tracing is what is checked, not code generation)."""
    code = (
        "import functools, torch\n"
        "torch.compile = functools.partial(torch.compile, backend='aot_eager')\n"
        "from unilab.envs.runner import EnvRunner\n"
        "from unilab.tasks.registry import make_functional_env\n"
        "env = make_functional_env('g1_walk_flat', sim='mujoco', num_envs=2)\n"
        "runner = EnvRunner(env, lambda obs: torch.tanh(obs['policy'][:, :29]), compile=True, capture=False)\n"
        "assert runner.step()['action'].shape == (2, 29)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=600)


def test_the_compiled_runner_keeps_the_state_the_pure_step_returns() -> None:
    """Compiled by Inductor, the runner's in-place step leaves the state ``env.step`` returns, every entry: the step
    moves the old action tensor to ``prev_action`` while overwriting ``action``, which a compiled update got wrong."""
    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=3)
    weight = torch.randn(env.obs_dims["policy"], env.action_dim, generator=torch.Generator().manual_seed(0)) * 0.1

    def policy(obs):
        return torch.tanh(obs["policy"] @ weight)

    runner = EnvRunner(env, policy, seed=3, compile=True, capture=False)
    for _ in range(2):
        before, rng = runner.state.clone(), advance(runner.rng)
        expected, _ = env.step(before, policy(before["obs"]), rng)
        runner.step()
        for key in expected.keys(True, True):
            torch.testing.assert_close(runner.state[key], expected[key], msg=str(key))


@pytest.mark.parametrize(("sim", "task"), [("mjwarp", "g1_walk_flat_rand"), ("mujoco", "go1_walk_rough")])
def test_the_compiled_runner_steps_as_the_pure_step_with_events_and_terrain(sim: str, task: str) -> None:
    """The runner's compiled step over the state's entries traces whole and leaves the state ``env.step`` returns,
    every entry, on the tasks whose steps do the most: interval pushes, a latency and per-world model parameters (the
    randomised walk), the terrain's terms and curriculum (the Go1's rough walk). ``aot_eager``: tracing and
    functionalization are what is checked; Inductor's code generation takes minutes on 2 cores."""
    env = make_functional_env(task, sim=sim, num_envs=3)
    weight = torch.randn(env.obs_dims["policy"], env.action_dim, generator=torch.Generator().manual_seed(0)) * 0.5

    def policy(obs):
        return torch.tanh(obs["policy"] @ weight)

    runner = EnvRunner(env, policy, seed=5)
    runner._advance_fn = torch.compile(runner._advance, fullgraph=True, backend="aot_eager")
    for _ in range(3):
        before, rng = runner.state.clone(), advance(runner.rng)
        expected, transition = env.step(before, policy(before["obs"]), rng)
        got = runner.step()
        torch.testing.assert_close(got["next", "reward"], transition["next", "reward"])
        for key in expected.keys(True, True):
            torch.testing.assert_close(runner.state[key], expected[key], msg=str(key))


def test_runner_reset_rewinds_to_the_seeded_start(short_env) -> None:
    def policy(obs):
        return torch.tanh(obs["policy"][:, :29])

    fresh = EnvRunner(short_env, policy=policy, seed=4)
    expected = [fresh.step()["next", "policy"].clone() for _ in range(3)]
    runner = EnvRunner(short_env, policy=policy, seed=9)
    for _ in range(5):  # somewhere else entirely, episodes ended and restarted
        runner.step()
    runner.reset(4)
    for want in expected:
        torch.testing.assert_close(runner.step()["next", "policy"], want)


def test_the_runner_s_health_counts_the_steps_whose_solver_stopped_at_its_limit(short_env, monkeypatch) -> None:
    runner = EnvRunner(short_env, policy=lambda obs: torch.zeros(3, 29), seed=0)
    assert int(runner.health()["solver_limit_steps"]) == 0  # C MuJoCo keeps no such count
    monkeypatch.setattr(short_env.sim, "solver_limit_tensor", lambda: torch.tensor(7))
    assert int(runner.health()["solver_limit_steps"]) == 7
    runner.check()  # a note on accuracy, not an error


def test_runner_steps_in_place_and_reports_bad_actions(short_env) -> None:
    runner = EnvRunner(short_env, policy=lambda obs: torch.tanh(obs["policy"][:, :29]), seed=0)
    first_obs = runner.state["obs", "policy"].clone()
    transition = runner.step()
    assert transition["action"].shape == (3, 29)
    assert not torch.equal(runner.state["obs", "policy"], first_obs)
    assert torch.equal(
        runner.state["obs", "policy"][~transition["next", "done"]],
        transition["next", "policy"][~transition["next", "done"]],
    )
    runner.check()
    broken = EnvRunner(short_env, policy=lambda obs: torch.full((3, 29), float("nan")), seed=0)
    broken.step()
    taken = broken.health()
    broken.step()  # the counters taken before it are copies: they do not move on
    assert int(taken.pop("contacts_peak")) > 0 and int(taken.pop("constraint_rows_peak")) > 0
    assert {name: int(count) for name, count in taken.items()} == {
        "nonfinite_actions": 3,
        "diverged_envs": 0,
        "contact_overflows": 0,
        "constraint_overflows": 0,
        "height_field_overflows": 0,
        "solver_limit_steps": 0,
    }
    with pytest.raises(NonFiniteActionError, match="6 env-step rows"):
        broken.check()
    with pytest.raises(NonFiniteActionError, match="3 env-step rows"):
        runner.check({name: int(count) for name, count in taken.items()})  # the counts handed over, not its own


def _envs_apart(a: tuple[TensorDict, TensorDict], b: tuple[TensorDict, TensorDict]) -> torch.Tensor:
    """Envs whose step results differ: reward past 1e-4 or the next actor observation past 1e-3."""
    reward = (a[1]["next", "reward"] - b[1]["next", "reward"]).abs() > 1e-4
    return reward | ((a[0]["obs", "policy"] - b[0]["obs", "policy"]).abs() > 1e-3).any(-1)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("task", "knobs"),
    [
        ("g1_walk_flat", {}),
        ("g1_walk_rough", {}),
        ("g1_walk_rough", {"layout": "solid"}),
        ("g1_walk_rough", {"stumble": -1.0}),
        ("go1_walk_rough", {}),
        ("go1_walk_rough", {"falls": "knees"}),
        ("go1_walk_rough", {"stumble": -1.0}),
        ("g1_motion_tracking", {}),
    ],
    ids=[
        "flat",
        "rough",
        "rough-solid",
        "rough-stumble",
        "go1-rough",
        "go1-rough-knees",
        "go1-rough-stumble",
        "tracking",
    ],
)
def test_captured_runner_matches_eager_on_cuda(task: str, knobs: dict) -> None:
    """Captured and eager steps agree from the same states (the pure core makes that possible).

    GPU contact kernels sum with atomics, so two eager steps from one state may already differ: on the plane by
    ~1e-7, on height fields by whole contacts (measured on the H200: 1 to 8 of 256 envs per step, rewards up to 0.7
    apart). So on the plane every env must agree; on terrain the captured step may part from the eager one in no more
    envs than a second eager step does, plus two; a broken capture parts in all of them. The solid layout's slopes
    (boxes and a convex mesh) take other collision kernels than the height fields do: they are captured too; the
    Go1's rough walk reads the height map in more of its terms (the ground's plane, the feet's clearance; with
    ``falls=knees`` the knees' clearance) and, by default, a contact sensor's count, which MuJoCo Warp fills from the
    collision stage's matches; with ``stumble`` each foot's net ground force, reduced from those matches too (on the
    G1 a sensor of each sole's body, eleven geoms). The
    tracking task reads its reference clip in its terms, on the plane."""
    env = make_functional_env(task, sim="mjwarp", num_envs=64, device="cuda", **knobs)
    seeded = torch.Generator("cuda").manual_seed(0)
    weight = torch.randn(env.obs_dims["policy"], env.action_dim, device="cuda", generator=seeded) * 0.1

    def policy(obs):
        return torch.tanh(obs["policy"] @ weight)

    captured = EnvRunner(env, policy, seed=3, capture=True, warmup_steps=3)
    on_plane = task in ("g1_walk_flat", "g1_motion_tracking")
    for _ in range(4):
        state, rng = captured.state.clone(), advance(captured.rng)
        expected = env.step(state, policy(state["obs"]), rng)
        again = env.step(state, policy(state["obs"]), rng)
        transition = captured.step()
        torch.cuda.synchronize()
        eager_apart = int(_envs_apart(expected, again).sum())
        captured_apart = int(_envs_apart(expected, (captured.state, transition)).sum())
        bound = 0 if on_plane else eager_apart + 2
        assert captured_apart <= bound, (
            f"captured parts from eager in {captured_apart} envs, eager twice in {eager_apart}"
        )
    captured.check()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_captured_compiled_runner_keeps_the_previous_action_on_cuda() -> None:
    """Training's runner (compiled, then captured) stores as ``prev_action`` the action of the step before, not the
    step's own. Compared exactly, since it is a copy: the other entries differ from an eager step by the float
    order of compiled kernels (checked within tolerance by ``test_captured_runner_matches_eager_on_cuda``)."""
    env = make_functional_env("g1_walk_flat", sim="mjwarp", num_envs=64, device="cuda")
    weight = torch.randn(env.obs_dims["policy"], env.action_dim, device="cuda", generator=torch.Generator("cuda")) * 0.1

    def policy(obs):
        return torch.tanh(obs["policy"] @ weight)

    runner = EnvRunner(env, policy, seed=3, compile=True, capture=True)
    for _ in range(3):
        previous = runner.state["env", "action"].clone()
        runner.step()
        torch.cuda.synchronize()
        assert torch.equal(runner.state["env", "prev_action"], previous)
        assert not torch.equal(runner.state["env", "action"], previous)


def assert_laid_out(spec, state) -> None:
    """Exactly the keys of the spec, each with its shape and dtype."""
    assert set(state.keys(True, True)) == set(spec.keys(True, True))
    for key in spec.keys(True, True):
        assert state[key].shape == spec[key].shape and state[key].dtype == spec[key].dtype, key


@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking", "g1_walk_flat_rand", "g1_walk_rough"])
def test_every_state_has_the_declared_layout(task: str) -> None:
    env = make_functional_env(task, sim="mujoco", num_envs=3, episode_length_s=0.1)
    spec = env.state_spec()
    assert spec["sim", "qacc_warmstart"].shape == (3, 35) and spec["env", "episode_step"].dtype == torch.int64
    assert spec["obs", "policy"].shape == (3, env.obs_dims["policy"])
    rng = make_rng(0)
    state = env.reset(rng)
    assert_laid_out(spec, state)
    for k in range(1, 7):  # through an auto-reset
        state, _ = env.step(state, actions(env, k), step_rng(rng, k))
        assert_laid_out(spec, state)
    assert_laid_out(spec, env.reset_where(state, torch.tensor([True, False, True]), rng))


@pytest.mark.parametrize("blow_up", ["nan_position", "absurd_speed"])
def test_diverged_envs_are_detected_reset_and_counted(pure_env, blow_up: str) -> None:
    rng = make_rng(5)
    state = pure_env.reset(rng)
    state, _ = pure_env.step(state, actions(pure_env, 1), step_rng(rng, 1))
    broken = state.clone()
    if blow_up == "nan_position":
        broken["sim", "qpos"][1, 9] = float("nan")
    else:
        broken["sim", "qvel"][1, 0] = 1e6
    clean_next, clean_t = pure_env.step(state, actions(pure_env, 2), step_rng(rng, 2))
    nxt, t = pure_env.step(broken, actions(pure_env, 2), step_rng(rng, 2))
    assert t["diverged"].tolist() == [False, True, False]
    assert t["next", "terminated"][1] and not t["next", "truncated"][1]
    assert t["next", "reward"][1] == 0 and not t["next", "policy"][1].any()
    assert int(nxt["task", "diverged_envs"]) == 1
    assert torch.isfinite(nxt["sim", "qpos"]).all() and int(nxt["env", "episode_step"][1]) == 0  # reset
    for key in (("sim", "qpos"), ("obs", "policy")):  # the other envs went on as if nothing happened
        assert torch.equal(nxt[key][[0, 2]], clean_next[key][[0, 2]]), key
    assert torch.equal(t["next", "reward"][[0, 2]], clean_t["next", "reward"][[0, 2]])
    assert not clean_t["diverged"].any() and int(clean_next["task", "diverged_envs"]) == 0


@pytest.mark.gpu
def test_divergence_inside_the_captured_step_is_reset_and_counted_on_cuda() -> None:
    env = make_functional_env("g1_walk_flat", sim="mjwarp", num_envs=64, device="cuda")
    runner = EnvRunner(env, lambda obs: torch.zeros(64, env.action_dim, device="cuda"), seed=1, capture=True)
    runner.step()
    broken = [3, 17, 40]
    with torch.no_grad():  # between replays, as a blown-up solve would leave them
        runner.state["sim", "qpos"][3, 9] = float("nan")
        runner.state["sim", "qvel"][17, 0] = 1e6
        runner.state["sim", "qvel"][40, 12] = float("inf")
    transition = runner.step()
    torch.cuda.synchronize()
    assert transition["diverged"].nonzero().flatten().tolist() == broken
    assert transition["next", "terminated"][broken].all()
    assert torch.isfinite(runner.state["sim", "qpos"]).all() and torch.isfinite(runner.state["sim", "qvel"]).all()
    assert (runner.state["env", "episode_step"][broken] == 0).all()
    for _ in range(10):  # the graph goes on replaying; nothing else diverges
        runner.step()
    assert int(runner.health()["diverged_envs"]) == 3
    runner.check()


def test_a_term_the_actor_and_the_critic_share_is_computed_once_per_call() -> None:
    """The critic's copy of an actor term (noise off) shares its parameters, on the device too, so the manager
    computes it once; a term whose parameters differ is computed on its own. The noise is still the actor's alone."""
    from unilab.managers.managers import ObservationManager
    from unilab.managers.terms import ObsTerm

    env = make_functional_env("g1_walk_rough", sim="mujoco", num_envs=2)
    actor, critic = (env.observations.groups[group]["height_scan"] for group in ("policy", "critic"))
    assert actor.params["ground"] is critic.params["ground"] and actor.noise > 0 and critic.noise == 0

    calls: list[float] = []

    def counted(state: TensorDict, ctx: object, offset: float) -> torch.Tensor:
        calls.append(offset)
        return state["x"] + offset

    shared = ObsTerm(counted, {"offset": 1.0}, noise=0.5)
    groups = {
        "policy": {"a": shared},
        "critic": {"a": ObsTerm(counted, shared.params), "b": ObsTerm(counted, {"offset": 2.0})},
    }
    manager = ObservationManager(groups, {"policy": {"a": 3}, "critic": {"a": 3, "b": 3}}, torch.device("cpu"))
    state = TensorDict({"x": torch.zeros(2, 3)}, batch_size=[2])
    out = manager.compute(state, None, make_rng(0), noise=True)
    assert calls == [1.0, 2.0]
    assert torch.equal(out["critic"], torch.cat([torch.ones(2, 3), torch.full((2, 3), 2.0)], dim=-1))
    assert not torch.equal(out["policy"], out["critic"][:, :3])  # the actor's noise, not the critic's
