"""What a saved compiled env step (``algo.precompile``) saves a warm start, and whether it computes what eager does.

    python scripts/precompile_probe.py {warm,save,load} --task g1_walk_flat --device cuda --num-envs 2048

Run each mode in a fresh process, as a new training run would pay it. Each builds the env and a runner as a training
run does (``unilab.envs.runner.EnvRunner`` with ``compile``), without a policy, and times the runner's first step:
``warm`` through ``torch.compile`` (the caches filled by an earlier run), ``save`` compiled ahead of time and saved
to ``--path``, ``load`` loaded from that file. Each also steps two eager runners from the same state and action:
their largest difference from each other is the backend's own run-to-run spread (MuJoCo Warp's contacts on a GPU
need not repeat bit for bit), the floor against which the compiled step's difference from eager is read. Prints one
JSON line.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from unilab.core.cache_dirs import configure


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

    from unilab.envs.runner import EnvRunner
    from unilab.tasks.registry import make_functional_env

    env = make_functional_env(args.task, "mjwarp", args.num_envs, args.device)
    path = args.path or Path(f"/tmp/unilab_precompiled_{args.task}_{env.device.type}_{args.num_envs}.bin")
    if args.mode == "save":
        path.unlink(missing_ok=True)
    kept = None if args.mode == "warm" else path
    runners = [EnvRunner(env, None, seed=0, capture=False, compile=True, precompiled=kept)]
    runners += [EnvRunner(env, None, seed=0, capture=False) for _ in range(2)]  # eager, twice
    action = 0.3 * torch.randn(args.num_envs, env.action_dim, device=env.device, generator=torch.Generator(env.device))
    for runner in runners:
        runner.action.copy_(action)
    report: dict[str, Any] = {"mode": args.mode, "task": args.task, "device": str(env.device)}
    report["build_sec"] = time.perf_counter() - began

    def first_step(runner: EnvRunner) -> Any:
        start = time.perf_counter()
        out = runner.step().clone()
        if env.device.type == "cuda":
            torch.cuda.synchronize()
        report["first_step_sec"] = time.perf_counter() - start
        return out

    def gap(a: Any, b: Any) -> float:
        pairs = zip(a.values(True, True), b.values(True, True), strict=True)
        return max(((x.double() - y.double()).abs().max().item() for x, y in pairs if x.numel()), default=0.0)

    compiled = first_step(runners[0])
    first, second = (runner.step().clone() for runner in runners[1:])
    split = runners[0].kept_split()  # named as a run's start-up split names it: env_step_saved or env_step_loaded
    if split:
        report.update(split, file_bytes=path.stat().st_size)
    report.update(eager_floor=gap(first, second), compiled_gap=gap(compiled, first))
    report["total_sec"] = time.perf_counter() - began
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
