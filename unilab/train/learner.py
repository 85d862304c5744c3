"""The one contract between a loop and an algorithm's learner, whichever loop runs it.

A loop builds the learner from the env's spec and the algorithm's settings, acts with ``act`` inside its recorded
env step, hands it data through ``observe`` and ``update`` inside its recorded steps, and saves what ``state_dict``
returns. Neither ``act`` nor ``update`` may read a value back to the host: both run inside CUDA graphs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Protocol

# Annotations only: the contract and ``learner_class`` load nothing of the training stack.
if TYPE_CHECKING:
    import torch
    from tensordict import TensorDict
    from torch import nn

    from torchrl_ext.distributed import World
    from unilab.core.spec import EnvSpec
    from unilab.train.settings import RunSettings


# Where a learner's ``state_dict`` (and so a checkpoint) keeps the average of the actor's weights that
# ``algo.actor_average`` asks for: parameter names as in ``loss.actor``, without its prefix.
ACTOR_AVERAGE = "actor_average"


class Learner(Protocol):
    """What the off-policy and the on-policy loop ask of a learner.

    ``loss`` holds the networks (its ``actor`` is what eval, play and the ONNX export run); ``minibatch`` is the rows
    of one gradient step.
    """

    loss: nn.Module
    minibatch: int

    def __init__(self, spec: EnvSpec, cfg: RunSettings, world: World = ...) -> None: ...

    @classmethod
    def networks(cls, spec: EnvSpec, cfg: RunSettings) -> tuple[nn.Module, nn.Module]:
        """The actor and the critic, freshly initialised from torch's generator: the learner builds them under its
        init seed; a memory estimate builds them on the meta device, to count their parameters for free."""
        ...

    def act(self, obs: TensorDict) -> torch.Tensor:
        """Actions for ``obs`` with the algorithm's exploration, inside the recorded env step."""
        ...

    def observe(self, data: TensorDict) -> None:
        """Fold ``data`` (a step's transitions, or a whole rollout) into the learner's statistics: normalisers,
        episode ends."""
        ...

    def update(self, batch: TensorDict) -> TensorDict:
        """One iteration's gradient steps on ``batch`` (replay rows, or the rollout); the losses, detached, for
        logging."""
        ...

    def shared_tensors(self) -> list[torch.Tensor]:
        """What every rank must hold bit-identical: the learner's weights and statistics, less per-env state."""
        ...

    def deployed_actor(self) -> nn.Module:
        """The actor that eval, play and the ONNX export run: ``loss.actor``, or a copy holding an average of its
        weights where the learner keeps one."""
        ...

    def state_dict(self) -> dict:
        """What a checkpoint keeps of the learner: tensors and plain values only (weights-only loading)."""
        ...

    def load_state_dict(self, state: dict) -> None: ...


def learner_class(settings: RunSettings | type[RunSettings]) -> type[Learner]:
    """The learner an algorithm's settings name (``learner_path``, "module:class"), its module imported now: the
    settings are read without torch, and the training stack loads when a run, eval or preflight asks for it."""
    module, _, name = settings.learner_path.partition(":")
    return getattr(importlib.import_module(module), name)
