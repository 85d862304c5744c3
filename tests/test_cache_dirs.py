"""Compiled artefacts kept across runs: where the cache lives (the environment, a read-only home), a second process
reusing the first's compiles, a corrupt entry rebuilt with one line, and ``unilab cache`` showing and clearing it."""

from __future__ import annotations

import json
import logging
import os
import pickle
import py_compile
import re
import subprocess
import sys
from pathlib import Path

import pytest

from unilab.apps.cache import human
from unilab.core import cache_dirs
from unilab.core.bytecode_ahead import shallowest_first
from unilab.core.cache_dirs import (
    CACHES,
    PTXAS_VARIABLE,
    SWITCHES,
    configure,
    default_root,
    drop_corrupt_warp_modules,
    resolve_root,
)

REPO = Path(__file__).resolve().parents[1]
VARIABLES = (
    "UNILAB_CACHE_DIR", "XDG_CACHE_HOME", "PYTHONDONTWRITEBYTECODE", *(variable for _, variable in CACHES.values()),
    *SWITCHES, "TORCHINDUCTOR_DYNAMIC_SCALE_RBLOCK", PTXAS_VARIABLE,
)  # fmt: skip

# A Warp kernel compiled (or loaded) on the CPU in a process whose caches ``configure`` placed; Warp prints whether
# the module was compiled or cached.
WARP_KERNEL = """
from pathlib import Path
from unilab.core.cache_dirs import configure, drop_corrupt_warp_modules
configure()
import warp as wp
wp.config.quiet = False
@wp.kernel
def bump(a: wp.array(dtype=float)):
    a[wp.tid()] = a[wp.tid()] + 1.0
wp.init()
drop_corrupt_warp_modules(Path(wp.config.kernel_cache_dir))
a = wp.zeros(4, dtype=float, device="cpu")
wp.launch(bump, dim=4, inputs=[a], device="cpu")
print(wp.config.kernel_cache_dir, a.numpy().sum())
"""

# A function compiled by Inductor in a process whose caches ``configure`` placed; prints the FX graph cache counters.
INDUCTOR_GRAPH = """
import json
from unilab.core.cache_dirs import configure
configure()
import torch
from torch._dynamo.utils import counters
torch.compile(lambda x: torch.sin(x) * 2 + 1)(torch.ones(8))
print(json.dumps(dict(counters["inductor"])))
"""


# A module imported after ``configure``, with Python's verbose import log: where its bytecode came from or went. The
# module stands in for the training stack, whose bytecode decides whether the root keeps it.
IMPORT_PROBE = """
import sys
from unilab.core import cache_dirs
from unilab.core.bytecode_ahead import shallowest_first
cache_dirs.STACK_SOURCES = (("probe_package", "probe_module.py"),)
cache_dirs.configure()
import probe_package.probe_module
print(sys.pycache_prefix)
"""


# The probe imported as a command imports its module: a damaged bytecode file of the root's is removed and the
# command started again with its arguments, which it prints.
REPAIR_PROBE = """
import sys
from unilab.core import cache_dirs
from unilab.core.bytecode_ahead import shallowest_first
cache_dirs.STACK_SOURCES = (("probe_package", "probe_module.py"),)
cache_dirs.configure()
from unilab.apps.cli import import_command
print(import_command("probe", "probe_package.probe_module").VALUE, *sys.argv[1:])
"""


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    """No cache variable set, bytecode written beside the sources, and each restored after the test (``configure``
    writes them)."""
    for variable in VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(sys, "pycache_prefix", None)
    return monkeypatch


