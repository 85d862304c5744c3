"""What ``unilab list`` and the early answers name, found without importing torch or any task where that can be done.

The task names are the task packages' folders (a package's name is its task's: ``tests/test_startup.py`` holds the
two together), so an unknown ``--task`` is answered at once. A task's sizes are its own, read from its layout
(``unilab.envs.layout``), which loads the tasks: only ``unilab list`` asks for them. The algorithms need no table:
their settings classes (``unilab.train.registry``) import no torch.
"""

from __future__ import annotations

import ctypes
import importlib.util
import re
import sys
from importlib.metadata import entry_points
from pathlib import Path
from typing import NamedTuple

import unilab
from unilab.run.config import BACKENDS
from unilab.train.registry import ALGORITHMS

ENTRY_POINT_GROUP = "unilab.tasks"  # as unilab.tasks.registry reads it
DEFAULT_ALGO = "sac"  # as configs/train.yaml's defaults list chooses it
DEFAULT_TASK = "g1_walk_flat"  # as configs/train.yaml's defaults list chooses it


class TaskSizes(NamedTuple):
    """A task's observation widths (actor, critic) and action width."""

    policy: int
    critic: int
    action: int


def shipped_tasks() -> list[str]:
    """The task packages in ``unilab/tasks/``, by their folders' names."""
    folder = Path(unilab.__file__).parent / "tasks"
    return sorted(path.name for path in folder.iterdir() if (path / "__init__.py").is_file())


def task_names() -> list[str]:
    """Every task ``train`` takes: the shipped ones, and the registry's list where it may hold more: where other
    distributions declare tasks as entry points (loading them: a point's name need not be its task's), or where
    the registry is loaded already (a program that registered a task of its own before calling a command)."""
    if not entry_points(group=ENTRY_POINT_GROUP) and "unilab.tasks.registry" not in sys.modules:
        return shipped_tasks()
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
    """A task's sizes, from its layout: its model compiled and its terms read, no env built."""
    from unilab.envs.layout import task_layout
    from unilab.tasks.registry import make_task

    layout = task_layout(make_task(name))
    return TaskSizes(layout.obs_dims["policy"], layout.obs_dims["critic"], layout.action_dim)


def list_everything(sizes: bool = False) -> str:
    """``unilab list``: every task, the algorithms and the backends; with ``sizes``, each task's observation and
    action widths, which are read from the task itself and so load torch and the tasks (seconds, not a blink)."""
    if sizes:
        lines = ["tasks (observations: policy / critic, actions):"]
        for name in task_names():
            widths = task_sizes(name)
            lines.append(f"  {name:<22} {widths.policy} / {widths.critic}, {widths.action}")
    else:
        lines = ["tasks (unilab list --sizes: their observation and action widths):"]
        lines += [f"  {name}" for name in task_names()]
    lines.append("algorithms:")
    lines += [f"  {name:<22} {settings.summary}" for name, settings in ALGORITHMS.items()]
    lines.append(f"physics backends: {', '.join(BACKENDS)} (default here: {default_backend()})")
    return "\n".join(lines)
