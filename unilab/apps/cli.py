"""The ``unilab`` console command: one entry point with subcommands."""

from __future__ import annotations

import importlib
import sys
from typing import NoReturn

COMMANDS = {
    "bench": "unilab.apps.bench",
    "eval": "unilab.apps.eval",
    "play": "unilab.apps.play",
    "train": "unilab.apps.train",
}


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] not in COMMANDS:
        print(f"usage: unilab {{{','.join(COMMANDS)}}} ...", file=sys.stderr)
        raise SystemExit(2)
    importlib.import_module(COMMANDS[argv[0]]).main(argv[1:])


def fail(prog: str, message: object) -> NoReturn:
    """A user-input error: one line naming the problem, exit status 2 (argparse's convention), no traceback."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(2)
