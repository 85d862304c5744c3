"""What an ahead-of-time compiled env step would save a warm start, and whether it computes what eager does.

    python scripts/precompile_probe.py {warm,save,load} --task g1_walk_flat --device cuda --num-envs 2048

Run each mode in a fresh process, as a new training run would pay it: ``warm`` times ``torch.compile``'s first call
of the env's pure step (no policy; the caches filled by an earlier run), ``save`` compiles it with ``aot_compile``
and saves it to ``--path``, ``load`` loads that file and times its first call. ``load`` also steps eagerly twice
from the same inputs: the first eager step's largest difference from the second is the backend's own run-to-run
spread (MuJoCo Warp's contacts on a GPU need not repeat bit for bit), the floor against which the loaded step's
difference from eager is read. Prints one JSON line.

The step reaches the env as a module global handed to the save as external data: Dynamo pickles every object its
trace reached into the saved guard state, and a backend's Warp runtime does not pickle, so a closure or a bound
method over the env cannot be saved. The guards are dropped (``keep_portable_guards_unsafe``), so the file is only
valid for the task, envs, device and code it was saved from.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from unilab.core.cache_dirs import configure

ENV: Any = None  # the FunctionalEnv the saved step reads; set before any compile, save or load
KEYS: list = []  # the state entries' keys, in the order the step's tensors come


def step(values: list, action: Any, rng: Any) -> tuple[dict, dict]:
    """The env's pure step over the state's entries as a list: what is compiled and saved."""
    return ENV.step_entries_(dict(zip(KEYS, values, strict=True)), action, rng)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("warm", "save", "load"))
    parser.add_argument("--task", default="g1_walk_flat")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--path", type=Path, default=None, help="the saved step (default: in the temporary folder)")
    args = parser.parse_args()
    began = time.perf_counter()
    configure()  # the caches a command uses, before torch's compiler is imported
    import torch

    from unilab.core.rng import advance, make_rng
    from unilab.tasks.registry import make_functional_env

    if hasattr(torch._dynamo.config, "enable_aot_compile"):  # torch 2.11 has aot_compile behind this switch
        torch._dynamo.config.enable_aot_compile = True
    global ENV, KEYS
    ENV = make_functional_env(args.task, "mjwarp", args.num_envs, args.device)
    rng = make_rng(0, ENV.device)
    entries = ENV.entries(ENV.reset(rng))
    KEYS = list(entries)
    noise = torch.Generator(ENV.device).manual_seed(1)
    action = 0.3 * torch.randn(args.num_envs, ENV.action_dim, device=ENV.device, generator=noise)
    path = args.path or Path(f"/tmp/unilab_precompiled_{args.task}_{ENV.device.type}_{args.num_envs}.bin")
    report: dict[str, Any] = {"mode": args.mode, "task": args.task, "device": str(ENV.device)}
    report["build_sec"] = time.perf_counter() - began

    def inputs() -> tuple[list, Any, Any]:  # fresh copies: the step writes the physics into the tensors it is given
        return [value.clone() for value in entries.values()], action.clone(), advance(rng)

    def timed(name: str, fn: Any) -> Any:
        start = time.perf_counter()
        result = fn()
        if ENV.device.type == "cuda":
            torch.cuda.synchronize()
        report[name] = time.perf_counter() - start
        return result

    def gap(a: Any, b: Any) -> float:
        pairs = zip(torch.utils._pytree.tree_leaves(a), torch.utils._pytree.tree_leaves(b), strict=True)
        tensors = [(x, y) for x, y in pairs if isinstance(x, torch.Tensor) and x.numel()]
        return max(((x.double() - y.double()).abs().max().item() for x, y in tensors), default=0.0)

    if args.mode == "warm":
        compiled = torch.compile(step, fullgraph=True)
        timed("first_call_sec", lambda: compiled(*inputs()))
    elif args.mode == "save":
        options = {"guard_filter_fn": torch.compiler.keep_portable_guards_unsafe}
        compiled = torch.compile(step, fullgraph=True, options=options)
        saved = timed("aot_compile_sec", lambda: compiled.aot_compile((inputs(), {})))
        timed("save_sec", lambda: saved.save_compiled_function(str(path), external_data={"env": ENV}))
    else:
        with path.open("rb") as file:
            load = torch.compiler.load_compiled_function
            loaded = timed("load_sec", lambda: load(file, f_globals=globals(), external_data={"env": ENV}))
        got = timed("first_call_sec", lambda: loaded(*inputs()))
        first, second = step(*inputs()), step(*inputs())
        report.update(eager_floor=gap(first, second), loaded_gap=gap(got, first))
    report["total_sec"] = time.perf_counter() - began
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