def _python(code: str, root: Path) -> subprocess.CompletedProcess[str]:
    """``code`` run as a script (Warp reads a kernel's source from its file) with the cache root ``root``."""
    script = root.parent / f"{root.name}_script.py"
    script.write_text(code)
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(UNILAB_CACHE_DIR=str(root), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, str(script)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_root_follows_the_environment(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("HOME", str(tmp_path / "home"))
    assert default_root() == tmp_path / "home" / ".cache" / "unilab"
    clean_env.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_root() == tmp_path / "xdg" / "unilab"
    clean_env.setenv("UNILAB_CACHE_DIR", str(tmp_path / "mine"))
    assert resolve_root() == tmp_path / "mine" and (tmp_path / "mine").is_dir()


@pytest.mark.parametrize("blocked", ["under_a_file", "read_only"])
def test_an_unwritable_home_falls_back_with_one_line(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str], blocked: str
) -> None:
    home = tmp_path / "home"
    if blocked == "under_a_file":  # cannot be created, whoever runs the test
        (tmp_path / "a_file").write_text("")
        home = tmp_path / "a_file" / "home"
    else:
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        home.mkdir()
        home.chmod(0o500)
    clean_env.setenv("HOME", str(home))
    root = resolve_root()
    assert root.is_dir() and not root.is_relative_to(home)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and "is not writable" in lines[0] and str(root) in lines[0]


def test_configure_places_the_caches_and_keeps_the_user_s_own(clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    clean_env.setenv("UNILAB_CACHE_DIR", str(tmp_path / "root"))
    clean_env.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor_of_mine"))
    clean_env.setenv("TORCHINDUCTOR_FX_GRAPH_CACHE", "0")
    placed = {cache.name: cache for cache in configure()}
    assert os.environ["WARP_CACHE_PATH"] == str(tmp_path / "root" / "warp") == str(placed["warp"].path)
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "root" / "triton")
    assert os.environ["CUDA_CACHE_PATH"] == str(tmp_path / "root" / "cuda")  # the driver's copies of Warp's PTX
    assert (tmp_path / "root" / "cuda").is_dir()  # made for the driver
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "inductor_of_mine")
    assert placed["inductor"].user_set and not placed["warp"].user_set
    assert os.environ["TORCHINDUCTOR_FX_GRAPH_CACHE"] == "0" and os.environ["TORCHINDUCTOR_AUTOGRAD_CACHE"] == "1"
    assert "TORCHINDUCTOR_DYNAMIC_SCALE_RBLOCK" not in os.environ  # Inductor's default stands
    # A second call (the command's, then the run's) sees its own placement, not the user's.
    assert {cache.name: cache for cache in configure()} == placed


@pytest.mark.parametrize("ships", ["runnable", "not_runnable", "none"])
def test_every_process_assembles_with_the_ptxas_torch_ships(
    clean_env: pytest.MonkeyPatch, tmp_path: Path, ships: str
) -> None:
    """Triton's cache key holds the ptxas version: the command names torch's for every process, as Inductor does for
    its own, so that a kernel has one key whichever process builds it. A user's choice stands."""
    torch_folder = tmp_path / "torch"
    ptxas = torch_folder / "bin" / "ptxas"
    if ships != "none":
        ptxas.parent.mkdir(parents=True)
        ptxas.write_text("#!/bin/sh\n")
        ptxas.chmod(0o755 if ships == "runnable" else 0o644)
    clean_env.setattr(cache_dirs, "_package_folder", lambda package: torch_folder if package == "torch" else None)
    clean_env.setenv("UNILAB_CACHE_DIR", str(tmp_path / "root"))
    configure()
    assert os.environ.get(PTXAS_VARIABLE) == (str(ptxas) if ships == "runnable" else None)
    clean_env.setenv(PTXAS_VARIABLE, "/opt/cuda/bin/ptxas")
    configure()
    assert os.environ[PTXAS_VARIABLE] == "/opt/cuda/bin/ptxas"


INDUCTOR_PROBE = """
from unilab.core.cache_dirs import configure
configure()
from torch._inductor import config
print(config.fx_graph_cache, config.dynamic_scale_rblock)
"""


@pytest.mark.parametrize(
    ("mine", "read"), [({}, "True True"), ({"TORCHINDUCTOR_DYNAMIC_SCALE_RBLOCK": "0"}, "True False")]
)
def test_inductor_reads_the_switches_a_command_sets(tmp_path: Path, mine: dict[str, str], read: str) -> None:
    """Inductor takes the switches from the environment when its config is first imported, after ``configure``: the
    graph cache on, RBLOCK scaling as Inductor has it unless the user turned it off."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(UNILAB_CACHE_DIR=str(tmp_path / "root"), PYTHONPATH=str(REPO), **mine)
    done = subprocess.run(
        [sys.executable, "-c", INDUCTOR_PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == read


def _probe_package(tmp_path: Path) -> Path:
    """A package of one module, with no bytecode, under ``tmp_path / "src"``; returns the package's folder."""
    package = tmp_path / "src" / "probe_package"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text("")
    (package / "probe_module.py").write_text("VALUE = 1\n")
    return package


