"""The ``unilab`` console command: one entry point with subcommands."""

from __future__ import annotations

import importlib
import sys

from unilab.apps.args import check_environment, fail

COMMANDS = {
    "train": ("unilab.apps.train", "train a policy (SAC or FlashSAC) on a task; key=value overrides"),
    "eval": ("unilab.apps.eval", "score a checkpoint or an exported policy with the task's metrics"),
    "play": ("unilab.apps.play", "render a policy to play_video.mp4 (and a still with --still)"),
    "view": ("unilab.apps.view", "serve a web viewer of a policy running live (viser; loopback, --port)"),
    "bench": ("unilab.apps.bench", "throughput: canonical train runs, env steps, physics, drift"),
    "list": ("unilab.apps.cli", "the tasks (observation and action sizes), algorithms and physics backends"),
}


def usage() -> str:
    width = max(len(name) for name in COMMANDS)
    lines = [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    return "usage: unilab <command> [args]   (unilab <command> --help for each)\n\ncommands:\n" + "\n".join(lines)


def list_everything() -> str:
    """What can be trained: every registered task with its sizes, the algorithms and the backends."""
    from torchrl_ext.learners import LEARNERS
    from unilab.sim import BACKENDS, default_backend
    from unilab.tasks.registry import list_tasks, make_functional_env

    lines = ["tasks (observations: policy / critic, actions):"]
    for name in list_tasks():
        env = make_functional_env(name, sim="mujoco", num_envs=1)
        lines.append(f"  {name:<22} {env.obs_dims['policy']} / {env.obs_dims['critic']}, {env.action_dim}")
    lines.append("algorithms:")
    lines += [f"  {name:<22} {learner.summary}" for name, learner in LEARNERS.items()]
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
    check_environment(f"unilab {argv[0]}")
    if argv[0] == "list":
        if argv[1:] in (["-h"], ["--help"]):
            print(f"usage: unilab list\n\n{COMMANDS['list'][1]}")
            return
        if argv[1:]:
            fail("unilab list", f"takes no arguments, got {' '.join(argv[1:])}")
        print(list_everything())
        return
    importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])


def train() -> None:
    """Console command ``train``: the environment is checked before the training stack is imported."""
    check_environment("train")
    from unilab.apps.train import main as train_main

    train_main()
