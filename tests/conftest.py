"""Shared fixtures; GPU tests skip themselves where torch sees no CUDA device."""

from __future__ import annotations

import pytest
import torch

import unilab  # noqa: F401  (first: test modules import torchrl, which imports mujoco; unilab sets MUJOCO_GL before)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
