"""Data parallelism over ``torch.distributed``: N ranks, one set of weights.

Each rank steps its own envs into its own replay shard and draws its own minibatches; the ranks stay one learner
because every optimiser step uses the gradient averaged over ranks, the observation and reward normalisers fold in
the statistics of every rank's data, and BatchNorm running statistics are averaged after each update block. All
ranks start from the same weights, so they hold bit-identical weights throughout (all-reduce hands every rank the
same sum).

Launch with ``torchrun``: its variables (WORLD_SIZE, RANK, LOCAL_RANK) make the world. Without them the world is
this process alone, and every operation here is local arithmetic identical to the code before this module existed,
so a single-process run is bit-identical to one of an earlier build.

On CUDA the collectives of the replay write and of the update block are recorded into their CUDA graphs with
everything else (NCCL >= 2.9.6 allows capture); the eager collectives (the stop vote, the final weight check) run on
the same stream, after the graphs, in the same order on every rank.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import torch
import torch.distributed as dist
from torch import Tensor

TORCHRUN_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK")
# How long past its own timeout the rendezvous may take to raise by itself before it is given up.
JOIN_GRACE_S = 5.0


class RankLost(RuntimeError):
    """A collective failed: another rank died, or did not reach the collective within the timeout."""


def _within(seconds: float, join: Callable[[], object]) -> None:
    """``join()`` on a thread of its own, given up after ``seconds``: the rendezvous client waits forever on a
    listener that accepts its connection and never answers, whatever timeout it was given. The thread is a daemon,
    so a process that gives up can still exit."""
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            join()
            outcome.append(None)
        except BaseException as exc:  # handed to the caller's thread
            outcome.append(exc)

    thread = threading.Thread(target=attempt, name="unilab-rendezvous", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        raise RuntimeError(f"the rendezvous at MASTER_ADDR:MASTER_PORT did not answer in {seconds:g} s")
    if outcome[0] is not None:
        raise outcome[0]


@dataclass
class World:
    """This process's place among the ranks, and the collectives the trainer needs; a world of one by default.

    ``start`` joins the process group (NCCL on CUDA, gloo on the CPU) with a collective timeout, so a dead or hung
    rank ends the others with ``RankLost`` rather than leaving them waiting forever.
    """

    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1  # ranks on this machine
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    timeout_s: float | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> World:
        """The world torchrun describes; a world of one when its variables are absent."""
        present = [name for name in TORCHRUN_VARIABLES if name in environ]
        if not present:
            return cls()
        if len(present) < len(TORCHRUN_VARIABLES):
            missing = sorted(set(TORCHRUN_VARIABLES) - set(present))
            raise ValueError(f"{', '.join(present)} set but {', '.join(missing)} not: launch the ranks with torchrun")
        try:
            world = cls(
                rank=int(environ["RANK"]),
                size=int(environ["WORLD_SIZE"]),
                local_rank=int(environ["LOCAL_RANK"]),
                local_size=int(environ.get("LOCAL_WORLD_SIZE", environ["WORLD_SIZE"])),
            )
        except ValueError as exc:
            raise ValueError(f"torchrun variables are not integers: {exc}") from None
        if not 0 <= world.rank < world.size or not 0 <= world.local_rank < world.local_size <= world.size:
            raise ValueError(
                f"inconsistent torchrun variables: RANK={world.rank} WORLD_SIZE={world.size} "
                f"LOCAL_RANK={world.local_rank} LOCAL_WORLD_SIZE={world.local_size}"
            )
        return world

    @property
    def leader(self) -> bool:
        """Rank 0, the one rank that writes the run directory."""
        return self.rank == 0

    def start(self, device: torch.device, timeout_s: float) -> None:
        """Join the process group of the ranks; for a world of one only record ``device``."""
        self.device, self.timeout_s = device, timeout_s
        if self.size == 1:
            return
        cuda = device.type == "cuda"
        if cuda:
            torch.cuda.set_device(device)
        with self._collective("joining the process group"):
            _within(
                timeout_s + JOIN_GRACE_S,
                lambda: dist.init_process_group(
                    "nccl" if cuda else "gloo",
                    timeout=datetime.timedelta(seconds=timeout_s),
                    device_id=device if cuda else None,  # NCCL: bind the communicator to this rank's GPU now
                ),
            )

    def close(self) -> None:
        """Leave the process group (idempotent)."""
        if self.size > 1 and dist.is_initialized():
            dist.destroy_process_group()

    @contextlib.contextmanager
    def _collective(self, what: str) -> Iterator[None]:
        """Every failure of a collective is a lost rank to the caller; say so in terms of the run."""
        try:
            yield
        except RuntimeError as exc:
            lines = str(exc).strip().splitlines()
            detail = lines[0] if lines else type(exc).__name__
            raise RankLost(
                f"rank {self.rank} of {self.size}: {what} failed: another rank died or did not arrive within "
                f"training.dist_timeout_s={self.timeout_s:g} s (its own log says why) [{detail}]"
            ) from exc

    def _all_reduce(self, tensor: Tensor, what: str, op: dist.ReduceOp.RedOpType = dist.ReduceOp.SUM) -> None:
        with self._collective(what):
            dist.all_reduce(tensor, op=op)

    # -- inside the captured replay write and update block ---------------------------------------------------------

    @torch.no_grad()
    def average_(self, tensors: Sequence[Tensor], what: str = "averaging over ranks") -> None:
        """Replace each tensor by its mean over ranks, with one all-reduce of their concatenation (one dtype)."""
        if self.size == 1 or not tensors:
            return
        flat = torch.cat([t.reshape(-1) for t in tensors])
        self._all_reduce(flat, what)
        flat.div_(self.size)
        parts = flat.split([t.numel() for t in tensors])
        torch._foreach_copy_(list(tensors), [part.view_as(t) for part, t in zip(parts, tensors, strict=True)])

    def average_gradients_(self, optimizer: torch.optim.Optimizer) -> None:
        """Average the gradients an optimiser is about to apply, so every rank takes the same step."""
        if self.size == 1:
            return
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        self.average_(grads, "the gradient all-reduce")

    def moments(self, x: Tensor, reference: Tensor) -> tuple[Tensor | int, Tensor, Tensor]:
        """Row count, mean and (biased) variance over dim 0 of ``x`` on every rank together.

        Each rank contributes its count and its moments about ``reference`` (a tensor of the mean's shape, the same on
        every rank: the running mean), in one all-reduce; centring on it keeps the pooled variance free of the
        cancellation that raw sums of squares suffer. A world of one returns ``torch.var_mean`` unchanged.
        """
        var, mean = torch.var_mean(x, dim=0, correction=0)
        if self.size == 1:
            return x.shape[0], mean, var
        count = x.shape[0]
        shift = (mean - reference).reshape(-1)
        packed = torch.cat([shift.new_full((1,), count), shift * count, (var.reshape(-1) + shift.square()) * count])
        self._all_reduce(packed, "the normaliser statistics all-reduce")
        total = packed[0]
        shift, second = (packed[1:].view(2, -1) / total).unbind(0)
        pooled_var = (second - shift.square()).clamp_min(0.0)
        return total, reference + shift.view_as(reference), pooled_var.view_as(reference)

    def maximum_(self, tensor: Tensor, what: str = "the maximum all-reduce") -> None:
        """Replace ``tensor`` by its elementwise maximum over ranks."""
        if self.size > 1:
            self._all_reduce(tensor, what, dist.ReduceOp.MAX)

    # -- eager, at start-up, log points and the end ----------------------------------------------------------------

    @torch.no_grad()
    def broadcast_(self, tensors: Sequence[Tensor]) -> None:
        """Overwrite ``tensors`` with rank 0's, one by one (start-up only; any dtypes)."""
        if self.size == 1:
            return
        with self._collective("the weight broadcast from rank 0"):
            for tensor in tensors:
                dist.broadcast(tensor, src=0)

    def broadcast_object(self, value: object) -> object:
        """Rank 0's ``value`` on every rank (a picklable object)."""
        if self.size == 1:
            return value
        box = [value]
        with self._collective("the broadcast from rank 0"):
            dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather_digests(self, tensors: Sequence[Tensor]) -> list[str]:
        """Every rank's ``digest`` of its ``tensors``, in rank order."""
        mine = digest(tensors)
        if self.size == 1:
            return [mine]
        value = torch.tensor(int(mine, 16), dtype=torch.int64, device=self.device)  # 60 bits fit an int64
        gathered = [torch.empty_like(value) for _ in range(self.size)]
        with self._collective("the final weight check"):
            dist.all_gather(gathered, value)
        return [f"{int(v):015x}" for v in gathered]


