"""docs/support_matrix.md is what scripts/support_matrix.py generates, and every test it names exists."""

from __future__ import annotations

import importlib.util
import itertools
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_generator():
    spec = importlib.util.spec_from_file_location("support_matrix", ROOT / "scripts" / "support_matrix.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_matrix_is_up_to_date_and_covers_every_cell() -> None:
    generator = load_generator()
    assert generator.OUTPUT.read_text() == generator.generate(), "stale: run python scripts/support_matrix.py"
    coverage = json.loads(generator.COVERAGE.read_text())
    cells = {f"{s}/{a}/{t}" for s, a, t in itertools.product(generator.SIMS, generator.ALGOS, generator.TASKS)}
    assert set(coverage) == cells
    results = json.loads(generator.RESULTS.read_text())
    assert {r["cell"] for r in results} <= cells and {r["kind"] for r in results} <= {"throughput", "learning"}


def test_every_test_the_matrix_names_exists() -> None:
    coverage = json.loads(load_generator().COVERAGE.read_text())
    named = {node for nodes in coverage.values() for node in nodes}
    files = sorted({node.split("::", 1)[0] for node in named})
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout.splitlines()
    assert named <= set(collected), sorted(named - set(collected))
