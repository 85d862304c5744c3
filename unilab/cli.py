"""The ``unilab`` console command: one entry point with subcommands."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    commands = {"bench": "unilab.bench", "train": "unilab.train"}
    if not argv or argv[0] not in commands:
        print(f"usage: unilab {{{','.join(commands)}}} ...", file=sys.stderr)
        raise SystemExit(2)
    module = __import__(commands[argv[0]], fromlist=["main"])
    module.main(argv[1:])
