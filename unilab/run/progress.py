"""What a command shows while it works: a line naming each phase that can take more than a few seconds, and a bar
over the phase's loop where it has one.

On a small CPU, importing the stack, building an env, rendering a video or rolling out an eval each take from
seconds to minutes; without a word a user cannot tell working from hung. Lines go to stderr, so a command's stdout
(JSON lines, tables, paths) stays what scripts read; the bar shows only on a terminal, where it redraws in place.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

T = TypeVar("T")


def announce(prog: str, message: str) -> None:
    """One line, ``<prog>: <message>``, on stderr at once (a pipe would hold it back until the phase is over)."""
    print(f"{prog}: {message}", file=sys.stderr, flush=True)


def bar(items: Iterable[T], desc: str, unit: str, total: int | None = None) -> Iterator[T]:
    """``items`` with a progress bar on a terminal (gone once complete, so the output keeps only the results)."""
    from tqdm import tqdm  # here, not at the top: ``unilab --help`` imports this module and prints no bar

    return iter(tqdm(items, desc=desc, unit=unit, total=total, leave=False, disable=not sys.stderr.isatty()))
