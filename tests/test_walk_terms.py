"""Term functions of g1_walk_flat against its definition (docs/tasks.md), on hand-made states."""

from __future__ import annotations

import math

import pytest
import torch

from unilab.core.rng import make_rng
from unilab.mdp import commands, curricula, rewards
from unilab.tasks.registry import make_functional_env


@pytest.fixture(scope="module")
def env():
    return make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4, obs_noise=False)


def test_observation_widths_and_mirror_maps(env) -> None:
    assert env.obs_dims == {"policy": 100, "critic": 103}
    maps = env.mirrors()
    assert [len(maps[k].index) for k in ("policy", "critic", "action")] == [100, 103, 29]
    x = torch.randn(5, 100)
    idx, sign = torch.tensor(maps["policy"].index), torch.tensor(maps["policy"].sign)
    mirrored = x[:, idx] * sign
    torch.testing.assert_close(mirrored[:, idx] * sign, x)
    # gyro x and z flip, y stays; command vy and wz flip; the two gait phases swap
    assert maps["policy"].sign[:3] == (-1.0, 1.0, -1.0)
    assert maps["policy"].sign[93:96] == (1.0, -1.0, -1.0)
    assert maps["policy"].index[96:100] == (97, 96, 99, 98)


def test_reset_state_matches_the_reset_rules(env) -> None:
    state = env.reset(make_rng(3))
    obs = state["obs", "policy"]
    torch.testing.assert_close(obs[:, 3:6], torch.tensor([0.0, 0.0, -1.0]).expand(4, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(obs[:, 6:35], torch.zeros(4, 29), atol=1e-6, rtol=0)  # joints at q0
    assert torch.equal(obs[:, 64:93], torch.zeros(4, 29))  # no action yet
    phase = state["env", "gait_phase"]
    torch.testing.assert_close(phase[:, 1] - phase[:, 0], torch.full((4,), math.pi))
    q = state["sim", "qpos"]
    assert (q[:, :2].abs() <= 0.5).all()
    torch.testing.assert_close(q[:, 2], torch.full((4,), 0.754), atol=1e-6, rtol=0)
    kp_scale = state["sim", "actuator_kp"] / env.ctx.default_kp
    kv_scale = state["sim", "actuator_kv"] / env.ctx.default_kv
    for scale in (kp_scale, kv_scale):  # one scalar per env, the same for every joint, within the range
        assert (scale >= 0.9 - 1e-6).all() and (scale <= 1.1 + 1e-6).all()
        torch.testing.assert_close(scale, scale[:, :1].expand_as(scale))
    assert not torch.equal(kp_scale[:, 0], kv_scale[:, 0])


def test_a_share_of_velocity_commands_walks_straight_and_the_rest_are_drawn_as_without_it(env) -> None:
    big = type(env.ctx)(**{**env.ctx.__dict__, "num_envs": 20_000})
    ranges = ((-0.6, 1.0), (-0.4, 0.4), (-0.8, 0.8))
    plain = commands.uniform_velocity(None, big, None, make_rng(1), *ranges, deadzone=0.2)
    half = commands.uniform_velocity(None, big, None, make_rng(1), *ranges, deadzone=0.2, straight=0.5)
    straight = half[:, 2] == 0
    assert straight.float().mean().item() == pytest.approx(0.5, abs=0.02)
    assert torch.equal(half[~straight], plain[~straight]) and torch.equal(half[:, :2], plain[:, :2])


def test_velocity_command_ranges_and_deadzone(env) -> None:
    ctx = env.ctx
    n = 20_000
    big = type(ctx)(**{**ctx.__dict__, "num_envs": n})
    cmd = commands.uniform_velocity(None, big, None, make_rng(1), (-0.6, 1.0), (-0.4, 0.4), (-0.8, 0.8), deadzone=0.2)
    zeroed = (cmd[:, :2] == 0).all(-1)
    # P(|v_xy| <= 0.2) = pi * 0.2^2 / (1.6 * 0.8) = 9.8 %
    assert zeroed.float().mean().item() == pytest.approx(0.098, abs=0.01)
    assert (cmd[~zeroed, :2].norm(dim=-1) > 0.2).all()
    assert cmd[:, 0].min() >= -0.6 and cmd[:, 0].max() <= 1.0
    assert cmd[:, 2].abs().max() <= 0.8 and (cmd[zeroed, 2] != 0).any()


def test_gait_clock_and_swing_height(env) -> None:
    phase = torch.tensor([[0.1, 6.2]])
    advanced = commands.gait_phase_advance(phase, env.ctx, frequency=1.5)
    torch.testing.assert_close(
        advanced, torch.tensor([[0.1 + 0.18850, 6.2 + 0.18850 - 2 * math.pi]]), atol=1e-4, rtol=0
    )
    h = rewards.swing_height_target(torch.tensor([math.pi, 0.0, math.pi / 2]), 0.09)
    torch.testing.assert_close(h, torch.tensor([0.0, 0.09, 0.045]), atol=1e-5, rtol=0)


def test_standing_still_on_zero_command_earns_tracking_and_alive(env) -> None:
    state = env.reset(make_rng(0))
    state.set(("env", "velocity"), torch.zeros(4, 3))
    state.set(("sim", "sensordata"), torch.zeros_like(state["sim", "sensordata"]))
    reward, terms = env.rewards.compute(state, env.ctx)
    dt = env.ctx.dt
    torch.testing.assert_close(terms["tracking_lin_vel"], torch.full((4,), 2.0 * dt))
    torch.testing.assert_close(terms["tracking_ang_vel"], torch.full((4,), 1.5 * dt))
    torch.testing.assert_close(terms["alive"], torch.full((4,), 10.0 * dt))
    assert torch.equal(terms["penalty_action_rate"], torch.zeros(4))
    assert (reward <= 0.37 + 1e-6).all()


def test_penalties_are_scaled_by_the_curriculum(env) -> None:
    state = env.reset(make_rng(0))
    state.set(("env", "action"), torch.ones(4, 29))
    _, half = env.rewards.compute(state, env.ctx)
    state.set(("task", "penalty_scale"), torch.tensor(1.0))
    _, full = env.rewards.compute(state, env.ctx)
    torch.testing.assert_close(full["penalty_action_rate"], 2.0 * half["penalty_action_rate"])
    torch.testing.assert_close(full["penalty_action_rate"], torch.full((4,), -4.0 * 29 * env.ctx.dt))
    torch.testing.assert_close(full["alive"], half["alive"])


def test_terminations(env) -> None:
    state = env.reset(make_rng(0))
    up = env.ctx.sensor_slices["torso_upvector"]
    sensordata = state["sim", "sensordata"].clone()
    for i, angle in enumerate((math.radians(60), math.radians(70), 0.0, 0.0)):
        sensordata[i, up] = torch.tensor([math.sin(angle), 0.0, math.cos(angle)])
    qpos = state["sim", "qpos"].clone()
    qpos[2, 2] = 0.25
    steps = torch.tensor([3, 3, 3, env.ctx.max_episode_steps])
    state.set(("sim", "sensordata"), sensordata)
    state.set(("sim", "qpos"), qpos)
    state.set(("env", "episode_step"), steps)
    terminated, truncated = env.terminations.compute(state, env.ctx)
    assert terminated.tolist() == [False, True, True, False]
    assert truncated.tolist() == [False, False, False, True]


def test_curriculum_moves_the_penalty_scale(env) -> None:
    state = env.reset(make_rng(0))
    params = env.task.curricula["penalty_scale"].params
    state.set(("task", "penalty_scale"), torch.tensor(0.8))
    state.set(("env", "episode_step"), torch.tensor([100, 900, 900, 900]))
    done = torch.tensor([True, True, False, False])
    out = curricula.penalty_scale_by_episode_length(state, env.ctx, done, done, **params)
    # w = 2 / 500; mean length of finished episodes (100 + 900) / 2 = 500
    avg = out[("task", "mean_episode_length")]
    torch.testing.assert_close(avg, torch.tensor(2 / 500 * 500.0))
    torch.testing.assert_close(out[("task", "penalty_scale")], torch.tensor(0.8 * 0.999))  # avg 2 < 150
    state.set(("task", "mean_episode_length"), torch.tensor(800.0))
    out = curricula.penalty_scale_by_episode_length(state, env.ctx, done, done, **params)
    torch.testing.assert_close(out[("task", "penalty_scale")], torch.tensor(0.8 * 1.001))
    none = torch.zeros(4, dtype=torch.bool)
    nothing = curricula.penalty_scale_by_episode_length(state, env.ctx, none, none, **params)
    torch.testing.assert_close(nothing[("task", "penalty_scale")], torch.tensor(0.8))
    torch.testing.assert_close(nothing[("task", "mean_episode_length")], torch.tensor(800.0))


def test_the_penalty_curriculum_counts_an_episode_cut_short_without_a_failure_as_a_whole_one(env) -> None:
    state = env.reset(make_rng(0))
    params = env.task.curricula["penalty_scale"].params
    state.set(("env", "episode_step"), torch.tensor([100, 300, 900, 900]))
    done = torch.tensor([True, True, False, False])
    failed = torch.tensor([True, False, False, False])  # env 1 was truncated at step 300
    out = curricula.penalty_scale_by_episode_length(state, env.ctx, done, failed, **params)
    whole = (100 + env.ctx.max_episode_steps) / 2
    torch.testing.assert_close(out[("task", "mean_episode_length")], torch.tensor(2 / 500 * whole))
