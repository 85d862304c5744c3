"""Per-algorithm pieces of the off-policy loop: networks, loss, optimisers, exploration, updates.

The trainer owns the env runner, replay buffer, graphs and bookkeeping; a learner owns what
differs between SAC and FlashSAC. ``explore`` runs inside the captured env step and
``update`` inside the captured update block, so neither may sync with the host.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from copy import deepcopy

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torch.profiler import record_function

from torchrl_ext.config import AlgoConfig
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
from torchrl_ext.networks import Actor, EnsembleCritic
from torchrl_ext.ppo_learner import PPOLearner
from torchrl_ext.sac import SACLoss, Symmetry, make_optimizers, target_entropy_from_ratio
from torchrl_ext.seeding import derive_seed, rank_seed, seeded
from unilab.core import rng as rnglib
from unilab.core.spec import EnvSpec

LossFn = Callable[[TensorDictBase], TensorDict]

_SPAN_STREAM = rnglib.stream_id("explore/span")
_NOISE_STREAM = rnglib.stream_id("explore/noise")


def _symmetry(spec: EnvSpec) -> Symmetry:
    if not spec.mirrors:
        raise ValueError("algo.use_symmetry needs a task that declares left-right mirror maps; this one has none")
    return Symmetry(spec.mirrors["policy"], spec.mirrors["critic"], spec.mirrors["action"])


# The profiler ranges of one update, in the order they run.
UPDATE_PHASES = (
    *(f"{net}: {part}" for net in ("critic", "actor", "alpha") for part in ("forward", "backward", "optimiser")),
    "target",
)


class Learner:
    """Shared update loop: critic every minibatch, actor and temperature every ``policy_frequency``-th."""

    summary: str  # the algorithm in one line, for ``unilab list``
    on_policy = False  # trained by the off-policy trainer (torchrl_ext.trainer)
    loss: nn.Module
    minibatch: int

    @classmethod
    def check_config(cls, cfg: AlgoConfig) -> None:
        """Raise ``ValueError``, one line naming the setting, if ``cfg`` asks for what this learner cannot do; config
        validation calls it too, so that a run is refused before any work starts."""

    @classmethod
    def networks(cls, spec: EnvSpec, cfg: AlgoConfig) -> tuple[nn.Module, nn.Module]:
        """The actor and the critic, freshly initialised from the torch generator: the learner builds them under
        its init seed; a memory estimate builds them on the meta device, to count their parameters for free."""
        raise NotImplementedError

    def __init__(self, cfg: AlgoConfig, spec: EnvSpec, world: World) -> None:
        self.check_config(cfg)
        self.cfg = cfg
        self.world = world
        self.device = device = spec.device
        self.action_dim = spec.action_dim
        self.acting: nn.Module | None = None  # the actor ``explore`` runs; set by ``_set_acting``
        self._acting_pairs: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
        self.amp = cfg.amp and device.type == "cuda"
        # On for a profile of ``update``: each phase then runs under a profiler range (``UPDATE_PHASES``). Off in
        # training, so that the update launches exactly what it would without any profiling support.
        self.profile_phases = False
        # Inductor fuses the losses' elementwise tails (C51 projection, log-probs, LayerNorm/SiLU) into few kernels;
        # the whole update is then recorded as one CUDA graph, so fewer kernels is what buys time.
        self.compile = cfg.compile and device.type == "cuda"
        # Counter-based, advanced in place: the captured env step replays it like any other tensor op.
        self._explore_rng = rnglib.make_rng(rank_seed(cfg.seed, "explore", world.rank), device)

    def explore(self, obs: TensorDict) -> torch.Tensor:
        raise NotImplementedError

    def _next_explore_rng(self) -> torch.Tensor:
        rng = rnglib.advance(self._explore_rng)
        self._explore_rng.copy_(rng)
        return rng

    def _set_acting(self, actor: nn.Module, copy: bool) -> None:
        """Act with ``actor`` itself, or with a copy that ``sync_acting`` refreshes, so an env step can run
        concurrently with the update block that rewrites the actor."""
        if not copy:
            self.acting = actor
            return
        self.acting = deepcopy(actor).requires_grad_(False)
        dst = [*self.acting.parameters(), *self.acting.buffers()]
        src = [*actor.parameters(), *actor.buffers()]
        self._acting_pairs = (dst, src)

    @torch.no_grad()
    def sync_acting(self) -> None:
        """Copy the actor's weights and statistics into the acting copy (a no-op without one)."""
        dst, src = self._acting_pairs
        if dst:
            torch._foreach_copy_(dst, src)

    def observe(self, data: TensorDict) -> None:
        """What the learner takes from each env step's transitions (normaliser statistics, episode ends), inside the
        record step."""

    def after_step(self) -> None:
        """Hook at the end of each minibatch of ``update``, after its critic (and, when they ran, actor and
        temperature) steps and before the Polyak update of the target (weight projection, LR schedules)."""

    def _per_env_state(self) -> list[torch.Tensor]:
        """Tensors of the loss that belong to this rank's envs, so differ between ranks by design."""
        return []

    def shared_tensors(self) -> list[torch.Tensor]:
        """The loss's parameters and statistics less per-env state: what every rank must hold bit-identical."""
        local = {id(t) for t in self._per_env_state()}
        return [t for t in (*self.loss.parameters(), *self.loss.buffers()) if id(t) not in local]

    def _phase(self, name: str) -> contextlib.AbstractContextManager:
        return record_function(name) if self.profile_phases else contextlib.nullcontext()

    def _descend(
        self, phase: str, optimizer: torch.optim.Optimizer, value: torch.Tensor, net: nn.Module | None = None
    ) -> None:
        """One gradient step with the gradient averaged over ranks (one flat all-reduce, captured with the update
        block on CUDA), so every rank takes the same step; gradients of ``net`` are clipped when ``max_grad_norm``
        is set, after averaging, so the clip sees the gradient the step uses."""
        with self._phase(f"{phase}: backward"):
            optimizer.zero_grad(set_to_none=True)
            value.backward()
            self.world.average_gradients_(optimizer)
        with self._phase(f"{phase}: optimiser"):
            if net is not None and self.cfg.max_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(net.parameters(), self.cfg.max_grad_norm)
            optimizer.step()

    def update(self, batch: TensorDict) -> TensorDict:
        """``updates_per_step`` minibatch updates on ``batch`` (``updates_per_step * minibatch`` rows).

        With ``profile_phases`` on, each phase runs under a profiler range (``UPDATE_PHASES``), so a profile of
        an update block can book every kernel to the phase that launched it."""
        loss, opt, n = self.loss, self.optim, self.minibatch
        # No autocast weight cache: inside a CUDA graph a cached cast would outlive its capture.
        autocast = functools.partial(
            torch.autocast, self.device.type, torch.bfloat16, enabled=self.amp, cache_enabled=False
        )
        out = {}
        for i in range(self.cfg.updates_per_step):
            mb = batch[i * n : (i + 1) * n]
            with self._phase("critic: forward"), autocast():
                critic = self._critic_loss(mb)
            self._descend("critic", opt.critic, critic["loss_critic"], loss.critic)
            out.update(loss_critic=critic["loss_critic"].detach(), q_mean=critic["q_mean"].detach())
            if i % self.cfg.policy_frequency == 0:
                with self._phase("actor: forward"), autocast():
                    actor = self._actor_loss(mb)
                self._descend("actor", opt.actor, actor["loss_actor"], loss.actor)
                with self._phase("alpha: forward"):
                    alpha = loss.alpha_loss(actor["log_prob"])
                self._descend("alpha", opt.alpha, alpha["loss_alpha"])
                out.update(loss_actor=actor["loss_actor"].detach(), entropy=actor["entropy"].detach())
                out.update(loss_alpha=alpha["loss_alpha"].detach(), alpha=loss.alpha.detach())
            with self._phase("target"):
                self.after_step()  # before Polyak, so the target averages projected weights
                loss.update_target()
        return TensorDict(out, batch_size=[])

    def _compiled(self, fn: LossFn) -> LossFn:
        return torch.compile(fn) if self.compile else fn

    # Built on first use: a subclass makes ``loss`` after ``Learner.__init__`` has run.
    @functools.cached_property
    def _critic_loss(self) -> LossFn:
        return self._compiled(self.loss.critic_loss)

    @functools.cached_property
    def _actor_loss(self) -> LossFn:
        return self._compiled(self.loss.actor_loss)

    def state_dict(self) -> dict:
        return {
            "loss": self.loss.state_dict(),
            "optim": {name: o.state_dict() for name, o in self.optim._asdict().items()},
        }

    def load_state_dict(self, state: dict) -> None:
        self.loss.load_state_dict(state["loss"])
        for name, o in self.optim._asdict().items():
            o.load_state_dict(state["optim"][name])


