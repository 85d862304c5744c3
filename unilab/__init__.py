"""UniLab: humanoid policies trained with off-policy RL on batched MuJoCo physics."""

import ctypes.util
import os
import sys
from collections.abc import Callable


def headless_gl(platform: str, display: str | None, find_library: Callable[[str], str | None]) -> str | None:
    """MuJoCo's offscreen GL backend for a machine without a display: EGL where a library provides it (the NVIDIA
    driver on GPU machines, Mesa on most CPU ones), else OSMesa (software); None where a window system can serve."""
    if not platform.startswith("linux") or display:
        return None
    for backend, library in (("egl", "EGL"), ("osmesa", "OSMesa")):
        if find_library(library):
            return backend
    return None


# Must happen before mujoco is first imported (torchrl imports it too), which is why it sits here.
_gl = headless_gl(sys.platform, os.environ.get("DISPLAY"), ctypes.util.find_library)
if _gl is not None:
    os.environ.setdefault("MUJOCO_GL", _gl)

__version__ = "0.1.0"

__all__ = ["list_tasks", "make_env", "register_task"]


def __getattr__(name: str) -> object:
    """The task registry on first use: importing it loads torchrl, mujoco and every task, which ``import
    unilab.core`` (or a command's ``--help``) has no need for."""
    if name in __all__:
        from unilab.tasks import registry

        return getattr(registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
