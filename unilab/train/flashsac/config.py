"""FlashSAC's settings: the off-policy loop's with FlashSAC's defaults, and its residual BatchNorm networks, reward
normalisation, held exploration noise and cosine learning-rate schedule."""

from __future__ import annotations

from dataclasses import dataclass

from unilab.train.settings import COUNT, OffPolicySettings, Range, RunSettings, redefault, setting

WIDTH, BLOCKS = Range(1, 2**16), Range(1, 256)


@dataclass
class FlashSACConfig(OffPolicySettings):
    """FlashSAC's settings; each task sets what it tunes in its package's tuning/flashsac.yaml."""

    summary = (
        "residual BatchNorm trunks with unit-norm weights, min-Q distributional target, reward normalisation, "
        "held exploration noise, cosine LR"
    )
    learner_path = "unilab.train.flashsac.learner:FlashSACLearner"

    name: str = redefault(RunSettings, "name", "flashsac")
    # The held exploration noise and the reward normaliser are per env: a resume keeps the number of envs.
    num_envs: int = redefault(RunSettings, "num_envs", 4096, shape=True)
    max_iterations: int = redefault(RunSettings, "max_iterations", 5000)
    save_interval: int = redefault(RunSettings, "save_interval", 1000)
    batch_size: int = redefault(OffPolicySettings, "batch_size", 2048)
    replay_buffer_n: int = redefault(OffPolicySettings, "replay_buffer_n", 256)
    updates_per_step: int = redefault(OffPolicySettings, "updates_per_step", 2)
    policy_frequency: int = redefault(OffPolicySettings, "policy_frequency", 2)
    learning_starts: int = redefault(OffPolicySettings, "learning_starts", 49)
    gamma: float = redefault(OffPolicySettings, "gamma", 0.99)
    tau: float = redefault(OffPolicySettings, "tau", 0.05)
    v_min: float = redefault(OffPolicySettings, "v_min", -5.0)
    v_max: float = redefault(OffPolicySettings, "v_max", 5.0)
    target_sigma: float = setting(
        0.15,
        "the pre-tanh std the temperature aims at",
        Range(0.0, 10.0, low_open=True, why="the pre-tanh std the temperature aims at"),
    )
    reward_normalization: bool = setting(True, "scale rewards by the running std of the discounted return", shape=True)
    lr_final: float = setting(1.5e-4, "the learning rate the cosine schedule ends at", Range(0.0, 1.0, low_open=True))
    lr_decay_steps: int = setting(500_000, "updates of the cosine schedule", Range(1, COUNT))
    actor_width: int = setting(128, "the actor trunk's width", WIDTH, True)
    actor_blocks: int = setting(2, "the actor trunk's residual blocks", BLOCKS, True)
    critic_width: int = setting(256, "the critic trunk's width", WIDTH, True)
    critic_blocks: int = setting(2, "the critic trunk's residual blocks", BLOCKS, True)
    noise_max_span: int = setting(
        16, "longest span a noise draw is held for", Range(1, 10_000, why="env steps a noise draw is held for")
    )
    noise_zipf_mu: float = setting(2.0, "Zipf exponent of the held spans", Range(0.0, 100.0, low_open=True))
