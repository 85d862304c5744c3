"""``unilab cache``: where the compiled kernels and graphs that make a second run start fast are kept, how much room
they take, and ``unilab cache clear`` to remove them (``unilab.core.cache_dirs`` places them).

Clearing is safe at any time no run is compiling: the next run compiles again, as on a fresh machine (on the GPU a
minute or two). A cache the user placed with its library's own variable is shown but never removed: that folder is
the user's, and may hold more than this package put there.
"""

from __future__ import annotations

from unilab.apps.args import ArgumentParser
from unilab.core.cache_dirs import ROOT_VARIABLE, CacheDir, cache_dirs, clear, resolve_root, size_bytes

ACTIONS = ("info", "clear")


def human(size: int) -> str:
    """``size`` bytes in the largest 1024-based unit that keeps it at or above one, as ``du -h``."""
    value, unit = float(size), "B"
    for bigger in ("KiB", "MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"


def _placed(cache: CacheDir) -> str:
    return f" (set by {cache.variable})" if cache.user_set else ""


def info(dirs: list[CacheDir]) -> str:
    """One line per cache: its name, folder and size, then the total and how to clear them."""
    width = max(len(cache.name) for cache in dirs)
    path_width = max(len(str(cache.path)) for cache in dirs)
    lines, total = [], 0
    for cache in dirs:
        size = size_bytes(cache.path)
        total += size
        state = human(size) if cache.path.exists() else "empty (not created yet)"
        lines.append(f"  {cache.name:<{width}}  {cache.path!s:<{path_width}}  {state}{_placed(cache)}")
    lines.append(f"total {human(total)}; unilab cache clear removes them (the next run compiles again)")
    return "\n".join(lines)


def clear_all(dirs: list[CacheDir]) -> str:
    """Remove every cache this package placed; one line per cache saying what went or why it stayed."""
    lines = []
    for cache in dirs:
        if cache.user_set:
            lines.append(f"  kept {cache.path}{_placed(cache)}: yours to remove")
        elif cache.path.exists():
            lines.append(f"  removed {cache.path} ({human(clear(cache))})")
        else:
            lines.append(f"  {cache.path}: nothing to remove")
    return "\n".join(lines)


def main(argv: list[str]) -> None:
    parser = ArgumentParser(
        prog="unilab cache",
        description=f"Where compiled kernels and graphs are kept across runs (root: ${ROOT_VARIABLE}, else "
        "$XDG_CACHE_HOME/unilab, else ~/.cache/unilab) and their sizes; 'clear' removes them.",
    )
    parser.add_argument("action", nargs="?", default="info", choices=ACTIONS, help="info (the default) or clear")
    args = parser.parse_args(argv)
    root = resolve_root()
    dirs = cache_dirs(root)
    print(f"cache root: {root}")
    print(info(dirs) if args.action == "info" else clear_all(dirs))
