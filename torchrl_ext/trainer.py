"""Off-policy trainer over the functional env: one env step of every env, then the updates.

Schedule (the same for every reported figure): iteration i steps all envs, appends the
transitions to the replay buffer, then runs ``updates_per_step`` minibatch updates (critic
every update, actor and temperature every ``policy_frequency``-th, Polyak after each) on a
sample drawn once for the whole iteration. With ``algo.overlap_updates`` (the default) the
env acts with the weights from before the latest update block, so on CUDA the env step of
i+1 overlaps the updates of i; without it, the env step of i+1 waits for the updates of i.

On CUDA the env step, the replay write and the update block are each recorded once as a
CUDA graph and replayed; the replay cursor, its size and the sample indices live on device,
so nothing in an iteration reads back to the host. Episode and reward-term statistics
accumulate on device; ``log_point`` queues copies of them and ``report`` reads those once later work is queued.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from tensordict import TensorDict

from torchrl_ext.config import AlgoConfig
from torchrl_ext.distributed import ALONE, World
from torchrl_ext.learners import LEARNERS
from torchrl_ext.replay import DeviceReplay
from torchrl_ext.seeding import rank_seed
from unilab.core.cuda_graphs import record, warm_up
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


Lap = tuple[object, object, object]  # (end of the previous iteration, end of collection, end of this one)


@dataclass
class IterationTimer:
    """Wall time per completed iteration and its split, resolved lazily so no iteration waits on the GPU.

    On CUDA an event is recorded when the env step (collection) ends and when the iteration ends; the time of
    iteration i is the GPU-timeline gap between the ends of i-1 and i, so host stalls that leave the GPU idle
    count. The ``collect`` share runs from the end of i-1 to the split mark, ``update`` from there to the end.
    """

    device: torch.device

    def __post_init__(self) -> None:
        self._last: torch.cuda.Event | float | None = None
        self._split: torch.cuda.Event | float | None = None
        self._pending: list[Lap] = []

    def _mark(self):
        if self.device.type == "cuda":
            event = torch.cuda.Event(enable_timing=True)
            event.record()
            return event
        return time.perf_counter()

    def _seconds(self, begin, end) -> float:
        return begin.elapsed_time(end) / 1000.0 if self.device.type == "cuda" else end - begin

    def start(self) -> None:
        self._last = self._mark()
        self._pending.clear()

    def split(self) -> None:
        """Collection of this iteration is done; what follows until ``lap`` is the update."""
        self._split = self._mark()

    def lap(self) -> None:
        mark = self._mark()
        self._pending.append((self._last, self._split, mark))
        self._last = mark

    def take(self) -> list[Lap]:
        """The iterations lapped since the last take, not yet resolved (no wait)."""
        laps, self._pending = self._pending, []
        return laps

    def resolve(self, laps: list[Lap]) -> list[tuple[float, dict[str, float]]]:
        """Seconds of each of ``laps`` with its collect/update split (on CUDA, waits for the last one's end)."""
        if self.device.type == "cuda" and laps:
            laps[-1][2].synchronize()
        return [
            (self._seconds(begin, end), {"collect": self._seconds(begin, split), "update": self._seconds(split, end)})
            for begin, split, end in laps
        ]


@dataclass
class LogPoint:
    """What one log point reports, copied to host memory behind the iteration it closes.

    ``read`` waits only for those copies. A loop that queues the next iteration before reading keeps the GPU
    busy while the host writes its logs; reading at once would leave the GPU idle for the whole host side of
    the log point, and the iteration after it without its env/update overlap.
    """

    iteration: int
    env_steps: int
    names: list[str]
    term_steps: int
    host: torch.Tensor
    copied: torch.cuda.Event | None
    laps: list[Lap] = field(default_factory=list)  # the iterations it closes, for the caller's timer

    def ready(self) -> bool:
        """True once ``read`` would not wait."""
        return self.copied is None or self.copied.query()

    def read(self) -> dict[str, float]:
        if self.copied is not None:
            self.copied.synchronize()
        return dict(zip(self.names, self.host.tolist(), strict=True))


class Report(NamedTuple):
    """What a log point reports: the latest update's ``metrics``; in ``episodes`` the mean return and length of
    the episodes finished and the mean reward terms per env step since the previous log point, and the curricula's
    task-level values as they stand (``curriculum_<name>``); and the ``health`` counters since the start
    (``unilab.envs.runner.HEALTH``)."""

    metrics: dict[str, float]
    episodes: dict[str, float]
    health: dict[str, int]


class OffPolicyTrainer:
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
        if cfg.name not in LEARNERS:
            raise ValueError(f"unknown algo {cfg.name!r}; known algos: {', '.join(LEARNERS)}")
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
        self._graphs: dict[str, torch.cuda.CUDAGraph] = {}
        self._graph_out: dict[str, TensorDict | None] = {}
        self._transition: TensorDict | None = None
        self.concurrent = self.capture and cfg.overlap_updates
        # Record and update graphs are recorded on this stream, the env step on the runner's: graphs that replay
        # at the same time must not share a capture stream (unilab.core.cuda_graphs).
        self._capture_stream = torch.cuda.Stream(dev) if self.capture else None
        self._env_stream = torch.cuda.Stream(dev) if self.concurrent else None
        self._stepped = torch.cuda.Event() if self.concurrent else None
        self._recorded = torch.cuda.Event() if self.concurrent else None
        self.iteration = 0
        self.env_steps = 0  # every transition recorded, replay pre-fill included
        self._episode_return = torch.zeros(env.num_envs, device=dev)
        self._episodes = TensorDict(
            {name: torch.zeros((), device=dev) for name in ("count", "return", "length")}, batch_size=[]
        )
        self._term_names = list(spec.reward_terms)
        # The curricula's task-level values (a penalty scale, a mean terrain level), logged as they stand.
        self._curriculum_names = [
            name for name, value in env.curricula.initial_state(env.ctx).items() if value.ndim == 0
        ]
        self._term_sums = torch.zeros(len(self._term_names), device=dev)  # per-step means, summed over steps
        self._term_steps = 0

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
        """The stream the env steps on when it overlaps the updates (None: the current stream). Work queued there
        runs between two env steps, so a copy of the env state taken on it is never torn by the next step."""
        return self._env_stream

    def _graphed(self, name: str, fn: Callable[[], TensorDict | None]) -> TensorDict | None:
        """Run ``fn``; on CUDA its first call runs eagerly on a side stream and is then recorded as a graph
        that later calls replay (on the current stream). Returns the first call's or the graph's output."""
        if not self.capture:
            return fn()
        graph = self._graphs.get(name)
        if graph is not None:
            graph.replay()
            return self._graph_out[name]
        out = warm_up(fn, self._capture_stream)  # the warm-up call is this iteration's real work
        # The update graph samples replay rows from the replay generator.
        self._graphs[name], self._graph_out[name] = record(fn, self._capture_stream, [self.replay.sampler.generator])
        return out

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
        done = transition["next", "done"]
        self._episode_return += transition["next", "reward"]
        finished = done.float()
        self._episodes["count"] += finished.sum()
        self._episodes["return"] += (self._episode_return * finished).sum()
        self._episodes["length"] += (transition["episode_length"].float() * finished).sum()
        self._episode_return *= 1.0 - finished
        terms = transition["reward_terms"]
        self._term_sums += torch.stack([terms[name] for name in self._term_names]).mean(-1)

    @property
    def ready(self) -> bool:
        """Enough data for updates: max(batch, learning_starts * num_envs) rows."""
        return self.filled >= max(self.cfg.batch_size, self.cfg.learning_starts * self.env.num_envs)

    # -- learning ------------------------------------------------------------------------

    def _update_block(self) -> TensorDict:
        return self.learner.update(self.replay.sample(self.learner.minibatch * self.cfg.updates_per_step))

    def update(self) -> TensorDict:
        """``updates_per_step`` updates; on CUDA the first call also records them as a CUDA graph."""
        return self._graphed("update", self._update_block)

    # -- host boundary -------------------------------------------------------------------

    def log_point(self, metrics: TensorDict) -> LogPoint:
        """Queue copies of the latest update's ``metrics``, the episode and reward-term sums (then zero them)
        and the health counters; nothing waits. Pass the result to ``report`` once more work is queued.

        The health counters are copied on the learner stream, which has waited for this iteration's env step;
        an env step queued later may or may not be counted in them (they only grow, so that only moves a
        detection earlier).
        """
        parts = {f"metric/{key}": value.detach().reshape(()) for key, value in metrics.items()}
        parts.update({f"episodes/{key}": value for key, value in self._episodes.items()})
        parts.update({f"term/{name}": value for name, value in zip(self._term_names, self._term_sums, strict=True)})
        parts.update({f"curriculum/{name}": self.runner.state["task", name] for name in self._curriculum_names})
        parts.update({f"health/{name}": count for name, count in self.runner.health().items()})
        # float64 keeps the counts exact; the stack is a copy, so the zeroing below is safe.
        flat = torch.stack([value.double() for value in parts.values()])
        self._episodes.zero_()
        self._term_sums.zero_()
        point_steps, self._term_steps = self._term_steps, 0
        on_cuda = self.device.type == "cuda"
        host = torch.empty(flat.shape, dtype=flat.dtype, pin_memory=on_cuda)
        host.copy_(flat, non_blocking=on_cuda)
        copied = None
        if on_cuda:
            copied = torch.cuda.Event()
            copied.record()
        return LogPoint(self.iteration, self.env_steps, list(parts), point_steps, host, copied)

    def report(self, point: LogPoint) -> Report:
        """Raise on non-finite actions or physics buffer overflow up to ``point``; else return its ``Report``."""
        values = point.read()
        health = {key.removeprefix("health/"): int(v) for key, v in values.items() if key.startswith("health/")}
        self.runner.check(health)
        metrics = {key.removeprefix("metric/"): v for key, v in values.items() if key.startswith("metric/")}
        episodes = {}
        if point.term_steps:
            episodes = {f"reward_{name}": values[f"term/{name}"] / point.term_steps for name in self._term_names}
        episodes.update({f"curriculum_{name}": values[f"curriculum/{name}"] for name in self._curriculum_names})
        count = values["episodes/count"]
        if count > 0:
            episodes.update(
                episode_return=values["episodes/return"] / count,
                episode_length=values["episodes/length"] / count,
                episodes=count,
            )
        return Report(metrics, episodes, health)

    def state_dict(self) -> dict:
        """Learner state and the counters a resumed run continues from; plain values only (weights-only loading)."""
        return {**self.learner.state_dict(), "iteration": self.iteration, "env_steps": self.env_steps}

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state)
        self.learner.sync_acting()
        self.iteration = int(state["iteration"])
        self.env_steps = int(state["env_steps"])
