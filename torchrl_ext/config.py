"""The algorithms' settings: the ``algo`` part of the training config (the schema its YAML files follow).

Every ``algo.*`` key a user may override is a field here, so a misspelt key or a value of the
wrong type fails when the config is composed, before any work starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from torchrl_ext.networks import LOG_STD_MIN

# SAC aims the policy's entropy at -target_entropy_ratio nats per action dimension (sac.target_entropy_from_ratio).
# Per dimension a policy with actions in [-1, 1] has at most log 2 nats (the uniform distribution's; the actor, its
# std capped at 1, tops out near 0.68), and the actor's narrowest Gaussian (std exp(LOG_STD_MIN)) has
# 0.5 * log(2 pi e) + LOG_STD_MIN = -3.58 nats at the centre of the range, less only where the tanh squeezes it,
# near +-1. So a ratio at or below -log 2 can never be met (the temperature grows without end), and one above 3.58
# only by pushing the actions towards the bounds, not by narrowing the noise.
TARGET_ENTROPY_RATIO_RANGE = (-math.log(2), -(0.5 * math.log(2 * math.pi * math.e) + LOG_STD_MIN))


@dataclass
class AlgoConfig:
    name: str = "sac"
    num_envs: int = 4096
    batch_size: int = 8192
    replay_buffer_n: int = 512
    updates_per_step: int = 4
    policy_frequency: int = 4
    learning_starts: int = 1
    max_iterations: int = 500
    save_interval: int = 500
    gamma: float = 0.97
    tau: float = 0.125
    actor_hidden: list[int] = field(default_factory=lambda: [512, 256, 128])
    critic_hidden: list[int] = field(default_factory=lambda: [768, 384, 192])
    num_atoms: int = 101
    v_min: float = -20.0
    v_max: float = 20.0
    alpha_init: float = 0.01
    target_entropy_ratio: float = 0.0  # SAC only; in (-log 2, 3.58]: TARGET_ENTROPY_RATIO_RANGE
    max_grad_norm: float = 0.0
    use_symmetry: bool = False
    obs_normalization: bool = True
    lr: float = 3e-4
    weight_decay: float = 1e-3
    seed: int = 1
    amp: bool = True
    compile: bool = True  # torch.compile the env step and the losses before graph capture; CUDA only
    overlap_updates: bool = True  # act with the pre-update weights so env step and updates overlap on CUDA
    resume: str | None = None
    # FlashSAC only
    target_sigma: float = 0.15
    reward_normalization: bool = True
    lr_final: float = 1.5e-4
    lr_decay_steps: int = 500_000
    actor_width: int = 128
    actor_blocks: int = 2
    critic_width: int = 256
    critic_blocks: int = 2
    noise_max_span: int = 16
    noise_zipf_mu: float = 2.0
    # PPO only (rsl_rl's names)
    num_steps_per_env: int = 24  # env steps of every env per rollout
    num_learning_epochs: int = 5
    num_mini_batches: int = 4  # per epoch; must divide num_envs * num_steps_per_env
    clip_param: float = 0.2  # the ratio clip, and the value clip with use_clipped_value_loss
    use_clipped_value_loss: bool = True
    entropy_coef: float = 0.01
    value_loss_coef: float = 1.0
    lam: float = 0.95  # GAE lambda
    desired_kl: float = 0.01
    lr_schedule: str = "adaptive"  # adaptive (rsl_rl's KL rule) or fixed
    init_noise_std: float = 1.0
