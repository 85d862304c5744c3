"""Recording CUDA graphs that replay beside one another.

torch records every graph on one shared capture stream unless it is given another, and cuBLAS caches one
workspace per stream, so graphs recorded on the same stream share that scratch memory: replayed at the same time
on two streams (the env step beside a trainer's updates), their GEMMs race on it, and on an H200 that wedged the
GPU. So each owner records its graphs on a stream it keeps for itself, after warming the work up on that same
stream (Warp kernel loads, compiles, the allocator's pools).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

import torch

T = TypeVar("T")


def warm_up(fn: Callable[[], T], stream: torch.cuda.Stream, times: int = 1) -> T:
    """Call ``fn`` ``times`` times on ``stream``, after the work already queued on the current stream, which then
    waits for them; returns the last call's output."""
    if times < 1:
        raise ValueError(f"times must be >= 1, got {times}")
    current = torch.cuda.current_stream(stream.device)
    stream.wait_stream(current)
    with torch.cuda.stream(stream):
        for _ in range(times):
            out = fn()
    current.wait_stream(stream)
    return out


def record(
    fn: Callable[[], T], stream: torch.cuda.Stream, generators: Sequence[torch.Generator] = ()
) -> tuple[torch.cuda.CUDAGraph, T]:
    """Record one call of ``fn`` as a CUDA graph on ``stream``; returns the graph and that call's output, the
    static tensors every replay overwrites. ``generators`` are the ones ``fn`` draws from: each replay then
    advances their state as the eager call would."""
    graph = torch.cuda.CUDAGraph()
    for generator in generators:
        graph.register_generator_state(generator)
    with torch.cuda.graph(graph, stream=stream):
        out = fn()
    return graph, out
