"""A compiled env step's cache key is the same in every process, so a second `train` reuses the first's compile."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The physics op inside a compiled function, as the env step holds it; prints the start-up split's cache counters.
COMPILE_A_STEP = """
import json, torch
from unilab.run.startup import compile_totals
from unilab.apps.bench_timing import stand_state
from unilab.robots import g1
from unilab.sim import make_backend, ops
backend = make_backend("mujoco", g1.load_model(), 2, device="cpu")
handle = ops.register(backend)
state = stand_state(backend, seed=0)
ctrl = torch.zeros(2, backend.model.nu)
def step():
    ops.sim_step_(handle, state, ctrl)
    return state["qpos"] * 2
torch.compile(step, fullgraph=True)()
print(json.dumps(compile_totals()))
"""


@pytest.mark.slow  # two fresh processes, each compiling with Inductor (about half a minute on 2 cores)
def test_a_second_process_hits_the_compile_cache_of_the_first(tmp_path: Path) -> None:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}

    def compile_once() -> dict:
        done = subprocess.run(
            [sys.executable, "-c", COMPILE_A_STEP], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.splitlines()[-1])

    first, second = compile_once(), compile_once()
    assert (first["cache_misses"], first["aot_misses"]) == (1, 1)
    # a handle that differed by process would miss again; an AOTAutograd miss would trace the graph again
    assert (second["cache_hits"], second["aot_hits"], second["aot_bypasses"]) == (1, 1, 0)
