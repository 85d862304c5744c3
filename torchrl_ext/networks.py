"""FastSAC actor and distributional twin critic.

The two critics share one module with stacked weights, so each layer of both nets is a single batched matmul instead
of two kernel launches. Each network owns its observation normaliser, so a saved or exported policy carries the
statistics it was trained with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from torchrl_ext.distributed import ALONE, World

# Tensor cores read a bf16 operand 8 elements (16 bytes) at a time. A product whose widths are not multiples of that
# takes a slower path unless Inductor pads it, which it decides when a cache is filled, by timing both: one program
# then runs at the speed of its cache's draw (ADR 35). The critic aligns its input width itself.
ALIGNMENT = 8

LOG_STD_MIN = -5.0
LOG_STD_MAX = 0.0
MEAN_LIMIT = 10.0


@torch.no_grad()
def fold_moments_(
    mean: Tensor, var: Tensor, count: Tensor, batch_count: Tensor | int, batch_mean: Tensor, batch_var: Tensor
) -> None:
    """Fold a batch's count, mean and (population) variance into running ``mean``, ``var`` and ``count``, in place:
    the parallel update of Chan et al., exact for any split of the data into batches."""
    total = count + batch_count
    new_share = batch_count / total
    delta = batch_mean - mean
    mean.add_(delta * new_share)
    var.mul_(1 - new_share).add_((batch_var + delta.square() * (1 - new_share)) * new_share)
    count.copy_(total)


class RunningNorm(nn.Module):
    """Standardises inputs with running statistics.

    A batch is folded in with Chan's parallel merge, a handful of tensor ops with no host synchronisation, so the
    update can sit inside a captured graph. The statistics are buffers: they follow ``.to(device)`` and are saved in
    ``state_dict``. ``eps`` is added to the variance so features that never vary are not blown up.
    """

    def __init__(self, dim: int, eps: float = 1e-4, clip: float | None = None) -> None:
        super().__init__()
        self.eps = eps
        self.clip = clip
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("var", torch.ones(dim))
        self.register_buffer("count", torch.zeros(()))

    @torch.no_grad()
    def update(self, x: Tensor, world: World = ALONE) -> None:
        """Fold in ``x``; with several ranks, the rows of every rank's ``x``, so all ranks keep the same statistics."""
        x = x.reshape(-1, self.mean.shape[0]).to(self.mean.dtype)
        fold_moments_(self.mean, self.var, self.count, *world.moments(x, self.mean))

    def forward(self, x: Tensor) -> Tensor:
        normalised = (x - self.mean) * torch.rsqrt(self.var + self.eps)
        return normalised if self.clip is None else normalised.clamp(-self.clip, self.clip)


def detached(param: Tensor, frozen: bool) -> Tensor:
    """``param`` cut from autograd when ``frozen``. A frozen forward reads its weights through this instead of
    ``torch.func.functional_call`` with detached copies: the same graph, but Dynamo traces a handful of ops rather
    than the swap of every parameter in and out of the module."""
    return param.detach() if frozen else param


def linear(layer: nn.Linear, x: Tensor, frozen: bool) -> Tensor:
    """``layer(x)``, on detached parameters when ``frozen``."""
    bias = None if layer.bias is None else detached(layer.bias, frozen)
    return F.linear(x, detached(layer.weight, frozen), bias)


class MLP(nn.Sequential):
    """Linear + LayerNorm + SiLU blocks; LayerNorm keeps pre-activations in range at the high update-to-data ratios
    FastSAC uses."""

    def __init__(self, in_dim: int, widths: Sequence[int]) -> None:
        layers: list[nn.Module] = []
        for width in widths:
            layers += [nn.Linear(in_dim, width), nn.LayerNorm(width), nn.SiLU()]
            in_dim = width
        super().__init__(*layers)

    def forward(self, x: Tensor, frozen: bool = False) -> Tensor:
        """``frozen``: on detached parameters."""
        for layer in self:
            if isinstance(layer, nn.Linear):
                x = linear(layer, x, frozen)
            elif isinstance(layer, nn.LayerNorm):
                weight, bias = detached(layer.weight, frozen), detached(layer.bias, frozen)
                x = F.layer_norm(x, layer.normalized_shape, weight, bias, layer.eps)
            else:
                x = layer(x)
        return x


