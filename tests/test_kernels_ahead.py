"""A model's own Warp kernels compiled in a side process: the same kernels the backend's build makes, waited for by
that build, and started only where Warp's kernel cache was cold."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import mujoco
import pytest
import torch

from unilab.core import side_process, warp_ahead
from unilab.robots import g1
from unilab.sim import SimConfig, kernels_ahead, make_backend

REPO = Path(__file__).resolve().parents[1]

# In a fresh process on an empty cache root: the backend (its step modules compiled into the cache), then the side
# process for its model, waited for; then the backend's own build. Prints the kernel modules each added.
SAME_KERNELS = """
from pathlib import Path
from unilab.core import cache_dirs
cache_dirs.configure()
import warp as wp
from unilab.robots import g1
from unilab.sim import kernels_ahead, make_backend, mjwarp
sim = make_backend("mjwarp", g1.load_model(), 2, device="cpu")
cache = Path(wp.config.kernel_cache_dir)
entries = lambda: {path.name for path in cache.glob("wp_*")}  # the modules, not the build's record
before = entries()
assert kernels_ahead.start(sim.model, 2, sim.config, "cpu")
assert kernels_ahead.wait() is not None
side = entries()
sim.begin_kernel_build()
mjwarp._wait_for_builds()
print(len(side - before), len(entries() - side))
"""


@pytest.mark.slow  # a fresh process compiling the step modules (about 40 s) and a side process the model's kernels
def test_the_side_process_compiles_the_kernels_the_backend_s_build_would(tmp_path: Path) -> None:
    """After the side process, the backend's build finds every kernel it makes in the cache and adds none: the side
    process made the model on the device as the backend does (gains per world, the solver's settings)."""
    env = {**os.environ, "UNILAB_CACHE_DIR": str(tmp_path / "root")}
    for variable in ("WARP_CACHE_PATH", "CUDA_CACHE_PATH"):
        env.pop(variable, None)
    run = subprocess.run(
        [sys.executable, "-c", SAME_KERNELS], cwd=REPO, env=env, capture_output=True, text=True, timeout=900
    )
    assert run.returncode == 0, run.stderr[-2000:]
    by_side, by_build = map(int, run.stdout.split()[-2:])
    assert by_side > 0 and by_build == 0


def test_the_build_waits_for_the_side_process_and_says_so(monkeypatch: pytest.MonkeyPatch, build_records: Path) -> None:
    backend = make_backend("mjwarp", g1.load_model(), 1, device="cpu")
    state = backend.initial_state()
    side = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.3)"])
    monkeypatch.setattr(kernels_ahead._side, "process", side)
    backend.begin_kernel_build()
    backend.step_(state, torch.zeros(1, backend.model.nu))
    report = backend.kernel_build_seconds()
    assert side.returncode == 0 and 0.2 <= report["side_process"] <= report["build"]
    assert kernels_ahead.wait() is None  # waited for once


def test_the_side_process_starts_once_and_only_on_a_cold_kernel_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend starts it where the command found Warp's kernel cache without the step modules; a process's later
    backends (eval's suites) do not."""
    started = []
    monkeypatch.setattr(kernels_ahead, "start", lambda *args: started.append(args[1:]) or True)
    monkeypatch.setattr(warp_ahead._side, "started", False)
    make_backend("mjwarp", g1.load_model(), 2, device="cpu")
    assert started == []
    monkeypatch.setattr(warp_ahead._side, "started", True)
    make_backend("mjwarp", g1.load_model(), 2, device="cpu")
    assert len(started) == 1 and started[0][0] == 2 and started[0][2] == "cpu"


def test_start_is_once_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    launched = []
    monkeypatch.setattr(kernels_ahead, "_side", side_process.Pending("test"))
    monkeypatch.setattr(side_process, "launch", lambda name, command: launched.append(command) or "process")
    model = g1.load_model()
    assert kernels_ahead.start(model, 2, SimConfig(), "cpu")
    assert not kernels_ahead.start(model, 2, SimConfig(), "cpu")
    [command] = launched
    assert command[1:3] == ["-m", "unilab.sim.kernels_ahead"] and command[-2:] == ["2", "cpu"]
    model_path, settings_path = map(Path, command[3:5])
    assert model_path.is_file() and settings_path.is_file()
    monkeypatch.setattr(kernels_ahead._side, "process", None)  # the fake process is not waited for
    assert mujoco.MjModel.from_binary_path(str(model_path)).nq == model.nq
    model_path.unlink()
    settings_path.unlink()
    model_path.parent.rmdir()


def test_a_side_process_that_cannot_start_leaves_the_build_to_the_backend(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """No room for its input files: nothing starts, nothing is left behind, and the run goes on."""
    monkeypatch.setattr(kernels_ahead, "_side", side_process.Pending("test"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(mujoco, "mj_saveModel", full)
    assert not kernels_ahead.start(g1.load_model(), 2, SimConfig(), "cpu")
    assert kernels_ahead.wait() is None and list(tmp_path.iterdir()) == []
