"""The precompile probe's saved env step computes what the eager step does (on Warp's CPU device)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).resolve().parents[1] / "scripts" / "precompile_probe.py"


@pytest.mark.slow
def test_a_saved_step_loads_in_a_fresh_process_and_matches_eager(tmp_path: Path) -> None:
    common = ["--task", "g1_walk_flat", "--device", "cpu", "--num-envs", "2", "--path", str(tmp_path / "step.bin")]
    reports = []
    for mode in ("save", "load"):
        done = subprocess.run([sys.executable, str(PROBE), mode, *common], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        reports.append(json.loads(done.stdout.strip().splitlines()[-1]))
    saved, loaded = reports
    assert saved["aot_compile_sec"] > 0 and (tmp_path / "step.bin").is_file()
    assert loaded["eager_floor"] == 0.0  # on Warp's CPU device a step repeats bit for bit
    assert loaded["loaded_gap"] < 1e-5