def _zero_linear(in_dim: int, out_dim: int) -> nn.Linear:
    layer = nn.Linear(in_dim, out_dim)
    nn.init.zeros_(layer.weight)
    nn.init.zeros_(layer.bias)
    return layer


class SquashedGaussianPolicy(nn.Module):
    """Tanh-squashed Gaussian policy over the ``features`` a subclass's trunk computes from an observation.

    The log-std is squashed into ``[log_std_min, log_std_max]`` with a tanh rather than clipped, so it keeps a
    gradient near its bounds. Heads are evaluated in float32 so bf16 autocast does not coarsen the log-probability.
    """

    mean_limit = MEAN_LIMIT
    log_std_min = LOG_STD_MIN
    log_std_max = LOG_STD_MAX
    mean_head: nn.Linear
    log_std_head: nn.Linear

    def features(self, obs: Tensor, frozen: bool = False) -> Tensor:
        raise NotImplementedError

    def distribution(self, obs: Tensor, frozen: bool = False) -> tuple[Tensor, Tensor]:
        """Mean and log-std of the pre-tanh Gaussian, float32. ``frozen``: the policy as acting and the critic's
        targets read it, on detached parameters and any normaliser's running statistics, whatever the module's mode
        (``eval()`` and ``train()`` inside a compiled function cost Dynamo a walk over every submodule each way)."""
        features = self.features(obs, frozen)
        mean = linear(self.mean_head, features, frozen).float().clamp(-self.mean_limit, self.mean_limit)
        squashed = torch.tanh(linear(self.log_std_head, features, frozen).float())
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (squashed + 1)
        return mean, log_std

    def forward(self, obs: Tensor) -> Tensor:
        """Deterministic action, the one a deployed policy takes."""
        return torch.tanh(self.distribution(obs)[0])

    def sample(self, obs: Tensor, noise: Tensor | None = None, frozen: bool = False) -> tuple[Tensor, Tensor]:
        """Reparameterised action and its log-probability under the squashed distribution.

        ``noise`` (standard normal, like ``mean``) lets the collector pass draws from its own RNG (or held noise);
        fresh draws from torch's generator otherwise. The tanh Jacobian uses ``log(1 - tanh(u)^2) = 2 (log 2 - u -
        softplus(-2u))``, which stays finite when the action saturates, where the naive form takes the log of zero.
        ``frozen`` as in ``distribution``.
        """
        mean, log_std = self.distribution(obs, frozen)
        noise = torch.randn_like(mean) if noise is None else noise.to(mean.dtype)
        pre_tanh = mean + noise * log_std.exp()
        gaussian = (-0.5 * noise.square() - log_std).sum(-1) - 0.5 * math.log(2 * math.pi) * mean.shape[-1]
        log_jacobian = 2 * (math.log(2) - pre_tanh - F.softplus(-2 * pre_tanh))
        return torch.tanh(pre_tanh), gaussian - log_jacobian.sum(-1)


