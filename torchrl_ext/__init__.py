"""TorchRL extensions for unilab: SAC-family losses, networks and the trainer, for batched, graph-captured training."""

import unilab  # noqa: F401  (first: sets the headless MUJOCO_GL default before torchrl imports mujoco)
from torchrl_ext.flashsac import FlashSACLoss
from torchrl_ext.networks import Actor, EnsembleCritic, RunningNorm
from torchrl_ext.sac import (
    Mirror,
    Optimizers,
    SACLoss,
    SoftActorCriticLoss,
    Symmetry,
    Transition,
    make_optimizers,
    project_distribution,
    target_entropy_from_ratio,
)

__all__ = [
    "Actor",
    "EnsembleCritic",
    "FlashSACLoss",
    "Mirror",
    "Optimizers",
    "RunningNorm",
    "SACLoss",
    "SoftActorCriticLoss",
    "Symmetry",
    "Transition",
    "make_optimizers",
    "project_distribution",
    "target_entropy_from_ratio",
]
