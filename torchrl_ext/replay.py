"""A replay ring whose every index lives on the device, so its writes and samples can be captured in a CUDA graph.

It has TorchRL's three parts: a ``TensorStorage`` holding the rows, a writer and a sampler. TorchRL's own writers
keep their cursor on the host and read the written index back at every write, which waits for the device; its
samplers draw against the storage's host-side length, which a graph would keep at its value at capture. Here the
cursor and the count of rows written are device tensors advanced in place, and the sampler scales its uniform draws
by that count.
"""

from __future__ import annotations

import torch
from tensordict import TensorDict
from torchrl.data import TensorStorage


class RingWriter:
    """Writes ``rows`` rows at a time at a device-side cursor that wraps at ``capacity``; counts the rows written
    (at most ``capacity``) on the device too."""

    def __init__(self, capacity: int, rows: int, device: torch.device) -> None:
        self.capacity = capacity
        self.rows = rows
        self.cursor = torch.zeros((), dtype=torch.long, device=device)
        self.size = torch.zeros((), device=device)  # float, as the sampler scales its uniform draws by it
        self._offsets = torch.arange(rows, device=device)

    def extend(self, storage: TensorStorage, data: TensorDict) -> None:
        storage.set((self.cursor + self._offsets) % self.capacity, data, set_cursor=False)
        self.cursor.copy_((self.cursor + self.rows) % self.capacity)
        self.size.copy_((self.size + self.rows).clamp(max=self.capacity))


class UniformSampler:
    """Rows drawn uniformly with replacement among the first ``size`` (a device tensor), from a seeded generator of
    its own, so the draws depend on nothing else that uses randomness and a graph can register that generator."""

    def __init__(self, seed: int, device: torch.device) -> None:
        self.device = device
        self.generator = torch.Generator(device).manual_seed(seed)

    def sample(self, size: torch.Tensor, count: int) -> torch.Tensor:
        return (torch.rand(count, device=self.device, generator=self.generator) * size).long()


class DeviceReplay:
    """``capacity`` rows, written ``rows`` at a time; the storage is allocated at the first write, when the layout
    of a row is known. Neither ``extend`` nor ``sample`` reads anything back to the host."""

    def __init__(self, capacity: int, rows: int, seed: int, device: torch.device) -> None:
        self.capacity = capacity
        self.writer = RingWriter(capacity, rows, device)
        self.sampler = UniformSampler(seed, device)
        self._memory: TensorDict | None = None  # the rows; ``storage`` is TorchRL's view of them
        self.storage: TensorStorage | None = None

    def extend(self, data: TensorDict) -> None:
        """Write ``data`` (``rows`` rows), overwriting the oldest rows once the ring is full."""
        if self.storage is None:
            self._memory = data[0].expand(self.capacity).clone().zero_()
            self.storage = TensorStorage(self._memory)
        self.writer.extend(self.storage, data)

    def sample_indices(self, count: int) -> torch.Tensor:
        """The rows a ``sample`` of ``count`` would read; it draws from the same generator, so it advances it."""
        return self.sampler.sample(self.writer.size, count)

    def sample(self, count: int) -> TensorDict:
        """``count`` rows among those written (a fresh copy); the ring must have been written to."""
        return self._memory[self.sample_indices(count)]
