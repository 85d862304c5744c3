"""Throughput benchmarks; each prints one JSON line per configuration.

``physics``, ``env``, ``drift`` and ``profile`` are diagnostics. ``train`` runs the canonical end-to-end workloads
(docs/benchmarks.md), the acceptance gate, each in a fresh process and repeated, and reports what each run's
``run_summary.json`` says.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import mujoco
import torch

from unilab.apps.args import ArgumentParser, InputError, resolve_sim_device, unknown_name
from unilab.apps.bench_profile import add_profile_options, run_profile
from unilab.apps.bench_timing import STAND_STEPS, capture_replay, rate, stand_ctrl, standing
from unilab.apps.bench_train import bench_train, summarize_train
from unilab.apps.early import GROUPS
from unilab.apps.workloads import CANONICAL_WORKLOADS
from unilab.core.device import settle
from unilab.robots import g1
from unilab.run.config import WARP_OUTPUTS
from unilab.run.progress import announce
from unilab.run.resources import FLOAT_BYTES, InsufficientMemoryError, check_fits, format_bytes
from unilab.sim import (
    BACKENDS,
    BROADPHASES,
    SimCapacityError,
    SimConfig,
    backend_device,
    default_backend,
    make_backend,
    state_shapes,
)
from unilab.tasks.g1_walk_rough.config import TERRAIN as ROUGH_TERRAIN
from unilab.terrain import generate, terrain_model, terrain_spec
from unilab.terrain.generator import LAYOUTS

# The fields of one mjwarp contact counted below: dist, pos, frame, includemargin, friction, solref, solreffriction
# and solimp (mujoco_warp's Contact, float32); its integer fields are left out.
CONTACT_FLOATS = 1 + 3 + 9 + 1 + 5 + 2 + 2 + 5


def physics_bytes_per_world(sim: str, model: mujoco.MjModel, config: SimConfig) -> dict[str, int]:
    """A lower bound on what one world of ``bench physics`` holds, by part, from the model's sizes, so a world count
    that cannot fit is refused before anything is allocated.

    Every backend keeps a world's state as float32 (``state_shapes``: joint state, body poses and velocities, sites,
    sensors, gains) and the bench its control. mjwarp also sizes each world's contact and constraint buffers by
    ``nconmax`` and ``njmax``: counted are the dense constraint Jacobian, ``njmax`` rows of ``nv`` float32 (a sparse
    model's is left out: its size is mjwarp's own guess), and ``CONTACT_FLOATS`` of each of ``nconmax`` contacts.
    mjwarp's other per-world arrays are not counted: for the G1 at the defaults (64 contacts, 400 rows) its data
    takes 131 KB a world besides the 3 KB of state, the bound is 66 KB, so a refusal is always a real shortage."""
    state = sum(math.prod(shape) for shape in state_shapes(model).values()) + model.nu
    parts = {"state": FLOAT_BYTES * state}
    if sim == "mjwarp":
        parts["contacts"] = FLOAT_BYTES * CONTACT_FLOATS * config.nconmax
        parts["constraint Jacobian"] = 0 if mujoco.mj_isSparse(model) else FLOAT_BYTES * config.njmax * model.nv
    return parts


def check_physics_memory(sim: str, num_envs: int, device: str | None, config: SimConfig) -> None:
    """Refuse ``num_envs`` worlds whose ``physics_bytes_per_world`` exceed the free memory of the device they would
    live on."""
    per_world = physics_bytes_per_world(sim, g1.load_model(), config)
    parts = {name: num_envs * size for name, size in per_world.items() if size}
    each = format_bytes(sum(per_world.values()))
    check_fits(parts, backend_device(sim, device), f"lower --num-envs ({num_envs} worlds of at least {each} each)")


def bench_physics(
    sim: str,
    num_envs: int,
    steps: int,
    device: str | None,
    config: SimConfig,
    terrain: str | None = None,
    tiles: str | None = None,
    geoms: dict[str, str | None] | None = None,
) -> dict:
    """The G1 stepped at its stand targets, timed from the stand ``STAND_STEPS`` at a time; with ``terrain`` (a
    layout, ``unilab.terrain.scene``) on the rough walk's terrain grid, the worlds spread over its tiles' centres,
    instead of the flat scene's plane; with ``tiles`` (a terrain type of the grid) over that type's tiles only, so
    each type's cost can be told apart; ``geoms`` narrows the geoms that touch its height fields and its other
    pieces (``TerrainConfig``'s ``hfield_geoms`` and ``box_geoms``, by those names)."""
    geoms = geoms or {}
    origins = None
    if terrain is not None:
        grid = generate(dataclasses.replace(ROUGH_TERRAIN, layout=terrain, **geoms))
        model = terrain_model(g1.SCENE, grid)
        centres = grid.origins if tiles is None else grid.origins[:, [ROUGH_TERRAIN.types.index(tiles)]]
        origins = torch.as_tensor(centres.reshape(-1, 3), dtype=torch.float32)
    else:
        model = g1.load_model()
    began = time.perf_counter()
    backend = make_backend(sim, model, num_envs, device=device, config=config)
    built = time.perf_counter() - began  # on mjwarp, mujoco_warp's step modules load (or compile) here
    dev = backend.device
    ctrl = stand_ctrl(backend)
    state, restand = standing(backend, seed=0, origins=origins)

    def step() -> None:
        backend.step_(state, ctrl)

    began = time.perf_counter()
    backend.begin_kernel_build()  # the model's own kernels, built side by side as a run's warm-up builds them
    step()
    settle(dev)
    first_step = time.perf_counter() - began
    eager = rate(step, steps, num_envs, dev, restand)
    captured = None
    if backend.capabilities.graph_capturable and dev.type == "cuda":
        restand()
        replay = capture_replay(step, dev)  # the graph reads and writes ``state``'s tensors, which restand rewrites
        captured = rate(replay, steps, num_envs, dev, restand)
    backend.check_capacity()
    return {
        "bench": "physics",
        "sim": sim,
        "scene": f"terrain/{terrain}" if terrain else "flat",
        "tiles": tiles,
        "hfield_geoms": geoms.get("hfield_geoms"),
        "box_geoms": geoms.get("box_geoms"),
        "stand_steps": STAND_STEPS,
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
        "broadphase": backend.broadphase_name(),
        "build_sec": round(built, 3),
        "first_step_sec": round(first_step, 3),
        "eager_steps_per_sec": round(eager, 1),
        "captured_steps_per_sec": None if captured is None else round(captured, 1),
        "overflows": backend.overflow_counts(),
        "peak": dict(zip(("contacts", "constraint_rows"), backend.peak_tensor().tolist(), strict=True)),
    }


def _mlp_policy(obs_dim: int, action_dim: int, device: torch.device) -> Callable:
    """A small actor-sized MLP (512-256-128, tanh output) standing in for a trained policy."""
    net = torch.nn.Sequential(
        torch.nn.Linear(obs_dim, 512),
        torch.nn.SiLU(),
        torch.nn.Linear(512, 256),
        torch.nn.SiLU(),
        torch.nn.Linear(256, 128),
        torch.nn.SiLU(),
        torch.nn.Linear(128, action_dim),
        torch.nn.Tanh(),
    ).to(device)

    @torch.no_grad()
    def policy(obs) -> torch.Tensor:
        return net(obs["policy"])

    return policy


def bench_env(task: str, sim: str, num_envs: int, steps: int, device: str | None, compile: bool) -> dict:
    from unilab.envs.runner import EnvRunner
    from unilab.tasks.registry import make_functional_env

    env = make_functional_env(task, sim=sim, num_envs=num_envs, device=device)
    dev = env.device
    policy = _mlp_policy(env.obs_dims["policy"], env.action_dim, dev)
    eager = EnvRunner(env, policy, capture=False)
    eager.step()
    eager_rate = rate(eager.step, steps, num_envs, dev)
    captured_rate = None
    if dev.type == "cuda" and env.sim.capabilities.graph_capturable:
        runner = EnvRunner(env, policy, capture=True, compile=compile)
        captured_rate = rate(runner.step, steps, num_envs, dev)
        runner.check()
    return {
        "bench": "env",
        "task": task,
        "sim": sim,
        "device": str(dev),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
        "num_envs": num_envs,
        "steps": steps,
        "compile": compile,
        "eager_steps_per_sec": round(eager_rate, 1),
        "captured_steps_per_sec": None if captured_rate is None else round(captured_rate, 1),
    }


def bench_drift(task: str, sim: str, num_envs: int, steps: int, device: str | None, compile: bool) -> dict:
    """Two runners of one seed, one policy and one env, stepped side by side: where and how far they part.

    On the CPU they never do. On a GPU the physics sums contact and constraint terms with atomic adds, whose order
    changes from launch to launch; ``one_step`` is the largest gap after stepping one state twice.
    """
    from unilab.envs.runner import EnvRunner
    from unilab.tasks.registry import make_functional_env

    env = make_functional_env(task, sim=sim, num_envs=num_envs, device=device)
    dev = env.device
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        policy = _mlp_policy(env.obs_dims["policy"], env.action_dim, dev)
    capture = dev.type == "cuda" and env.sim.capabilities.graph_capturable
    a, b = (EnvRunner(env, policy, seed=0, capture=capture, compile=compile and capture) for _ in range(2))
    twice = [env.step(a.state, policy(a.state["obs"]), a.rng)[0]["sim", "qpos"] for _ in range(2)]
    one_step = (twice[0] - twice[1]).abs().max().item()
    first, gaps = None, {}
    for k in range(1, steps + 1):
        a.step(), b.step()
        gap = (a.state["sim", "qpos"] - b.state["sim", "qpos"]).abs().amax(dim=-1)
        if first is None and bool(gap.max() > 0):
            first = k
        if k in (1, 10, 50, 100, 200, 500, steps):
            gaps[k] = {"max_qpos_gap": gap.max().item(), "worlds_apart": int((gap > 0).sum())}
    return {
        "bench": "drift",
        "task": task,
        "sim": sim,
        "device": str(dev),
        "num_envs": num_envs,
        "steps": steps,
        "one_step_max_qpos_gap": one_step,
        "first_step_apart": first,
        "gaps": gaps,
    }


SIZES = {
    "cuda": {"physics": ("2048,8192", 200), "env": ("2048,8192", 200), "drift": ("2048", 200)},
    "cpu": {"physics": ("16,64", 50), "env": ("16,64", 50), "drift": ("16", 50)},
}


def _sizes_help(bench: str) -> tuple[str, str]:
    gpu, cpu = SIZES["cuda"][bench], SIZES["cpu"][bench]
    return f"comma-separated counts (default {gpu[0]} on CUDA, {cpu[0]} on the CPU)", (
        f"timed steps per measurement (default {gpu[1]} on CUDA, {cpu[1]} on the CPU)"
    )


def _add_env_stepping_args(parser: argparse.ArgumentParser, bench: str) -> None:
    """The options of the benches that step a task's env (``env`` and ``drift``)."""
    sizes, steps = _sizes_help(bench)
    parser.add_argument("--task", default="g1_walk_flat")
    parser.add_argument("--sim", choices=BACKENDS, default=None)
    parser.add_argument("--num-envs", default=None, help=sizes)
    parser.add_argument("--steps", type=int, default=None, help=steps)
    parser.add_argument("--device", default=None)
    parser.add_argument("--compile", action="store_true", help="torch.compile the step before capturing it")


def _positive_counts(parser: argparse.ArgumentParser, text: str) -> list[int]:
    """``--num-envs``'s comma-separated counts, each an integer >= 1, or a one-line usage error."""
    try:
        counts = [int(x) for x in text.split(",")]
    except ValueError:
        counts = []
    if not counts or min(counts) < 1:
        parser.error(f"--num-envs must be comma-separated integers >= 1, got {text!r}")
    return counts


def _parser() -> ArgumentParser:
    """The subcommands and their options."""
    parser = ArgumentParser(prog="unilab bench", description=__doc__)
    sub = parser.add_subparsers(dest="bench", required=True)
    phys = sub.add_parser("physics", help="control steps/s of the physics backend, eager and CUDA-graph captured")
    phys.add_argument("--sim", choices=BACKENDS, default=None, help="default: mjwarp with CUDA, else mujoco")
    sizes, steps = _sizes_help("physics")
    phys.add_argument("--num-envs", default=None, help=sizes.replace("counts", "world counts"))
    phys.add_argument("--steps", type=int, default=None, help=steps.replace("steps", "control steps", 1))
    phys.add_argument("--device", default=None)
    phys.add_argument("--iterations", type=int, default=None, help="solver iterations (default: the MJCF's)")
    phys.add_argument("--ls-iterations", type=int, default=None)
    phys.add_argument("--nconmax", type=int, default=SimConfig.nconmax)
    phys.add_argument("--njmax", type=int, default=SimConfig.njmax)
    phys.add_argument(
        "--terrain", choices=LAYOUTS, default=None, help="on the rough walk's terrain grid, in this layout"
    )
    phys.add_argument(
        "--broadphase", choices=BROADPHASES, default=None, help="MuJoCo Warp's pair search (default: its own choice)"
    )
    phys.add_argument(
        "--tiles",
        choices=ROUGH_TERRAIN.types,
        default=None,
        help="with --terrain: every world on that terrain type's tiles (default: spread over all of them)",
    )
    phys.add_argument(
        "--warp-opt",
        type=int,
        choices=range(4),
        default=None,
        help="mjwarp: Warp's optimization level for the kernels this process compiles (default: Warp's, 3 on CUDA); "
        "with an empty WARP_CACHE_PATH, build_sec and first_step_sec say what compiling at it costs",
    )
    phys.add_argument(
        "--warp-output",
        choices=WARP_OUTPUTS,
        default=None,
        help="mjwarp on CUDA: what Warp's compiler emits (default: Warp's choice, PTX where the driver is at least as "
        "new as it); PTX is compiled again by the driver as each module loads (its cache: CUDA_CACHE_PATH), CUBIN "
        "is the GPU's code already",
    )
    phys.add_argument(
        "--hfield-geoms",
        default=None,
        metavar="REGEX",
        help="with --terrain: only the robot geoms whose names match touch the height fields (default: all)",
    )
    phys.add_argument(
        "--box-geoms",
        default=None,
        metavar="REGEX",
        help="with --terrain: only the robot geoms whose names match touch its boxes and solids (default: all)",
    )
    env = sub.add_parser("env", help="env steps/s with a small MLP policy in the loop, eager and captured")
    _add_env_stepping_args(env, "env")
    drift = sub.add_parser("drift", help="how far two runs of one seed drift apart, step by step")
    _add_env_stepping_args(drift, "drift")
    train = sub.add_parser("train", help="the canonical `train` runs, repeated; their tail rates")
    train.add_argument("--workloads", default="sac,flashsac", help=f"comma-separated: {', '.join(CANONICAL_WORKLOADS)}")
    train.add_argument("--repeats", type=int, default=3)
    train.add_argument("--sim", choices=BACKENDS, default=None)
    train.add_argument("--log-root", type=Path, default=None, help="run directories (default: a temporary one)")
    train.add_argument(
        "--cold",
        action="store_true",
        help="each run with an empty cache root of its own, removed after it: a first run's start-up",
    )
    train.add_argument(
        "--warm",
        type=int,
        default=0,
        metavar="N",
        help="with --cold: then N more runs of each workload in the cache root its last cold run filled (warm "
        "start-ups), summarised apart",
    )
    train.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=OVERRIDES",
        help="a named set of Hydra overrides (quoted, space-separated; may be empty); with several, each workload runs "
        "once per variant, interleaved, and is summarised per variant",
    )
    train.add_argument("overrides", nargs="*", help="Hydra overrides applied after the canonical ones")
    add_profile_options(sub.add_parser("profile", help="kernels and busy time of each CUDA graph of an iteration"))
    return parser


