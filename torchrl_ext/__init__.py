"""TorchRL extensions for unilab: FastSAC-style networks and a SAC loss built for batched, graph-captured training."""

from torchrl_ext.networks import Actor, EnsembleCritic, RunningNorm
from torchrl_ext.sac import (
    Mirror,
    Optimizers,
    SACLoss,
    Symmetry,
    Transition,
    make_optimizers,
    project_distribution,
    target_entropy_from_ratio,
)

__all__ = [
    "Actor",
    "EnsembleCritic",
    "Mirror",
    "Optimizers",
    "RunningNorm",
    "SACLoss",
    "Symmetry",
    "Transition",
    "make_optimizers",
    "project_distribution",
    "target_entropy_from_ratio",
]
