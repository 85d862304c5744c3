"""The ``unilab`` console command: one entry point with subcommands."""

from __future__ import annotations

import argparse
import importlib
import sys
import tempfile
from pathlib import Path
from typing import NoReturn

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


def list_everything() -> str:
    """What can be trained: every registered task with its sizes, the algorithms and the backends."""
    from unilab.apps.train import ALGOS
    from unilab.sim import BACKENDS, default_backend
    from unilab.tasks.registry import list_tasks, make_functional_env

    lines = ["tasks (observations: policy / critic, actions):"]
    for name in list_tasks():
        env = make_functional_env(name, sim="mujoco", num_envs=1)
        lines.append(f"  {name:<22} {env.obs_dims['policy']} / {env.obs_dims['critic']}, {env.action_dim}")
    lines.append(f"algorithms: {', '.join(ALGOS)}")
    lines.append(f"physics backends: {', '.join(BACKENDS)} (default here: {default_backend()})")
    return "\n".join(lines)


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
    if argv[0] == "list":
        if argv[1:] in (["-h"], ["--help"]):
            print(f"usage: unilab list\n\n{COMMANDS['list'][1]}")
            return
        if argv[1:]:
            fail("unilab list", f"takes no arguments, got {' '.join(argv[1:])}")
        print(list_everything())
        return
    importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the commands' error format: argparse prints its usage before the error, which makes a
    mistyped flag several lines; here it is one line, ``<prog>: error: ...``, exit status 2, as every other input
    error. ``--help`` still prints the usage."""

    def error(self, message: str) -> NoReturn:
        fail(self.prog, message)


def fail(prog: str, message: object) -> NoReturn:
    """A user-input error: one line naming the problem, exit status 2 (argparse's convention), no traceback."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(2)


def check_rollout_args(prog: str, num_envs: int, seed: int) -> None:
    """The arguments every rollout command takes: at least one env, a seed the counter RNG accepts."""
    if num_envs < 1:
        fail(prog, f"--num-envs must be >= 1, got {num_envs}")
    if not 0 <= seed < 2**31:
        fail(prog, f"--seed must be in [0, 2**31), got {seed}")


def check_device(prog: str, device: str) -> None:
    """``--device`` names a torch device this machine has."""
    import torch

    try:
        kind = torch.device(device).type
    except RuntimeError as exc:
        fail(prog, f"--device {device!r} is not a torch device ({exc})")
    if kind == "cuda" and not torch.cuda.is_available():
        fail(prog, f"--device {device} but CUDA is not available on this machine")


def resolve_sim_device(prog: str, sim: str, device: str | None) -> str:
    """``--device``, by default where ``sim`` runs here (``unilab.sim.backend_device``); refused in one line if
    it is not a torch device, is a CUDA device this machine lacks, or is one ``sim`` cannot hold its worlds on."""
    from unilab.sim import backend_device

    if device is not None:
        check_device(prog, device)
    try:
        return str(backend_device(sim, device))
    except ValueError as exc:
        fail(prog, str(exc))


def check_output(prog: str, path: Path | None, flag: str, suffix: str | None = None) -> None:
    """Make sure ``path`` can take a command's output before the command works for it: a directory (``suffix``
    None) that exists or can be made, or a file ending in ``suffix`` whose directory exists or can be made.
    Creating that directory now is no loss: the command would create it at the end anyway."""
    if path is None:
        return
    path = Path(path)
    if suffix is not None and path.suffix.lower() != suffix:
        fail(prog, f"{flag} {path} must end in {suffix}")
    folder = path if suffix is None else path.parent
    if suffix is not None and path.is_dir():
        fail(prog, f"{flag} {path} is a directory")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(prog, f"{flag} {path}: cannot create {folder} ({exc.strerror or exc})")
    try:  # a write probe, not os.access: root passes access checks in folders nobody can write, such as /proc
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        fail(prog, f"{flag} {path}: cannot write in {folder} ({exc.strerror or exc})")
