"""make_env returns a TorchRL EnvBase that TorchRL's own tools accept."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs import RewardSum, StepCounter, TransformedEnv
from torchrl.envs.utils import check_env_specs

from unilab import list_tasks, make_env


@pytest.fixture(scope="module", params=["mujoco", "mjwarp"])
def env(request: pytest.FixtureRequest):
    return make_env("g1_walk_flat", sim=request.param, num_envs=3, episode_length_s=0.1, seed=1)


def test_list_tasks() -> None:
    assert "g1_walk_flat" in list_tasks()


def test_unknown_task_lists_known_ones() -> None:
    with pytest.raises(ValueError, match="known tasks: g1_motion_tracking, g1_walk_flat"):
        make_env("walk", sim="mujoco", num_envs=1)


def test_check_env_specs(env) -> None:
    check_env_specs(env)
    assert env.observation_spec["policy"].shape == (3, 100)
    assert env.observation_spec["critic"].shape == (3, 103)
    assert env.action_spec.shape == (3, 29)


def test_rollout_keeps_terminal_observation_under_next(env) -> None:
    env.set_seed(0)
    td = env.rollout(7, break_when_any_done=False)
    assert td.shape == (3, 7)
    done = td["next", "done"].squeeze(-1)
    assert done[:, 4].all()  # 5-step episodes time out at the fifth step
    assert td["next", "truncated"][:, 4].all() or td["next", "terminated"][:, 4].any()
    # Where an episode ended, the next step starts from a reset observation, not the terminal one.
    for t in range(6):
        same = torch.isclose(td["next", "policy"][:, t], td["policy"][:, t + 1]).all(-1)
        assert torch.equal(same, ~done[:, t])


def test_partial_reset_honours_the_mask(env) -> None:
    env.rand_step(env.reset())
    before = env.state["obs", "policy"].clone()
    assert env.state["env", "episode_step"].tolist() == [1, 1, 1]
    reset_td = TensorDict({"_reset": torch.tensor([[True], [False], [False]])}, batch_size=[3])
    out = env.reset(reset_td)
    assert env.state["env", "episode_step"].tolist() == [0, 1, 1]
    assert torch.equal(env.state["obs", "policy"][1:], before[1:])
    assert not torch.equal(env.state["obs", "policy"][0], before[0])
    assert torch.equal(out["policy"][0], env.state["obs", "policy"][0])


def test_transformed_env_composes(env) -> None:
    tenv = TransformedEnv(env, StepCounter())
    tenv.append_transform(RewardSum())
    td = tenv.rollout(3, break_when_any_done=False)
    assert td["next", "step_count"][:, -1].squeeze(-1).tolist() == [3, 3, 3]
    assert td["next", "episode_reward"].shape == (3, 3, 1)


def test_non_finite_action_names_the_rows(env) -> None:
    td = env.reset()
    action = torch.zeros(3, 29)
    action[1, 0] = float("inf")
    td.set("action", action)
    with pytest.raises(ValueError, match=r"non-finite action in env rows \[1\]"):
        env.step(td)


def test_seeding_reproduces_a_rollout(env) -> None:
    env.set_seed(4)
    torch.manual_seed(0)
    a = env.rollout(3, break_when_any_done=False)
    env.set_seed(4)
    torch.manual_seed(0)
    b = env.rollout(3, break_when_any_done=False)
    torch.testing.assert_close(a["next", "policy"], b["next", "policy"])


def _policy(td):
    """A deterministic policy, so rollouts from one snapshot differ only if the env does."""
    return td.set("action", torch.tanh(td["policy"][:, :29]))


def test_snapshot_restore_replays_and_branches_are_independent(env) -> None:
    env.reset()
    env.rollout(3, _policy, break_when_any_done=False)
    snapshot = env.get_state()
    first = env.rollout(8, _policy, break_when_any_done=False, auto_reset=False, tensordict=env.set_state(snapshot))
    assert first["next", "done"].any(), "the rollout crosses an auto-reset"
    other = env.get_state()
    kept = other.clone()
    again = env.rollout(8, _policy, break_when_any_done=False, auto_reset=False, tensordict=env.set_state(snapshot))
    for key in ("policy", ("next", "policy"), ("next", "reward"), ("next", "done")):
        assert torch.equal(again[key], first[key]), key
    assert torch.equal(env.state["sim", "qpos"], other["core", "sim", "qpos"])  # the replay ends where it did
    # A branch with other actions goes elsewhere, and writes nothing of the branch it left.
    flipped = env.rollout(
        8,
        lambda td: _policy(td).set("action", -td["action"]),
        break_when_any_done=False,
        auto_reset=False,
        tensordict=env.set_state(snapshot),
    )
    assert not torch.equal(flipped["next", "policy"], first["next", "policy"])
    assert (other == kept).all()


def test_set_state_refuses_what_is_not_a_snapshot(env) -> None:
    env.reset()
    with pytest.raises(ValueError, match=r"not an env snapshot: it has no \['rng', 'pending'\]"):
        env.set_state(TensorDict({"core": env.state}, batch_size=[]))


def test_impossible_env_count_and_missing_cuda_are_named() -> None:
    with pytest.raises(ValueError, match="num_envs must be >= 1, got 0"):
        make_env("g1_walk_flat", sim="mujoco", num_envs=0)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device cuda: CUDA is not available"):
            make_env("g1_walk_flat", sim="mjwarp", num_envs=2, device="cuda")
