"""A compiled function kept on disk, so that a later run loads it instead of tracing its Python again.

``torch.compile`` reads a function's Python in every process, even where Inductor's cache holds every graph the
trace leads to: the env step's tracing is 1.5-2.6 s of a warm start on a GPU host. ``aot_compile`` saves the traced
frame with its compiled graphs, and a later process loads it and calls it without tracing.

Dynamo's guards would check at each call that what the trace read still holds what it held. They cannot be kept:
saving them pickles every object the trace went through, and a MuJoCo Warp backend holds ctypes handles, which do
not pickle. So every guard but torch's global state is dropped, and a saved function is right only for the code,
settings, model and device it was compiled from. The caller names its file by a digest of all of those, and a file
is found by nothing less (``unilab.run.precompile``). The function reaches its objects through one global that the
save and the load are given as external data: none of them is pickled, and the loaded function reads the live
objects (weights included) at each call, as the traced one does.

Beside each file a record names every module file the trace read, with its digest; a file is loaded only where
all of them are as they were, so an edit to a term outside this package (a user's own task) is seen too.

The files live in Inductor's cache folder, so ``unilab cache clear`` clears them with the graphs. One that does not
load (cut short, damaged, from another torch) is removed with a one-line notice and compiled again.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import hashlib
import json
import os
import sys
import time
import types
from collections.abc import Callable, Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import torch

from unilab.core.cache_dirs import inductor_folder, notice
from unilab.core.files import write_atomic

# Under Inductor's cache folder (set by ``unilab.core.cache_dirs.configure``).
FOLDER = "unilab-precompiled"
# The packages whose code a traced function runs, by distribution name.
STACK = ("torch", "tensordict", "torchrl", "warp-lang", "mujoco-warp", "mujoco")


def folder() -> Path | None:
    """Where saved functions go; None where Inductor's cache folder is unset (nothing is then kept)."""
    return inductor_folder(FOLDER)


