"""The shape of the code: the ground floor imports alone, and no file or function outgrows its limit."""

from __future__ import annotations

import subprocess
import sys

import pytest

from scripts import check_sizes

HEAVY = ("mujoco", "mujoco_warp", "warp", "torchrl", "tensordict")


@pytest.mark.parametrize("module", ["unilab.core.rng", "unilab.core.math", "unilab.core.spec", "unilab.core.files"])
def test_the_core_imports_without_physics_or_torchrl(module: str) -> None:
    code = f"import sys, {module}; print(' '.join(sorted(set(sys.modules) & set({HEAVY!r}))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []


def test_the_package_still_offers_the_registry_and_chooses_gl_before_mujoco() -> None:
    code = (
        "import os, sys, unilab; assert 'mujoco' not in sys.modules; "
        "print(unilab.make_env.__module__, os.environ.get('MUJOCO_GL') is not None or bool(os.environ.get('DISPLAY')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["unilab.tasks.registry", "True"]
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        import unilab

        unilab.nope  # noqa: B018


def test_no_file_or_function_over_its_limit() -> None:
    assert check_sizes.breaches() == []


def test_the_size_check_names_what_breaks_it(tmp_path) -> None:
    (tmp_path / "unilab").mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(check_sizes.MAX_FUNCTION_LINES))
    (tmp_path / "unilab" / "big.py").write_text(f"def long():\n{body}\n" + "\n" * check_sizes.MAX_FILE_LINES)
    assert check_sizes.breaches(tmp_path) == [
        f"unilab/big.py: {check_sizes.MAX_FILE_LINES + check_sizes.MAX_FUNCTION_LINES + 1} lines (at most 600)",
        f"unilab/big.py:1: long is {check_sizes.MAX_FUNCTION_LINES + 1} lines (at most 100)",
    ]
