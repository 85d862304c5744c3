"""The off-policy loop over the functional env: one env step of every env, then the updates; and the learner base
that SAC and FlashSAC share.

Schedule (the same for every reported figure): iteration i steps all envs, appends the
transitions to the replay buffer, then runs ``updates_per_step`` minibatch updates (critic
every update, actor and temperature every ``policy_frequency``-th, Polyak after each) on a
sample drawn once for the whole iteration. With ``algo.overlap_updates`` (the default) the
env acts with the weights from before the latest update block, so on CUDA the env step of
i+1 overlaps the updates of i; without it, the env step of i+1 waits for the updates of i.

On CUDA the env step, the replay write and the update block are each recorded once as a
CUDA graph and replayed; the replay cursor, its size and the sample indices live on device,
so nothing in an iteration reads back to the host. Episode statistics and log points are
``unilab.train.loop``'s, shared with the on-policy trainer.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from copy import deepcopy
from pathlib import Path
from typing import NamedTuple

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn
from torch.profiler import record_function

from torchrl_ext.distributed import ALONE, World
from torchrl_ext.replay import DeviceReplay
from unilab.core import rng as rnglib
from unilab.core.spec import EnvSpec
from unilab.envs.functional import FunctionalEnv
from unilab.envs.runner import EnvRunner
from unilab.train.learner import ACTOR_AVERAGE, learner_class
from unilab.train.loop import Trainer, scalar_curricula
from unilab.train.seeding import rank_seed
from unilab.train.settings import OffPolicySettings
from unilab.train.update_key import compile_loss

LossFn = Callable[[TensorDictBase], TensorDict]

TRANSITION_KEYS = (
    "policy",
    "critic",
    "action",
    ("next", "policy"),
    ("next", "critic"),
    ("next", "reward"),
    ("next", "terminated"),
    ("next", "truncated"),
)


# The profiler ranges of one update, in the order they run.
UPDATE_PHASES = (
    *(f"{net}: {part}" for net in ("critic", "actor", "alpha") for part in ("forward", "backward", "optimiser")),
    "target",
)


class OffPolicyLearner:
    """What SAC and FlashSAC share (``unilab.train.learner.Learner``): the update block (critic every minibatch, actor
    and temperature every ``policy_frequency``-th, Polyak after each), the acting copy, the exploration RNG and the
    rank-averaged gradient step. A subclass builds ``loss``, ``optim`` and ``minibatch`` and defines ``act``."""

    loss: nn.Module
    optim: NamedTuple
    minibatch: int

    @classmethod
    def networks(cls, spec: EnvSpec, cfg: OffPolicySettings) -> tuple[nn.Module, nn.Module]:
        """The actor and the critic, freshly initialised from the torch generator: the learner builds them under
        its init seed; a memory estimate builds them on the meta device, to count their parameters for free."""
        raise NotImplementedError

    def __init__(self, spec: EnvSpec, cfg: OffPolicySettings, world: World) -> None:
        self.cfg = cfg
        self.world = world
        self._spec = spec  # the layout its compiled losses are named after (``algo.precompile``)
        self.device = device = spec.device
        self.action_dim = spec.action_dim
        self.acting: nn.Module | None = None  # the actor ``act`` runs; set by ``_set_acting``
        self._acting_pairs: tuple[list[torch.Tensor], list[torch.Tensor]] = ([], [])
        # ``actor_average``'s average of the actor's parameters by name, and the parameters it follows; empty where
        # none is kept. Set by ``_set_acting``.
        self._average: dict[str, torch.Tensor] = {}
        self._averaged: list[torch.Tensor] = []
        self.amp = cfg.amp and device.type == "cuda"
        # On for a profile of ``update``: each phase then runs under a profiler range (``UPDATE_PHASES``). Off in
        # training, so that the update launches exactly what it would without any profiling support.
        self.profile_phases = False
        # Inductor fuses the losses' elementwise tails (C51 projection, log-probs, LayerNorm/SiLU) into few kernels;
        # the whole update is then recorded as one CUDA graph, so fewer kernels is what buys time.
        self.compile = cfg.compile and device.type == "cuda"
        # Counter-based, advanced in place: the captured env step replays it like any other tensor op.
        self._explore_rng = rnglib.make_rng(rank_seed(cfg.seed, "explore", world.rank), device)

    def act(self, obs: TensorDict) -> torch.Tensor:
        raise NotImplementedError

    def _next_explore_rng(self) -> torch.Tensor:
        rng = rnglib.advance(self._explore_rng)
        self._explore_rng.copy_(rng)
        return rng

    def _set_acting(self, actor: nn.Module, copy: bool) -> None:
        """Act with ``actor`` itself, or with a copy that ``sync_acting`` refreshes, so an env step can run
        concurrently with the update block that rewrites the actor; and keep the average of its weights that
        ``actor_average`` asks for, starting from them."""
        if self.cfg.actor_average > 0:
            named = dict(actor.named_parameters())
            self._average = {name: p.detach().clone() for name, p in named.items()}
            self._averaged = list(named.values())
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

    @torch.no_grad()
    def _step_average(self) -> None:
        """``average <- (1 - f) average + f actor`` after an actor step, one fused multi-tensor op (a no-op without
        an average). Over many steps this smooths the actor's swings from one update to the next, which a policy
        judged at one checkpoint otherwise inherits."""
        if self._average:
            torch._foreach_lerp_(list(self._average.values()), self._averaged, self.cfg.actor_average)

    def deployed_actor(self) -> nn.Module:
        """What eval, play and the ONNX export run: a copy of the actor holding the average's weights (its
        observation statistics the actor's own) where an average is kept, else the actor itself."""
        actor = self.loss.actor
        if not self._average:
            return actor
        deployed = deepcopy(actor).requires_grad_(False)
        with torch.no_grad():
            for name, parameter in deployed.named_parameters():
                parameter.copy_(self._average[name])
        return deployed

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
                if i % self.cfg.policy_frequency == 0:
                    self._step_average()  # and the actor's average too
                loss.update_target()
        return TensorDict(out, batch_size=[])

    def _compiled(self, fn: LossFn, name: str) -> LossFn:
        """``fn`` as the update runs it: compiled on CUDA, and with ``algo.precompile`` kept on disk as ``name``."""
        return compile_loss(fn, self.cfg, self._spec, name) if self.compile else fn

    # Built on first use: a subclass makes ``loss`` after ``Learner.__init__`` has run.
    @functools.cached_property
    def _critic_loss(self) -> LossFn:
        return self._compiled(self.loss.critic_loss, "critic_loss")

    @functools.cached_property
    def _actor_loss(self) -> LossFn:
        return self._compiled(self.loss.actor_loss, "actor_loss")

    def state_dict(self) -> dict:
        state = {
            "loss": self.loss.state_dict(),
            "optim": {name: o.state_dict() for name, o in self.optim._asdict().items()},
        }
        if self._average:
            state[ACTOR_AVERAGE] = {name: tensor.clone() for name, tensor in self._average.items()}
        return state

    def load_state_dict(self, state: dict) -> None:
        self.loss.load_state_dict(state["loss"])
        for name, o in self.optim._asdict().items():
            o.load_state_dict(state["optim"][name])
        if self._average:  # a checkpoint that kept none: the average starts again from the actor
            saved = state.get(ACTOR_AVERAGE) or dict(self.loss.actor.named_parameters())
            torch._foreach_copy_(list(self._average.values()), [saved[name] for name in self._average])


