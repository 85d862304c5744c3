"""How the benches time their work: robots held at their stand, steps a second, and graphs replayed."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from unilab.core.cuda_graphs import record, warm_up
from unilab.core.device import settle
from unilab.sim import SimBackend


def stand_pose(
    backend: SimBackend, seed: int, origins: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every world's joint positions and velocities at the stand keyframe, with a small random root velocity so that
    worlds differ; with ``origins`` (k, 3), world ``i`` stands at origin ``i mod k`` (a terrain's tiles)."""
    gen = torch.Generator().manual_seed(seed)
    n, model = backend.num_worlds, backend.model
    qpos = torch.tensor(model.key_qpos[0], dtype=torch.float32).repeat(n, 1)
    if origins is not None:
        qpos[:, :3] += origins[torch.arange(n) % origins.shape[0]]
    qvel = torch.zeros(n, model.nv)
    qvel[:, :6] = torch.rand(n, 6, generator=gen) - 0.5
    return qpos.to(backend.device), qvel.to(backend.device)


def standing(
    backend: SimBackend, seed: int, origins: torch.Tensor | None = None
) -> tuple[dict[str, torch.Tensor], Callable[[], None]]:
    """A state with every world at ``stand_pose``, and the call that puts every world back there in place (the
    state's own tensors, which a captured graph reads and writes)."""
    state = backend.initial_state()
    everyone = torch.ones(backend.num_worlds, dtype=torch.bool, device=backend.device)
    pose = stand_pose(backend, seed, origins)

    def restand() -> None:
        backend.reset_(state, everyone, *pose)

    restand()
    return state, restand


def stand_state(backend: SimBackend, seed: int, origins: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    """A state with every world at ``stand_pose``."""
    return standing(backend, seed, origins)[0]


def stand_ctrl(backend: SimBackend) -> torch.Tensor:
    """Every world's actuators held at the stand keyframe's targets, to step a ``stand_state`` with."""
    ctrl = torch.tensor(backend.model.key_ctrl[0], dtype=torch.float32, device=backend.device)
    return ctrl.expand(backend.num_worlds, -1).contiguous()


STAND_STEPS = 20
"""Control steps timed from the stand at a time. Held at its stand targets with no policy, the G1 is still up after
25 steps and most robots are down by 50; a fallen robot's contacts are not a walking one's (fewer rows; on a height
field a geom that no longer touches it sinks in deep, and its convex collision gets dearer)."""


def rate(
    run: Callable[[], None], steps: int, num_envs: int, device: torch.device, restand: Callable[[], None] | None = None
) -> float:
    """``run``'s control steps a second over ``steps`` steps; with ``restand`` (putting every world back at the stand,
    in place), timed ``STAND_STEPS`` at a time from the stand, the resets untimed."""
    block = steps if restand is None else STAND_STEPS
    elapsed = 0.0
    for done in range(0, steps, block):
        if restand is not None:
            restand()
        settle(device)
        start = time.perf_counter()
        for _ in range(min(block, steps - done)):
            run()
        settle(device)
        elapsed += time.perf_counter() - start
    return steps * num_envs / elapsed


def capture_replay(step: Callable[[], None], device: torch.device) -> Callable[[], None]:
    """Record ``step`` in a CUDA graph (warm-up on a side stream first) and return its replay."""
    own = torch.cuda.Stream(device)  # see unilab.core.cuda_graphs
    warm_up(step, own, times=3)
    graph, _ = record(step, own)
    return graph.replay