class Actor(SquashedGaussianPolicy):
    """FastSAC's policy: a LayerNorm MLP trunk, optionally on running-normalised observations.

    The heads start at zero so the first policy is centred with a mid-range std whatever the trunk's random init.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: Sequence[int] = (512, 256, 128),
        normalize_obs: bool = False,
    ) -> None:
        super().__init__()
        self.obs_norm: nn.Module = RunningNorm(obs_dim) if normalize_obs else nn.Identity()
        self.trunk = MLP(obs_dim, hidden)
        self.mean_head = _zero_linear(hidden[-1], action_dim)
        self.log_std_head = _zero_linear(hidden[-1], action_dim)

    def features(self, obs: Tensor, frozen: bool = False) -> Tensor:
        return self.trunk(self.obs_norm(obs), frozen)


class EnsembleLinear(nn.Module):
    """``num_members`` independent linear layers applied with one ``bmm``; input and output are (E, N, dim).

    The bias is added after the product, not passed to ``baddbmm``: ``baddbmm`` into a fresh output first copies
    its broadcast bias into that output (a full (E, N, dim) write before the GEMM), whereas a separate add fuses
    into the LayerNorm that follows under torch.compile.
    """

    def __init__(self, num_members: int, in_dim: int, out_dim: int) -> None:
        super().__init__()
        bound = 1 / math.sqrt(in_dim)  # the same range nn.Linear's default init draws from
        self.weight = nn.Parameter(torch.empty(num_members, in_dim, out_dim).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(num_members, 1, out_dim).uniform_(-bound, bound))

    def forward(self, x: Tensor, frozen: bool = False) -> Tensor:
        """``x`` may be wider than ``in_dim`` by zero columns (an aligned width); the weight gets zero rows for them,
        so the map is the same and the parameter keeps its shape."""
        weight = detached(self.weight, frozen)
        extra = x.shape[-1] - weight.shape[-2]
        product = torch.bmm(x, F.pad(weight, (0, 0, 0, extra)) if extra else weight)
        return product + detached(self.bias, frozen).to(product.dtype)  # the product's dtype: bf16 under autocast


class EnsembleLayerNorm(nn.Module):
    """LayerNorm with a separate affine transform per ensemble member."""

    def __init__(self, num_members: int, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(num_members, 1, dim))
        self.bias = nn.Parameter(torch.zeros(num_members, 1, dim))

    def forward(self, x: Tensor, frozen: bool = False) -> Tensor:
        normalised = F.layer_norm(x, x.shape[-1:], eps=self.eps)
        return torch.addcmul(detached(self.bias, frozen), normalised, detached(self.weight, frozen))


class EnsembleCritic(nn.Module):
    """Ensemble of C51 critics on ``concat[critic_obs, action]``.

    Returns logits over a fixed support ``linspace(v_min, v_max, num_atoms)``. The support bounds are configuration:
    they must cover the discounted return scale of the task's rewards.

    The concatenation ends in zero columns up to a multiple of ``ALIGNMENT``, so that the first layer's products
    (forward, and both of its gradients) are aligned by construction rather than by Inductor's timing.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        hidden: Sequence[int] = (768, 384, 192),
        num_atoms: int = 101,
        v_min: float = -20.0,
        v_max: float = 20.0,
        num_members: int = 2,
        normalize_obs: bool = False,
    ) -> None:
        super().__init__()
        self.num_members = num_members
        self.v_min = float(v_min)
        self.v_max = float(v_max)
        self.obs_norm: nn.Module = RunningNorm(obs_dim) if normalize_obs else nn.Identity()
        self.register_buffer("support", torch.linspace(self.v_min, self.v_max, num_atoms), persistent=False)
        self.input_pad = -(obs_dim + action_dim) % ALIGNMENT
        widths = [obs_dim + action_dim, *hidden]
        layers: list[nn.Module] = []
        for in_dim, out_dim in pairwise(widths):
            layers += [EnsembleLinear(num_members, in_dim, out_dim), EnsembleLayerNorm(num_members, out_dim), nn.SiLU()]
        layers.append(EnsembleLinear(num_members, widths[-1], num_atoms))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: Tensor, action: Tensor, frozen: bool = False) -> Tensor:
        """Logits of shape (num_members, *batch, num_atoms); ``frozen``: on detached parameters, the critic as the
        actor's loss sees it (a gradient reaches the inputs, never the critic)."""
        parts = [self.obs_norm(obs), action]
        if self.input_pad:
            parts.append(action.new_zeros(*action.shape[:-1], self.input_pad))
        x = torch.cat(parts, dim=-1)
        batch_shape = x.shape[:-1]
        x = x.reshape(1, -1, x.shape[-1]).expand(self.num_members, -1, -1)
        for layer in self.net:
            x = layer(x, frozen) if isinstance(layer, (EnsembleLinear, EnsembleLayerNorm)) else layer(x)
        return x.reshape(self.num_members, *batch_shape, -1)

    def expected_q(self, logits: Tensor) -> Tensor:
        """Mean of each member's return distribution, in float32."""
        return (logits.float().softmax(-1) * self.support).sum(-1)
