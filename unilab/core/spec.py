"""What a learner may know of an env: shapes, mirror maps, device. No env internals."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import torch


def reflect(x: torch.Tensor, index: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
    """``out[..., i] = x[..., index[i]] * sign[i]``, with the maps as tensors: a caller that builds them once on the
    device (a loss keeps them as buffers) can reflect inside a captured CUDA graph, where no host data may be copied.
    """
    return x.index_select(-1, index) * sign


@dataclass(frozen=True)
class Mirror:
    """Left-right mirror of a vector: ``mirrored[..., i] = x[..., index[i]] * sign[i]``."""

    index: tuple[int, ...]
    sign: tuple[float, ...]

    def __post_init__(self) -> None:
        if len(self.index) != len(self.sign):
            raise ValueError(f"Mirror index and sign differ in length: {len(self.index)} vs {len(self.sign)}")

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` mirrored along its last dimension, in ``x``'s dtype."""
        index = torch.tensor(self.index, dtype=torch.long, device=x.device)
        return reflect(x, index, x.new_tensor(self.sign))

    @staticmethod
    def signs(*sign: float) -> Mirror:
        """A mirror that only flips signs, element by element."""
        return Mirror(tuple(range(len(sign))), tuple(float(s) for s in sign))


@dataclass(frozen=True)
class EnvSpec:
    """The env as an algorithm sees it.

    ``obs_dims`` maps observation group (``policy``, ``critic``) to width; ``mirrors`` maps every group and
    ``"action"`` to its left-right mirror (empty when the task declares none); ``reward_terms`` names the
    per-term rewards a transition carries; ``graph_capturable`` says whether a step can be recorded in a CUDA graph.
    """

    num_envs: int
    action_dim: int
    obs_dims: Mapping[str, int]
    device: torch.device
    mirrors: Mapping[str, Mirror]
    reward_terms: tuple[str, ...]
    graph_capturable: bool
