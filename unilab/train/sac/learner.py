"""SAC's learner (FastSAC): LayerNorm MLPs, a twin C51 critic, optional mirror augmentation and running observation
normalisation, on ``torchrl_ext.sac.SACLoss``; the update block is ``OffPolicyLearner``'s."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from tensordict import TensorDict

from torchrl_ext.distributed import ALONE, World
from torchrl_ext.networks import Actor, EnsembleCritic
from torchrl_ext.sac import SACLoss, Symmetry, make_optimizers, target_entropy_from_ratio
from unilab.core import rng as rnglib
from unilab.core.spec import EnvSpec
from unilab.train.off_policy import OffPolicyLearner
from unilab.train.seeding import seeded

if TYPE_CHECKING:
    from unilab.train.sac.config import SACConfig

_NOISE_STREAM = rnglib.stream_id("explore/noise")


def _symmetry(spec: EnvSpec) -> Symmetry:
    if not spec.mirrors:
        raise ValueError(
            "algo.use_symmetry needs a task that declares left-right mirror maps for its action and every observation "
            "term; this one does not"
        )
    return Symmetry(spec.mirrors["policy"], spec.mirrors["critic"], spec.mirrors["action"])


class SACLearner(OffPolicyLearner):
    """FastSAC: LayerNorm MLPs, twin C51 critic, optional mirror augmentation."""

    @classmethod
    def networks(cls, spec: EnvSpec, cfg: SACConfig) -> tuple[Actor, EnsembleCritic]:
        obs_dim, critic_dim, act_dim = spec.obs_dims["policy"], spec.obs_dims["critic"], spec.action_dim
        actor = Actor(obs_dim, act_dim, tuple(cfg.actor_hidden), normalize_obs=cfg.obs_normalization)
        critic = EnsembleCritic(
            critic_dim,
            act_dim,
            tuple(cfg.critic_hidden),
            num_atoms=cfg.num_atoms,
            v_min=cfg.v_min,
            v_max=cfg.v_max,
            normalize_obs=cfg.obs_normalization,
        )
        return actor, critic

    def __init__(self, spec: EnvSpec, cfg: SACConfig, world: World = ALONE, acting_copy: bool = False) -> None:
        super().__init__(spec, cfg, world)
        act_dim = spec.action_dim
        with seeded(rnglib.derive_seed(cfg.seed, "init")):
            actor, critic = self.networks(spec, cfg)
        self.loss = SACLoss(
            actor.to(self.device),
            critic.to(self.device),
            target_entropy=target_entropy_from_ratio(act_dim, cfg.target_entropy_ratio),
            gamma=cfg.gamma,
            tau=cfg.tau,
            alpha_init=cfg.alpha_init,
            mirror=_symmetry(spec) if cfg.use_symmetry else None,
        ).to(self.device)
        self.optim = make_optimizers(self.loss, lr=cfg.lr, weight_decay=cfg.weight_decay)
        # With symmetry the loss doubles each minibatch with its mirror image.
        self.minibatch = cfg.batch_size // 2 if cfg.use_symmetry else cfg.batch_size
        self._set_acting(self.loss.actor, acting_copy)

    @torch.no_grad()
    def act(self, obs: TensorDict) -> torch.Tensor:
        policy_obs = obs["policy"]
        noise = rnglib.normal(self._next_explore_rng(), _NOISE_STREAM, (policy_obs.shape[0], self.action_dim))
        action, _ = self.acting.sample(policy_obs, noise, frozen=True)
        return action

    def observe(self, data: TensorDict) -> None:
        if self.cfg.obs_normalization:
            self.loss.update_normalizers(data, self.world)
