"""g1_motion_tracking against its definition (docs/tasks.md), on the C MuJoCo backend."""

from __future__ import annotations

import pytest
import torch
from torchrl.envs.utils import check_env_specs

from unilab import make_env
from unilab.context import apply_updates
from unilab.core.rng import advance, make_rng
from unilab.motion import DEFAULT_MOTION, MotionFileError
from unilab.tasks.g1_motion_tracking import terms as tracking
from unilab.tasks.registry import make_functional_env, make_task

N = 4
TRACKING_TERMS = {
    "motion_global_root_pos": 1.0,
    "motion_global_root_ori": 0.5,
    "motion_body_pos": 2.0,
    "motion_body_ori": 1.0,
    "motion_body_lin_vel": 1.0,
    "motion_body_ang_vel": 1.0,
}


@pytest.fixture(scope="module")
def env():
    return make_functional_env("g1_motion_tracking", sim="mujoco", num_envs=N, obs_noise=False, reset_noise_scale=0.0)


def _motion(env):
    return env.task.events["reset_to_reference"].params["motion"]


def _place_on_reference(env, state, frames: torch.Tensor):
    """Robot exactly on the reference at ``frames``, pointer there, no action history."""
    motion = _motion(env)
    ref = tracking.reference_root_state(motion, frames, torch.zeros(N, 41))
    state = _teleport(env, state, ref["qpos"], ref["qvel"])
    pointer = torch.stack((frames, tracking.clip_last_frame(motion, frames)), dim=-1).float()
    zeros = torch.zeros(N, 29)
    return apply_updates(state, {("env", "motion"): pointer, ("env", "action"): zeros, ("env", "prev_action"): zeros})


def _teleport(env, state, qpos: torch.Tensor, qvel: torch.Tensor):
    """``state`` with every robot moved to ``qpos``/``qvel`` (physics of a copy, so ``state`` is kept)."""
    physics = {name: value.clone() for name, value in state["sim"].items()}
    env.sim.reset_(physics, torch.ones(N, dtype=torch.bool), qpos, qvel)
    return apply_updates(state, {("sim", name): value for name, value in physics.items()})


def _action_to_reach(env, frames: torch.Tensor) -> torch.Tensor:
    """The action whose PD target is the reference joint position at ``frames``."""
    return (_motion(env).joint_pos[frames] - env.ctx.default_joint_pos) / env.task.action.params["scale"]


def test_observation_widths(env) -> None:
    assert env.obs_dims == {"policy": 160, "critic": 289}


def test_torchrl_specs() -> None:
    check_env_specs(make_env("g1_motion_tracking", sim="mujoco", num_envs=2))


def test_robot_on_the_reference_scores_the_maximum(env) -> None:
    state = env.reset(make_rng(0))
    state = _place_on_reference(env, state, torch.tensor([0, 120, 250, 400]))
    _, components = env.rewards.compute(state, env.ctx)
    for name, weight in TRACKING_TERMS.items():
        torch.testing.assert_close(components[name], torch.full((N,), weight * env.ctx.dt), atol=2e-4, rtol=0)
    for name in ("action_rate_l2", "joint_limit", "undesired_contacts"):
        assert torch.equal(components[name], torch.zeros(N))
    terminated, truncated = env.terminations.compute(state, env.ctx)
    assert not terminated.any() and not truncated.any()
    obs = env.observations.compute(state, env.ctx, make_rng(0), noise=False)["policy"]
    torch.testing.assert_close(obs[:, 58:61], torch.zeros(N, 3), atol=1e-5, rtol=0)  # anchor position error
    identity_6d = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.0, 0.0]).expand(N, 6)
    torch.testing.assert_close(obs[:, 61:67], identity_6d, atol=1e-5, rtol=0)


def test_step_advances_the_reference_before_obs(env) -> None:
    rng = make_rng(1)
    frames = torch.tensor([10, 100, 200, 300])
    state = _place_on_reference(env, env.reset(rng), frames)
    state, transition = env.step(state, _action_to_reach(env, frames + 1), advance(rng))
    assert not transition["next", "done"].any()
    assert torch.equal(state["env", "motion"][:, 0], (frames + 1).float())
    motion = _motion(env)
    expected = torch.cat((motion.joint_pos[frames + 1], motion.joint_vel[frames + 1]), dim=-1)
    torch.testing.assert_close(transition["next", "policy"][:, :58], expected)
    torch.testing.assert_close(state["obs", "policy"][:, :58], expected)
    # following the reference closely keeps the tracking reward near its maximum 6.5 * dt
    assert (transition["next", "reward"] > 0.8 * 6.5 * env.ctx.dt).all()


def test_clip_end_truncates_without_terminating(env) -> None:
    rng = make_rng(2)
    last = _motion(env).num_frames - 1
    frames = torch.tensor([last - 1, 50, last - 1, 60])
    state = _place_on_reference(env, env.reset(rng), frames)
    _, transition = env.step(state, _action_to_reach(env, frames + 1), advance(rng))
    assert transition["next", "truncated"].tolist() == [True, False, True, False]
    assert not transition["next", "terminated"].any()


