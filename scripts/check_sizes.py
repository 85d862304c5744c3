"""Size limits of the code outside tests: a file over 600 lines or a function over 100 is doing several jobs.

`make check` runs this (exit status 1 and one line per breach); ``tests/test_structure.py`` runs it on the tree too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("unilab", "torchrl_ext", "scripts")
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 100


def measure(root: Path = ROOT) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """``(lines, file)`` of every source file and ``(lines, file:line: function)`` of every function in them,
    methods and nested functions included."""
    files, fns = [], []
    for folder in SOURCES:
        for path in sorted((root / folder).rglob("*.py")):
            text = path.read_text()
            name = path.relative_to(root).as_posix()
            files.append((len(text.splitlines()), name))
            for node in ast.walk(ast.parse(text, str(path))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    fns.append((node.end_lineno - node.lineno + 1, f"{name}:{node.lineno}: {node.name}"))
    return files, fns


def breaches(root: Path = ROOT) -> list[str]:
    """One line for every file and function over its limit."""
    files, fns = measure(root)
    return [f"{name}: {lines} lines (at most {MAX_FILE_LINES})" for lines, name in files if lines > MAX_FILE_LINES] + [
        f"{name} is {lines} lines (at most {MAX_FUNCTION_LINES})" for lines, name in fns if lines > MAX_FUNCTION_LINES
    ]


def main() -> None:
    found = breaches()
    for line in found:
        print(line, file=sys.stderr)
    if found:
        raise SystemExit(1)
    files, fns = measure()
    (file_lines, file), (fn_lines, function) = max(files), max(fns)
    print(f"sizes: longest file {file} ({file_lines} lines), longest function {function} ({fn_lines} lines)")


if __name__ == "__main__":
    main()
