"""The ``unilab`` console command: one entry point with subcommands.

A subcommand's module is imported only when it runs: ``unilab --help`` and ``unilab list`` import no torchrl, mujoco
or task (``unilab.apps.catalog``), so they answer in a fraction of the training stack's import time.
"""

from __future__ import annotations

import importlib
import sys

from unilab.apps.args import check_environment, fail
from unilab.apps.catalog import list_everything
from unilab.apps.progress import announce

COMMANDS = {
    "train": ("unilab.apps.train", "train a policy (SAC or FlashSAC) on a task; key=value overrides"),
    "eval": ("unilab.apps.eval", "score a checkpoint or an exported policy with the task's metrics"),
    "play": ("unilab.apps.play", "render a policy to play_video.mp4 (and a still with --still)"),
    "bench": ("unilab.apps.bench", "throughput: canonical train runs, env steps, physics, drift"),
    "list": ("unilab.apps.cli", "the tasks (observation and action sizes), algorithms and physics backends"),
}


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    return "usage: unilab <command> [args]   (unilab <command> --help for each)\n\ncommands:\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(usage())
        return
    if not argv:
        print(usage(), file=sys.stderr)
        raise SystemExit(2)
    if argv[0] not in COMMANDS:
        fail("unilab", f"unknown command {argv[0]!r}; commands: {', '.join(COMMANDS)} (unilab --help)")
    check_environment(f"unilab {argv[0]}")
    if argv[0] == "list":
        if argv[1:] in (["-h"], ["--help"]):
            print(f"usage: unilab list\n\n{COMMANDS['list'][1]}")
            return
        if argv[1:]:
            fail("unilab list", f"takes no arguments, got {' '.join(argv[1:])}")
        print(list_everything())
        return
    announce_imports(f"unilab {argv[0]}", argv[1:])
    importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])


def announce_imports(prog: str, argv: list[str]) -> None:
    """Say that the stack is loading (torch, torchrl, mujoco, the tasks): seconds on a small CPU, tens of seconds
    under a cold cache, before the command can print anything. ``--help`` and ``--cfg`` are quiet: they only print."""
    if not {"-h", "--help", "--cfg"} & set(argv):
        announce(prog, "loading torch, torchrl, MuJoCo and the tasks")


def train() -> None:
    """Console command ``train``: the environment is checked before the training stack is imported."""
    check_environment("train")
    announce_imports("train", sys.argv[1:])
    from unilab.apps.train import main as train_main

    train_main()
