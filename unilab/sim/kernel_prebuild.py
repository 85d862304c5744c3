"""Build the Warp kernels a call will launch before it runs, side by side instead of one after another.

mujoco_warp creates most of a model's kernels inside ``mjw.step`` (per geom pair type, per solver size), and Warp
compiles each at its first launch, so on a machine with an empty kernel cache the first step compiles them in
sequence on one core: for the rough walk's scene on an H200, about 130 s, the two height-field collision kernels
alone 82 s. Which kernels a step launches is decided by the model's sizes and options in Python, not by the data, so
running the step's Python with every launch recorded instead of made names them all; each is then compiled on a
thread of its own (Warp compiles outside the GIL), and the step that follows finds them loaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import warp as wp
from warp._src.context import _resolve_launch_block_dim

# A module and the block size it is compiled for: Warp keys a module's compiled code by both.
Variant = tuple[Any, int]
# Warp's sorts and scans that mujoco_warp calls inside a step: native code, no module of their own.
_NATIVE = ("segmented_sort_pairs", "radix_sort_pairs", "array_scan")


def _skip(*args: Any, **kwargs: Any) -> None:
    return None


def launched_kernels(call: Callable[[], object], device: wp.DeviceLike) -> list[Variant]:
    """The (module, block size) of every kernel ``call`` launches on ``device``, found without launching any.

    While ``call`` runs, ``wp.launch`` and ``wp.launch_tiled`` only record, a captured loop or branch runs its
    body once, and Warp's native sorts and scans (``_NATIVE``) do nothing: they compile no module, and they would
    read index arrays that no kernel has filled (the segmented sort of the ``sap_segmented`` pair search refused
    the garbage). No kernel runs and no array changes, so ``call`` must not read results back to the host to decide
    what to do next (``mjw.step`` reads none). The functions are Warp's module attributes, swapped for the whole
    process: no other thread may launch Warp kernels meanwhile.
    """
    device = wp.get_device(device)
    found: dict[tuple[int, int], Variant] = {}

    def record(kernel: Any, block_dim: int | None) -> None:
        dim = _resolve_launch_block_dim(device, block_dim)
        found.setdefault((id(kernel.module), dim), (kernel.module, dim))

    def launch(kernel: Any, *args: Any, block_dim: int | None = None, **kwargs: Any) -> None:
        record(kernel, block_dim)

    def launch_tiled(*args: Any, **kwargs: Any) -> None:
        record(args[0] if args else kwargs["kernel"], kwargs["block_dim"])

    def capture_while(condition: Any, while_body: Callable, stream: Any = None, **kwargs: Any) -> None:
        while_body(**kwargs)

    def capture_if(
        condition: Any, on_true: Callable | None = None, on_false: Callable | None = None, stream: Any = None, **kw: Any
    ) -> None:
        for branch in (on_true, on_false):
            if callable(branch):
                branch(**kw)

    swaps = {"launch": launch, "launch_tiled": launch_tiled, "capture_while": capture_while, "capture_if": capture_if}
    with _swapped(wp, swaps), _swapped(wp.utils, dict.fromkeys(_NATIVE, _skip)):
        call()
    return list(found.values())


def load_variants(variants: list[Variant], device: wp.DeviceLike, workers: int | None = None) -> None:
    """Compile (or load from Warp's cache) each variant on ``device``, ``workers`` at a time (default: one per
    core)."""
    device = wp.get_device(device)
    workers = workers or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(variants)))) as pool:
        for future in [pool.submit(module.load, device, block_dim=dim) for module, dim in variants]:
            future.result()


@contextmanager
def _swapped(namespace: Any, replacements: dict[str, Callable]) -> Iterator[None]:
    saved = {name: getattr(namespace, name) for name in replacements}
    for name, replacement in replacements.items():
        setattr(namespace, name, replacement)
    try:
        yield
    finally:
        for name, original in saved.items():
            setattr(namespace, name, original)
