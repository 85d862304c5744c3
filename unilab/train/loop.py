"""What the off-policy and the on-policy loop share: the ``Trainer`` interface a training run drives, iteration
timing, graph recording, episode and reward-term statistics, log points and checkpoint state.

Statistics accumulate on the device inside the recorded steps; ``log_point`` queues copies of them and ``report``
reads those once later work is queued, so a log point never stalls the GPU. The same steps count the env steps whose
reward terms or observation groups are NaN or infinite, and the update blocks whose losses are: a run reads those at
its log points and before every checkpoint, and stops instead of saving what they have touched.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from tensordict import TensorDict
from torch import nn

from unilab.core.cuda_graphs import record, warm_up
from unilab.core.device import settle
from unilab.envs.functional import FunctionalEnv
from unilab.envs.runner import EnvRunner, NonFiniteError
from unilab.train.learner import Learner

Lap = tuple[object, object, object]  # (end of the previous iteration, end of collection, end of this one)
# The trainer's own health counters, beside the env's (``unilab.envs.runner.HEALTH``): env-step rows with a NaN or
# infinite reward term or observation group, and update blocks with a non-finite loss.
GUARDS = ("nonfinite_rewards", "nonfinite_observations", "nonfinite_losses")


class NonFiniteValueError(NonFiniteError):
    """A reward term, an observation group, a loss or the learner's state turned NaN or infinite: found on the
    device, raised at a log point or before a checkpoint, so nothing it touched is saved."""


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


def scalar_curricula(env: FunctionalEnv) -> list[str]:
    """The task-level scalars the env's curricula keep (a penalty scale, a mean terrain level), for the logs."""
    return [name for name, value in env.curricula.initial_state(env.ctx).items() if value.ndim == 0]


class Report(NamedTuple):
    """What a log point reports: the latest update's ``metrics``; in ``episodes`` the mean return and length of
    the episodes finished and the mean reward terms per env step since the previous log point, and the curricula's
    task-level values as they stand (``curriculum_<name>``); the ``health`` counters since the start
    (``unilab.envs.runner.HEALTH`` and ``GUARDS``); in ``nonfinite`` each reward term or observation group that was
    NaN or infinite since the start, as (env steps, envs); and the ``iteration`` it was taken at."""

    metrics: dict[str, float]
    episodes: dict[str, float]
    health: dict[str, int]
    nonfinite: dict[str, tuple[int, int]]
    iteration: int


def nonfinite_message(report: Report) -> str | None:
    """One line naming what turned NaN or infinite by ``report``, its cause first (a reward term or observation
    group before the losses it poisoned, the losses before the actions); None when nothing did."""
    where = f"by iteration {report.iteration}; the run stopped without saving it"
    if report.nonfinite:
        found = ", ".join(
            f"{name} in {steps} env steps of {envs} env{'s' * (envs != 1)}"
            for name, (steps, envs) in report.nonfinite.items()
        )
        return f"NaN or infinite values: {found}, {where}"
    blocks = report.health["nonfinite_losses"]
    if blocks:
        losses = [name for name, value in report.metrics.items() if not math.isfinite(value)]
        named = f" ({', '.join(losses)})" if losses else ""
        return f"the losses{named} turned NaN or infinite in {blocks} update blocks, {where}"
    return None


