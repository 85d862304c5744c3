"""PPO pieces as TorchRL modules: the Gaussian actor and value critic, TorchRL's clipped loss and GAE.

The networks follow rsl_rl's (the G1 velocity baseline of mjlab): ELU MLPs, a state-independent learned std, each
network with its own observation normaliser, so a saved or exported actor carries the statistics it was trained
with. The loss is TorchRL's ``ClipPPOLoss`` with the few methods that a CUDA graph cannot hold replaced
(``CapturableClipPPOLoss`` says which and why); the advantage is TorchRL's ``GAE`` as it stands, on its loop
implementation, which has fixed shapes and no host reads.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule
from torch import Tensor, nn
from torchrl.modules import IndependentNormal, ProbabilisticActor, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.utils import distance_loss
from torchrl.objectives.value import GAE

from torchrl_ext.networks import RunningNorm

# rsl_rl's empirical normaliser adds 1e-2; here it is added to the variance (RunningNorm's form).
NORM_EPS = 1e-2
# The std is learned directly (rsl_rl's "scalar" std); the floor keeps it positive, so the Gaussian's log-prob and
# analytic entropy are finite by construction, whatever a step does to the parameter.
STD_MIN = 1e-3
BEHAVIOUR_LOC, BEHAVIOUR_SCALE = "behaviour_loc", "behaviour_scale"  # the acting Gaussian, stored with the rollout
LOG_PROB = "action_log_prob"  # ClipPPOLoss's default key for the behaviour log-prob


def elu_mlp(in_dim: int, hidden: Sequence[int], out_dim: int) -> nn.Sequential:
    """Linear + ELU layers, then a linear head: rsl_rl's actor and critic."""
    layers: list[nn.Module] = []
    for width in hidden:
        layers += [nn.Linear(in_dim, width), nn.ELU()]
        in_dim = width
    layers.append(nn.Linear(in_dim, out_dim))
    return nn.Sequential(*layers)


