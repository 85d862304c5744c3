"""``unilab bench profile``: where a training iteration's GPU time goes, graph by graph and kernel family by family.

An off-policy trainer's iteration is three CUDA graphs (env step, replay write, update block), an on-policy
trainer's two (one env step of the rollout, replayed for each of its steps; update block). Once ``bench profile``
has built a canonical workload's trainer and let it record its graphs (``unilab.apps.bench_profile``), this

1. times each graph replayed on its own, and the iteration as training runs it (off-policy: the env step beside
   the previous updates; on-policy: the rollout, then its update), with CUDA events;
2. lists the kernels each graph runs with ``torch.profiler``, which sees the kernels inside a graph launch, and
   sums them by family: MuJoCo Warp's physics stages (by the module that defines each kernel), matrix
   multiplies, Inductor's fused Triton kernels, optimiser kernels and torch's own kernels, by name.

3. off-policy only: runs the update block once more without its graph, so that the learner's profiler ranges
   (critic, actor and temperature: forward, backward, optimiser; the target update) exist on the host, and books
   each of its kernels to the range that launched it: the same kernels the graph replays, by phase.

Busy time is the union of the kernels' intervals. A graph whose busy time is well under its wall time is
bound by launch latency and dependencies rather than by arithmetic. One blind spot: CUPTI traces only the
first pass of a conditional while node, so the MuJoCo Warp solver's later iterations are missing from the
kernel counts and busy times (never from the wall times). ``physics_alone_ms`` (``bench physics``, captured)
says how long the physics takes by itself; an on-policy rollout's step graph is in the same unit.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

from unilab.core.device import settle

# A Warp kernel's device symbol: its function's name, an 8-digit hash, then this suffix.
WARP_SUFFIX = "_cuda_kernel_forward"
# MuJoCo Warp's modules (mujoco_warp._src.<name>) by the physics stage they implement.
MODULE_STAGES = {
    "solver": "physics: solver",
    "smooth": "physics: kinematics and dynamics",
    "constraint": "physics: constraints",
    "sensor": "physics: sensors",
    "passive": "physics: passive forces",
    "forward": "physics: actuation and integration",
    "derivative": "physics: actuation and integration",
    "bvh": "physics: collision",
    "ray": "physics: collision",
}
TORCH_FAMILIES = (
    ("matmul", ("gemm", "xmma", "cutlass", "cublas", "wgmma", "nvjet", "splitk", "matmul")),
    ("optimiser", ("multi_tensor_apply", "adam", "fused_sgd")),
    ("fused (Triton)", ("triton_",)),
    ("copy and fill", ("memcpy", "memset", "fillfunctor", "copy_kernel", "direct_copy")),
    ("reduction", ("reduce_kernel", "reduce_", "softmax", "norm_kernel", "layer_norm", "batch_norm")),
    ("torch elementwise", ("elementwise", "at::native")),
)


def physics_stage(module: str) -> str:
    """The stage of the physics that a Warp kernel defined in ``module`` belongs to."""
    if not module.startswith("mujoco_warp."):
        return "warp: other"
    name = module.rsplit(".", 1)[-1]
    return "physics: collision" if name.startswith("collision") else MODULE_STAGES.get(name, "physics: other")


def warp_kernel_stages() -> dict[str, str]:
    """The device symbol of every Warp kernel loaded so far, with its physics stage (by its defining module).

    Reads Warp's module registry, which is not public API; the test of this function notices when it moves.
    """
    from warp._src import codegen, context

    stages = {}
    for module in list(context.user_modules.values()):
        kernels = module.kernels.values() if isinstance(module.kernels, dict) else module.kernels
        for kernel in kernels:
            try:
                symbol = codegen.cuda_kernel_forward_name(kernel)
            except RuntimeError:  # never loaded: it has no hash, and it never ran
                continue
            stages[symbol] = physics_stage(kernel.func.__module__)
    return stages


def kernel_family(name: str, warp_stages: dict[str, str]) -> str:
    """The family a kernel's time is booked to: a Warp kernel's physics stage, else a family by name."""
    if name in warp_stages:
        return warp_stages[name]
    if name.endswith(WARP_SUFFIX):
        return "warp: other"
    lowered = name.lower()
    for family, keywords in TORCH_FAMILIES:
        if any(k in lowered for k in keywords):
            return family
    return "other"


@dataclass(frozen=True)
class Kernel:
    name: str
    start_us: float
    end_us: float


def busy_us(kernels: Iterable[Kernel]) -> float:
    """Microseconds during which at least one kernel ran (overlapping kernels count once)."""
    total, reach = 0.0, float("-inf")
    for kernel in sorted(kernels, key=lambda k: k.start_us):
        start = max(kernel.start_us, reach)
        if kernel.end_us > start:
            total += kernel.end_us - start
        reach = max(reach, kernel.end_us)
    return total


def tally(kernels: Sequence[Kernel], replays: int, warp_stages: dict[str, str], top: int = 8) -> dict:
    """Per replay: kernel count and busy time, both by family, and the kernels that took longest."""
    families: dict[str, dict[str, float]] = {}
    by_name: dict[str, float] = {}
    for kernel in kernels:
        family = families.setdefault(kernel_family(kernel.name, warp_stages), {"kernels": 0.0, "ms": 0.0})
        family["kernels"] += 1 / replays
        family["ms"] += (kernel.end_us - kernel.start_us) / 1e3 / replays
        by_name[kernel.name] = by_name.get(kernel.name, 0.0) + (kernel.end_us - kernel.start_us) / 1e3 / replays
    ranked = sorted(families.items(), key=lambda item: -item[1]["ms"])
    return {
        "kernels": len(kernels) / replays,
        "busy_ms": busy_us(kernels) / 1e3 / replays,
        "families": {name: {k: round(v, 4) for k, v in values.items()} for name, values in ranked},
        "top_kernels": [
            {"name": name, "ms": round(ms, 4)} for name, ms in sorted(by_name.items(), key=lambda i: -i[1])[:top]
        ],
    }


def time_ms(run: Callable[[], object], replays: int) -> float:
    """Mean milliseconds per call of ``run`` on the current stream, from CUDA events around ``replays`` calls."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(replays):
        run()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / replays