def test_failure_terminates_and_feeds_the_sampling_ema(env) -> None:
    rng = make_rng(3)
    state = _place_on_reference(env, env.reset(rng), torch.tensor([25, 75, 260, 480]))
    qpos = state["sim", "qpos"].clone()
    qpos[1, 2] -= 0.6  # env 1: torso far below the reference
    state = _teleport(env, state, qpos, state["sim", "qvel"])
    terminated, _ = env.terminations.compute(state, env.ctx)
    assert terminated.tolist() == [False, True, False, False]
    update = tracking.failure_ema(
        state, env.ctx, terminated, terminated, **env.task.curricula["adaptive_sampling"].params
    )
    ema = update[("task", tracking.FAIL_EMA_KEY)]
    expected = torch.zeros_like(ema)
    expected[75 * ema.shape[0] // _motion(env).num_frames] = 0.001
    torch.testing.assert_close(ema, expected)


def test_failure_ema_ignores_steps_without_failures(env) -> None:
    state = _place_on_reference(env, env.reset(make_rng(4)), torch.tensor([1, 2, 3, 4]))
    ema = torch.linspace(0.0, 1.0, state["task", tracking.FAIL_EMA_KEY].shape[0])
    state = apply_updates(state, {("task", tracking.FAIL_EMA_KEY): ema})
    done = torch.ones(N, dtype=torch.bool)  # time-outs do not count
    update = tracking.failure_ema(state, env.ctx, done, ~done, **env.task.curricula["adaptive_sampling"].params)
    assert torch.equal(update[("task", tracking.FAIL_EMA_KEY)], ema)


def test_adaptive_sampling_follows_the_failure_ema() -> None:
    num_frames, bins = 501, 11
    ema = torch.zeros(bins)
    ema[7] = 1.0
    u = torch.rand(10_000, 2, generator=torch.Generator().manual_seed(0))
    frames = tracking.sample_frames(ema, u, num_frames, uniform_ratio=0.1)
    in_bin = frames * bins // num_frames == 7
    # p(bin 7) = (1 + 0.1/11) / 1.1 = 0.917
    assert in_bin.float().mean().item() == pytest.approx(0.917, abs=0.02)
    assert frames.min() >= 0 and frames.max() <= num_frames - 1
    uniform = tracking.sample_frames(torch.zeros(bins), u, num_frames, uniform_ratio=0.1)
    counts = torch.bincount(uniform * bins // num_frames, minlength=bins).float() / len(uniform)
    torch.testing.assert_close(counts, torch.full((bins,), 1 / bins), atol=0.02, rtol=0)


def test_reset_perturbations_stay_in_range() -> None:
    env = make_functional_env("g1_motion_tracking", sim="mujoco", num_envs=N, obs_noise=False)
    state = env.reset(make_rng(5))
    motion = _motion(env)
    frames = state["env", "motion"][:, 0].long()
    assert torch.equal(state["env", "motion"][:, 1], torch.full((N,), motion.num_frames - 1.0))
    delta = state["sim", "qpos"][:, :3] - motion.body_pos_w[frames, 1]
    assert (delta.abs() <= torch.tensor([0.05, 0.05, 0.01]) + 1e-5).all()
    joints = state["sim", "qpos"][:, 7:]
    assert ((joints - motion.joint_pos[frames]).abs() <= 0.1 + 1e-5).all()
    assert (joints >= env.ctx.joint_lower).all() and (joints <= env.ctx.joint_upper).all()
    torch.testing.assert_close(state["sim", "qvel"][:, 6:], motion.joint_vel[frames])


def test_motion_file_argument() -> None:
    env = make_env("g1_motion_tracking", sim="mujoco", num_envs=2, motion_file=DEFAULT_MOTION)
    assert tuple(env.batch_size) == (2,)
    assert env.reset()["policy"].shape == (2, 160)
    with pytest.raises((MotionFileError, FileNotFoundError, OSError)):
        make_task("g1_motion_tracking", motion_file="/nonexistent/clip.npz")
    with pytest.raises(ValueError, match=r"unknown override\(s\) \['motion_fle'\]"):
        make_task("g1_motion_tracking", motion_fle=DEFAULT_MOTION)


@pytest.mark.slow
def test_step_traces_fullgraph() -> None:
    """No host sync in any tracking term: a graph break would fail ``fullgraph=True``."""
    env = make_functional_env("g1_motion_tracking", sim="mujoco", num_envs=2)
    action = torch.rand(2, 29, generator=torch.Generator().manual_seed(0)) * 2 - 1
    rng = make_rng(0)
    compiled = torch.compile(env.step, fullgraph=True, backend="aot_eager")
    state_c, trans_c = compiled(env.reset(rng), action, advance(rng))
    got = (state_c["obs", "critic"].clone(), trans_c["next", "reward"].clone())
    state_e, trans_e = env.step(env.reset(rng), action, advance(rng))
    torch.testing.assert_close(got[0], state_e["obs", "critic"])
    torch.testing.assert_close(got[1], trans_e["next", "reward"])
