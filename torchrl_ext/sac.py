"""FastSAC loss: SAC with a twin C51 critic, written as a TorchRL ``LossModule``.

Nothing in the loss path reads a value back to the host (no ``.item()``, no branch on a tensor), so a trainer can
capture a whole update in a CUDA graph. Distribution arithmetic runs in float32 whatever autocast is active: bf16
cannot resolve the small probability masses that the C51 projection moves around.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase
from torch import Tensor
from torchrl.objectives import LossModule

from torchrl_ext.distributed import ALONE, World
from torchrl_ext.networks import Actor, EnsembleCritic, RunningNorm


class Reflection(Protocol):
    """A left-right mirror of a vector, ``mirrored[..., i] = x[..., index[i]] * sign[i]``: what the loss reads of the
    maps it is given (an env's mirror type serves as it is)."""

    index: Sequence[int]
    sign: Sequence[float]


def target_entropy_from_ratio(action_dim: int, ratio: float) -> float:
    """Target entropy as a fraction of the action dimension, so one ratio transfers across robots."""
    return -action_dim * ratio


def project_distribution(atoms: Tensor, probs: Tensor, v_min: float, v_max: float) -> Tensor:
    """Project mass ``probs`` sitting on ``atoms`` onto the fixed support ``linspace(v_min, v_max, n)``.

    ``atoms`` and ``probs`` broadcast against each other; ``n`` is ``probs.shape[-1]``. Each atom is clamped into the
    support and its mass split between the two neighbouring grid points in proportion to closeness (C51). The lower
    share is ``1 - frac`` rather than ``upper - position``, so an atom sitting exactly on a grid point keeps all its
    mass instead of losing it when ``floor == ceil``. Computed in float32. A NaN atom (from a NaN reward) lands on
    the first grid point with NaN mass, so the result shows it instead of indexing out of bounds (on CUDA, a device
    assert that would end the process before anything could report it).
    """
    num_atoms = probs.shape[-1]
    scale = (num_atoms - 1) / (v_max - v_min)
    position = ((atoms.float() - v_min) * scale).clamp(0, num_atoms - 1)
    position, probs = torch.broadcast_tensors(position, probs.float())
    lower = position.floor()
    upper_share = position - lower
    lower_index = lower.long().clamp(0, num_atoms - 1)  # only a NaN position is outside, as the least int64
    upper_index = (lower_index + 1).clamp(max=num_atoms - 1)
    projected = torch.zeros(position.shape, dtype=torch.float32, device=position.device)
    projected.scatter_add_(-1, lower_index, probs * (1 - upper_share))
    projected.scatter_add_(-1, upper_index, probs * upper_share)
    return projected


@dataclass(frozen=True)
class Symmetry:
    """The reflections of the three spaces the loss augments; they must describe the same physical mirror."""

    observation: Reflection
    critic_observation: Reflection
    action: Reflection


class Transition(NamedTuple):
    """A batch flattened to one leading dimension, with reward and terminated as (N,) vectors."""

    observation: Tensor
    critic_observation: Tensor
    action: Tensor
    reward: Tensor
    terminated: Tensor
    next_observation: Tensor
    next_critic_observation: Tensor


def flatten_batch(x: Tensor) -> Tensor:
    """Features on the last axis, every leading (batch, time, ...) axis folded into one."""
    return x.reshape(-1, x.shape[-1])


class SoftActorCriticLoss(LossModule):
    """What SAC-family losses share: transition keys, target critic, temperature, Polyak update.

    Subclasses supply ``target_distribution``, the projected target that ``critic_loss`` fits the critic to, and
    ``actor_loss``, which returns a detached per-sample ``log_prob`` for ``alpha_loss``; one whose critic must see
    its batch laid out otherwise overrides ``critic_loss`` too (FlashSAC's BatchNorm joint batch). Exposing the three
    losses separately lets a trainer update the critic every step and the actor only every k-th step.
    """

    @dataclass
    class _AcceptedKeys:
        """Where each entry of a transition lives; change with ``set_keys``."""

        observation: NestedKey = "policy"
        critic_observation: NestedKey = "critic"
        action: NestedKey = "action"
        reward: NestedKey = ("next", "reward")
        terminated: NestedKey = ("next", "terminated")
        next_observation: NestedKey = ("next", "policy")
        next_critic_observation: NestedKey = ("next", "critic")

    default_keys = _AcceptedKeys
    tensor_keys: _AcceptedKeys

    def __init__(
        self,
        actor: torch.nn.Module,
        critic: torch.nn.Module,
        *,
        target_entropy: float,
        gamma: float,
        tau: float,
        alpha_init: float,
    ) -> None:
        super().__init__()
        self.actor = actor
        self.critic = critic
        self._target_critic = copy.deepcopy(critic).requires_grad_(False)
        self.log_alpha = torch.nn.Parameter(torch.tensor(math.log(alpha_init)))
        self.target_entropy = target_entropy
        self.gamma = gamma
        self.tau = tau
        self._set_in_keys()
        self.out_keys = ["loss_critic", "q_mean", "loss_actor", "entropy", "loss_alpha", "alpha"]

    def _set_in_keys(self) -> None:
        self.in_keys = [getattr(self.tensor_keys, field.name) for field in dataclasses.fields(self.tensor_keys)]

    def _forward_value_estimator_keys(self, **kwargs: object) -> None:
        self._set_in_keys()

    @property
    def target_critic(self) -> torch.nn.Module:
        return self._target_critic

    @property
    def alpha(self) -> Tensor:
        return self.log_alpha.detach().exp()

    def read_transition(self, tensordict: TensorDictBase) -> Transition:
        """Pull a transition out of ``tensordict``, flattened to one leading dimension."""
        keys = self.tensor_keys
        return Transition(
            observation=flatten_batch(tensordict.get(keys.observation)),
            critic_observation=flatten_batch(tensordict.get(keys.critic_observation)),
            action=flatten_batch(tensordict.get(keys.action)),
            reward=tensordict.get(keys.reward).reshape(-1),
            terminated=tensordict.get(keys.terminated).reshape(-1),
            next_observation=flatten_batch(tensordict.get(keys.next_observation)),
            next_critic_observation=flatten_batch(tensordict.get(keys.next_critic_observation)),
        )

    def target_distribution(self, transition: Transition) -> Tensor:
        raise NotImplementedError

    def critic_loss(self, tensordict: TensorDictBase) -> TensorDict:
        """Sum over critic members of the mean cross-entropy to the projected target of ``target_distribution``."""
        transition = self.read_transition(tensordict)
        target = self.target_distribution(transition)
        logits = self.critic(transition.critic_observation, transition.action)
        return self._cross_entropy(target, logits.float().log_softmax(-1))

    def _cross_entropy(self, target: Tensor, log_probs: Tensor) -> TensorDict:
        """Critic loss from per-member log-probabilities (members, N, atoms): the members' mean cross-entropies to
        ``target``, summed; and the mean predicted Q for logging. ``target`` is one (N, atoms) distribution for all
        members or one per member (members, N, atoms)."""
        loss = -(target * log_probs).sum(-1).mean(-1).sum()
        q_mean = (log_probs.detach().exp() * self.critic.support).sum(-1).mean()
        return TensorDict(loss_critic=loss, q_mean=q_mean)

    def actor_loss(self, tensordict: TensorDictBase) -> TensorDict:
        raise NotImplementedError

    def alpha_loss(self, log_prob: Tensor) -> TensorDict:
        """Temperature loss, pushing the policy entropy towards ``target_entropy``."""
        loss = -(self.log_alpha.exp() * (log_prob.detach() + self.target_entropy)).mean()
        return TensorDict(loss_alpha=loss, alpha=self.alpha)

    def forward(self, tensordict: TensorDictBase) -> TensorDict:
        out = self.critic_loss(tensordict)
        actor = self.actor_loss(tensordict)
        out.update(actor.exclude("log_prob"))
        out.update(self.alpha_loss(actor["log_prob"]))
        return out

    @torch.no_grad()
    def update_target(self) -> None:
        """Polyak step ``target <- (1 - tau) target + tau online`` over parameters, one fused multi-tensor op."""
        torch._foreach_lerp_(list(self._target_critic.parameters()), list(self.critic.parameters()), self.tau)


class SACLoss(SoftActorCriticLoss):
    """Soft actor-critic with a distributional twin critic, as used by FastSAC.

    Each critic member bootstraps from its own target member (no min over the pair); the C51 cross-entropy already
    curbs overestimation. Only ``terminated`` cuts the bootstrap: a time-limit truncation is not the end of the
    task's return.
    """

    def __init__(
        self,
        actor: Actor,
        critic: EnsembleCritic,
        *,
        target_entropy: float,
        gamma: float = 0.99,
        tau: float = 0.1,
        alpha_init: float = 1e-3,
        mirror: Symmetry | None = None,
    ) -> None:
        super().__init__(actor, critic, target_entropy=target_entropy, gamma=gamma, tau=tau, alpha_init=alpha_init)
        self._target_critic.obs_norm = critic.obs_norm  # the target must see inputs scaled like the online critic
        self.symmetric = mirror is not None
        if mirror is not None:
            self._register_mirror(mirror)

    def _register_mirror(self, mirror: Symmetry) -> None:
        # Buffers rather than plain attributes, so ``.to(device)`` on the loss moves the maps too.
        for field in dataclasses.fields(Symmetry):
            reflection: Reflection = getattr(mirror, field.name)
            self.register_buffer(f"_mirror_{field.name}_perm", torch.tensor(reflection.index), persistent=False)
            self.register_buffer(f"_mirror_{field.name}_sign", torch.tensor(reflection.sign), persistent=False)

    def mirror(self, space: str) -> Callable[[Tensor], Tensor]:
        """The reflection of ``space`` ("observation", "critic_observation" or "action") with the maps this loss holds
        on its device, so that it runs inside a captured CUDA graph (no host data is copied)."""
        perm, sign = getattr(self, f"_mirror_{space}_perm"), getattr(self, f"_mirror_{space}_sign")
        return lambda x: x.index_select(-1, perm) * sign

    def read_transition(self, tensordict: TensorDictBase) -> Transition:
        """Pull a transition out of ``tensordict``, doubled with its mirror image when symmetry is on."""
        transition = super().read_transition(tensordict)
        return self._augment(transition) if self.symmetric else transition

    def _augment(self, transition: Transition) -> Transition:
        reflections: dict[str, Callable[[Tensor], Tensor]] = {
            "observation": self.mirror("observation"),
            "next_observation": self.mirror("observation"),
            "critic_observation": self.mirror("critic_observation"),
            "next_critic_observation": self.mirror("critic_observation"),
            "action": self.mirror("action"),
        }
        return Transition._make(
            torch.cat([value, reflections[name](value) if name in reflections else value])
            for name, value in transition._asdict().items()
        )

    def _policy_inputs(self, tensordict: TensorDictBase) -> tuple[Tensor, Tensor]:
        obs = flatten_batch(tensordict.get(self.tensor_keys.observation))
        critic_obs = flatten_batch(tensordict.get(self.tensor_keys.critic_observation))
        if self.symmetric:
            obs = torch.cat([obs, self.mirror("observation")(obs)])
            critic_obs = torch.cat([critic_obs, self.mirror("critic_observation")(critic_obs)])
        return obs, critic_obs

    @torch.no_grad()
    def target_distribution(self, transition: Transition) -> Tensor:
        """Projected soft Bellman target, (num_members, N, num_atoms); member i bootstraps from target member i."""
        next_action, next_log_prob = self.actor.sample(transition.next_observation)
        next_probs = self._target_critic(transition.next_critic_observation, next_action).float().softmax(-1)
        continuation = 1.0 - transition.terminated.float()
        soft_support = self.critic.support - self.alpha * next_log_prob.unsqueeze(-1)
        atoms = transition.reward.float().unsqueeze(-1) + self.gamma * continuation.unsqueeze(-1) * soft_support
        return project_distribution(atoms, next_probs, self.critic.v_min, self.critic.v_max)

    def actor_loss(self, tensordict: TensorDictBase) -> TensorDict:
        """``alpha * log pi - mean_i E[Q_i]``; also returns the detached per-sample ``log_prob`` for ``alpha_loss``."""
        obs, critic_obs = self._policy_inputs(tensordict)
        action, log_prob = self.actor.sample(obs)
        q = self.critic.expected_q(self.critic(critic_obs, action, frozen=True)).mean(0)
        loss = (self.alpha * log_prob - q).mean()
        return TensorDict(loss_actor=loss, entropy=-log_prob.detach().mean(), log_prob=log_prob.detach())

    @torch.no_grad()
    def update_normalizers(self, tensordict: TensorDictBase, world: World = ALONE) -> None:
        """Fold a batch (of every rank, with several) into the observation normalisers; mirrored copies are
        included so the statistics are themselves symmetric when symmetry is on."""
        obs, critic_obs = self._policy_inputs(tensordict)
        for net, batch in ((self.actor, obs), (self.critic, critic_obs)):
            if isinstance(net.obs_norm, RunningNorm):
                net.obs_norm.update(batch, world)


class Optimizers(NamedTuple):
    actor: torch.optim.AdamW
    critic: torch.optim.AdamW
    alpha: torch.optim.AdamW


def make_optimizers(
    loss: SACLoss,
    lr: float = 3e-4,
    betas: tuple[float, float] = (0.9, 0.95),
    weight_decay: float = 1e-3,
) -> Optimizers:
    """AdamW for actor, critic and temperature; the temperature gets no weight decay, which would bias it to 1.

    On CUDA the optimisers are fused and capturable, so their steps can live inside a CUDA graph.
    """
    on_cuda = loss.log_alpha.is_cuda
    common = {"lr": lr, "betas": betas, "capturable": on_cuda, "fused": True if on_cuda else None}
    return Optimizers(
        actor=torch.optim.AdamW(loss.actor.parameters(), weight_decay=weight_decay, **common),
        critic=torch.optim.AdamW(loss.critic.parameters(), weight_decay=weight_decay, **common),
        alpha=torch.optim.AdamW([loss.log_alpha], weight_decay=0.0, **common),
    )