class SACLearner(Learner):
    """FastSAC: LayerNorm MLPs, twin C51 critic, optional mirror augmentation."""

    summary = "FastSAC: LayerNorm MLPs, twin C51 critic, mirror augmentation, running obs normalisation"

    @classmethod
    def networks(cls, spec: EnvSpec, cfg: AlgoConfig) -> tuple[Actor, EnsembleCritic]:
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

    def __init__(self, spec: EnvSpec, cfg: AlgoConfig, acting_copy: bool = False, world: World = ALONE) -> None:
        super().__init__(cfg, spec, world)
        act_dim = spec.action_dim
        with seeded(derive_seed(cfg.seed, "init")):
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
    def explore(self, obs: TensorDict) -> torch.Tensor:
        policy_obs = obs["policy"]
        noise = rnglib.normal(self._next_explore_rng(), _NOISE_STREAM, (policy_obs.shape[0], self.action_dim))
        action, _ = self.acting.sample(policy_obs, noise)
        return action

    def observe(self, data: TensorDict) -> None:
        if self.cfg.obs_normalization:
            self.loss.update_normalizers(data, self.world)


class FlashSACLearner(Learner):
    """FlashSAC: residual BatchNorm trunks with unit-norm weights, reward
    normalisation, exploration noise held for Zipf-distributed spans, cosine LR."""

    summary = (
        "residual BatchNorm trunks with unit-norm weights, min-Q distributional target, reward normalisation, "
        "held exploration noise, cosine LR"
    )

    @classmethod
    def check_config(cls, cfg: AlgoConfig) -> None:
        if cfg.use_symmetry or cfg.obs_normalization:
            raise ValueError("algo.use_symmetry and algo.obs_normalization must be false with algo=flashsac")

    @classmethod
    def networks(cls, spec: EnvSpec, cfg: AlgoConfig) -> tuple[FlashActor, FlashCritic]:
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

    def __init__(self, spec: EnvSpec, cfg: AlgoConfig, acting_copy: bool = False, world: World = ALONE) -> None:
        super().__init__(cfg, spec, world)
        act_dim = spec.action_dim
        with seeded(derive_seed(cfg.seed, "init")):
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
    def explore(self, obs: TensorDict) -> torch.Tensor:
        actor = self.acting
        actor.eval()  # BatchNorm: act with running statistics, do not update them from rollouts
        rng = self._next_explore_rng()
        num_envs = self._done.shape[0]
        u_span = rnglib.uniform(rng, _SPAN_STREAM, (num_envs,))
        noise = self.noise.step(self._done, u_span, rnglib.normal(rng, _NOISE_STREAM, (num_envs, self.action_dim)))
        action, _ = actor.sample(obs["policy"], noise)
        actor.train()
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


# The algorithms by ``algo.name``, the one registry of them: each learner's ``summary`` describes it to users, its
# ``check_config`` refuses the settings it cannot run, its ``on_policy`` picks the trainer (torchrl_ext.trainers).
# PPO's learner has an update of its own (no replay, no target nets), so it shares the interface, not the base.
LEARNERS: dict[str, type[Learner] | type[PPOLearner]] = {
    "sac": SACLearner,
    "flashsac": FlashSACLearner,
    "ppo": PPOLearner,
}
