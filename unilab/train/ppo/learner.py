"""PPO's learner: acting inside the captured rollout, then GAE and epochs of minibatch updates in one update block.

Nothing here reads a value back to the host. The adaptive learning rate lives in a device tensor that the optimiser
reads at every step, so the captured update block can raise and lower it; minibatches come from a sort of
counter-based random keys, a fixed-shape permutation that replays inside a graph like any other tensor op.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

import torch
from tensordict import TensorDict
from torch import nn
from torchrl.modules import IndependentNormal

from torchrl_ext.distributed import ALONE, World
from torchrl_ext.ppo import (
    BEHAVIOUR_LOC,
    BEHAVIOUR_SCALE,
    LOG_PROB,
    CapturableClipPPOLoss,
    GaussianActor,
    ValueCritic,
    make_gae,
    policy_operator,
    value_operator,
)
from unilab.core import rng as rnglib
from unilab.core.spec import EnvSpec
from unilab.train.seeding import rank_seed, seeded
from unilab.train.update_key import compile_loss

if TYPE_CHECKING:
    from unilab.train.ppo.config import PPOConfig

_NOISE_STREAM = rnglib.stream_id("ppo/action_noise")
_SHUFFLE_STREAM = rnglib.stream_id("ppo/shuffle")
# rsl_rl's adaptive rule: the step factor and the bounds the learning rate is held within.
LR_FACTOR, LR_MIN, LR_MAX = 1.5, 1e-5, 1e-2
ADVANTAGE_EPS = 1e-8
METRICS = ("loss_objective", "loss_critic", "loss_entropy", "entropy", "clip_fraction", "kl_approx")


class ActorCritic(nn.Module):
    """The two networks PPO trains: what a checkpoint saves under ``loss`` and ``eval``/``play``/ONNX read
    (``actor``), the same layout as the SAC learners' losses."""

    def __init__(self, actor: GaussianActor, critic: ValueCritic) -> None:
        super().__init__()
        self.actor = actor
        self.critic = critic


