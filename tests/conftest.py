"""Shared fixtures; GPU tests skip themselves where torch sees no CUDA device."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest
import torch

import unilab  # noqa: F401  (first: test modules import torchrl, which imports mujoco; unilab sets MUJOCO_GL before)
from unilab.motion import DEFAULT_MOTION
from unilab.robots import g1

if TYPE_CHECKING:  # imported for real only after unilab has chosen the GL backend
    import mujoco

# One intra-op thread unless the caller chose a number: the suite's tensors are small, and on a machine whose cores
# are busy with other work torch's OpenMP threads wait on each other (a 25-iteration test run took 9 s with two threads,
# 1.4 s with one, on two shared cores). In the environment too, so that the processes tests start inherit it.
if "OMP_NUM_THREADS" not in os.environ:
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)


# ``train`` leaves a stop signal alone when the process was started ignoring it (nohup's SIGHUP, a background job's
# SIGINT), so how the suite itself was started would decide what the signal tests see. They start from the
# dispositions of a foreground job instead, here and in the processes they start (an ignored signal is inherited).
for _signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
    signal.signal(_signum, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.default_int_handler)


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


@pytest.fixture
def build_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty place for the records of models whose Warp kernels a build has made (ADR 41), so that a test's
    ``begin_kernel_build`` builds whatever the user's cache holds."""
    from unilab.sim import warp_model

    records = tmp_path / "built-models"
    monkeypatch.setattr(warp_model, "_records_dir", lambda: records)
    return records
