"""MuJoCo Warp's step modules compiled in a side process while a run imports (``unilab.core.warp_ahead``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from unilab.apps.early import ahead_device
from unilab.core import side_process, warp_ahead
from unilab.core.warp_ahead import STEP_MODULES, cached, kernel_cache
from unilab.robots import g1
from unilab.sim import make_backend


def fill(folder: Path, names: tuple[str, ...], suffix: str) -> None:
    """Cache entries named as Warp names them, each holding one file of ``suffix``."""
    for name in names:
        entry = folder / f"wp_{name}_0123abc"
        entry.mkdir(parents=True)
        (entry / f"module{suffix}").write_bytes(b"code")


def test_the_cache_holds_the_modules_only_with_code_for_the_device_kind(tmp_path: Path) -> None:
    assert not cached(tmp_path, "cuda:0") and not cached(tmp_path, "cpu")
    fill(tmp_path, STEP_MODULES[:-1], ".cubin")
    assert not cached(tmp_path, "cuda:0")  # one module missing
    fill(tmp_path, STEP_MODULES[-1:], ".ptx")
    assert cached(tmp_path, "cuda:0")
    assert not cached(tmp_path, "cpu")  # GPU code only
    other = tmp_path / "cpu_only"
    fill(other, STEP_MODULES, ".o")
    assert cached(other, "cpu") and not cached(other, "cuda:1")


def test_the_run_imports_neither_torch_nor_warp_to_start_it() -> None:
    """``train`` imports this module before its stack, so that the side process compiles while the stack loads."""
    code = "import sys\nimport unilab.core.warp_ahead\nprint(sorted({'torch', 'warp'} & set(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert run.stdout.split() == ["[]"]


def test_the_kernel_cache_is_the_folder_warp_resolves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Read without importing Warp, it is the folder Warp itself initialises from the same variable."""
    monkeypatch.delenv("WARP_CACHE_PATH", raising=False)
    assert kernel_cache() is None
    monkeypatch.setenv("WARP_CACHE_PATH", str(tmp_path / "warp"))
    code = "import warp as wp\nwp.config.quiet = True\nwp.init()\nprint(wp.config.kernel_cache_dir)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert Path(run.stdout.split()[-1]) == kernel_cache()


class FakeProcess:
    def __init__(self, command: list[str], hangs: bool = False) -> None:
        self.command = command
        self.hangs = hangs
        self.waits = 0
        self.killed = False

    def wait(self, timeout: float | None = None) -> int:
        self.waits += 1
        if self.hangs and not self.killed:
            raise subprocess.TimeoutExpired(self.command, timeout or 0)
        return 0

    def kill(self) -> None:
        self.killed = True


def test_the_side_process_starts_only_where_it_can_help(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[FakeProcess] = []

    def launch(name: str, command: list[str]) -> FakeProcess:
        started.append(FakeProcess(command))
        return started[-1]

    monkeypatch.setattr(side_process, "launch", launch)
    monkeypatch.setattr(warp_ahead, "_side", side_process.Pending("test"))
    monkeypatch.setenv("WARP_CACHE_PATH", str(tmp_path))
    assert warp_ahead.wait() is None  # nothing to wait for
    assert not warp_ahead.start("cuda:0", min_cores=10_000)  # no cores to spare
    folder = kernel_cache()
    assert folder is not None
    fill(folder, STEP_MODULES, ".cubin")
    assert not warp_ahead.start("cuda:0", min_cores=1)  # compiled already
    assert not started
    assert warp_ahead.start("cpu", min_cores=1)  # the CPU's code is not there
    assert started[0].command == [sys.executable, "-m", "unilab.core.warp_ahead", "cpu"]
    assert not warp_ahead.start("cpu", min_cores=1)  # one a process
    waited = warp_ahead.wait()
    assert waited is not None and waited >= 0 and started[0].waits == 1
    assert warp_ahead.wait() is None  # waited for once


def test_the_backend_waits_for_the_side_process_and_says_how_long(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before it loads the step modules; a backend built with no side process running reports no wait."""
    process = FakeProcess([])
    monkeypatch.setattr(warp_ahead._side, "process", process)
    backend = make_backend("mjwarp", g1.load_model(), 1, device="cpu")
    assert process.waits == 1 and backend.startup["warp_ahead"] >= 0 and "warp_load" in backend.startup
    assert "warp_ahead" not in make_backend("mjwarp", g1.load_model(), 1, device="cpu").startup


def test_a_side_process_that_hangs_is_killed_and_said(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    process = FakeProcess([], hangs=True)
    monkeypatch.setattr(warp_ahead._side, "process", process)
    assert warp_ahead.wait(limit_s=0.01) is not None
    assert process.killed
    assert "not compiled beside the imports within 0.01 s" in capsys.readouterr().err
    assert warp_ahead.wait() is None


@pytest.mark.parametrize(
    ("arguments", "environment", "expected"),
    [
        ([], {}, "cuda:0"),
        (["--algo", "sac", "--task", "g1_walk_rough", "--sim", "mjwarp"], {}, "cuda:0"),
        (["sim=mjwarp", "training.device=cuda"], {}, "cuda:0"),
        (["training.device=cuda:1"], {}, "cuda:1"),
        (["--sim", "mujoco"], {}, None),
        (["sim=mujoco"], {}, None),
        (["training.device=cpu"], {}, None),
        (["--cfg"], {}, None),
        (["--help"], {}, None),
        (["sim.warp_output=cubin"], {}, None),
        ([], {"LOCAL_RANK": "1"}, None),
        ([], {"LOCAL_RANK": "0"}, "cuda:0"),
    ],
)
def test_the_gpu_is_read_from_the_train_command_line(
    arguments: list[str],
    environment: dict[str, str],
    expected: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    node = tmp_path / "nvidiactl"
    node.touch()
    assert ahead_device(arguments, node=node) == expected
    assert ahead_device(arguments, node=tmp_path / "absent") is None  # no GPU driver


@pytest.mark.slow  # compiles the eight modules with Warp's CPU compiler
def test_the_side_process_fills_the_entries_a_backend_looks_up(tmp_path: Path) -> None:
    """Run for the CPU into an empty cache, it leaves every step module where a backend built in a fresh process (the
    height-field fix installed, the model put) looks it up: the backend compiles none, so no entry is added."""
    environment = {**os.environ, "WARP_CACHE_PATH": str(tmp_path)}
    subprocess.run([sys.executable, "-m", "unilab.core.warp_ahead", "cpu"], env=environment, timeout=900, check=True)
    folder = kernel_cache_in(environment)
    entries = sorted(entry.name for entry in folder.iterdir())
    assert cached(folder, "cpu")
    code = (
        "from unilab.robots import g1\n"
        "from unilab.sim import make_backend\n"
        "make_backend('mjwarp', g1.load_model(), 1, device='cpu')\n"
    )
    subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, timeout=900, check=True)
    assert sorted(entry.name for entry in folder.iterdir()) == entries


def kernel_cache_in(environment: dict[str, str]) -> Path:
    code = "from unilab.core.warp_ahead import kernel_cache\nprint(kernel_cache())"
    run = subprocess.run([sys.executable, "-c", code], env=environment, capture_output=True, text=True, check=True)
    return Path(run.stdout.split()[-1])