class GaussianActor(nn.Module):
    """A Gaussian policy: an MLP mean on normalised observations, one learned std per action dimension.

    ``forward`` is the deterministic action (the mean), what ``eval``, ``play`` and the ONNX file run; actions are
    not squashed (the env scales and clips them, as rsl_rl leaves it to the env).
    """

    def __init__(
        self, obs_dim: int, action_dim: int, hidden: Sequence[int], init_std: float, normalize_obs: bool
    ) -> None:
        super().__init__()
        self.obs_norm: nn.Module = RunningNorm(obs_dim, eps=NORM_EPS) if normalize_obs else nn.Identity()
        self.mean = elu_mlp(obs_dim, hidden, action_dim)
        self.std = nn.Parameter(torch.full((action_dim,), float(init_std)))

    def distribution(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        """Mean and std of the action Gaussian, each shaped like the action."""
        loc = self.mean(self.obs_norm(obs))
        return loc, self.std.clamp(min=STD_MIN).expand_as(loc)

    def forward(self, obs: Tensor) -> Tensor:
        return self.mean(self.obs_norm(obs))


class ValueCritic(nn.Module):
    """State value on normalised critic observations, shaped (..., 1) as TorchRL's value keys are."""

    def __init__(self, obs_dim: int, hidden: Sequence[int], normalize_obs: bool) -> None:
        super().__init__()
        self.obs_norm: nn.Module = RunningNorm(obs_dim, eps=NORM_EPS) if normalize_obs else nn.Identity()
        self.value = elu_mlp(obs_dim, hidden, 1)

    def forward(self, obs: Tensor) -> Tensor:
        return self.value(self.obs_norm(obs))


class _GaussianParams(nn.Module):
    """The actor's ``distribution`` as a module, so a ``TensorDictModule`` can write ``loc`` and ``scale``."""

    def __init__(self, actor: GaussianActor) -> None:
        super().__init__()
        self.actor = actor

    def forward(self, obs: Tensor) -> tuple[Tensor, Tensor]:
        return self.actor.distribution(obs)


def policy_operator(actor: GaussianActor, obs_key: str = "policy") -> ProbabilisticActor:
    """``actor`` as the probabilistic TorchRL actor ``ClipPPOLoss`` evaluates.

    ``torch.distributions`` validates its arguments by default (``.all()`` on a device tensor, a host read at
    every construction and log-prob); importing ``torchrl.modules``, as this module does, turns that default off,
    which the captured update relies on (the fullgraph tests of ``tests/test_ppo.py`` fail if it ever stays on)."""
    params = TensorDictModule(_GaussianParams(actor), in_keys=[obs_key], out_keys=["loc", "scale"])
    return ProbabilisticActor(params, in_keys=["loc", "scale"], distribution_class=IndependentNormal)


def value_operator(critic: ValueCritic, obs_key: str = "critic") -> ValueOperator:
    """``critic`` as TorchRL's value operator (writes ``state_value``)."""
    return ValueOperator(critic, in_keys=[obs_key])


def gaussian_kl(old_loc: Tensor, old_scale: Tensor, loc: Tensor, scale: Tensor) -> Tensor:
    """KL(N_old || N_new) summed over the action dimensions: what rsl_rl's adaptive learning rate reads."""
    ratio = old_scale / scale
    return (-ratio.log() + 0.5 * (ratio.square() + ((old_loc - loc) / scale).square()) - 0.5).sum(-1)


class CapturableClipPPOLoss(ClipPPOLoss):
    """TorchRL's ``ClipPPOLoss``, with the parts that a CUDA graph cannot hold or that rsl_rl computes otherwise
    replaced; everything else (ratio clipping, entropy bonus, value clipping, reductions) is the stock code.

    - ``_get_entropy``: the stock method checks ``entropy.isfinite().all()`` on the host every call, a device sync
      (illegal while a graph is recorded). ``GaussianActor`` floors its std, so its analytic entropy is finite.
    - ``loss_critic``: the stock method branches on the ``clip_value`` buffer (``if self.clip_value``), a read of a
      device tensor; here whether to clip is a Python flag fixed at construction, the clipping arithmetic is the same.
    - ``_log_weight``: ``kl_approx`` becomes the exact KL between the behaviour Gaussian (``behaviour_loc`` and
      ``behaviour_scale`` of the batch) and the current one, summed over action dimensions: the quantity rsl_rl's
      adaptive learning-rate schedule compares with ``desired_kl``. The stock value is a sample estimate.
    """

    def __init__(self, *args: object, clip_value: float | None = None, **kwargs: object) -> None:
        super().__init__(*args, clip_value=clip_value, **kwargs)
        self._clips_value = clip_value is not None

    def _get_entropy(self, dist: torch.distributions.Distribution, adv_shape: torch.Size) -> Tensor:
        return dist.entropy().unsqueeze(-1)

    def _log_weight(self, tensordict: TensorDictBase, adv_shape: torch.Size) -> tuple:
        log_weight, dist, _, log_is_weight = super()._log_weight(tensordict, adv_shape)
        base = dist.base_dist
        kl = gaussian_kl(tensordict.get(BEHAVIOUR_LOC), tensordict.get(BEHAVIOUR_SCALE), base.loc, base.scale)
        return log_weight, dist, kl.unsqueeze(-1), log_is_weight

    def loss_critic(self, tensordict: TensorDictBase) -> tuple[Tensor, Tensor | None, Tensor]:
        keys = self.tensor_keys
        target = tensordict.get(keys.value_target)
        old_value = tensordict.get(keys.value)
        value = self.critic_network(tensordict).get(keys.value)
        loss = distance_loss(target, value, loss_function=self.loss_critic_type)
        clip_fraction = None
        if self._clips_value:
            delta = value - old_value
            clipped = delta.clamp(-self.clip_value, self.clip_value)
            clipped_loss = distance_loss(target, old_value + clipped, loss_function=self.loss_critic_type)
            loss = torch.maximum(loss, clipped_loss)
            with torch.no_grad():
                clip_fraction = (delta != clipped).to(value.dtype).mean()
        with torch.no_grad():
            residual = torch.var(target - value, correction=0, dim=0)
            explained = 1.0 - residual / (torch.var(target, correction=0, dim=0) + torch.finfo(target.dtype).eps)
        return self.critic_coeff * loss, clip_fraction, explained


def make_gae(gamma: float, lmbda: float) -> GAE:
    """TorchRL's GAE on values the caller has computed (``state_value``, ``("next", "state_value")``).

    ``vectorized=False`` picks its loop over time: the vectorised form splits the batch at episode ends with
    data-dependent shapes and reads gamma*lambda back to the host, neither of which a CUDA graph can hold. The loop
    bootstraps with the next state's value unless ``terminated`` and stops the recursion at ``done``, so a
    truncated episode keeps the value of its true last observation.
    """
    return GAE(gamma=gamma, lmbda=lmbda, value_network=None, vectorized=False, differentiable=False)
