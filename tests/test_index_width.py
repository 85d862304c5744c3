"""Compiled kernels keep their index arithmetic within 32 bits.

Inductor folds products of ``arange`` and constants into a kernel's index expressions, and Triton computes those in
32 bits where the tensors are small enough. A literal there of 2**31 or more fails the kernel's compile on a GPU
(every compiled CUDA run once failed so, on a draw's spread index). Inductor's CPU code carries the same index
expressions, so these tests read them on the CPU.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch._inductor.utils import run_and_get_code

from unilab.core import rng

# A literal multiplying an index variable (x0, r0_1, ...) in generated code, with or without C++'s L suffix.
_INDEX_PRODUCT = re.compile(r"(\d+)L?\s*\*\s*[xr]\d")


def _index_literals(fn, *args) -> list[int]:
    torch._dynamo.reset()
    _, code = run_and_get_code(torch.compile(fn, fullgraph=True), *args)
    return [int(v) for v in _INDEX_PRODUCT.findall("\n".join(code))]


def test_a_draw_fused_into_a_reduction_keeps_its_index_within_32_bits() -> None:
    def noisy_row_sums(r: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return (x + rng.uniform(r, 7, (x.shape[0], 29))).sum(-1)

    literals = _index_literals(noisy_row_sums, rng.make_rng(3), torch.randn(64, 29))
    assert literals and max(literals) < 2**31


@pytest.mark.slow  # each compiles a whole env step with Inductor (about a minute on two cores)
@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_walk_rough", "g1_motion_tracking"])
def test_the_compiled_env_step_keeps_its_index_within_32_bits(task: str) -> None:
    from unilab.envs.runner import EnvRunner
    from unilab.tasks.registry import make_functional_env

    runner = EnvRunner(make_functional_env(task, sim="mjwarp", num_envs=64))
    literals = _index_literals(runner._advance)
    assert literals and max(literals) < 2**31
