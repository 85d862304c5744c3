"""Where compiled artefacts are kept across runs: one user cache directory holding Warp's kernels, the CUDA driver's
machine code for them, Inductor's and AOTAutograd's compiled graphs and Triton's kernels.

A run compiles the same physics kernels and the same graphs as the run before it; kept, they load in a fraction of
the time (on the GPU a fresh start spends about 40 s compiling Warp's kernels and about 100 s in Inductor, a warm one
seconds). Left to their libraries, they land in three places, one of them (Inductor's) in the system's temporary
directory, which a reboot or a fresh container empties. So the commands point all of them at one root before torch
or Warp compiles anything, which is also one place to look at and one to clear (``unilab cache``).

The CUDA driver keeps a cache of its own: Warp hands it each module as PTX (Warp's choice wherever the driver is at
least as new as Warp's compiler), and the driver compiles that to the GPU's machine code as it loads the module,
keeping the result under ``~/.nv`` unless told otherwise. On the H200 a fresh machine's first run loaded
mujoco_warp's step modules in 17.2 s, a second run with every cache under the root emptied in 3.9 s: the driver
still had their machine code. It goes under the root too, so that ``unilab cache`` shows and clears it with the rest
and an emptied root is a cold start.

Python's own bytecode joins them where the environment turned off writing it beside the sources
(``PYTHONDONTWRITEBYTECODE``, set in many container images to keep their layers clean) and the stack was installed
without it: every run then compiles torch's modules from source again, about 3.5 s of a GPU machine's 7 s of
imports. Those runs write it under the root instead (``sys.pycache_prefix``), which leaves the installed packages as
untouched as the setting meant them to be. The first such run compiles the stack there side by side, where the
machine has the cores for it, while it imports (``start_stack_compile``).

The root is ``$UNILAB_CACHE_DIR``, else ``$XDG_CACHE_HOME/unilab``, else ``~/.cache/unilab``; where that cannot be
written (a read-only home) a folder in the temporary directory stands in, with a one-line notice, rather than a
failed run. A library's own variable that the user set (``WARP_CACHE_PATH``, ``CUDA_CACHE_PATH``,
``TORCHINDUCTOR_CACHE_DIR``, ``TRITON_CACHE_DIR``) is left as it is. This module imports nothing heavy: ``unilab
cache`` answers without torch.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

ROOT_VARIABLE = "UNILAB_CACHE_DIR"
# Each cache: its folder under the root and the variable its library reads it from (at ``wp.init`` for Warp, when the
# process first uses CUDA for the driver, at the first compile for Inductor and Triton).
CACHES: dict[str, tuple[str, str]] = {
    "warp": ("warp", "WARP_CACHE_PATH"),  # Warp's kernels (mujoco_warp's and the backend's)
    "cuda": ("cuda", "CUDA_CACHE_PATH"),  # the CUDA driver's machine code for the PTX Warp's kernels are loaded as
    "inductor": ("inductor", "TORCHINDUCTOR_CACHE_DIR"),  # Inductor's FX graphs, AOTAutograd's graphs, kernels
    "triton": ("triton", "TRITON_CACHE_DIR"),  # Triton's compiled GPU kernels
    "bytecode": ("bytecode", "PYTHONPYCACHEPREFIX"),  # Python's, only where writing it beside the sources is off
}
# Inductor's switches, by the value a command sets where the user set none. The torch versions this package supports
# (2.11 to 2.14) read them when ``torch._inductor.config`` and ``torch._functorch.config`` are imported; one that
# does not know a variable ignores it.
# - The FX graph and AOTAutograd caches: on by default already; set so that a later default cannot turn them off.
# RBLOCK scaling (``TORCHINDUCTOR_DYNAMIC_SCALE_RBLOCK``) is left at Inductor's default, on: the halved configs it times
# in every process cost a warm start about a second and make the updates faster (ADR 37).
SWITCHES = {
    "TORCHINDUCTOR_FX_GRAPH_CACHE": "1",
    "TORCHINDUCTOR_AUTOGRAD_CACHE": "1",
}
# Triton keys each compiled kernel on, among the rest, the version of the ptxas that assembles it, and torch may ship
# another ptxas than Triton bundles (CUDA 13.0's against 12.8's, torch 2.11 for CUDA 13 with Triton 3.6). Inductor
# names torch's (``torch/bin/ptxas``) for the processes it compiles in where the user named none, but not for every
# process that builds a kernel: a run built some of SAC's update kernels under one ptxas, and the next run, finding no
# entry under the other's key, built the same kernels again (ADR 48). Named for every process, one ptxas assembles
# them all.
PTXAS_VARIABLE = "TRITON_PTXAS_PATH"


@dataclass(frozen=True)
class CacheDir:
    """One cache: where it is, and whether the user chose that place (``variable`` was set before the commands
    set it), in which case ``unilab cache clear`` leaves it alone."""

    name: str
    path: Path
    variable: str
    user_set: bool


def default_root() -> Path:
    """The root the environment asks for, writable or not."""
    if os.environ.get(ROOT_VARIABLE):
        return Path(os.environ[ROOT_VARIABLE]).expanduser().absolute()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return (base / "unilab").absolute()  # the same folder for processes started elsewhere (torchrun's ranks)


def _writable(folder: Path) -> bool:
    """Whether files can be created in ``folder`` (made if missing): tried, since permission bits do not tell a
    read-only mount."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            return True
    except OSError:
        return False


