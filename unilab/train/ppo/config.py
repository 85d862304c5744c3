"""PPO's settings, with rsl_rl's names and the values mjlab trains its G1 velocity task with: 24 steps per env, 5
epochs of 4 minibatches, clip 0.2 on the ratio and the value, entropy 0.01, gamma 0.99, lambda 0.95, Adam at 1e-3 with
the adaptive KL schedule aiming at 0.01, gradients clipped at 1.0, ELU MLPs of 512-256-128, learned std from 1.0,
observation normalisation."""

from __future__ import annotations

from dataclasses import dataclass

from unilab.train.settings import Range, RunSettings, redefault, setting

LR_SCHEDULES = ("adaptive", "fixed")
LAYER_SIZES = Range(1, 2**16)


@dataclass
class PPOConfig(RunSettings):
    """PPO's settings; each task sets what it tunes in its package's tuning/ppo.yaml."""

    summary = "PPO (rsl_rl's): ELU MLPs, clipped surrogate and value loss, GAE, adaptive-KL learning rate"
    learner_path = "unilab.train.ppo.learner:PPOLearner"
    on_policy = True

    name: str = redefault(RunSettings, "name", "ppo")
    max_iterations: int = redefault(RunSettings, "max_iterations", 30000)
    save_interval: int = redefault(RunSettings, "save_interval", 50)
    seed: int = redefault(RunSettings, "seed", 42)
    gamma: float = setting(0.99, "discount", Range(0.0, 1.0, low_open=True))
    lam: float = setting(0.95, "GAE lambda", Range(0.0, 1.0))
    lr: float = setting(1e-3, "the first learning rate", Range(0.0, 1.0, low_open=True))
    lr_schedule: str = setting("adaptive", f"one of {', '.join(LR_SCHEDULES)} (rsl_rl's KL rule, or none)")
    desired_kl: float = setting(0.01, "the KL the adaptive schedule aims at", Range(0.0, 10.0, low_open=True))
    max_grad_norm: float = setting(1.0, "gradient clip, per network", Range(0.0, 1e6, why="0 turns clipping off"))
    actor_hidden: list[int] = setting([512, 256, 128], "the actor MLP's hidden sizes", LAYER_SIZES, True)
    critic_hidden: list[int] = setting([512, 256, 128], "the critic MLP's hidden sizes", LAYER_SIZES, True)
    obs_normalization: bool = setting(True, "running mean/std normalisation of the observations", shape=True)
    init_noise_std: float = setting(
        1.0,
        "the std of the first policy's action noise",
        Range(0.0, 100.0, low_open=True, why="the std of the first policy's action noise"),
    )
    num_steps_per_env: int = setting(
        24,
        "env steps of every env per rollout",
        Range(1, 4096, why="env steps per rollout, each its own slot of the rollout buffer"),
    )
    num_learning_epochs: int = setting(5, "epochs over each rollout", Range(1, 1024))
    num_mini_batches: int = setting(
        4, "minibatches per epoch; must divide num_envs * num_steps_per_env", Range(1, 2**20)
    )
    clip_param: float = setting(
        0.2, "the ratio clip, and the value clip with use_clipped_value_loss", Range(0.0, 10.0, low_open=True)
    )
    use_clipped_value_loss: bool = setting(True, "clip the value loss as the ratio is")
    entropy_coef: float = setting(0.01, "weight of the entropy bonus", Range(0.0, 100.0))
    value_loss_coef: float = setting(1.0, "weight of the value loss", Range(0.0, 1e6))
    positive_rewards_only: bool = setting(
        False, "clip each step's reward at zero before GAE (legged_gym's only_positive_rewards)"
    )
    tf32: bool = setting(
        True, "TensorFloat-32 products in the networks' float32 matmuls on CUDA, as mjlab trains (false: IEEE float32)"
    )

    def check(self) -> None:
        """A whole number of minibatches per rollout and a known schedule."""
        super().check()
        rows = self.num_envs * self.num_steps_per_env
        if rows % self.num_mini_batches:
            raise ValueError(
                f"algo.num_mini_batches={self.num_mini_batches} must divide the rollout's "
                f"algo.num_envs * algo.num_steps_per_env = {rows} rows"
            )
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"algo.lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}")
