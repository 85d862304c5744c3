"""A runner's saved compiled env step (``algo.precompile``), loaded by a fresh process, computes what the eager step
does: on Warp's CPU device, and on CUDA beside a step traced as usual."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[1] / "scripts" / "precompile_probe.py"


def _probe(mode: str, device: str, num_envs: int, path: Path) -> dict:
    args = ["--task", "g1_walk_flat", "--device", device, "--num-envs", str(num_envs), "--path", str(path)]
    done = subprocess.run([sys.executable, str(PROBE), mode, *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_saved_step_loads_in_a_fresh_process_and_matches_eager(tmp_path: Path) -> None:
    saved, loaded = (_probe(mode, "cpu", 2, tmp_path / "step.bin") for mode in ("save", "load"))
    assert "env_step_saved" in saved and "env_step_loaded" in loaded
    assert loaded["eager_floor"] == 0.0  # on Warp's CPU device a step repeats bit for bit
    assert loaded["compiled_gap"] < 1e-5


@pytest.mark.gpu
def test_a_saved_step_on_cuda_is_as_close_to_eager_as_a_traced_one(tmp_path: Path) -> None:
    warm, saved, loaded = (_probe(mode, "cuda", 64, tmp_path / "step.bin") for mode in ("warm", "save", "load"))
    assert "env_step_saved" in saved and "env_step_loaded" in loaded
    # The traced step's distance from eager, with the eager steps' own spread, bounds the loaded one's.
    assert loaded["compiled_gap"] <= warm["compiled_gap"] + max(warm["eager_floor"], loaded["eager_floor"]) + 1e-5