ALONE = World()  # a process launched without torchrun: every operation is local


def digest(tensors: Sequence[Tensor]) -> str:
    """Hex digest (15 digits) of the bytes, shapes and dtypes of ``tensors``: equal exactly when they are equal
    bit for bit, with overwhelming probability."""
    h = hashlib.sha256()
    for tensor in tensors:
        flat = tensor.detach().reshape(-1).contiguous().cpu()
        h.update(f"{tuple(tensor.shape)}{tensor.dtype}".encode())
        h.update(flat.view(torch.uint8).numpy().tobytes())
    return h.hexdigest()[:15]


class Vote:
    """The maximum of an integer over ranks, cast at one check point and read at the next.

    Reading the result of an all-reduce at once would make each check point wait for the GPU to drain; a vote is
    instead copied to host memory behind the iteration it closes and read a check point later, when the GPU has long
    passed it. Every rank casts at the same iterations, so every rank reads the same results at the same iterations.
    A world of one has nobody to agree with: ``cast`` returns its own value at once.
    """

    def __init__(self, world: World) -> None:
        self.world = world
        self._pending: tuple[Tensor, torch.cuda.Event | None] | None = None

    def cast(self, value: int) -> int:
        """Cast ``value``; returns the maximum over ranks of the previous cast (0 at the first)."""
        if self.world.size == 1:
            return value
        previous = self._read()
        device = self.world.device
        ballot = torch.full((1,), value, dtype=torch.int32, device=device)  # a fill kernel: no host copy to wait on
        self.world.maximum_(ballot, "the stop vote")
        on_cuda = device.type == "cuda"
        host = torch.empty(1, dtype=torch.int32, pin_memory=on_cuda)
        host.copy_(ballot, non_blocking=on_cuda)
        copied = None
        if on_cuda:
            copied = torch.cuda.Event()
            copied.record()
        self._pending = (host, copied)
        return previous

    def _read(self) -> int:
        if self._pending is None:
            return 0
        host, copied = self._pending
        if copied is not None:
            copied.synchronize()
        return int(host.item())