def _version(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def system(device: torch.device) -> dict[str, Any]:
    """What a compiled function depends on beside its own code and settings: the device and its GPU, Python, the
    stack's versions and Inductor's switches."""
    gpu = None
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        gpu = [properties.name, properties.major, properties.minor]
    return {
        "device": str(device),
        "gpu": gpu,
        "python": sys.version,
        "versions": {name: _version(name) for name in STACK},
        "torch": torch.__version__,  # a local build's own version string, which the distribution may not carry
        "inductor": {k: v for k, v in os.environ.items() if k.startswith("TORCHINDUCTOR_") and not k.endswith("DIR")},
    }


@functools.cache  # a run names its env step and each loss after the same packages
def sources_digest(*roots: Path) -> str:
    """A digest of every file under ``roots`` (names and bytes, ``__pycache__`` aside): an edit anywhere there may
    change what a trace reads."""
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def file_digest(path: Path) -> str | None:
    """The sha256 of ``path``'s bytes; None where it cannot be read."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def traced_files(compiled: Any) -> dict[str, str | None]:
    """The module files an ahead-of-time compile traced code of, by their digests (Dynamo's record of the inlined
    sources; none where a torch version keeps no such record)."""
    info = getattr(getattr(compiled, "_artifacts", None), "source_info", None)
    modules = {source.module for source in getattr(info, "inlined_sources", ())}
    paths = (getattr(sys.modules.get(name), "__file__", None) for name in sorted(modules))
    return {path: file_digest(Path(path)) for path in paths if path}


def _entry_template(*args: Any) -> Any:
    return TARGET(*args)  # noqa: F821 (the global of each entry's own namespace, ``_entry``)


def _entry(fn: Callable[..., Any]) -> tuple[types.FunctionType, dict[str, Any]]:
    """A function calling ``fn`` through a global of its own namespace, the shape a saved function can load into:
    Dynamo saves the global's name, and the load binds it to this process's ``fn``."""
    scope = {"__builtins__": builtins, "TARGET": fn}
    return types.FunctionType(_entry_template.__code__, scope, "precompiled"), scope


@contextlib.contextmanager
def _aot_enabled() -> Iterator[None]:
    """torch 2.11 keeps ``aot_compile`` behind a switch that later versions dropped."""
    config = torch._dynamo.config
    with config.patch(enable_aot_compile=True) if hasattr(config, "enable_aot_compile") else contextlib.nullcontext():
        yield


class KeptCompile:
    """``fn`` compiled whole, the first call loading it from ``path`` where a run saved it, else compiling it ahead of
    time for that call's arguments and saving it there; later calls must pass arguments of the same structure,
    shapes and dtypes, which nothing checks. ``outcome`` then says which ("loaded", "saved"; "compiled" where the
    save failed, "traced" where ``fn`` did not compile whole and ``torch.compile`` took it as usual) and ``seconds``
    how long the load, or the compile and save, took. With ``fullgraph`` a function that does not compile whole
    fails there, as ``torch.compile(fn, fullgraph=True)`` would, instead of being compiled in pieces. ``options`` are
    Inductor's, as ``torch.compile`` takes them; the file's name must tell compiles with other options apart."""

    def __init__(
        self, fn: Callable[..., Any], path: Path, fullgraph: bool = False, options: dict[str, Any] | None = None
    ) -> None:
        self._fn, self.path, self._fullgraph = fn, path, fullgraph
        self._options = dict(options or {})
        self._compiled: Callable[..., Any] | None = None
        self.outcome: str | None = None
        self.seconds = 0.0

    def __call__(self, *args: Any) -> Any:
        if self._compiled is not None:
            return self._compiled(*args)
        # The first call, under the caller's grad mode, autocast and matmul settings, which the saved function checks.
        began = time.perf_counter()
        loaded = self._load()
        self.seconds = time.perf_counter() - began
        if loaded is not None:
            try:
                result = loaded(*args)
            except Exception as error:  # a file that loads but does not run (another GPU's kernels) is compiled again
                self._drop(f"did not run ({type(error).__name__})")
            else:
                self._compiled = loaded
                return result
        began = time.perf_counter()
        self._compiled = self._compile_and_save(args)
        self.seconds = time.perf_counter() - began
        return self._compiled(*args)

    @property
    def record(self) -> Path:
        """The module files the saved trace read, with their digests."""
        return self.path.with_suffix(".sources.json")

    def _drop(self, why: str) -> None:
        notice(f"the saved compiled step {self.path} {why}; compiling it again")
        self.path.unlink(missing_ok=True)
        self.record.unlink(missing_ok=True)

    def _changed_source(self) -> str | None:
        """Why the saved trace may no longer be this code's: a file it read that has changed, or no record of them."""
        try:
            files = json.loads(self.record.read_text())
        except (OSError, ValueError):
            return "has no readable record of the code it traced"
        changed = next((path for path, digest in files.items() if file_digest(Path(path)) != digest), None)
        return None if changed is None else f"traced {changed}, which has changed since"

    def _load(self) -> Callable[..., Any] | None:
        if not self.path.is_file():
            return None
        changed = self._changed_source()
        if changed is not None:
            self._drop(changed)
            return None
        _, scope = _entry(self._fn)
        try:
            with self.path.open("rb") as file, _aot_enabled():
                loaded = torch.compiler.load_compiled_function(
                    file, f_globals=scope, external_data={"target": self._fn}
                )
        except Exception as error:  # any file that does not load is compiled again
            self._drop(f"did not load ({type(error).__name__})")
            return None
        self.outcome = "loaded"
        return loaded

    def _compile_and_save(self, args: tuple) -> Callable[..., Any]:
        entry, _ = _entry(self._fn)
        options = {**self._options, "guard_filter_fn": torch.compiler.keep_portable_guards_unsafe}
        try:
            with _aot_enabled():
                compiled = torch.compile(entry, fullgraph=True, options=options).aot_compile((args, {}))
        except torch._dynamo.exc.Unsupported as error:  # a graph break: compiled in pieces, each process anew
            if self._fullgraph:
                raise
            why = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
            notice(f"{self.path.name} is compiled as usual, not kept: it does not compile whole ({why})")
            self.outcome = "traced"
            return torch.compile(self._fn, options=self._options or None)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.record.unlink(missing_ok=True)  # a function without its record is never loaded
            compiled.save_compiled_function(str(self.path), external_data={"target": self._fn})
            record = json.dumps(traced_files(compiled), indent=1).encode()
            write_atomic(self.record, lambda file: file.write(record))
        except Exception as error:  # a step that runs but cannot be kept still runs
            notice(f"the compiled step could not be saved to {self.path} ({type(error).__name__}: {error})")
            self.outcome = "compiled"
            return compiled
        self.outcome = "saved"
        return compiled