def resolve_root(notice: bool = True) -> Path:
    """The cache root: ``default_root`` when it can be written, else a folder of this user's in the temporary
    directory (``notice`` says so in one line on stderr; the caches then last only as long as that folder)."""
    root = default_root()
    if _writable(root):
        return root
    fallback = Path(tempfile.gettempdir()) / f"unilab-cache-{os.getuid()}"
    _writable(fallback)  # made now, as the root would have been; where even this fails, each library reports it
    if notice:
        print(
            f"unilab: cache directory {root} is not writable; compiled kernels go to {fallback} for this run "
            f"(set {ROOT_VARIABLE} to a writable folder to keep them)",
            file=sys.stderr,
        )
    return fallback


def cache_dirs(root: Path | None = None) -> list[CacheDir]:
    """Every cache as the environment places it now: the user's own variable where set, else its folder under
    ``root`` (by default the resolved root). A variable already naming that folder is the commands' own doing (this
    process's ``configure``, or its parent's), not the user's."""
    root = resolve_root() if root is None else root
    found = []
    for name, (folder, variable) in CACHES.items():
        ours, own = root / folder, os.environ.get(variable)
        user_set = bool(own) and Path(own).expanduser() != ours
        found.append(CacheDir(name, Path(own).expanduser() if user_set else ours, variable, user_set))
    return found


def configure() -> list[CacheDir]:
    """Point every cache the user did not place at the root, through its library's variable (Python's bytecode as
    ``keep_bytecode`` says), and set Inductor's ``SWITCHES`` and Triton's ptxas where the user did not. Call it before
    torch or Warp is imported: Warp reads its variable at ``wp.init``, Inductor its switches when its config is
    imported, Python its prefix at each import. Returns the caches as placed."""
    dirs = cache_dirs(resolve_root())
    for cache in dirs:
        if cache.name == "bytecode":
            keep_bytecode(cache)
        elif not cache.user_set:
            os.environ[cache.variable] = str(cache.path)
            if cache.name == "cuda":  # made here: the driver reports nothing about a cache folder it cannot use
                _writable(cache.path)
    for switch, value in SWITCHES.items():
        os.environ.setdefault(switch, value)
    ptxas = torch_ptxas() if os.environ.get(PTXAS_VARIABLE) is None else None  # unset, as the workers test it
    if ptxas is not None:
        os.environ[PTXAS_VARIABLE] = str(ptxas)
    graph_log = logging.getLogger(GRAPH_CACHE_LOGGER)
    if not any(isinstance(f, CorruptGraphFilter) for f in graph_log.filters):
        graph_log.addFilter(CorruptGraphFilter())
    return dirs