def traced_kernels(run: Callable[[], object], replays: int) -> list[Kernel]:
    """The GPU kernels, copies and fills that ``replays`` calls of ``run`` launched."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            run()
        torch.cuda.synchronize()
    return [
        Kernel(event.name, event.time_range.start, event.time_range.end)
        for event in prof.events()
        if event.device_type == DeviceType.CUDA
    ]


@dataclass(frozen=True)
class HostRange:
    """A profiler range on the host: where a phase of an update started and ended."""

    name: str
    start_us: float
    end_us: float


def _phase_row() -> dict[str, float]:
    return {"runs": 0.0, "kernels": 0.0, "ms": 0.0}


def book_to_phases(
    ranges: Sequence[HostRange], launches: Iterable[tuple[float | None, float]], repeats: int
) -> dict[str, dict[str, float]]:
    """Per phase, per repeat: how often it ran, its kernels and their milliseconds. A kernel is
    ``(launched_at_us, duration_us)`` and belongs to the innermost range that holds its launch on the host,
    whatever thread launched it (the backward pass launches from autograd's own thread while the caller waits
    inside its range). A kernel with no known launch, or launched outside every range, is booked to
    ``outside the phases``."""
    out: dict[str, dict[str, float]] = {}
    for r in ranges:
        out.setdefault(r.name, _phase_row())["runs"] += 1 / repeats
    spans = sorted(ranges, key=lambda r: r.end_us - r.start_us)  # innermost first
    for launched, duration in launches:
        owner = next((r.name for r in spans if launched is not None and r.start_us <= launched <= r.end_us), None)
        row = out.setdefault(owner or "outside the phases", _phase_row())
        row["kernels"] += 1 / repeats
        row["ms"] += duration / 1e3 / repeats
    return {name: {k: round(v, 4) for k, v in row.items()} for name, row in out.items()}


def kernel_launches(events: Sequence, host: object, device: object) -> list[tuple[float | None, float]]:
    """``(launched_at_us, duration_us)`` of each kernel in a profiler's ``events``: the start of the host op that
    queued it. The profiler itself links kernels to the ops that queued them (each host op's ``kernels``); the
    correlation ids it links them by are not on its events in every torch release. Kernels no op claims come
    last, as ``(None, their mean duration)``: their count and total time stay exact. A profiler range also shows
    on the device as a user annotation spanning its kernels; it is no kernel, so it is left out."""
    launches: list[tuple[float | None, float]] = [
        (event.time_range.start, kernel.duration)
        for event in events
        if event.device_type == host
        for kernel in event.kernels
    ]
    on_device = [
        event.time_range.end - event.time_range.start
        for event in events
        if event.device_type == device and not event.is_user_annotation
    ]
    unclaimed = len(on_device) - len(launches)
    if unclaimed > 0:
        rest = (sum(on_device) - sum(duration for _, duration in launches)) / unclaimed
        launches += [(None, rest)] * unclaimed
    return launches


def phase_profile(
    run: Callable[[], object], phases: Sequence[str], repeats: int, device: torch.device
) -> dict[str, dict[str, float]]:
    """Run ``run`` (an update block on ``device``, launched eagerly: inside a graph replay the host ranges do not
    exist) ``repeats`` times under the profiler, and book each kernel to the ``phases`` range that launched it."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    settle(device)
    with profile(activities=activities) as prof:
        for _ in range(repeats):
            run()
        settle(device)
    events = prof.events()
    wanted = set(phases)
    # Every host range of a phase (not its annotation on the device); the same phase runs several times per block.
    ranges = [
        HostRange(e.name, e.time_range.start, e.time_range.end)
        for e in events
        if e.name in wanted and e.device_type == DeviceType.CPU
    ]
    booked = book_to_phases(ranges, kernel_launches(events, DeviceType.CPU, DeviceType.CUDA), repeats)
    return {name: booked.get(name, _phase_row()) for name in (*phases, "outside the phases")}


def profile_graphs(
    graphs: dict[str, Callable[[], object]], iteration: Callable[[], object], replays: int
) -> dict[str, dict]:
    """Each graph's wall time alone and its kernels, then the iteration's wall time (median of five timings)."""
    out = {}
    warp_stages = warp_kernel_stages()
    for name, replay in graphs.items():
        row = {"wall_ms": time_ms(replay, replays)}
        row.update(tally(traced_kernels(replay, replays), replays, warp_stages))
        row["busy_fraction"] = row["busy_ms"] / row["wall_ms"]
        out[name] = row
    out["iteration"] = {"wall_ms": statistics.median(time_ms(iteration, replays) for _ in range(5))}
    return out


def attribution_table(result: dict) -> str:
    """Markdown: each graph's totals, then its kernel families by time; the update block's kernels by phase; the
    iteration as training runs it; then the physics' step alone, to set beside an env step's graph."""
    lines = ["| graph | family | kernels / replay | kernel ms / replay |", "|---|---|---|---|"]
    graphs = result["graphs"]
    for name, row in graphs.items():
        if "families" not in row:
            continue
        lines.append(
            f"| **{name}** | all: wall {row['wall_ms']:.3f} ms, busy {row['busy_ms']:.3f} ms "
            f"({100 * row['busy_fraction']:.0f} %) | {row['kernels']:.0f} | |"
        )
        lines += [
            f"| {name} | {family} | {values['kernels']:.1f} | {values['ms']:.3f} |"
            for family, values in row["families"].items()
        ]
    for name, row in (result.get("update_phases") or {}).items():
        if row["kernels"]:
            runs = f" (x{row['runs']:g})" if row["runs"] else ""
            lines.append(f"| update, by phase | {name}{runs} | {row['kernels']:.1f} | {row['ms']:.3f} |")
    order = result.get("iteration_order", "as training runs it")
    lines.append(f"| **iteration** ({order}) | wall {graphs['iteration']['wall_ms']:.3f} ms | | |")
    if result.get("physics_alone_ms") is not None:
        lines.append(f"| physics alone (`bench physics`, captured) | wall {result['physics_alone_ms']:.3f} ms | | |")
    lines += ["", "| graph | longest kernels | ms / replay |", "|---|---|---|"]
    for name, row in graphs.items():
        lines += [f"| {name} | `{short_kernel_name(k['name'])}` | {k['ms']:.3f} |" for k in row.get("top_kernels", ())]
    return "\n".join(lines)


def short_kernel_name(name: str) -> str:
    """A kernel's name as a table can hold it: a Warp kernel's without its entry point's suffix (its builder and
    hash kept: two variants of one kernel differ there), a C++ kernel's without its template and argument lists."""
    if name.endswith(WARP_SUFFIX):
        return name.removesuffix(WARP_SUFFIX).replace("__locals__", ".")
    return name.removeprefix("void ").split("<")[0].split("(")[0][:80]
