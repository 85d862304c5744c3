"""The ``unilab`` console command: one entry point with subcommands.

A subcommand's module is imported only when it runs: ``unilab --help`` imports no torchrl, mujoco or task
(``unilab.apps.catalog``), so it answers in a fraction of the training stack's import time; ``unilab list`` loads the
tasks to read their sizes.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
from pathlib import Path
from types import ModuleType
from typing import NoReturn

from unilab.apps import early_update
from unilab.apps.args import check_environment, fail
from unilab.apps.catalog import list_everything
from unilab.apps.early import ahead_device, check_command
from unilab.core import startup_gc, warp_ahead
from unilab.core.cache_dirs import configure, corrupt_bytecode, notice, start_stack_compile

COMMANDS = {
    "train": ("unilab.apps.train", "train a policy (SAC, FlashSAC or PPO) on a task; key=value overrides"),
    "eval": ("unilab.apps.eval", "score a checkpoint or an exported policy with the task's metrics"),
    "play": ("unilab.apps.play", "render a policy to play_video.mp4 (and a still with --still)"),
    "view": ("unilab.apps.view", "serve a web viewer of a policy running live (viser; loopback, --port)"),
    "bench": ("unilab.apps.bench", "throughput: canonical train runs, env steps, physics, drift"),
    "deploy": ("unilab.apps.deploy", "run an exported policy without torch: 'check' it in C MuJoCo, 'export' one"),
    "list": ("unilab.apps.cli", "the tasks, algorithms and physics backends (--sizes: the tasks' widths)"),
    "cache": ("unilab.apps.cache", "where compiled kernels and graphs are kept, their sizes; 'clear' removes them"),
}
# The commands that hold Python's collector back while they start (unilab.core.startup_gc): train until its run's
# first iteration is done, eval for its whole life (start-up is most of it, and its rollouts report no rate).
HOLDING = ("train", "eval")


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
            print(f"usage: unilab list [--sizes]\n\n{COMMANDS['list'][1]}")
            return
        if argv[1:] not in ([], ["--sizes"]):
            fail("unilab list", f"takes only --sizes, got {' '.join(argv[1:])}")
        sizes = argv[1:] == ["--sizes"]
        if sizes:
            import_command("unilab list", "unilab.envs.layout")  # the tasks' sizes are read from their layouts
        print(list_everything(sizes))
        return
    if argv[0] == "cache":  # reads folders only: no stack to load, no caches to place
        importlib.import_module(COMMANDS["cache"][0]).main(argv[1:])
        return
    if argv[0] == "deploy":  # the runtime needs no torch; its export loads the stack itself, after its own checks
        configure()
        importlib.import_module(COMMANDS["deploy"][0]).main(argv[1:])
        return
    start_command(argv[0], f"unilab {argv[0]}", argv[1:], argv[1:])


def start_command(name: str, prog: str, arguments: list[str], command_argv: list[str] | None) -> None:
    """Start a command that loads the stack: what needs no stack is answered first, the caches are placed, ``train``
    begins compiling ahead, and the command's module is imported and run (given ``command_argv``; None where this
    process is the command, which then reads ``sys.argv`` itself), the collector held for the ``HOLDING`` ones."""
    check_command(name, arguments)  # what needs no stack is answered before it loads
    configure()  # before torch or Warp is imported: they read where their caches live as they load
    if name == "train":
        start_ahead(arguments)
    with startup_gc.held() if name in HOLDING else contextlib.nullcontext():
        import_command(prog, COMMANDS[name][0]).main(command_argv)


def import_command(prog: str, module: str) -> ModuleType:
    """Import a command's module, saying on a terminal that the stack is loading (torch, torchrl, mujoco, the
    tasks: seconds on a small CPU, tens of seconds under a cold cache, before the command can print anything). The
    line is erased once the import is done, so that what the command prints next, an error included, stands alone.
    Where the stack's bytecode is kept in the cache and is not there yet, it is compiled side by side while the
    command imports (``start_stack_compile``). A damaged file of the bytecode cache is removed and the command
    started again (``restart_without``)."""
    status = sys.stderr.isatty()
    if status:
        sys.stderr.write(f"{prog}: loading torch, torchrl, MuJoCo and the tasks...")
        sys.stderr.flush()
    damaged = None
    try:
        start_stack_compile()
        return importlib.import_module(module)
    except KeyboardInterrupt:  # Ctrl-C while loading: nothing has started; said below, once the line is erased
        pass
    except Exception as error:
        damaged = corrupt_bytecode(error)
        if damaged is None:
            raise
    finally:
        if status:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
    if damaged is not None:
        restart_without(damaged)
    fail_interrupted(prog)


REPAIRS_VARIABLE = "UNILAB_BYTECODE_REPAIRS"  # how many times this command has started again, in its environment
MAX_REPAIRS = 8


def restart_without(damaged: Path) -> NoReturn:
    """Remove a damaged file of the bytecode cache and start this command again (``exec``: the same process id,
    interpreter flags, arguments and environment), so that Python compiles that module from its source. Not retried
    in place: a package that failed half-way through its import (torch registers its operators once) cannot be
    imported again in the same process. After ``MAX_REPAIRS`` restarts (a disk that damages what is written) the
    command stops with one line instead."""
    repairs = int(os.environ.get(REPAIRS_VARIABLE, "0"))
    damaged.unlink(missing_ok=True)
    if repairs >= MAX_REPAIRS:
        notice(f"removed a corrupt bytecode cache entry {damaged}, {repairs + 1} in a row: check the disk under the "
               "cache root (unilab cache), or clear it (unilab cache clear)")  # fmt: skip
        raise SystemExit(1)
    notice(f"removed a corrupt bytecode cache entry {damaged}; starting again to compile it from its source")
    os.environ[REPAIRS_VARIABLE] = str(repairs + 1)
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


def fail_interrupted(prog: str) -> NoReturn:
    """Ctrl-C before a command began its work: one line and the exit status of a process SIGINT ended."""
    print(f"{prog}: stopped by SIGINT while loading; nothing was done", file=sys.stderr)
    raise SystemExit(128 + signal.SIGINT) from None


def train() -> None:
    """Console command ``train``: the environment, and what the catalog can answer, are checked before the
    training stack is imported."""
    check_environment("train")
    start_command("train", "train", sys.argv[1:], None)


def start_ahead(arguments: list[str]) -> None:
    """Where ``train``'s command line runs MuJoCo Warp on a GPU, start compiling its step modules beside the imports
    (``unilab.core.warp_ahead``; the backend waits for them); where their cache was cold, the run's update too
    (``unilab.apps.early_update``; the run waits for it before its first iteration)."""
    device = ahead_device(arguments)
    if device is not None and warp_ahead.start(device):
        early_update.start(arguments)