class OffPolicyTrainer(Trainer):
    """Runs the loop for any off-policy algorithm's learner (``learner_class(cfg)``: SAC's, FlashSAC's).

    Each iteration is three steps: the env step (``runner``), ``record`` (replay write at a device-side cursor,
    episode statistics, normalisers, acting-policy refresh) and ``update``. On CUDA each is one CUDA graph. With
    ``cfg.overlap_updates`` the env acts with a copy of the actor refreshed at every ``record``, i.e. with the
    weights from before the latest update block (a policy lag of one iteration), so on CUDA its step runs
    on its own stream while the updates of iteration i do (``concurrent``). Everything that touches the
    replay buffer stays on the learner stream, so sampling never races a write.

    With several ranks (``world``) each rank runs this loop on its own envs and replay shard, with its own env,
    exploration, replay and loss seeds; the learner averages what must agree (gradients, normaliser and BatchNorm
    statistics) inside the record and update steps, so the loop itself is the same on every rank.
    """

    def __init__(
        self, env: FunctionalEnv, cfg: OffPolicySettings, world: World = ALONE, step_file: Path | None = None
    ) -> None:
        if cfg.on_policy:
            raise ValueError(f"{cfg.name!r} is an on-policy algo: unilab.train.on_policy.OnPolicyTrainer runs it")
        self.env = env
        self.cfg = cfg
        self.world = world
        spec = env.spec()
        dev = self.device = spec.device
        torch.manual_seed(rank_seed(cfg.seed, "loss", world.rank))  # the losses draw from torch's default generators
        self.learner = learner_class(cfg)(spec, cfg, world, acting_copy=cfg.overlap_updates)
        # The shared init seed gave every rank the same weights already; rank 0's win if a platform differs.
        world.broadcast_(self.learner.shared_tensors())
        self.learner.sync_acting()
        self.capture = spec.graph_capturable
        self.runner = EnvRunner(
            env,
            self.learner.act,
            seed=rank_seed(cfg.seed, "env", world.rank),
            capture=self.capture,
            compile=self.capture and cfg.compile,
            precompiled=step_file,  # where the compiled step is kept (unilab.run.precompile)
        )
        self.replay = DeviceReplay(
            cfg.replay_buffer_n * env.num_envs, env.num_envs, rank_seed(cfg.seed, "replay", world.rank), dev
        )
        self.filled = 0  # rows written, counted on the host from the schedule (the replay holds its own copy)
        self._transition: TensorDict | None = None
        self.concurrent = self.capture and cfg.overlap_updates
        # Record and update graphs are recorded on the book's capture stream, the env step on the runner's. The env
        # step's stream has the higher priority: its graph is a chain of small per-world kernels, and the update's
        # kernels beside it fill the GPU, so at equal priority each of its kernels queues behind the update's blocks;
        # with priority a multiprocessor that frees up takes the env step's blocks first.
        self._env_stream = torch.cuda.Stream(dev, priority=-1) if self.concurrent else None
        self._stepped = torch.cuda.Event() if self.concurrent else None
        self._recorded = torch.cuda.Event() if self.concurrent else None
        self.iteration = 0
        self.env_steps = 0  # every transition recorded, replay pre-fill included
        self.steps_per_iteration = env.num_envs  # env steps of one iteration on this rank
        self._open_book(env.num_envs, spec.reward_terms, scalar_curricula(env))

    @property
    def graphs(self) -> dict[str, torch.cuda.CUDAGraph]:
        """The recorded graphs of one iteration, in the order it runs them (empty until recorded), for profilers."""
        env_step = {} if self.runner.graph is None else {"env_step": self.runner.graph}
        return {**env_step, **self._graphs}

    @property
    def env_stream(self) -> torch.cuda.Stream | None:
        return self._env_stream

    # -- acting --------------------------------------------------------------------------

    def collect(self) -> None:
        """One env step of every env, recorded into the replay buffer with running episode statistics."""
        if self._env_stream is None:
            self._transition = self.runner.step()
        else:
            self._env_stream.wait_event(self._recorded)  # the step overwrites what the last record read
            with torch.cuda.stream(self._env_stream):
                self._transition = self.runner.step()  # the same static buffers at every replay
                self._stepped.record()
            torch.cuda.current_stream(self.device).wait_event(self._stepped)
        self._graphed("record", self._record)
        if self._recorded is not None:
            self._recorded.record()
        self.env_steps += self.env.num_envs
        self.filled = min(self.filled + self.env.num_envs, self.replay.capacity)
        self._term_steps += 1

    def _record(self) -> None:
        transition = self._transition
        data = transition.select(*TRANSITION_KEYS)
        self.replay.extend(data)
        self.learner.observe(data)
        self.learner.sync_acting()
        self._count_step(transition)

    @property
    def ready(self) -> bool:
        """Enough data for updates: max(batch, learning_starts * num_envs) rows."""
        return self.filled >= max(self.cfg.batch_size, self.cfg.learning_starts * self.env.num_envs)

    # -- learning ------------------------------------------------------------------------

    def _update_block(self) -> TensorDict:
        batch = self.replay.sample(self.learner.minibatch * self.cfg.updates_per_step)
        return self._guard_losses(self.learner.update(batch))

    def update(self) -> TensorDict:
        """``updates_per_step`` updates; on CUDA the first call also records them as a CUDA graph."""
        # The update graph samples replay rows from the replay generator.
        return self._graphed("update", self._update_block, [self.replay.sampler.generator])

    # -- host boundary -------------------------------------------------------------------

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        self.learner.sync_acting()
