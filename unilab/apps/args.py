"""Argument parsing and one-line errors: what every command shares, and nothing else, so any command can use it.

A user's mistake ends a command with one line, ``<prog>: error: ...``, and exit status 2 (argparse's convention),
before any work; tracebacks are left for bugs.
"""

from __future__ import annotations

import argparse
import difflib
import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

# MUJOCO_GL values MuJoCo accepts on Linux; any other makes ``import mujoco`` raise.
MUJOCO_GL_VALUES = ("", "egl", "osmesa", "glx", "glfw", "enable", "enabled", "on", "true", "1")
MUJOCO_GL_OFF = ("disable", "disabled", "off", "false", "0")


def task_knob_values(items: Sequence[str]) -> dict[str, object]:
    """``task.<knob>=<value>`` arguments as ``{knob: value}``, each value read as YAML reads a scalar (as ``train``'s
    overrides are: ``1`` an int, ``0.5`` a float, ``true`` a flag, anything else a word). Whether the task takes the
    knob and the value is for ``unilab.apps.compose.check_knobs``; the form is checked here, in one line."""
    import yaml

    values: dict[str, object] = {}
    for item in items:
        key, equals, text = item.partition("=")
        knob = key.removeprefix("task.")
        if not equals or knob == key or not knob.isidentifier() or not text:
            raise InputError(f"{item!r} is not a task knob's value: write task.<knob>=<value>, e.g. task.falls=knees")
        try:
            values[knob] = yaml.safe_load(text)
        except yaml.YAMLError:
            raise InputError(f"{item!r}: {text!r} is not a value") from None
    return values


def check_environment(prog: str) -> None:
    """The environment variables the commands depend on, checked before anything imports the library that reads
    them: a bad ``MUJOCO_GL`` fails the import of mujoco, and an unusable ``WARP_CACHE_PATH`` Warp's first kernel
    build, each as a traceback."""
    gl = os.environ.get("MUJOCO_GL")
    if gl is not None and gl.lower().strip() not in (*MUJOCO_GL_VALUES, *MUJOCO_GL_OFF):
        fail(prog, f"MUJOCO_GL={gl!r} is not a backend MuJoCo knows: set egl, osmesa or glfw, or unset it")
    cache = os.environ.get("WARP_CACHE_PATH")
    if cache is not None:
        check_output(prog, Path(cache), "WARP_CACHE_PATH")


class InputError(ValueError):
    """Input a command cannot use (a missing or unfitting policy file, a value out of range), found past argument
    parsing; the command reports it as ``fail``'s one line."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse with the commands' error format: argparse prints its usage before the error, which makes a
    mistyped flag several lines; here it is one line, ``<prog>: error: ...``, exit status 2, as every other input
    error. ``--help`` still prints the usage."""

    def error(self, message: str) -> NoReturn:
        fail(self.prog, message)

    def format_help(self) -> str:
        """argparse's help without reST's literal quotes (doubled backquotes): descriptions come from docstrings,
        written for the docs, and on a terminal the quotes are noise."""
        return super().format_help().replace("``", "")


def fail(prog: str, message: object) -> NoReturn:
    """A user-input error: one line naming the problem, exit status 2 (argparse's convention), no traceback."""
    print(f"{prog}: error: {' '.join(str(message).split())}", file=sys.stderr)
    raise SystemExit(2)


def unknown_name(kind: str, name: str, known: Sequence[str], plural: str | None = None) -> str:
    """One line for a name that is not among ``known`` (a task, an algorithm, a backend): the known ones, and the
    closest of them where one is close, since a typo ("g1_walk_flta") or a half-remembered name ("g1_rough") is the
    usual cause. ``plural`` names the known ones where it is not ``kind`` + s."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]}?" if close else ""
    return f"unknown {kind} {name!r}; known {plural or kind + 's'}: {', '.join(known)}{hint}"


def check_rollout_args(prog: str, num_envs: int, seed: int) -> None:
    """The arguments every rollout command takes: at least one env, a seed the counter RNG accepts."""
    if num_envs < 1:
        fail(prog, f"--num-envs must be >= 1, got {num_envs}")
    if not 0 <= seed < 2**31:
        fail(prog, f"--seed must be in [0, 2**31), got {seed}")


def resolve_sim_device(prog: str, sim: str, device: str | None) -> str:
    """``--device``, by default where ``sim`` runs here (``unilab.sim.backend_device``); refused in one line if
    it is not a torch device, is a CUDA device this machine lacks, or is one ``sim`` cannot hold its worlds on."""
    from unilab.sim import backend_device

    try:
        return str(backend_device(sim, device, None if device is None else f"--device {device}"))
    except ValueError as exc:
        fail(prog, str(exc))


def check_output(prog: str, path: Path | None, flag: str, suffix: str | None = None, need_bytes: int = 0) -> None:
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
    try:
        check_room(folder, need_bytes)
    except InputError as exc:
        fail(prog, f"{flag} {path}: {exc}")


def check_room(folder: Path, need_bytes: int) -> None:
    """``InputError`` unless ``folder``'s disk has ``need_bytes`` free: a write probe passes on a full disk, and the
    command would find out only once its work is done."""
    free = shutil.disk_usage(folder).free
    if free < need_bytes:
        raise InputError(
            f"only {free / 2**20:.1f} MiB free in {folder}, and this writes about {need_bytes / 2**20:.1f} MiB"
        )


def shell_command(name: str) -> str:
    """How to type the console command ``name`` so that it works in the shell the user is in: its bare name where
    the shell finds this environment's copy, else its full path (a virtual environment that was never activated
    leaves its commands off ``PATH``, and a printed ``unilab eval ...`` would fail as "command not found")."""
    beside = Path(sys.executable).parent / name
    found = shutil.which(name)
    if not beside.is_file() or (found is not None and Path(found).resolve() == beside.resolve()):
        return name
    return str(beside)
