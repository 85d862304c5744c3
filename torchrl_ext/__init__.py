"""TorchRL extensions for batched, graph-captured training: SAC-family losses, PPO on TorchRL's loss and GAE,
networks, a device replay buffer, data-parallel collectives and ONNX export. Nothing here imports unilab, so any
TorchRL user can take these pieces; the loops that drive them are ``unilab.train``'s."""

from torchrl_ext.flashsac import FlashSACLoss
from torchrl_ext.networks import Actor, EnsembleCritic, RunningNorm
from torchrl_ext.ppo import CapturableClipPPOLoss, GaussianActor, ValueCritic
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
    "CapturableClipPPOLoss",
    "EnsembleCritic",
    "FlashSACLoss",
    "GaussianActor",
    "Optimizers",
    "RunningNorm",
    "SACLoss",
    "SoftActorCriticLoss",
    "Symmetry",
    "Transition",
    "ValueCritic",
    "make_optimizers",
    "project_distribution",
    "target_entropy_from_ratio",
]
