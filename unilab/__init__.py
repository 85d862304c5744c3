"""UniLab: humanoid policies trained with off-policy RL on batched MuJoCo physics."""

__version__ = "0.1.0"

from unilab.tasks.registry import list_tasks, make_env

__all__ = ["list_tasks", "make_env"]
