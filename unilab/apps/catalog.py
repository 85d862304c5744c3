"""What ``unilab list`` and ``--help`` name, declared as data so that printing it imports neither torch nor any task.

Building a task's env to read its sizes imports torch, torchrl, mujoco and every task package: seconds on a small
CPU, for a list that changes only when a task does. ``tests/test_startup.py`` checks the table against the task
registry, so it cannot drift from the real one. The algorithms need no table: their settings classes
(``unilab.train.registry``) import no torch.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import NamedTuple

from unilab.train.registry import ALGORITHMS

ENTRY_POINT_GROUP = "unilab.tasks"  # as unilab.tasks.registry reads it
BACKENDS = ("mjwarp", "mujoco")  # unilab.sim.BACKENDS
DEFAULT_ALGO = "sac"  # as configs/train.yaml's defaults list chooses it
DEFAULT_TASK = "g1_walk_flat"  # as configs/train.yaml's defaults list chooses it


class TaskSizes(NamedTuple):
    """A task's observation widths (actor, critic) and action width."""

    policy: int
    critic: int
    action: int


# The tasks shipped in unilab/tasks/, with the sizes their envs report (obs_dims, action_dim).
TASKS: dict[str, TaskSizes] = {
    "g1_motion_tracking": TaskSizes(160, 289, 29),
    "g1_walk_flat": TaskSizes(100, 103, 29),
    "g1_walk_flat_rand": TaskSizes(100, 103, 29),
    "g1_walk_rough": TaskSizes(287, 290, 29),
    "go1_walk_flat": TaskSizes(53, 56, 12),
    "go1_walk_rough": TaskSizes(240, 243, 12),
}


def task_names() -> list[str]:
    """Every task ``train`` takes: the shipped ones, and the registry's list where it may hold more: where other
    distributions declare tasks as entry points (loading them: a point's name need not be its task's), or where
    the registry is loaded already (a program that registered a task of its own before calling a command)."""
    if not entry_points(group=ENTRY_POINT_GROUP) and "unilab.tasks.registry" not in sys.modules:
        return sorted(TASKS)
    from unilab.tasks.registry import list_tasks

    return list_tasks()


def cuda_available() -> bool:
    """Whether torch would see a GPU, found without importing it (that import alone costs as much as the rest of
    ``unilab list``): torch must be a CUDA build (``torch/version.py`` names its CUDA version) and the driver must
    report a device, as ``torch.cuda.is_available`` asks it (``CUDA_VISIBLE_DEVICES`` applies)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return False
    built = re.search(r"^cuda\b[^=]*=\s*(\S+)", (Path(spec.origin).parent / "version.py").read_text(), re.MULTILINE)
    if built is None or built.group(1) == "None":
        return False
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    count = ctypes.c_int(0)
    return driver.cuInit(0) == 0 and driver.cuDeviceGetCount(ctypes.byref(count)) == 0 and count.value > 0


def default_backend() -> str:
    """As ``unilab.sim.default_backend``, without importing mujoco and Warp: mjwarp with CUDA, else mujoco."""
    return "mjwarp" if cuda_available() else "mujoco"


def task_sizes(name: str) -> TaskSizes:
    """A task's sizes: declared for the shipped tasks, built (slow: imports the registry) for any other."""
    if name in TASKS:
        return TASKS[name]
    from unilab.tasks.registry import make_functional_env

    env = make_functional_env(name, sim="mujoco", num_envs=1)
    return TaskSizes(env.obs_dims["policy"], env.obs_dims["critic"], env.action_dim)


def list_everything() -> str:
    """``unilab list``: every task with its sizes, the algorithms and the backends."""
    lines = ["tasks (observations: policy / critic, actions):"]
    for name in task_names():
        sizes = task_sizes(name)
        lines.append(f"  {name:<22} {sizes.policy} / {sizes.critic}, {sizes.action}")
    lines.append("algorithms:")
    lines += [f"  {name:<22} {settings.summary}" for name, settings in ALGORITHMS.items()]
    lines.append(f"physics backends: {', '.join(BACKENDS)} (default here: {default_backend()})")
    return "\n".join(lines)