class PPOLearner:
    """rsl_rl's PPO (the baseline mjlab trains its G1 velocity task with) on TorchRL's loss and GAE.

    ``act`` runs inside the rollout; ``update`` takes the rollout (``[num_steps_per_env, num_envs]``), computes the
    behaviour log-probs, values and GAE, then runs ``num_learning_epochs`` epochs of ``num_mini_batches``
    minibatches, and last folds the rollout's observations into the normalisers. Folding them in after the updates,
    not at every env step as rsl_rl does, keeps one set of statistics for acting, the stored log-probs and the
    updates of one iteration, so the first minibatch's ratio is exactly 1.
    """

    @classmethod
    def networks(cls, spec: EnvSpec, cfg: PPOConfig) -> tuple[GaussianActor, ValueCritic]:
        """Fresh actor and critic from torch's generator (the learner builds them under its init seed)."""
        norm = cfg.obs_normalization
        actor = GaussianActor(spec.obs_dims["policy"], spec.action_dim, cfg.actor_hidden, cfg.init_noise_std, norm)
        return actor, ValueCritic(spec.obs_dims["critic"], cfg.critic_hidden, norm)

    def __init__(self, spec: EnvSpec, cfg: PPOConfig, world: World = ALONE) -> None:
        cfg.check()  # a learner built directly, not through a composed config, is refused the same way
        self.cfg, self.world = cfg, world
        self.device = device = spec.device
        with seeded(rnglib.derive_seed(cfg.seed, "init")):
            self.loss = ActorCritic(*self.networks(spec, cfg)).to(device)
        self.objective = CapturableClipPPOLoss(
            policy_operator(self.loss.actor),
            value_operator(self.loss.critic),
            clip_epsilon=cfg.clip_param,
            entropy_coeff=cfg.entropy_coef,
            critic_coeff=cfg.value_loss_coef,
            loss_critic_type="l2",
            clip_value=cfg.clip_param if cfg.use_clipped_value_loss else None,
            normalize_advantage=False,  # done once over the whole rollout, as rsl_rl does
            functional=False,  # the loss runs the networks themselves: their weights are what the optimiser steps
        ).to(device)
        self.gae = make_gae(cfg.gamma, cfg.lam)
        on_cuda = device.type == "cuda"
        # A tensor learning rate, read by every step: the adaptive schedule rewrites it in place on the device.
        self.lr = torch.tensor(cfg.lr, device=device)
        self.optim = torch.optim.Adam(
            self.loss.parameters(), lr=self.lr, capturable=on_cuda, fused=True if on_cuda else None, foreach=False
        )
        self.minibatch = cfg.num_envs * cfg.num_steps_per_env // cfg.num_mini_batches
        self.compile = cfg.compile and on_cuda
        self._spec = spec  # the layout its compiled loss is named after (``algo.precompile``)
        self._act_rng = rnglib.make_rng(rank_seed(cfg.seed, "explore", world.rank), device)
        self._shuffle_rng = rnglib.make_rng(rank_seed(cfg.seed, "shuffle", world.rank), device)

    # Built on first use, so that ``compile`` set after construction (as a test does on CPU) is honoured.
    @functools.cached_property
    def _loss_fn(self) -> Callable[[TensorDict], TensorDict]:
        """The loss as the update runs it. Compiled, Inductor fuses its elementwise tail into few kernels; whole, so
        that anything that would read a device value on the host (a graph break) fails at compile time, not inside
        the captured update; and with ``algo.precompile`` kept on disk, so that a later run loads it."""
        if not self.compile:
            return self.objective
        return compile_loss(self.objective, self.cfg, self._spec, "ppo_loss", fullgraph=True)

    @staticmethod
    def _next(rng: torch.Tensor) -> torch.Tensor:
        """Advance a counter-based RNG state in place; returns the new state to draw from."""
        rng.copy_(rnglib.advance(rng))
        return rng

    @torch.no_grad()
    def act(self, obs: TensorDict) -> torch.Tensor:
        """A draw from the current Gaussian policy, noise from this rank's counter-based RNG (inside the rollout)."""
        loc, scale = self.loss.actor.distribution(obs["policy"])
        return loc + scale * rnglib.normal(self._next(self._act_rng), _NOISE_STREAM, tuple(loc.shape))

    @torch.no_grad()
    def prepare(self, rollout: TensorDict) -> TensorDict:
        """The rollout as PPO's batch, flattened to ``num_steps_per_env * num_envs`` rows: behaviour Gaussian and
        log-prob, values, GAE advantages (normalised over the batch) and value targets.

        The value of the true next observation bootstraps every step that did not terminate, truncated ones
        included; rsl_rl approximates that at a time-out by adding gamma * V(s_t) to the reward.

        With ``positive_rewards_only`` a step's reward counts from zero up: where the penalties outweigh the rest
        (a wide exploration noise pays far more in action rate than any tracking earns), a return made of negative
        steps would make an early fall the best an episode can do."""
        actor, critic = self.loss.actor, self.loss.critic
        loc, scale = actor.distribution(rollout["policy"])
        action = rollout["action"]
        signals = {key: rollout["next", key].unsqueeze(-1) for key in ("reward", "done", "terminated")}
        if self.cfg.positive_rewards_only:
            signals["reward"] = signals["reward"].clamp_min(0.0)
        estimate = TensorDict(
            {
                "state_value": critic(rollout["critic"]),
                "next": {"state_value": critic(rollout["next", "critic"]), **signals},
            },
            batch_size=rollout.batch_size,
        )
        self.gae(estimate, time_dim=0)
        advantage = estimate["advantage"]
        advantage = (advantage - advantage.mean()) / (advantage.std() + ADVANTAGE_EPS)
        batch = TensorDict(
            {
                "policy": rollout["policy"],
                "critic": rollout["critic"],
                "action": action,
                LOG_PROB: IndependentNormal(loc, scale).log_prob(action),
                BEHAVIOUR_LOC: loc,
                BEHAVIOUR_SCALE: scale,
                "state_value": estimate["state_value"],
                "advantage": advantage,
                "value_target": estimate["value_target"],
            },
            batch_size=rollout.batch_size,
        )
        return batch.reshape(-1)

    def update(self, rollout: TensorDict) -> TensorDict:
        """Epochs of minibatch updates on ``rollout``, then the normalisers; returns the last minibatch's losses,
        the mean KL over all minibatches, the learning rate, and the share of the rollout's action components
        beyond [-1, 1] (``action_clipped``: the env clips them, so the Gaussian the loss scores is not what moved
        the robot there), detached, for logging."""
        cfg = self.cfg
        batch = self.prepare(rollout)
        rows, n = batch.shape[0], self.minibatch
        kl_sum = torch.zeros((), device=self.device)
        for _ in range(cfg.num_learning_epochs):
            order = torch.argsort(rnglib.uniform(self._next(self._shuffle_rng), _SHUFFLE_STREAM, (rows,)))
            for i in range(cfg.num_mini_batches):
                losses = self._step(batch[order[i * n : (i + 1) * n]])
                kl_sum += losses["kl_approx"]
        self.observe(rollout)
        out = {key: losses[key].detach() for key in METRICS}
        out.update(kl_mean=kl_sum / (cfg.num_learning_epochs * cfg.num_mini_batches), lr=self.lr.clone())
        out["action_clipped"] = (rollout["action"].abs() > 1.0).float().mean()
        return TensorDict(out, batch_size=[])

    def _step(self, minibatch: TensorDict) -> TensorDict:
        """One minibatch: the loss, the learning rate adapted to this minibatch's KL (before the step, as rsl_rl
        does), then one Adam step on the rank-averaged gradient, actor and critic clipped each on its own."""
        losses = self._loss_fn(minibatch)
        kl = losses["kl_approx"].detach().clone()
        self.world.average_([kl], "the KL all-reduce")
        losses["kl_approx"] = kl
        if self.cfg.lr_schedule == "adaptive":
            self._adapt_lr(kl)
        total = losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]
        self.optim.zero_grad(set_to_none=True)
        total.backward()
        self.world.average_gradients_(self.optim)
        if self.cfg.max_grad_norm > 0:
            for net in (self.loss.actor, self.loss.critic):
                nn.utils.clip_grad_norm_(net.parameters(), self.cfg.max_grad_norm)
        self.optim.step()
        return losses

    @torch.no_grad()
    def _adapt_lr(self, kl: torch.Tensor) -> None:
        """rsl_rl's rule, on the device: lr / 1.5 when KL > 2 desired_kl, lr * 1.5 when 0 < KL < desired_kl / 2,
        kept within [1e-5, 1e-2]."""
        lr, target = self.lr, self.cfg.desired_kl
        lower = (lr / LR_FACTOR).clamp(min=LR_MIN)
        higher = (lr * LR_FACTOR).clamp(max=LR_MAX)
        grow = (kl < target / 2) & (kl > 0)
        lr.copy_(torch.where(kl > 2 * target, lower, torch.where(grow, higher, lr)))

    @torch.no_grad()
    def observe(self, rollout: TensorDict) -> None:
        """Fold the rollout's observations (of every rank) into the actor's and the critic's normalisers."""
        if self.cfg.obs_normalization:
            self.loss.actor.obs_norm.update(rollout["policy"], self.world)
            self.loss.critic.obs_norm.update(rollout["critic"], self.world)

    def shared_tensors(self) -> list[torch.Tensor]:
        """What every rank must hold bit-identical: weights, normaliser statistics and the learning rate."""
        return [*self.loss.parameters(), *self.loss.buffers(), self.lr]

    def deployed_actor(self) -> nn.Module:
        return self.loss.actor

    def state_dict(self) -> dict:
        return {"loss": self.loss.state_dict(), "optim": {"adam": self.optim.state_dict()}}

    def load_state_dict(self, state: dict) -> None:
        self.loss.load_state_dict(state["loss"])
        self.optim.load_state_dict(state["optim"]["adam"])
        # Loading replaces the group's learning rate with the saved value; put the live tensor back, so the
        # schedule keeps rewriting the one the optimiser (and a captured step) reads.
        group = self.optim.param_groups[0]
        self.lr.copy_(torch.as_tensor(group["lr"], device=self.device))
        group["lr"] = self.lr
