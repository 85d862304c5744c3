"""TorchRL extensions for unilab: SAC-family losses, networks and the trainer, for batched, graph-captured training."""

from torchrl_ext.flashsac import FlashSACLoss
from torchrl_ext.networks import Actor, EnsembleCritic, RunningNorm
from torchrl_ext.sac import (
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
