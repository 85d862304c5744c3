"""UniLab: humanoid policies trained with off-policy RL on batched MuJoCo physics."""

__version__ = "0.1.0"