def _variants(parser: ArgumentParser, given: list[str]) -> dict[str, list[str]] | None:
    """``--variant NAME=OVERRIDES`` options as names and override lists, in the order given; None without any.
    A name labels run directories, so it is a word of letters, digits, ``-`` and ``_``, and each is used once."""
    variants: dict[str, list[str]] = {}
    for option in given:
        name, sep, overrides = option.partition("=")
        if not sep or not name or not name.replace("-", "").replace("_", "").isalnum():
            parser.error(f"--variant takes NAME=OVERRIDES with a name of letters, digits, - and _; got {option!r}")
        if name in variants:
            parser.error(f"--variant {name} is given twice")
        try:
            variants[name] = shlex.split(overrides)
        except ValueError as exc:
            parser.error(f"--variant {name}: {exc}")
    return variants or None


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.bench == "profile":
        run_profile(parser, args)
        return
    sim = args.sim or default_backend()
    if args.bench == "train":
        workloads = args.workloads.split(",")
        unknown = [w for w in workloads if w not in CANONICAL_WORKLOADS]
        if unknown or args.repeats < 1:
            parser.error(f"unknown workloads {unknown}" if unknown else f"--repeats must be >= 1, got {args.repeats}")
        if args.warm < 0:
            parser.error(f"--warm must be >= 0, got {args.warm}")
        variants = _variants(parser, args.variant)
        # A workload is its algorithm and task, and --sim its backend: an override naming one would fail every run.
        given = [*args.overrides, *(o for overrides in (variants or {}).values() for o in overrides)]
        naming = [o for o in given if o.lstrip("+").split("=", 1)[0] in GROUPS]
        if naming:
            parser.error(f"a workload fixes algo and task, and --sim the backend; drop {naming} or pick a workload")
        log_root = args.log_root or Path(tempfile.mkdtemp(prefix="unilab-bench-"))
        try:  # a log root that holds one of the runs is refused before any run
            rows = bench_train(workloads, args.repeats, sim, args.overrides, log_root, args.cold, variants, args.warm)
        except InputError as exc:
            parser.error(str(exc))
        for row in summarize_train(rows):
            print(json.dumps(row), flush=True)
        failed = [row for row in rows if row["status"] != "completed"]
        if failed:  # the rows say which; the exit status and one line say that something did fail
            said = (failed[0].get("stderr_tail") or "").strip().splitlines() or ["no output"]
            print(
                f"{parser.prog}: error: {len(failed)} of {len(rows)} runs failed; the first "
                f"({failed[0]['workload']}, exit status {failed[0]['returncode']}): {said[-1]}",
                file=sys.stderr,
            )
            # An input error (exit status 2) in every failed run is the caller's; anything else is the runs'.
            raise SystemExit(2 if all(row["returncode"] == 2 for row in failed) else 1)
        return
    where = "cuda" if resolve_sim_device(parser.prog, sim, args.device).startswith("cuda") else "cpu"
    default_sizes, default_steps = SIZES[where][args.bench]
    sizes = _positive_counts(parser, args.num_envs or default_sizes)
    args.steps = default_steps if args.steps is None else args.steps
    if args.steps < 1:
        parser.error(f"--steps must be >= 1, got {args.steps}")
    if args.bench in ("env", "drift"):
        from unilab.tasks.registry import list_tasks

        if args.task not in list_tasks():
            parser.error(unknown_name("task", args.task, list_tasks()))
        bench = bench_env if args.bench == "env" else bench_drift
        for n in sizes:
            announce(parser.prog, f"{args.bench}: {n} {args.task} envs on {sim} ({where}), {args.steps} steps")
            print(json.dumps(bench(args.task, sim, n, args.steps, args.device, args.compile)), flush=True)
        return
    _run_physics(parser, args, sim, sizes)


