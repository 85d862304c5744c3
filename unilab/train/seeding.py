"""One ``algo.seed`` determines every random draw of a run, each consumer on its own derived stream.

Consumers get independent seeds derived from the run's seed and their name
(``unilab.core.rng.derive_seed``), so adding a draw to one of them never shifts the numbers another sees:

- ``env``: the functional env's counter-based RNG (resets, commands, observation noise);
- ``init``: network initialisation, done on the CPU under a private RNG state, so the same
  seed gives the same initial weights on every device;
- ``explore``: exploration noise, a counter-based RNG state advanced inside the captured
  env step;
- ``replay``: replay sampling, a ``torch.Generator`` registered with the update graph;
- ``loss``: the losses' reparameterised draws, which come from torch's default generator,
  seeded when the trainer is built.

With several ranks (``torchrl_ext.distributed``) ``init`` is shared, so every rank starts from the
same weights, and the other streams are per rank (``rank_seed``), so ranks collect and sample
different data.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch

from unilab.core.rng import derive_seed


def rank_seed(seed: int, stream: str, rank: int) -> int:
    """The seed of ``stream`` on ``rank``. Rank 0 keeps the plain stream, so a run of one rank draws exactly what a
    run without ranks draws; rank r > 0 draws from ``{stream}/rank{r}``."""
    return derive_seed(seed, stream if rank == 0 else f"{stream}/rank{rank}")


@contextmanager
def seeded(seed: int) -> Iterator[None]:
    """Run the block on torch's CPU RNG seeded with ``seed``, then restore the RNG state it had."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield
