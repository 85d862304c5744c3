"""Off-policy trainer over the functional env: one env step of every env, then the updates.

Schedule (the same for every reported figure): iteration i steps all envs, appends the
transitions to the replay buffer, then runs ``updates_per_step`` minibatch updates (critic
every update, actor and temperature every ``policy_frequency``-th, Polyak after each) on a
sample drawn once for the whole iteration. With ``algo.overlap_updates`` (the default) the
env acts with the weights from before the latest update block, so on CUDA the env step of
i+1 overlaps the updates of i; without it, the env step of i+1 waits for the updates of i.

On CUDA the env step, the replay write and the update block are each recorded once as a
CUDA graph and replayed; the replay cursor, its size and the sample indices live on device,
so nothing in an iteration reads back to the host. Episode statistics and log points are
``torchrl_ext.bookkeeping``'s, shared with the on-policy trainer.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict

from torchrl_ext.bookkeeping import TrainerBase, scalar_curricula
from torchrl_ext.config import AlgoConfig
from torchrl_ext.distributed import ALONE, World
from torchrl_ext.learners import LEARNERS
from torchrl_ext.replay import DeviceReplay
from torchrl_ext.seeding import rank_seed
from unilab.envs.functional import FunctionalEnv
from unilab.envs.runner import EnvRunner

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


class OffPolicyTrainer(TrainerBase):
    """Runs the loop for any learner of ``torchrl_ext.learners`` (``cfg.name``: sac, flashsac).

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

    def __init__(self, env: FunctionalEnv, cfg: AlgoConfig, world: World = ALONE) -> None:
        if cfg.name not in LEARNERS or LEARNERS[cfg.name].on_policy:
            off_policy = [name for name, learner in LEARNERS.items() if not learner.on_policy]
            raise ValueError(f"{cfg.name!r} is not an off-policy algo; those are: {', '.join(off_policy)}")
        self.env = env
        self.cfg = cfg
        self.world = world
        spec = env.spec()
        dev = self.device = spec.device
        torch.manual_seed(rank_seed(cfg.seed, "loss", world.rank))  # the losses draw from torch's default generators
        self.learner = LEARNERS[cfg.name](spec, cfg, acting_copy=cfg.overlap_updates, world=world)
        # The shared init seed gave every rank the same weights already; rank 0's win if a platform differs.
        world.broadcast_(self.learner.shared_tensors())
        self.learner.sync_acting()
        self.capture = spec.graph_capturable
        self.runner = EnvRunner(
            env,
            self.learner.explore,
            seed=rank_seed(cfg.seed, "env", world.rank),
            capture=self.capture,
            compile=self.capture and cfg.compile,
        )
        self.replay = DeviceReplay(
            cfg.replay_buffer_n * env.num_envs, env.num_envs, rank_seed(cfg.seed, "replay", world.rank), dev
        )
        self.filled = 0  # rows written, counted on the host from the schedule (the replay holds its own copy)
        self._transition: TensorDict | None = None
        self.concurrent = self.capture and cfg.overlap_updates
        # Record and update graphs are recorded on the book's capture stream, the env step on the runner's.
        self._env_stream = torch.cuda.Stream(dev) if self.concurrent else None
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
    def loss(self):
        return self.learner.loss

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
        return self.learner.update(self.replay.sample(self.learner.minibatch * self.cfg.updates_per_step))

    def update(self) -> TensorDict:
        """``updates_per_step`` updates; on CUDA the first call also records them as a CUDA graph."""
        # The update graph samples replay rows from the replay generator.
        return self._graphed("update", self._update_block, [self.replay.sampler.generator])

    # -- host boundary -------------------------------------------------------------------

    def state_dict(self) -> dict:
        """Learner state and the counters a resumed run continues from; plain values only (weights-only loading)."""
        return {**self.learner.state_dict(), "iteration": self.iteration, "env_steps": self.env_steps}

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state)
        self.learner.sync_acting()
        self.iteration = int(state["iteration"])
        self.env_steps = int(state["env_steps"])