def _run_physics(parser: ArgumentParser, args: argparse.Namespace, sim: str, sizes: list[int]) -> None:
    """``bench physics``: its solver options checked, every size's memory checked, then each size measured."""
    given = {
        "--nconmax": args.nconmax,
        "--njmax": args.njmax,
        "--iterations": args.iterations,
        "--ls-iterations": args.ls_iterations,
    }
    bad = {k: v for k, v in given.items() if v is not None and v < 1}
    if bad:
        parser.error(", ".join(f"{k} must be >= 1, got {v}" for k, v in bad.items()))
    if args.tiles is not None and args.terrain is None:
        parser.error("--tiles needs --terrain (the tiles are the terrain grid's)")
    geoms = {k: v for k, v in (("hfield_geoms", args.hfield_geoms), ("box_geoms", args.box_geoms)) if v is not None}
    if geoms:
        if args.terrain is None:
            flags = " and ".join("--" + k.replace("_", "-") for k in geoms)
            parser.error(f"{flags} needs --terrain (the geoms narrowed are the terrain grid's)")
        try:  # a pattern that is no regular expression, or names no geom, before any world is built
            terrain_spec(g1.SCENE, generate(dataclasses.replace(ROUGH_TERRAIN, **geoms)))
        except ValueError as exc:
            parser.error(str(exc))
    for flag, value in (("--warp-opt", args.warp_opt), ("--warp-output", args.warp_output)):
        if value is not None and sim != "mjwarp":
            parser.error(f"{flag} is Warp's: it needs --sim mjwarp")
    if sim == "mjwarp" and (args.warp_opt is not None or args.warp_output is not None):
        import warp as wp

        if args.warp_opt is not None:
            wp.config.optimization_level = args.warp_opt
        if args.warp_output is not None:
            wp.config.cuda_output = args.warp_output
    config = SimConfig(
        iterations=args.iterations,
        ls_iterations=args.ls_iterations,
        nconmax=args.nconmax,
        njmax=args.njmax,
        broadphase=args.broadphase,
    )
    for n in sizes:  # every size first: a refused last size would otherwise come after the others' runs
        try:
            check_physics_memory(sim, n, args.device, config)
        except InsufficientMemoryError as exc:
            parser.error(str(exc))
    for n in sizes:
        announce(parser.prog, f"physics: {n} worlds on {args.sim or default_backend()}, {args.steps} control steps")
        try:
            row = bench_physics(sim, n, args.steps, args.device, config, args.terrain, args.tiles, geoms)
            print(json.dumps({**row, "warp_opt": args.warp_opt, "warp_output": args.warp_output}), flush=True)
        except SimCapacityError as exc:  # a result of the sizes chosen, said as such
            parser.error(f"{n} worlds: {exc}")
