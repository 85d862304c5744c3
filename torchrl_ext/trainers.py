"""The trainer for an algorithm: the off-policy loop for SAC and FlashSAC, the on-policy loop for PPO."""

from __future__ import annotations

from torchrl_ext.config import AlgoConfig
from torchrl_ext.distributed import ALONE, World
from torchrl_ext.learners import LEARNERS
from torchrl_ext.onpolicy import OnPolicyTrainer
from torchrl_ext.trainer import OffPolicyTrainer
from unilab.envs.functional import FunctionalEnv

Trainer = OffPolicyTrainer | OnPolicyTrainer


def make_trainer(env: FunctionalEnv, cfg: AlgoConfig, world: World = ALONE) -> Trainer:
    """The trainer whose loop ``cfg.name``'s learner runs in (its ``on_policy`` flag)."""
    if cfg.name not in LEARNERS:
        raise ValueError(f"unknown algo {cfg.name!r}; known algos: {', '.join(LEARNERS)}")
    trainer = OnPolicyTrainer if LEARNERS[cfg.name].on_policy else OffPolicyTrainer
    return trainer(env, cfg, world)