def _bytecode_log(tmp_path: Path, **variables: str) -> tuple[list[str], str]:
    """``IMPORT_PROBE`` run with ``variables`` set: the verbose log's lines about ``probe_module``, and the prefix."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(UNILAB_CACHE_DIR=str(tmp_path / "root"), PYTHONPATH=f"{tmp_path / 'src'}{os.pathsep}{REPO}", **variables)
    done = subprocess.run(
        [sys.executable, "-v", "-c", IMPORT_PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stderr.splitlines() if "probe_module" in line], done.stdout.split()[-1]


def test_bytecode_goes_under_the_root_where_the_environment_turned_it_off(tmp_path: Path) -> None:
    """Where ``PYTHONDONTWRITEBYTECODE`` is set and the stack has no bytecode, a command compiles a module once into
    the cache root and the next process loads it from there; nothing is written beside the sources."""
    package = _probe_package(tmp_path)
    bytecode = tmp_path / "root" / "bytecode"
    first, prefix = _bytecode_log(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert prefix == str(bytecode)
    assert any(line.startswith("# created") and str(bytecode) in line for line in first), first
    second, _ = _bytecode_log(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert any(line.startswith("# code object from") and str(bytecode) in line for line in second), second
    assert not any(line.startswith("# created") for line in second), second
    assert not (package / "__pycache__").exists()


def test_bytecode_is_left_where_python_puts_it_or_the_user_chose(tmp_path: Path) -> None:
    """A prefix of the user's with writing off: nothing written at all. Writing on: beside the sources, as always.
    Writing off but the stack installed with its bytecode: read from beside the sources, nothing compiled again."""
    package = _probe_package(tmp_path)
    mine = tmp_path / "my_bytecode"
    lines, prefix = _bytecode_log(tmp_path, PYTHONDONTWRITEBYTECODE="1", PYTHONPYCACHEPREFIX=str(mine))
    assert prefix == str(mine) and not mine.exists() and not any(line.startswith("# created") for line in lines)
    lines, prefix = _bytecode_log(tmp_path)
    assert prefix == "None" and (package / "__pycache__").is_dir()
    lines, prefix = _bytecode_log(tmp_path, PYTHONDONTWRITEBYTECODE="1")
    assert prefix == "None" and any(line.startswith("# code object from") and "__pycache__" in line for line in lines)
    assert not (tmp_path / "root" / "bytecode").exists()


AHEAD_PROBE = """
import sys
from unilab.core import cache_dirs
from unilab.core.bytecode_ahead import shallowest_first
cache_dirs.configure()
first = cache_dirs.start_stack_compile(("probe_package",), min_cores=int(sys.argv[1]))
again = cache_dirs.start_stack_compile(("probe_package",), min_cores=int(sys.argv[1]))
print(int(first is not None), first.wait() if first is not None else -1, int(again is not None))
"""


def _compile_ahead(tmp_path: Path, min_cores: int, probe: str = AHEAD_PROBE, **variables: str) -> list[int]:
    """Whether ``probe``'s two calls started a compile, and between them the first's exit status (-1: none started),
    run from stdin in a process whose bytecode a parent command put under the root."""
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(UNILAB_CACHE_DIR=str(tmp_path / "root"), PYTHONPATH=f"{tmp_path / 'src'}{os.pathsep}{REPO}", **variables)
    done = subprocess.run(
        [sys.executable, "-", str(min_cores)], input=probe, cwd=REPO, env=env, capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    return [int(word) for word in done.stdout.split()]


def test_the_stack_is_compiled_ahead_side_by_side_once_where_its_bytecode_goes_under_the_root(tmp_path: Path) -> None:
    """Where a command keeps the stack's bytecode under the root and has the cores, the stack's packages are compiled
    there side by side while it imports them, once a process: a second call starts nothing. A module that does not
    compile (written for another Python) is skipped, not fatal. Nothing is written with too few cores, or where
    Python writes bytecode beside the sources as usual."""
    package = _probe_package(tmp_path)
    (package / "other_python.py").write_text("match = (\n")
    bytecode = tmp_path / "root" / "bytecode"
    placed = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(bytecode)}
    assert _compile_ahead(tmp_path, 10**6, **placed) == [0, -1, 0]  # the middle: the started compile's status
    assert not list(bytecode.rglob("probe_module*.pyc"))
    assert _compile_ahead(tmp_path, 1) == [0, -1, 0] and not bytecode.exists()
    assert _compile_ahead(tmp_path, 1, **placed) == [1, 0, 0]
    compiled = sorted(path.name.split(".")[0] for path in bytecode.rglob("*.pyc") if "probe_package" in path.parts)
    assert compiled == ["__init__", "probe_module"]
    assert not (package / "__pycache__").exists()


def test_the_stack_is_compiled_ahead_whatever_the_caller_s_main_module(tmp_path: Path) -> None:
    """Process pools started from a fork server (compileall's choice on Python 3.12) import the caller's main module
    again first; a main read from stdin cannot be, which broke the pool and the command. The compile runs apart."""
    _probe_package(tmp_path)
    placed = {"PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": str(tmp_path / "root" / "bytecode")}
    probe = 'import multiprocessing\nmultiprocessing.set_start_method("forkserver")\n' + AHEAD_PROBE
    assert _compile_ahead(tmp_path, 1, probe, **placed) == [1, 0, 0]
    assert list((tmp_path / "root" / "bytecode").rglob("probe_module.*.pyc"))


def test_the_stack_is_compiled_shallowest_first(tmp_path: Path) -> None:
    """The modules a package's import reaches first are its top-level ones: compiled first, in the packages' order."""
    first, second = tmp_path / "first", tmp_path / "second"
    for path in ("a/b/deep.py", "a/mid.py", "top.py", "__init__.py"):
        (first / path).parent.mkdir(parents=True, exist_ok=True)
        (first / path).write_text("")
    (second / "__init__.py").parent.mkdir()
    (second / "__init__.py").write_text("")
    order = [str(path.relative_to(tmp_path)) for path in shallowest_first([first, second])]
    assert order == ["first/__init__.py", "first/top.py", "second/__init__.py", "first/a/mid.py", "first/a/b/deep.py"]


def test_the_side_compile_imports_none_of_the_stack_it_compiles() -> None:
    """It runs while the command imports its stack: importing torch itself would cost as long as it saves."""
    code = "import sys\nimport unilab.core.bytecode_ahead\nprint(sorted({'torch', 'warp', 'numpy'} & set(sys.modules)))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert run.stdout.split() == ["[]"]


def test_the_stack_s_bytecode_is_looked_for_beside_its_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = _probe_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path / "src"))
    monkeypatch.setattr(
        cache_dirs, "STACK_SOURCES", (("not_installed_anywhere", "x.py"), ("probe_package", "probe_module.py"))
    )
    assert cache_dirs.installed_without_bytecode()
    beside = package / "__pycache__" / f"probe_module.{sys.implementation.cache_tag}.pyc"  # whatever the prefix
    py_compile.compile(str(package / "probe_module.py"), cfile=str(beside))
    assert not cache_dirs.installed_without_bytecode()
    assert "probe_package" not in sys.modules  # looked for, not imported


def test_a_corrupt_bytecode_entry_is_removed_and_the_command_starts_again(tmp_path: Path) -> None:
    """Python checks a cached file's header against its source, not its body: a damaged body fails the import. The
    command removes the file, says so in one line and starts again (the same arguments), which compiles the module
    from its source; after eight restarts in a row it stops with one line."""
    _probe_package(tmp_path)
    script = tmp_path / "command.py"
    script.write_text(REPAIR_PROBE)
    env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    env.update(
        UNILAB_CACHE_DIR=str(tmp_path / "root"), PYTHONPATH=f"{tmp_path / 'src'}{os.pathsep}{REPO}",
        PYTHONDONTWRITEBYTECODE="1",
    )  # fmt: skip

    def command(**more: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, str(script), "--an-argument"], cwd=REPO, env={**env, **more}, capture_output=True,
            text=True, timeout=120,
        )  # fmt: skip

    def damage() -> Path:
        (entry,) = (tmp_path / "root" / "bytecode").rglob("probe_module.*.pyc")
        entry.write_bytes(entry.read_bytes()[:16] + b"\xff" * 8)  # the header still matches the source
        return entry

    assert command().stdout.split() == ["1", "--an-argument"]
    entry = damage()
    done = command()
    assert done.returncode == 0 and done.stdout.split() == ["1", "--an-argument"], done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        f"unilab: removed a corrupt bytecode cache entry {entry}; starting again to compile it from its source"
    ]
    again = command()
    assert again.returncode == 0 and not again.stderr and entry.is_file()
    damage()
    stopped = command(UNILAB_BYTECODE_REPAIRS="8")
    assert stopped.returncode == 1 and not stopped.stdout
    (line,) = stopped.stderr.splitlines()
    assert line.startswith(f"unilab: removed a corrupt bytecode cache entry {entry}, 9 in a row") and not entry.exists()


def test_a_second_process_loads_warp_s_kernels_and_a_corrupt_one_is_rebuilt(tmp_path: Path) -> None:
    first = _python(WARP_KERNEL, tmp_path / "root")
    assert first.returncode == 0, first.stderr[-2000:]
    kernel_cache = Path(first.stdout.split()[-2])
    assert kernel_cache.is_relative_to(tmp_path / "root" / "warp") and "(compiled)" in first.stdout
    second = _python(WARP_KERNEL, tmp_path / "root")
    assert "(cached)" in second.stdout and "(compiled)" not in second.stdout
    (module,) = kernel_cache.glob("wp_*")
    (binary,) = module.glob("*.o")
    binary.write_bytes(binary.read_bytes()[:200])  # a write cut short: Warp alone fails to load it
    third = _python(WARP_KERNEL, tmp_path / "root")
    assert third.returncode == 0, third.stderr[-2000:]
    notices = [line for line in third.stderr.splitlines() if line.startswith("unilab:")]
    assert len(notices) == 1 and "corrupt Warp kernel cache entry" in notices[0] and "cut short" in notices[0]
    assert "(compiled)" in third.stdout and third.stdout.split()[-1] == "4.0"


def test_warp_s_in_flight_builds_and_whole_modules_are_kept(tmp_path: Path) -> None:
    whole = tmp_path / "wp_mod_abc"
    whole.mkdir()
    (whole / "wp_mod_abc.meta").write_text('{"shared_memory_bytes": {}}')
    building = tmp_path / "wp_mod_def_p123_t456"  # another process writing: not ours to judge
    building.mkdir()
    (building / "wp_mod_def.o").write_bytes(b"\x7fELF")
    broken = tmp_path / "wp_mod_ghi"
    broken.mkdir()
    (broken / "wp_mod_ghi.meta").write_text("{")
    assert drop_corrupt_warp_modules(tmp_path) == [broken]
    assert whole.is_dir() and building.is_dir() and not broken.exists()


def test_a_corrupt_graph_entry_is_one_line_and_removed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Inductor's warning, as its cache reader logs it (the entry in the catching frame's ``subdir`` and ``path``),
    becomes one line, and the entry goes; a warning without an entry passes through."""
    entry = tmp_path / "fxgraph" / "ab" / "key" / "entry"
    entry.parent.mkdir(parents=True)
    entry.write_bytes(b"garbage")
    graph_log = logging.getLogger(cache_dirs.GRAPH_CACHE_LOGGER)
    graph_filter = cache_dirs.CorruptGraphFilter()
    graph_log.addFilter(graph_filter)
    try:

        def read(subdir: str, path: str) -> bool:
            try:
                int(pickle.loads(Path(subdir, path).read_bytes()))
            except Exception:
                record = graph_log.makeRecord(
                    graph_log.name, logging.WARNING, __file__, 0, "fx graph cache unable to load compiled graph", (),
                    sys.exc_info(),
                )  # fmt: skip
                return graph_filter.filter(record)
            return True

        assert read(str(entry.parent), entry.name) is False
        assert not entry.exists()
        lines = capsys.readouterr().err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("unilab: removed a corrupt compiled-graph cache entry")
        assert str(entry) in lines[0] and "UnpicklingError" in lines[0]
        plain = graph_log.makeRecord(graph_log.name, logging.WARNING, __file__, 0, "something else", (), None)
        assert graph_filter.filter(plain) is True
        entry.write_bytes(pickle.dumps("not a number"))  # unpickles: what failed was not the entry, which stays
        assert read(str(entry.parent), entry.name) is True and entry.exists()
    finally:
        graph_log.removeFilter(graph_filter)


@pytest.mark.slow  # four processes, the first compiling with Inductor (20-40 s on two shared cores)
def test_a_second_process_hits_the_graph_cache_and_a_corrupt_entry_is_rebuilt(tmp_path: Path) -> None:
    def compile_once() -> tuple[dict, list[str]]:
        done = _python(INDUCTOR_GRAPH, tmp_path / "root")
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout.splitlines()[-1]), done.stderr.splitlines()

    assert compile_once()[0].get("fxgraph_cache_miss") == 1
    assert compile_once()[0].get("fxgraph_cache_hit") == 1
    entries = [path for path in (tmp_path / "root" / "inductor" / "fxgraph").rglob("*") if path.is_file()]
    assert entries
    for path in entries:
        path.write_bytes(b"garbage")
    counts, stderr = compile_once()
    assert "fxgraph_cache_hit" not in counts and len(stderr) == len(entries)
    assert all(line.startswith("unilab: removed a corrupt compiled-graph cache entry") for line in stderr)
    counts, stderr = compile_once()
    assert counts.get("fxgraph_cache_hit") == 1 and not stderr


