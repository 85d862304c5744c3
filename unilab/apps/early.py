"""Answers that need no training stack: a mistyped task, algorithm or key, a value out of its range, a policy file
that is not there.

The commands import torch, torchrl, MuJoCo and every task before they can compose a config or load a policy:
seconds on a small CPU, several times ``import torch`` alone. A mistake a declared table can catch (the catalog's
tasks, the algorithms' settings classes, a path on disk) is therefore answered here, before that import, in the same
one line the full check would print; whatever needs the stack (a task's own knobs, a value that depends on another,
a checkpoint's contents) is left to the command, which checks everything again.
"""

from __future__ import annotations

import argparse
import os
import re
import typing
from pathlib import Path

from unilab.apps.args import ArgumentParser, fail, unknown_name
from unilab.apps.catalog import DEFAULT_ALGO, DEFAULT_TASK, task_names
from unilab.run.config import BACKENDS, schema, schema_keys, settings_fields, unknown_key_message
from unilab.train.registry import ALGORITHMS

GROUPS = ("algo", "task", "sim")  # what --algo/--task/--sim set, also given as algo=NAME (Hydra's group syntax)
POLICY_COMMANDS = ("eval", "play", "view")
CHECKED_SECTIONS = ("algo", "training")  # override keys the schema lists in full (a task's knobs are the task's)
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