class Trainer:
    """A loop as a training run drives it: ``collect`` then, once ``ready``, ``update``, per iteration; and the
    bookkeeping around it. A subclass sets ``learner``, ``runner``, ``device``, ``capture`` (whether steps are
    recorded as CUDA graphs), ``iteration``, ``env_steps`` and ``steps_per_iteration``, calls ``_open_book`` once,
    ``_count_step`` on each env step's transition inside its recorded steps, and advances ``_term_steps`` on the host
    per env step."""

    learner: Learner
    runner: EnvRunner
    device: torch.device
    capture: bool
    iteration: int
    env_steps: int
    steps_per_iteration: int  # env steps of one iteration on this rank
    # The stream the env steps on beside the updates; None: the current stream. A copy of the env state queued on
    # it lands between two env steps, never inside one.
    env_stream: torch.cuda.Stream | None = None

    @property
    def ready(self) -> bool:
        """Whether enough data was gathered for ``update``."""
        raise NotImplementedError

    def collect(self) -> None:
        """One iteration's env steps, with their statistics."""
        raise NotImplementedError

    def update(self) -> TensorDict:
        """One iteration's updates; the latest losses, for logging."""
        raise NotImplementedError

    @property
    def graphs(self) -> dict[str, torch.cuda.CUDAGraph]:
        """The recorded graphs of one iteration, in the order it runs them (empty until recorded), for profilers."""
        return dict(self._graphs)

    @property
    def loss(self) -> nn.Module:
        """The learner's networks (``loss.actor``, ``loss.critic``)."""
        return self.learner.loss

    def deployed_actor(self) -> nn.Module:
        """The actor that eval, play and the ONNX export run (``Learner.deployed_actor``)."""
        return self.learner.deployed_actor()

    def state_dict(self) -> dict:
        """Learner state and the counters a resumed run continues from; plain values only (weights-only loading)."""
        return {**self.learner.state_dict(), "iteration": self.iteration, "env_steps": self.env_steps}

    def load_state_dict(self, state: dict) -> None:
        self.learner.load_state_dict(state)
        self.iteration = int(state["iteration"])
        self.env_steps = int(state["env_steps"])

    def _open_book(self, num_envs: int, reward_terms: Sequence[str], curricula: Sequence[str] = ()) -> None:
        dev = self.device
        self._graphs: dict[str, torch.cuda.CUDAGraph] = {}
        self._graph_out: dict[str, TensorDict | None] = {}
        self.capture_split: dict[str, float] = {}  # ``take_capture_split``
        # Graphs of this trainer are recorded on this stream: graphs that replay at the same time must not share a
        # capture stream (unilab.core.cuda_graphs).
        self._capture_stream = torch.cuda.Stream(dev) if self.capture else None
        self._episode_return = torch.zeros(num_envs, device=dev)
        self._episodes = TensorDict(
            {name: torch.zeros((), device=dev) for name in ("count", "return", "length")}, batch_size=[]
        )
        self._term_names = list(reward_terms)
        self._term_sums = torch.zeros(len(self._term_names), device=dev)  # per-step means, summed over steps
        self._term_steps = 0
        self._curriculum_names = list(curricula)  # task-level values, logged as they stand (a mean terrain level)
        self._open_guards(num_envs)

    def _open_guards(self, num_envs: int) -> None:
        """The non-finite counters: one row per reward term, then per observation group, each counting the env
        steps it was NaN or infinite in and marking the envs; and the update blocks with a non-finite loss."""
        groups = list(self.runner.env.obs_dims)
        self._guard_rows = [f"reward term {name!r}" for name in self._term_names]
        self._guard_rows += [f"observation group {group!r}" for group in groups]
        self._obs_groups = groups
        rows = len(self._guard_rows)
        self._nonfinite_steps = torch.zeros(rows, dtype=torch.int64, device=self.device)
        self._nonfinite_envs = torch.zeros(rows, num_envs, dtype=torch.bool, device=self.device)
        self._nonfinite_losses = torch.zeros((), dtype=torch.int64, device=self.device)

    def _count_step(self, transition: TensorDict) -> None:
        """Fold one env step's transition into the episode and reward-term sums (on the device)."""
        done = transition["next", "done"]
        self._episode_return += transition["next", "reward"]
        finished = done.float()
        self._episodes["count"] += finished.sum()
        self._episodes["return"] += (self._episode_return * finished).sum()
        self._episodes["length"] += (transition["episode_length"].float() * finished).sum()
        self._episode_return *= 1.0 - finished
        terms = transition["reward_terms"]
        stacked = torch.stack([terms[name] for name in self._term_names])
        self._term_sums += stacked.mean(-1)
        self._guard_step(stacked, transition)

    def _guard_step(self, terms: torch.Tensor, transition: TensorDict) -> None:
        """Count, on the device, the envs whose reward terms (``terms``, one row each) or observation groups (the
        one acted on and the next) are NaN or infinite in this step."""
        obs = [
            torch.isfinite(transition[group]).all(-1) & torch.isfinite(transition["next", group]).all(-1)
            for group in self._obs_groups
        ]
        bad = torch.cat([~torch.isfinite(terms), ~torch.stack(obs)])
        self._nonfinite_steps += bad.sum(-1)
        self._nonfinite_envs |= bad

    def _guard_losses(self, metrics: TensorDict) -> TensorDict:
        """Count, on the device, an update block whose ``metrics`` (its losses) are NaN or infinite; returns them."""
        values = torch.stack([value.detach().float().reshape(()) for value in metrics.values()])
        self._nonfinite_losses += (~torch.isfinite(values)).any()
        return metrics

    def _graphed(
        self,
        name: str,
        fn: Callable[[], TensorDict | None],
        generators: Sequence[torch.Generator] = (),
    ) -> TensorDict | None:
        """Run ``fn``; on CUDA its first call runs eagerly on a side stream and is then recorded as a graph
        that later calls replay (on the current stream). Returns the first call's or the graph's output.
        ``generators`` are the torch generators ``fn`` draws from, registered with its graph."""
        if not self.capture:
            return fn()
        graph = self._graphs.get(name)
        if graph is not None:
            graph.replay()
            return self._graph_out[name]
        began, loads_before = time.perf_counter(), self._step_loads()
        out = warm_up(fn, self._capture_stream)  # this iteration's real work
        settle(self.device)  # free: the capture below waits for the device first anyway
        warmed = time.perf_counter()
        self._graphs[name], self._graph_out[name] = record(fn, self._capture_stream, generators)
        # Start-up parts of the iteration that recorded it. The eager call leaves out the env step's load, which it
        # may have done (an uncaptured runner loads its kept step at its first step) and which is reported apart.
        self.capture_split[f"{name}_eager"] = warmed - began - (self._step_loads() - loads_before)
        self.capture_split[f"{name}_capture"] = time.perf_counter() - warmed
        return out

    def _step_loads(self) -> float:
        return sum(self.runner.kept_split().values())

    def take_capture_split(self) -> dict[str, float]:
        """Seconds of each graph's first call since the last take, as start-up parts: ``<graph>_eager``, the call
        that does that iteration's work and loads what it runs (kernels, a kept loss's compiled code), and
        ``<graph>_capture``, its recording and instantiation. Empty where nothing is recorded (off CUDA)."""
        split, self.capture_split = self.capture_split, {}
        return split

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
        parts.update(self._guard_parts())
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

    def _guard_parts(self) -> dict[str, torch.Tensor]:
        """The health counters (the env's and ``GUARDS``) and, per guarded row, its env steps and envs, on the
        device."""
        rows = len(self._term_names)
        parts = {f"health/{name}": count for name, count in self.runner.health().items()}
        parts["health/nonfinite_rewards"] = self._nonfinite_steps[:rows].sum()
        parts["health/nonfinite_observations"] = self._nonfinite_steps[rows:].sum()
        parts["health/nonfinite_losses"] = self._nonfinite_losses
        envs = self._nonfinite_envs.sum(-1)
        for i, row in enumerate(self._guard_rows):
            parts[f"steps/{row}"], parts[f"envs/{row}"] = self._nonfinite_steps[i], envs[i]
        return parts

    def _guard_report(self, values: dict[str, float], iteration: int) -> Report:
        """A ``Report`` of ``values``' health and non-finite rows alone."""
        health = {key.removeprefix("health/"): int(v) for key, v in values.items() if key.startswith("health/")}
        nonfinite = {
            row: (int(values[f"steps/{row}"]), int(values[f"envs/{row}"]))
            for row in self._guard_rows
            if values[f"steps/{row}"]
        }
        return Report({}, {}, health, nonfinite, iteration)

    def report_now(self) -> Report:
        """The health and the non-finite rows as they stand, read at once (waits for the device): what a run checks
        before it writes a checkpoint, which waits for the device anyway."""
        parts = self._guard_parts()
        values = torch.stack([value.double() for value in parts.values()]).tolist()
        return self._guard_report(dict(zip(parts, values, strict=True)), self.iteration)

    def check(self, report: Report) -> None:
        """Raise on what ``report`` found NaN or infinite (``NonFiniteValueError``), then on non-finite actions or
        physics buffer overflow (``EnvRunner.check``)."""
        message = nonfinite_message(report)
        if message is not None:
            raise NonFiniteValueError(message)
        self.runner.check(report.health)

    def report(self, point: LogPoint) -> Report:
        """``read`` then ``check``: raises on anything non-finite or a physics buffer overflow up to ``point``."""
        report = self.read(point)
        self.check(report)
        return report

    def read(self, point: LogPoint) -> Report:
        """``point``'s ``Report``, checked for nothing (a run records its health before it checks them)."""
        values = point.read()
        guarded = self._guard_report(values, point.iteration)
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
        return guarded._replace(metrics=metrics, episodes=episodes)
