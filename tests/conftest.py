"""Shared fixtures; GPU tests skip themselves where torch sees no CUDA device."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

import unilab  # noqa: F401  (first: test modules import torchrl, which imports mujoco; unilab sets MUJOCO_GL before)
from unilab.motion import DEFAULT_MOTION
from unilab.robots import g1

if TYPE_CHECKING:  # imported for real only after unilab has chosen the GL backend
    import mujoco


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def model() -> mujoco.MjModel:
    """The G1 flat scene, compiled once for every test that reads it."""
    return g1.load_model()


@pytest.fixture(scope="session")
def raw() -> dict[str, np.ndarray]:
    """The arrays of the shipped reference clip, for tests that write variants of it."""
    with np.load(DEFAULT_MOTION) as archive:
        return {key: archive[key] for key in archive.files}