def test_unilab_cache_shows_and_clears_without_torch(tmp_path: Path) -> None:
    (tmp_path / "root" / "warp" / "1.19.0").mkdir(parents=True)
    (tmp_path / "root" / "warp" / "1.19.0" / "kernel.o").write_bytes(b"x" * 3000)
    (tmp_path / "root" / "cuda").mkdir()
    (tmp_path / "root" / "cuda" / "index").write_bytes(b"z" * 200)  # the driver's JIT cache
    mine = tmp_path / "my_inductor"
    mine.mkdir()
    (mine / "graph").write_bytes(b"y" * 10)
    code = (
        "import sys\n"
        "from unilab.apps.cli import main\n"
        "main(sys.argv[1:])\n"
        "print('torch' in sys.modules)\n"
    )  # fmt: skip

    def cache(*argv: str) -> list[str]:
        env = {k: v for k, v in os.environ.items() if k not in VARIABLES}
        env.update(UNILAB_CACHE_DIR=str(tmp_path / "root"), TORCHINDUCTOR_CACHE_DIR=str(mine))
        done = subprocess.run(
            [sys.executable, "-c", code, "cache", *argv], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[-1] == "False"  # torch never imported
        return done.stdout.splitlines()[:-1]

    shown = cache()
    assert shown[0] == f"cache root: {tmp_path / 'root'}"
    rows = {line.split()[0]: line for line in shown[1:6]}
    assert str(tmp_path / "root" / "warp") in rows["warp"] and rows["warp"].endswith(human(3000))
    assert str(tmp_path / "root" / "cuda") in rows["cuda"] and rows["cuda"].endswith(human(200))
    assert str(mine) in rows["inductor"] and "10 B (set by TORCHINDUCTOR_CACHE_DIR)" in rows["inductor"]
    assert "empty" in rows["triton"] and "empty" in rows["bytecode"] and shown[6].startswith(f"total {human(3210)}")
    assert cache("info") == shown
    cleared = cache("clear")[1:]

    def line(path: Path) -> str:  # the line about one cache's folder
        (found,) = [text for text in cleared if re.search(rf"{re.escape(str(path))}[ :]", text)]
        return found

    root = tmp_path / "root"
    assert line(root / "warp").strip() == f"removed {root / 'warp'} ({human(3000)})"
    assert line(root / "cuda").strip() == f"removed {root / 'cuda'} ({human(200)})"
    assert "kept" in line(mine) and (mine / "graph").exists()
    assert not (root / "warp").exists() and not (root / "cuda").exists()
    assert "nothing to remove" in line(root / "triton") and "nothing to remove" in line(root / "bytecode")