def train_parser(epilog: str | None = None) -> ArgumentParser:
    """``train``'s flags; the rest of its arguments are Hydra overrides."""
    parser = ArgumentParser(
        prog="train",
        usage="train [--algo ALGO] [--task TASK] [--sim SIM] [--cfg] [key=value ...]",
        description="Train a policy. Every setting is a key=value override of the config (Hydra syntax).",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--algo", default=None, help=f"one of {', '.join(ALGORITHMS)} (default {DEFAULT_ALGO})")
    parser.add_argument("--task", default=None, help=f"one of {', '.join(task_names())} (default {DEFAULT_TASK})")
    parser.add_argument("--sim", default=None, help="mjwarp or mujoco (default: mjwarp with CUDA, else mujoco)")
    parser.add_argument("--cfg", action="store_true", help="print the resolved config and exit without training")
    return parser


class TrainArgs(typing.NamedTuple):
    """``train``'s command line, split: the flags, the Hydra overrides (the groups the flags chose first) and
    whether help was asked for."""

    flags: argparse.Namespace
    overrides: list[str]
    wants_help: bool


def split_train_args(arguments: list[str]) -> TrainArgs:
    """``train``'s arguments as flags and overrides; a stray flag, or a group given both ways, is refused."""
    arguments = list(arguments)
    for i in range(len(arguments) - 1):  # Hydra's spelling, --cfg job, means the same
        if arguments[i] == "--cfg" and arguments[i + 1] == "job":
            del arguments[i + 1]
            break
    wants_help = any(a in ("-h", "--help") for a in arguments)
    parser = train_parser()
    flags, overrides = parser.parse_known_args([a for a in arguments if a not in ("-h", "--help")])
    for flag in [o for o in overrides if o.startswith("-")]:
        fail(parser.prog, f"unrecognised option {flag}")
    groups = [f"{name}={value}" for name in GROUPS if (value := getattr(flags, name))]
    clashing = [o for o in overrides if o.split("=", 1)[0] in GROUPS]
    if groups and clashing:
        fail(parser.prog, f"give algo/task/sim either as --flags or as overrides, not both: {clashing}")
    return TrainArgs(flags, groups + overrides, wants_help)


def last_values(overrides: list[str]) -> dict[str, str]:
    """Each key's value as the command line leaves it (a later override wins), with Hydra's ``+``/``++`` prefixes
    dropped; deletions (``~key``) and bare words are not values."""
    values: dict[str, str] = {}
    for override in overrides:
        key, equals, value = override.partition("=")
        if equals and not key.startswith("~"):
            values[key.lstrip("+")] = value
    return values


def resume_path(values: dict[str, str]) -> str | None:
    """The checkpoint ``algo.resume`` names, as a plain path; None where it is unset, null or written in Hydra's
    quotes or interpolations (the composed config has its value, and ``validate`` its checks)."""
    path = values.get("algo.resume")
    if not path or path == "null" or path[0] in "'\"$":
        return None
    return path


def _typed(hint: object, text: str) -> float | int | None:
    """``text`` as the number a field of type ``hint`` holds, or None where it is not plainly one (Hydra then
    parses it, and reports what it cannot)."""
    if typing.get_origin(hint) is list:  # a list of sizes: Hydra's syntax, Hydra's checks
        return None
    kinds = typing.get_args(hint) or (hint,)
    if float in kinds and _FLOAT.fullmatch(text):
        return float(text)
    if int in kinds and bool not in kinds and _INT.fullmatch(text):
        return int(text)
    return None


def check_values(algo: str, values: dict[str, str]) -> None:
    """``ValueError`` for a key of ``algo``'s schema nobody declared, or a plain number outside its field's range:
    the first of ``compose_config``'s checks, made from the settings classes alone."""
    known = set(schema_keys(algo))
    for key in values:
        section, dot, _ = key.partition(".")
        if dot and section in CHECKED_SECTIONS and key not in known:
            raise ValueError(unknown_key_message(key))
    cfg = schema(algo)
    for key, f, _ in settings_fields(cfg):
        bounds = f.metadata.get("bounds")
        if key not in values or bounds is None:
            continue
        owner = cfg
        for part in key.split(".")[:-1]:
            owner = getattr(owner, part)
        number = _typed(typing.get_type_hints(type(owner))[f.name], values[key])
        if number is not None:
            bounds.check(key, number)


def check_train(arguments: list[str]) -> None:
    """Refuse, in one line, an unknown algorithm, task or backend, an unknown key of the algorithm's schema and a
    number out of its range, before the stack is imported."""
    values = last_values(split_train_args(arguments).overrides)
    resume = resume_path(values)
    if resume is not None and not Path(resume).is_file():
        fail("train", f"algo.resume={resume}: no such checkpoint file")
    algo = values.get("algo", DEFAULT_ALGO)
    if algo not in ALGORITHMS:
        fail("train", unknown_name("algo", algo, list(ALGORITHMS)))
    task = values.get("task")
    if task is not None and task not in (known := task_names()):
        fail("train", unknown_name("task", task, known))
    sim = values.get("sim")
    if sim not in (None, "auto", *BACKENDS):
        fail("train", unknown_name("sim", sim, BACKENDS, "backends"))
    if resume is not None and "algo" not in values:
        return  # the algorithm is the checkpoint's (``compose.resumed_groups``), whose keys are not known yet
    try:
        check_values(algo, values)
    except ValueError as exc:
        fail("train", exc)


# Where the GPU driver is present; read without loading CUDA (the run's process loads it once torch is imported).
CUDA_DEVICE_NODE = Path("/dev/nvidiactl")


def ahead_device(arguments: list[str], node: Path = CUDA_DEVICE_NODE) -> str | None:
    """The GPU a ``train`` command line will run MuJoCo Warp's physics on, as a Warp device name, read before the
    stack is imported so that Warp's step modules can be compiled meanwhile (``unilab.core.warp_ahead``); None
    where the line asks for no run (help, ``--cfg``), for the CPU or C MuJoCo, for another compiler output
    (``sim.warp_output``), or the machine has no GPU driver. Under torchrun only the first rank of a host answers:
    the ranks share its cache."""
    if os.environ.get("LOCAL_RANK", "0") != "0" or not node.exists():
        return None
    args = split_train_args(arguments)  # after ``check_command``, which refused a line this cannot split
    values = last_values(args.overrides)
    if args.wants_help or args.flags.cfg or values.get("sim", "auto") not in ("auto", "mjwarp"):
        return None
    if values.get("sim.warp_output", "null") != "null":
        return None
    device = values.get("training.device", "null")
    if device in ("null", "cuda"):
        return "cuda:0"
    return device if re.fullmatch(r"cuda:\d+", device) else None


class _Malformed(Exception):
    """A command line the early parse cannot read; the command's own parser words the error."""


class _QuietParser(argparse.ArgumentParser):
    """Raises where argparse would print its usage and exit: the command's own parser reports the line."""

    def error(self, message: str) -> typing.NoReturn:
        raise _Malformed(message)


def check_policy_files(command: str, arguments: list[str]) -> None:
    """``eval``/``play``/``view``: a ``--checkpoint`` or ``--onnx`` that names no file is refused as the command
    would refuse it, before the stack is imported (eval takes several checkpoints, a series)."""
    parser = _QuietParser(add_help=False)
    parser.add_argument("--checkpoint", type=Path, nargs="+", default=[])
    parser.add_argument("--onnx", type=Path, default=None)
    try:
        given, _ = parser.parse_known_args(arguments)
    except _Malformed:
        return
    for path in given.checkpoint:
        if not path.exists():
            fail(f"unilab {command}", f"checkpoint not found: {path}")
    if given.onnx is not None and not given.onnx.exists():
        fail(f"unilab {command}", f"onnx policy not found: {given.onnx}")


def check_command(command: str, arguments: list[str]) -> None:
    """The early checks of ``command`` (a ``unilab`` subcommand, or ``train``). ``--help`` of eval, play and view is
    left to the command; ``train --help`` composes the config it describes, so it is refused as a run would be."""
    if any(a in ("-h", "--help") for a in arguments) and command != "train":
        return
    if command == "train":
        check_train(arguments)
    elif command in POLICY_COMMANDS:
        check_policy_files(command, arguments)