# Modules deep in what a training run imports, by package: where one has no bytecode beside its source, the stack
# was installed without it (uv, for one, writes none unless asked) and each run would compile it from source.
STACK_SOURCES = (("torch", "_dynamo/symbolic_convert.py"), ("tensordict", "_td.py"), ("torchrl", "envs/common.py"))


def _package_folder(package: str) -> Path | None:
    """An installed package's folder, found without importing it; None where it is not installed as one."""
    try:
        spec = importlib.util.find_spec(package)
    except ImportError:  # a finder that refuses the name outright
        return None
    if spec is None or spec.origin is None or not spec.origin.endswith("__init__.py"):
        return None
    return Path(spec.origin).parent


def _placed_bytecode() -> Path | None:
    """The bytecode cache's folder where ``keep_bytecode`` put this process's bytecode there; None where Python writes
    it as usual or where the user chose its place."""
    ours = next(cache for cache in cache_dirs(resolve_root(notice=False)) if cache.name == "bytecode")
    return None if ours.user_set or sys.pycache_prefix != str(ours.path) else ours.path


def torch_ptxas() -> Path | None:
    """The ptxas torch ships, found without importing torch; None where torch ships none that can be run."""
    folder = _package_folder("torch")
    if folder is None:
        return None
    ptxas = folder / "bin" / "ptxas"
    return ptxas if ptxas.is_file() and os.access(ptxas, os.X_OK) else None


def installed_without_bytecode() -> bool:
    """Whether a module of ``STACK_SOURCES`` has no bytecode beside its source; found without importing any. A
    package that is not installed (a robot's computer runs the deploy runtime without torch) has none to compile."""
    for package, module in STACK_SOURCES:
        folder = _package_folder(package)
        if folder is None:
            continue
        source = folder / module
        cached = source.parent / "__pycache__" / f"{source.stem}.{sys.implementation.cache_tag}.pyc"
        if source.is_file() and not cached.is_file():
            return True
    return False


def keep_bytecode(cache: CacheDir) -> bool:
    """Write this process's bytecode under ``cache`` where the environment turned writing it off, named no folder
    of its own for it, and the stack was installed without bytecode; returns whether it does. A stack installed with
    its bytecode is read from there as before (under a prefix Python would compile it all again, once). A prefix the
    user set with writing off is a choice to write nothing, and is kept. The variable is set for the processes this
    one starts (torchrun's ranks, Inductor's compile workers), which read what is there; a command among them writes
    too, through its own ``configure``."""
    placed_by_parent = os.environ.get(cache.variable) == str(cache.path)
    if not sys.dont_write_bytecode or cache.user_set or not (placed_by_parent or installed_without_bytecode()):
        return False
    sys.pycache_prefix = str(cache.path)
    sys.dont_write_bytecode = False
    os.environ[cache.variable] = str(cache.path)
    return True


# The top-level packages a training run imports most of (of the about 2,300 modules it loads: torch about 1,080,
# sympy 430, torchrl 280, numpy 110, tensorboard 100, hydra 55, mpmath 55, tensordict 50), and the physics.
STACK_PACKAGES = (
    "torch", "sympy", "torchrl", "numpy", "tensorboard", "hydra", "omegaconf", "mpmath", "tensordict", "warp",
    "mujoco_warp", "mujoco",
)  # fmt: skip
# Compiled whole, these packages take about 3.7 times the CPU time of the modules a run imports, which Python
# compiles one after another as it loads them (17.3 s against 4.7 s on a 2-core CPU); side by side on this many
# cores or more the whole keeps ahead of the imports.
AHEAD_MIN_CORES = 8
# The compile ``start_stack_compile`` started in this process; None where it started none.
_stack_compile: subprocess.Popen[bytes] | None = None


