"""Python's cyclic garbage collector run less often while a training run starts.

A start-up allocates about a million objects that live as long as the process (torch's and Warp's modules, the
function objects and parsed sources of the ~800 kernel functions mujoco_warp defines, Dynamo's and Inductor's
structures as a compiled graph loads) and few that die in reference cycles. Under the default thresholds a
collection of the youngest generation runs every 700 allocations, and every so often a full one walks all the objects
allocated so far: the collector took a quarter of the stack's import and the flat walk's build on a 2-core CPU (5.2-5.9
s, against 4.15-4.35 s with the youngest generation's threshold at 50,000; ADR 43). The collector still runs
meanwhile, only less often, so what start-up leaves in cycles is collected as before.

``hold`` raises the youngest generation's threshold and ``release`` puts back the thresholds it found: a training run
releases once its first iteration is done, before the iterations it times. Processes that start nothing but
compiles (the side processes) hold for their whole, short life, and so does ``unilab eval``, whose rollouts report
no rate. A process that never held (a run started from Python, a test) is left as it is. Imports nothing.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

# The youngest generation's threshold while held: one collection per 50,000 allocations instead of 700.
HELD_THRESHOLD = 50_000

_found: tuple[int, ...] | None = None  # the thresholds ``hold`` replaced; None when not held


def hold() -> None:
    """Collect less often from now on, until ``release``; holding again changes nothing, and a collector its process
    turned off with a threshold of 0 stays off."""
    global _found
    if _found is None:
        _found = gc.get_threshold()
        if _found[0] > 0:
            gc.set_threshold(max(HELD_THRESHOLD, _found[0]), *_found[1:])


def release() -> None:
    """The thresholds ``hold`` found, back; nothing where this process does not hold."""
    global _found
    if _found is not None:
        gc.set_threshold(*_found)
        _found = None


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Held for the block, released after it (if nothing in it released earlier), however it ends."""
    hold()
    try:
        yield
    finally:
        release()
