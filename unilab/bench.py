"""Throughput benchmarks; each prints one JSON line per configuration.

Diagnostic only: the end-to-end ``train`` run is the acceptance gate (DESIGN.md).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

import torch

from unilab.sim import BACKENDS, SimBackend, SimConfig, default_backend, make_backend


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _stand(backend: SimBackend, seed: int) -> None:
    """Every world at the stand keyframe, with a small random root velocity so worlds differ."""
    gen = torch.Generator().manual_seed(seed)
    n, model = backend.num_worlds, backend.model
    qpos = torch.tensor(model.key_qpos[0], dtype=torch.float32).expand(n, -1)
    qvel = torch.zeros(n, model.nv)
    qvel[:, :6] = torch.rand(n, 6, generator=gen) - 0.5
    mask = torch.ones(n, dtype=torch.bool)
    backend.reset_worlds(mask.to(backend.device), qpos.to(backend.device), qvel.to(backend.device))
    ctrl = torch.tensor(model.key_ctrl[0], dtype=torch.float32).expand(n, -1)
    backend.set_ctrl(ctrl.to(backend.device))


def _rate(run: Callable[[], None], steps: int, num_envs: int, device: torch.device) -> float:
    _sync(device)
    start = time.perf_counter()
    for _ in range(steps):
        run()
    _sync(device)
    return steps * num_envs / (time.perf_counter() - start)


def _captured_step(backend: SimBackend) -> Callable[[], None]:
    """Record one control step in a CUDA graph (warm-up on a side stream first) and return its replay."""
    side = torch.cuda.Stream(backend.device)
    side.wait_stream(torch.cuda.current_stream(backend.device))
    with torch.cuda.stream(side):
        for _ in range(3):
            backend.step()
    torch.cuda.current_stream(backend.device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        backend.step()
    return graph.replay


def bench_physics(sim: str, num_envs: int, steps: int, device: str | None, config: SimConfig) -> dict:
    backend = make_backend(sim, num_envs, device=device, config=config)
    dev = backend.device
    _stand(backend, seed=0)
    backend.step()  # first launch compiles/loads kernels
    eager = _rate(backend.step, steps, num_envs, dev)
    captured = None
    if backend.capabilities.graph_capturable and dev.type == "cuda":
        _stand(backend, seed=0)
        replay = _captured_step(backend)
        _stand(backend, seed=0)
        captured = _rate(replay, steps, num_envs, dev)
    backend.check_capacity()
    return {
        "bench": "physics",
        "sim": sim,
        "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "num_envs": num_envs,
        "steps": steps,
        "substeps": config.substeps,
        "timestep": backend.model.opt.timestep,
        "iterations": backend.model.opt.iterations,
        "ls_iterations": backend.model.opt.ls_iterations,
        "nconmax": config.nconmax,
        "njmax": config.njmax,
        "eager_steps_per_sec": round(eager, 1),
        "captured_steps_per_sec": None if captured is None else round(captured, 1),
        "overflows": backend.overflow_counts(),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="unilab bench", description=__doc__)
    sub = parser.add_subparsers(dest="bench", required=True)
    phys = sub.add_parser("physics", help="control steps/s of the physics backend, eager and CUDA-graph captured")
    phys.add_argument("--sim", choices=BACKENDS, default=None, help="default: mjwarp with CUDA, else mujoco")
    phys.add_argument("--num-envs", default="2048,8192", help="comma-separated world counts")
    phys.add_argument("--steps", type=int, default=200, help="timed control steps per measurement")
    phys.add_argument("--device", default=None)
    phys.add_argument("--iterations", type=int, default=None, help="solver iterations (default: the MJCF's)")
    phys.add_argument("--ls-iterations", type=int, default=None)
    phys.add_argument("--nconmax", type=int, default=SimConfig.nconmax)
    phys.add_argument("--njmax", type=int, default=SimConfig.njmax)
    args = parser.parse_args(argv)
    config = SimConfig(
        iterations=args.iterations, ls_iterations=args.ls_iterations, nconmax=args.nconmax, njmax=args.njmax
    )
    sim = args.sim or default_backend()
    for n in (int(x) for x in args.num_envs.split(",")):
        print(json.dumps(bench_physics(sim, n, args.steps, args.device, config)), flush=True)
