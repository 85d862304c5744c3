"""FlashSAC's learner: residual BatchNorm trunks with unit-norm weights, a min-Q distributional target, reward
normalisation, exploration noise held for Zipf-distributed spans and a cosine learning rate, on
``torchrl_ext.flashsac.FlashSACLoss``; the update block is ``OffPolicyLearner``'s, with the weight projection and the
schedule after each minibatch."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from tensordict import TensorDict
from torch import nn

from torchrl_ext.distributed import ALONE, World
from torchrl_ext.flashsac import (
    FlashActor,
    FlashCritic,
    FlashSACLoss,
    HeldNoise,
    RewardNormalizer,
    flashsac_target_entropy,
    make_flashsac_optimizers,
)
from unilab.core import rng as rnglib
from unilab.core.spec import EnvSpec
from unilab.train.off_policy import OffPolicyLearner
from unilab.train.seeding import seeded

if TYPE_CHECKING:
    from unilab.train.flashsac.config import FlashSACConfig

_SPAN_STREAM = rnglib.stream_id("explore/span")
_NOISE_STREAM = rnglib.stream_id("explore/noise")


class FlashSACLearner(OffPolicyLearner):
    """FlashSAC: residual BatchNorm trunks with unit-norm weights, reward
    normalisation, exploration noise held for Zipf-distributed spans, cosine LR."""

    @classmethod
    def networks(cls, spec: EnvSpec, cfg: FlashSACConfig) -> tuple[FlashActor, FlashCritic]:
        obs_dim, critic_dim, act_dim = spec.obs_dims["policy"], spec.obs_dims["critic"], spec.action_dim
        actor = FlashActor(obs_dim, act_dim, width=cfg.actor_width, num_blocks=cfg.actor_blocks)
        critic = FlashCritic(
            critic_dim,
            act_dim,
            width=cfg.critic_width,
            num_blocks=cfg.critic_blocks,
            num_atoms=cfg.num_atoms,
            v_min=cfg.v_min,
            v_max=cfg.v_max,
        )
        return actor, critic

    def __init__(self, spec: EnvSpec, cfg: FlashSACConfig, world: World = ALONE, acting_copy: bool = False) -> None:
        super().__init__(spec, cfg, world)
        act_dim = spec.action_dim
        with seeded(rnglib.derive_seed(cfg.seed, "init")):
            actor, critic = self.networks(spec, cfg)
        normalizer = RewardNormalizer(spec.num_envs, cfg.gamma) if cfg.reward_normalization else None
        self.loss = FlashSACLoss(
            actor,
            critic,
            target_entropy=flashsac_target_entropy(act_dim, cfg.target_sigma),
            gamma=cfg.gamma,
            tau=cfg.tau,
            alpha_init=cfg.alpha_init,
            reward_normalizer=normalizer,
        ).to(self.device)
        self.optim = make_flashsac_optimizers(
            self.loss, lr=cfg.lr, lr_final=cfg.lr_final, total_steps=cfg.lr_decay_steps
        )
        self.minibatch = cfg.batch_size
        self.noise = HeldNoise(spec.num_envs, act_dim, cfg.noise_max_span, cfg.noise_zipf_mu).to(self.device)
        self._done = torch.ones(spec.num_envs, dtype=torch.bool, device=self.device)
        self._set_acting(self.loss.actor, acting_copy)
        norms = [m for m in self.loss.modules() if isinstance(m, nn.BatchNorm1d)]
        self._batch_stats = [stat for m in norms for stat in (m.running_mean, m.running_var)]

    @torch.no_grad()
    def act(self, obs: TensorDict) -> torch.Tensor:
        rng = self._next_explore_rng()
        num_envs = self._done.shape[0]
        u_span = rnglib.uniform(rng, _SPAN_STREAM, (num_envs,))
        noise = self.noise.step(self._done, u_span, rnglib.normal(rng, _NOISE_STREAM, (num_envs, self.action_dim)))
        # frozen: the BatchNorms act with their running statistics and are not moved by the rollouts
        action, _ = self.acting.sample(obs["policy"], noise, frozen=True)
        return action

    def observe(self, data: TensorDict) -> None:
        done = data["next", "terminated"] | data["next", "truncated"]
        if self.loss.reward_normalizer is not None:
            self.loss.reward_normalizer.update(data["next", "reward"], done, self.world)
        self._done.copy_(done)

    def after_step(self) -> None:
        self.loss.project_weights_()
        self.optim.scheduler.step()

    def update(self, batch: TensorDict) -> TensorDict:
        """The update block, then the BatchNorm running statistics averaged over ranks: each rank moved them with
        its own minibatches, and acting and the targets read them."""
        out = super().update(batch)
        self.world.average_(self._batch_stats, "the BatchNorm statistics all-reduce")
        return out

    def _per_env_state(self) -> list[torch.Tensor]:
        normalizer = self.loss.reward_normalizer
        return [] if normalizer is None else [normalizer.running_return]

    def state_dict(self) -> dict:
        return {**super().state_dict(), "noise": self.noise.state_dict()}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.noise.load_state_dict(state["noise"])
