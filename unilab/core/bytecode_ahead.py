"""Compile packages' bytecode side by side, the shallowest modules first, while the command that started this
imports them.

``python -X pycache_prefix=DIR -m unilab.core.bytecode_ahead WORKERS FOLDER...`` (``cache_dirs.start_stack_compile``
starts it). The command does not wait: it imports its stack at once, loading what this has compiled and compiling
the rest itself, as without it. A package's top-level modules are imported first and its deep ones later, if at all,
so compiling breadth first keeps this ahead of the imports for the most modules. Python writes each bytecode file
whole (to a temporary file, then a rename), so a module compiled by both is read whole from either. A file that
does not compile (a module for another Python) is left for Python to report if it is ever imported. Imports neither
torch nor Warp.
"""

from __future__ import annotations

import contextlib
import py_compile
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

# Files per task handed to a worker: the pool's overhead per task is about a small module's compile.
_CHUNK = 16


def shallowest_first(folders: list[Path]) -> list[Path]:
    """Every ``.py`` file under ``folders``, by depth below its folder, then in the folders' order, then by path."""
    found = [
        (len(path.relative_to(folder).parts), rank, str(path))
        for rank, folder in enumerate(folders)
        for path in folder.rglob("*.py")
    ]
    return [Path(name) for _, _, name in sorted(found)]


def _compile(path: Path) -> None:
    # Another Python's syntax, a file gone or unreadable: left for Python to report if the module is ever imported.
    with contextlib.suppress(py_compile.PyCompileError, OSError, ValueError):
        py_compile.compile(str(path), doraise=True)


def compile_all(folders: list[Path], workers: int) -> None:
    """Compile every module under ``folders`` into the bytecode cache Python uses here, ``workers`` at a time."""
    with ProcessPoolExecutor(max_workers=workers) as pool:
        for _ in pool.map(_compile, shallowest_first(folders), chunksize=_CHUNK):
            pass


if __name__ == "__main__":
    compile_all([Path(folder) for folder in sys.argv[2:]], int(sys.argv[1]))