def usable_cores() -> int:
    """The cores this process may run on (its affinity, where the platform says), which a side-by-side compile can
    use; at least one."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def start_stack_compile(
    packages: tuple[str, ...] = STACK_PACKAGES, min_cores: int = AHEAD_MIN_CORES
) -> subprocess.Popen[bytes] | None:
    """Start compiling ``packages`` into the bytecode cache side by side, one process per core, where
    ``keep_bytecode`` put this process's bytecode there, the machine has ``min_cores`` cores or more and the first
    package's bytecode is not there yet (a fresh machine's first command: it would otherwise compile the stack one
    module at a time as it imports it, 8-10 s of an H200 machine's first start). The command imports its stack
    meanwhile (``unilab.core.bytecode_ahead``: the shallowest modules first). Returns the compile's process; None
    where none was started, as on a second call."""
    global _stack_compile
    cores = usable_cores()
    if _stack_compile is not None or sys.pycache_prefix is None or cores < min_cores:  # answered before any probe
        return None
    if _placed_bytecode() is None:
        return None
    folders = [folder for folder in map(_package_folder, packages) if folder is not None]
    if not folders or Path(importlib.util.cache_from_source(str(folders[0] / "__init__.py"))).is_file():
        return None
    # In a process of its own: a process pool may start from a fork server, which first imports the caller's main
    # module again (a script run from stdin cannot be, and the pool breaks; a script's unguarded code would run).
    prefix = f"pycache_prefix={sys.pycache_prefix}"
    command = [sys.executable, "-X", prefix, "-m", "unilab.core.bytecode_ahead", str(cores), *map(str, folders)]
    quiet = subprocess.DEVNULL
    _stack_compile = subprocess.Popen(command, stdin=quiet, stdout=quiet, stderr=quiet)
    return _stack_compile


def corrupt_bytecode(error: BaseException) -> Path | None:
    """The file of the bytecode cache ``keep_bytecode`` placed whose unmarshalling raised ``error`` (found in the
    locals of the import system's frame that read it), or None: the error came from elsewhere, or from bytecode of
    the user's own, which is left to Python. Python writes each file whole (a temporary file, then a rename) and
    checks its header against the source, but not its body, so a file damaged later fails every import of its
    module (``bad marshal data``) until it is removed."""
    if not isinstance(error, (ValueError, EOFError, TypeError)):  # what unmarshalling a damaged body raises
        return None
    ours = _placed_bytecode()
    if ours is None:
        return None
    trace = error.__traceback__
    while trace is not None:
        frame = trace.tb_frame
        path = frame.f_locals.get("bytecode_path") if frame.f_code.co_name == "_compile_bytecode" else None
        if isinstance(path, str) and Path(path).is_relative_to(ours) and Path(path).is_file():
            return Path(path)
        trace = trace.tb_next
    return None


def inductor_folder(name: str) -> Path | None:
    """A folder of this package's own under Inductor's cache folder, so that clearing that cache clears it too; None
    where the variable is unset (``configure`` sets it)."""
    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return None if not inductor else Path(inductor) / name


def notice(message: str) -> None:
    """A cache's one-line notice on stderr: what was wrong, and that it is being rebuilt."""
    print(f"unilab: {' '.join(message.split())}", file=sys.stderr, flush=True)


# Inductor's FX graph and AOTAutograd caches read a key's entries one by one; one that does not unpickle (a write cut
# short, a full disk, a damaged copy) is skipped with a logged traceback and the graph compiled again, but the entry
# stays, and the traceback returns in every later run.
GRAPH_CACHE_LOGGER = "torch._inductor.codecache"
GRAPH_CACHE_FAILURE = "unable to load compiled graph"


class CorruptGraphFilter(logging.Filter):
    """Turns Inductor's warning about a local cache entry it could not load into one line, and removes the entry so
    that the graph compiled in its place is what the next run finds.

    The entry's file is read from the frame that caught the failure (its ``subdir`` and ``path``, in every torch
    version this package supports). A warning whose entry cannot be found that way, and an in-flight write of
    another process (a dot file), pass through unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        if GRAPH_CACHE_FAILURE not in str(record.msg) or not record.exc_info:
            return True
        entry = _failed_entry(record.exc_info[2])
        if entry is None or entry.name.startswith(".") or _loads(entry):
            return True
        try:
            entry.unlink()
        except OSError:
            return True
        error = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        notice(f"removed a corrupt compiled-graph cache entry {entry} ({error}); compiling again")
        return False


def _loads(entry: Path) -> bool:
    """Whether ``entry`` unpickles now, as Inductor reads it: if it does, the failure was not this file's (a remote
    cache's, say, logged from the same frame after the local entries), and the entry stays."""
    try:
        pickle.loads(entry.read_bytes())
    except Exception:  # whatever Inductor's reader failed on: a short file, a foreign pickle, a missing class
        return False
    return True


def _failed_entry(trace: TracebackType | None) -> Path | None:
    """The cache file whose load raised, from the locals of the frame that caught it."""
    if trace is None:
        return None
    names = trace.tb_frame.f_locals
    folder, name = names.get("subdir"), names.get("path")
    if not (isinstance(folder, str) and isinstance(name, str)):
        return None
    entry = Path(folder) / name
    return entry if entry.is_file() else None


# Warp compiles a module into ``<module>_p<pid>_t<thread>`` beside the cache entry, then renames it into place.
WARP_BUILD_DIR = re.compile(r"_p\d+_t\d+$")


def drop_corrupt_warp_modules(kernel_cache: Path) -> list[Path]:
    """Remove every module of Warp's kernel cache (``wp.config.kernel_cache_dir`` once Warp is initialised) whose
    files cannot be what Warp wrote, with a line each; Warp compiles a missing module again. Warp itself fails the
    first launch of such a module ("Failed to load CPU module", a JSON error on its ``.meta``) and leaves it there."""
    removed = []
    for module in sorted(kernel_cache.glob("wp_*")):
        in_flight = WARP_BUILD_DIR.search(module.name)  # another process compiling; Warp renames it when done
        problem = _warp_module_problem(module) if module.is_dir() and not in_flight else None
        if problem is None:
            continue
        shutil.rmtree(module, ignore_errors=True)
        notice(f"removed a corrupt Warp kernel cache entry {module} ({problem}); compiling it again")
        removed.append(module)
    return removed


def _warp_module_problem(module: Path) -> str | None:
    """What is wrong with one cached Warp module, or None: its ``.meta`` files must be JSON, its binaries (``.o``
    on the CPU, ``.cubin`` on a GPU: ELF files) whole, its PTX not empty."""
    for path in module.iterdir():
        try:
            if path.suffix == ".meta":
                json.loads(path.read_bytes())
            elif path.suffix in (".o", ".cubin"):
                problem = _elf_problem(path.read_bytes())
                if problem is not None:
                    return f"{path.name}: {problem}"
            elif path.suffix == ".ptx" and path.stat().st_size == 0:
                return f"{path.name}: empty"
        except (OSError, ValueError) as error:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            return f"{path.name}: {type(error).__name__}"
    return None


def _elf_problem(data: bytes) -> str | None:
    """Why ``data`` is not a whole 64-bit little-endian ELF file (what Warp's compilers write), or None: the header's
    section table must lie inside the file, which a write cut short breaks."""
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return "not an ELF object"
    section_table, entry_size, entries = struct.unpack_from("<Q", data, 0x28)[0], *struct.unpack_from("<HH", data, 0x3A)
    if section_table + entry_size * entries > len(data):
        return f"cut short at {len(data)} bytes"
    return None


def size_bytes(path: Path) -> int:
    """Bytes of the files under ``path`` (links not followed; files vanishing meanwhile skipped)."""
    total = 0
    for folder, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(folder, name)).st_size
            except OSError:
                continue
    return total


def clear(cache: CacheDir) -> int:
    """Remove ``cache``'s folder; returns the bytes it held. Only the folder itself goes, never its parent."""
    held = size_bytes(cache.path)
    shutil.rmtree(cache.path, ignore_errors=True)
    return held
