"""The pieces compose in a plain TorchRL pipeline: collector, replay buffer, loss, optimiser, no unilab trainer."""

from __future__ import annotations

import pytest
import torch
from tensordict.nn import TensorDictModule
from torchrl.collectors import Collector
from torchrl.data import LazyTensorStorage, ReplayBuffer

from torchrl_ext.flashsac import FlashActor, FlashCritic, FlashSACLoss, flashsac_target_entropy
from torchrl_ext.networks import Actor, EnsembleCritic
from torchrl_ext.sac import SACLoss, target_entropy_from_ratio
from unilab import make_env

ATOMS = {"num_atoms": 21, "v_min": -10.0, "v_max": 10.0}


def sac(obs_dim: int, critic_dim: int, action_dim: int) -> SACLoss:
    actor = Actor(obs_dim, action_dim, hidden=(32, 32))
    critic = EnsembleCritic(critic_dim, action_dim, hidden=(32, 32), **ATOMS)
    return SACLoss(actor, critic, target_entropy=target_entropy_from_ratio(action_dim, 0.5))


def flashsac(obs_dim: int, critic_dim: int, action_dim: int) -> FlashSACLoss:
    actor = FlashActor(obs_dim, action_dim, width=32, num_blocks=1)
    critic = FlashCritic(critic_dim, action_dim, width=32, num_blocks=1, **ATOMS)
    return FlashSACLoss(actor, critic, target_entropy=flashsac_target_entropy(action_dim))


@pytest.mark.parametrize("make_loss", [sac, flashsac])
def test_collector_buffer_and_loss_train_on_make_env(make_loss) -> None:
    env = make_env("g1_walk_flat", sim="mujoco", num_envs=4, episode_length_s=0.1, seed=0)
    dims = (env.observation_spec[key].shape[-1] for key in ("policy", "critic"))
    loss = make_loss(*dims, env.action_spec.shape[-1])
    policy = TensorDictModule(lambda obs: loss.actor.sample(obs)[0], in_keys=["policy"], out_keys=["action"])
    collector = Collector(
        env, policy, frames_per_batch=4 * 8, total_frames=4 * 8 * 3, auto_register_policy_transforms=False
    )
    buffer = ReplayBuffer(storage=LazyTensorStorage(1024), batch_size=64)
    optimizer = torch.optim.Adam(loss.parameters(), lr=1e-3)
    before = [p.detach().clone() for p in loss.actor.parameters()]
    batches = 0
    for batch in collector:
        assert batch.shape == (4, 8) and batch["next", "done"].any()  # 5-step episodes end inside every batch
        buffer.extend(batch.reshape(-1))
        out = loss(buffer.sample())
        optimizer.zero_grad()
        (out["loss_critic"] + out["loss_actor"] + out["loss_alpha"]).backward()
        optimizer.step()
        loss.update_target()
        batches += 1
    collector.shutdown()
    assert batches == 3 and len(buffer) == 4 * 8 * 3
    assert all(torch.isfinite(out[key]) for key in ("loss_critic", "loss_actor", "loss_alpha"))
    assert any(not torch.equal(a, b) for a, b in zip(before, loss.actor.parameters(), strict=True))
