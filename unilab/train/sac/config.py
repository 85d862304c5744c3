"""SAC's settings: the off-policy loop's, and the networks, temperature target, mirror augmentation and observation
normalisation of FastSAC."""

from __future__ import annotations

import math
from dataclasses import dataclass

from unilab.train.settings import OffPolicySettings, Range, RunSettings, redefault, setting

# The actor's narrowest log-std (torchrl_ext.networks.LOG_STD_MIN, which a test holds this to): restated, so that
# reading the settings imports no torch.
ACTOR_LOG_STD_MIN = -5.0
# SAC aims the policy's entropy at -target_entropy_ratio nats per action dimension (sac.target_entropy_from_ratio).
# Per dimension a policy with actions in [-1, 1] has at most log 2 nats (the uniform distribution's; the actor, its
# std capped at 1, tops out near 0.68), and the actor's narrowest Gaussian has 0.5 * log(2 pi e) + ACTOR_LOG_STD_MIN
# = -3.58 nats at the centre of the range, less only where the tanh squeezes it, near +-1. So a ratio at or below
# -log 2 can never be met (the temperature grows without end), and one above 3.58 only by pushing the actions
# towards the bounds, not by narrowing the noise.
TARGET_ENTROPY_RATIO = Range(
    -math.log(2),
    -(0.5 * math.log(2 * math.pi * math.e) + ACTOR_LOG_STD_MIN),
    low_open=True,
    why="SAC aims at an entropy of -ratio nats per action dimension, which must stay below log 2 (uniform actions on "
    "[-1, 1]) and not under -3.58 (the actor's narrowest Gaussian)",
)
LAYER_SIZES = Range(1, 2**16)


@dataclass
class SACConfig(OffPolicySettings):
    """FastSAC's settings; the defaults of the run and the off-policy loop are SAC's."""

    summary = "FastSAC: LayerNorm MLPs, twin C51 critic, mirror augmentation, running obs normalisation"
    learner_path = "unilab.train.sac.learner:SACLearner"

    name: str = redefault(RunSettings, "name", "sac")
    actor_hidden: list[int] = setting([512, 256, 128], "the actor MLP's hidden sizes", LAYER_SIZES, True)
    critic_hidden: list[int] = setting([768, 384, 192], "the critic MLP's hidden sizes", LAYER_SIZES, True)
    target_entropy_ratio: float = setting(
        0.0, "the entropy target, in -nats per action dimension", TARGET_ENTROPY_RATIO
    )
    weight_decay: float = setting(1e-3, "AdamW weight decay", Range(0.0, 1.0))
    use_symmetry: bool = setting(False, "double each minibatch with its left-right mirror image")
    obs_normalization: bool = setting(True, "running mean/std normalisation of the observations", shape=True)

    def check(self) -> None:
        super().check()
        if self.use_symmetry and self.batch_size % 2:
            raise ValueError(
                f"algo.batch_size={self.batch_size} must be even with algo.use_symmetry (half is mirrored)"
            )
