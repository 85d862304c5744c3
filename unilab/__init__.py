"""UniLab: humanoid policies trained with off-policy RL on batched MuJoCo physics."""

import ctypes.util
import os
import sys

if sys.platform.startswith("linux") and not os.environ.get("DISPLAY") and ctypes.util.find_library("EGL"):
    # Headless Linux with an EGL library (Mesa on CPU machines, the NVIDIA driver on GPU ones): GLFW cannot open a
    # window, EGL renders offscreen. Must happen before mujoco is first imported, which is why it sits here.
    os.environ.setdefault("MUJOCO_GL", "egl")

__version__ = "0.1.0"

from unilab.tasks.registry import list_tasks, make_env

__all__ = ["list_tasks", "make_env"]
