"""FlashSAC: SAC with residual BatchNorm networks, unit-norm weights and a min-Q distributional target.

The pieces mirror ``torchrl_ext.sac`` so a trainer can swap one loss for the other: the same key layout, the same
split ``critic_loss`` / ``actor_loss`` / ``alpha_loss`` API and the same guarantees. Nothing here reads a tensor back
to the host (no ``.item()``, no branch on a tensor value), so a whole update, including the weight projection, the
reward normaliser and the learning-rate schedule, can be captured in a CUDA graph. Distribution arithmetic runs in
float32 under bf16 autocast, because bf16 cannot resolve the small masses the C51 projection moves around.

Arrangement of a residual block (a choice; the reference only names the ingredients)::

    x -> x + Linear(4w -> w)(ReLU(BatchNorm(Linear(w -> 4w)(x))))

No normalisation sits in front of the block and none on the residual stream itself: BatchNorm lives inside the
branch, right after the expansion, so each branch sees standardised pre-activations while the identity path stays
untouched. The only normalisation of the stream is the RMSNorm on the trunk output, which bounds the features the
heads read however much the blocks add up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from tensordict import TensorDict, TensorDictBase
from torch import Tensor, nn

from torchrl_ext.distributed import ALONE, World
from torchrl_ext.networks import SquashedGaussianPolicy, detached, fold_moments_, linear
from torchrl_ext.sac import SoftActorCriticLoss, Transition, flatten_batch, project_distribution

FLASH_LOG_STD_MIN = -10.0
FLASH_LOG_STD_MAX = 2.0
FLASH_MEAN_LIMIT = 10.0
_ROW_NORM_EPS = 1e-8
# Running statistics move slowly: acting and the actor's view of the critic use them, so they should average over
# many minibatches rather than follow the last few (the FlashSAC reference uses 0.01 too).
BN_MOMENTUM = 0.01


def flashsac_target_entropy(action_dim: int, sigma: float = 0.15) -> float:
    """Entropy of a diagonal Gaussian with std ``sigma`` per dimension.

    Expressing the target as a per-dimension std is easier to reason about than a raw entropy number: it says how
    much exploration noise the temperature should keep in the (pre-tanh) policy.
    """
    return action_dim * 0.5 * math.log(2 * math.pi * math.e * sigma**2)


# --------------------------------------------------------------------------------------------------------------------
# Networks
# --------------------------------------------------------------------------------------------------------------------


class UnitNormLinear(nn.Linear):
    """A hidden linear layer whose weight rows are kept at unit L2 norm by ``project_weights_``.

    A distinct type, rather than a flag, lets ``project_weights_`` find exactly the hidden layers and leave the
    output heads free to set their own scale. Rows start unit-norm so the first forward pass already matches the
    constraint the optimiser steps are projected back onto.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True) -> None:
        super().__init__(in_features, out_features, bias=bias)
        with torch.no_grad():
            self.weight.div_(torch.linalg.vector_norm(self.weight, dim=1, keepdim=True).clamp_min(_ROW_NORM_EPS))


@torch.no_grad()
def project_weights_(module: nn.Module, eps: float = _ROW_NORM_EPS) -> None:
    """Re-normalise every row of every ``UnitNormLinear`` weight in ``module`` to unit L2 norm, in place.

    Called after each optimiser step: with unit-norm rows the effective learning rate no longer shrinks as weight
    norms grow, which is what keeps plasticity at high update-to-data ratios. The row norms are computed per tensor
    (there is no multi-tensor row-norm kernel) and the division is one fused ``_foreach`` op; nothing is read back
    to the host. ``eps`` only guards a row that is exactly zero.
    """
    weights = [m.weight for m in module.modules() if isinstance(m, UnitNormLinear)]
    if not weights:
        return
    norms = [torch.linalg.vector_norm(w, dim=1, keepdim=True) for w in weights]
    torch._foreach_clamp_min_(norms, eps)
    torch._foreach_div_(weights, norms)


def batch_norm(norm: nn.BatchNorm1d, x: Tensor, frozen: bool) -> Tensor:
    """``norm(x)``; when ``frozen``, as in eval mode (running statistics, none updated) on detached parameters,
    whatever the module's mode: toggling ``eval()`` and ``train()`` inside a compiled function costs Dynamo a walk
    over every submodule each way."""
    if not frozen:
        return norm(x)
    weight, bias = detached(norm.weight, frozen), detached(norm.bias, frozen)
    return F.batch_norm(x, norm.running_mean, norm.running_var, weight, bias, training=False, eps=norm.eps)


class ResidualBlock(nn.Module):
    """``x + Linear(4w -> w)(ReLU(BatchNorm(Linear(w -> 4w)(x))))`` on (N, w) inputs.

    The expansion carries no bias: the BatchNorm that follows would subtract it again.
    """

    def __init__(self, width: int, expansion: int = 4) -> None:
        super().__init__()
        self.expand = UnitNormLinear(width, expansion * width, bias=False)
        self.norm = nn.BatchNorm1d(expansion * width, momentum=BN_MOMENTUM)
        self.contract = UnitNormLinear(expansion * width, width)

    def forward(self, x: Tensor, frozen: bool = False) -> Tensor:
        expanded = batch_norm(self.norm, linear(self.expand, x, frozen), frozen)
        return x + linear(self.contract, F.relu(expanded), frozen)


class RMSNorm(nn.Module):
    """RMS normalisation written out in elementary ops, so ONNX opset 17 can express it (``aten::rms_norm``
    has no opset-17 export) and the exported policy matches the trained one."""

    def __init__(self, dim: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: Tensor, frozen: bool = False) -> Tensor:
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps) * detached(self.weight, frozen)


class ResidualTrunk(nn.Module):
    """BatchNorm on the raw input, projection to ``width``, ``num_blocks`` residual blocks, RMSNorm output.

    The input BatchNorm stands in for observation normalisation (FlashSAC runs without it): raw joint velocities
    reach tens of rad/s while actions stay within +-1, and a unit-norm projection of unscaled inputs would let the
    largest features drown the rest. Accepts any leading batch shape; BatchNorm needs a flat (N, w) batch, so the
    batch is flattened inside.
    """

    def __init__(self, in_dim: int, width: int, num_blocks: int) -> None:
        super().__init__()
        self.width = width
        self.in_norm = nn.BatchNorm1d(in_dim, momentum=BN_MOMENTUM)
        self.project = UnitNormLinear(in_dim, width, bias=False)
        self.blocks = nn.Sequential(*(ResidualBlock(width) for _ in range(num_blocks)))
        self.out_norm = RMSNorm(width)

    def forward(self, x: Tensor, frozen: bool = False) -> Tensor:
        """``frozen``: on detached parameters and every BatchNorm on its running statistics (as in eval mode)."""
        batch_shape = x.shape[:-1]
        hidden = linear(self.project, batch_norm(self.in_norm, x.reshape(-1, x.shape[-1]), frozen), frozen)
        for block in self.blocks:
            hidden = block(hidden, frozen)
        # RMSNorm in the weight's dtype (float32): under bf16 autocast the output scale would otherwise round in bf16.
        features = self.out_norm(hidden.to(self.out_norm.weight.dtype), frozen)
        return features.reshape(*batch_shape, self.width)


class FlashActor(SquashedGaussianPolicy):
    """FlashSAC's policy: a residual trunk, a wider log-std range than FastSAC's.

    The mean head starts at zero and the log-std head at a constant ``init_log_std``, so the first policy is
    centred with a known spread whatever the trunk's random init.
    """

    mean_limit = FLASH_MEAN_LIMIT
    log_std_min = FLASH_LOG_STD_MIN
    log_std_max = FLASH_LOG_STD_MAX

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        width: int = 128,
        num_blocks: int = 2,
        init_log_std: float = math.log(0.15),
    ) -> None:
        super().__init__()
        self.action_dim = action_dim
        self.trunk = ResidualTrunk(obs_dim, width, num_blocks)
        self.mean_head = nn.Linear(width, action_dim)
        self.log_std_head = nn.Linear(width, action_dim)
        unit = 2 * (init_log_std - FLASH_LOG_STD_MIN) / (FLASH_LOG_STD_MAX - FLASH_LOG_STD_MIN) - 1
        with torch.no_grad():
            for head in (self.mean_head, self.log_std_head):
                head.weight.zero_()
                head.bias.zero_()
            self.log_std_head.bias.fill_(math.atanh(min(max(unit, -0.999), 0.999)))

    def features(self, obs: Tensor, frozen: bool = False) -> Tensor:
        return self.trunk(obs, frozen)


class FlashCritic(nn.Module):
    """Ensemble of C51 critics, each a residual trunk on ``concat[critic_obs, action]``.

    Members are separate modules rather than stacked weights: BatchNorm statistics must be per member, and two
    small nets cost little. Returns logits over ``linspace(v_min, v_max, num_atoms)``; the narrow default support
    assumes rewards scaled by ``RewardNormalizer``.
    """

    def __init__(
        self,
        obs_dim: int,
        action_dim: int,
        width: int = 256,
        num_blocks: int = 2,
        num_atoms: int = 101,
        v_min: float = -5.0,
        v_max: float = 5.0,
        num_members: int = 2,
    ) -> None:
        super().__init__()
        self.num_members = num_members
        self.v_min = float(v_min)
        self.v_max = float(v_max)
        self.register_buffer("support", torch.linspace(self.v_min, self.v_max, num_atoms), persistent=False)
        self.members = nn.ModuleList(
            nn.Sequential(ResidualTrunk(obs_dim + action_dim, width, num_blocks), nn.Linear(width, num_atoms))
            for _ in range(num_members)
        )

    def forward(self, obs: Tensor, action: Tensor, frozen: bool = False) -> Tensor:
        """Logits of shape (num_members, *batch, num_atoms); ``frozen``: the critic as the actor's loss sees it, on
        detached parameters and running statistics, whatever the module's mode."""
        x = torch.cat([obs, action], dim=-1)
        return torch.stack([linear(head, trunk(x, frozen), frozen) for trunk, head in self.members])

    def expected_q(self, logits: Tensor) -> Tensor:
        """Mean of each member's return distribution, in float32."""
        return (logits.float().softmax(-1) * self.support).sum(-1)


# --------------------------------------------------------------------------------------------------------------------
# Reward normalisation and exploration noise
# --------------------------------------------------------------------------------------------------------------------


class RewardNormalizer(nn.Module):
    """Scales rewards by the spread of the discounted return, so the critic's fixed [-5, 5] support fits any task.

    What is tracked, per ``update(reward, done)`` call with one row per env:

    1. ``G <- gamma * G + r`` per env (``G`` is the return accumulated so far in the current episode);
    2. the batch of the ``num_envs`` new ``G`` values is folded into running mean/variance with Chan's merge
       (population variance, every env step of every env weighted equally), and ``G_max <- max(G_max, max |G|)``;
    3. ``G <- G * (1 - done)``, so the next episode starts from zero.

    Doing the reset after the fold equals the update ``G <- gamma * G * (1 - done_prev) + r`` with the previous
    step's done flag: the terminal reward still counts in the return of the episode it ends.

    ``normalize(r) = r / max(sqrt(Var(G)), G_max / 5, eps)``. Before the first update ``Var`` is 1 and ``G_max`` 0,
    so rewards pass through unchanged; the first update overwrites ``Var`` entirely (its weight is then 1).
    All state is buffers, so it follows ``.to(device)`` and is saved in ``state_dict``; no step reads back to host.
    """

    def __init__(self, num_envs: int, gamma: float, g_max_divisor: float = 5.0, eps: float = 1e-8) -> None:
        super().__init__()
        self.gamma = gamma
        self.g_max_divisor = g_max_divisor
        self.eps = eps
        self.register_buffer("running_return", torch.zeros(num_envs))
        self.register_buffer("mean", torch.zeros(()))
        self.register_buffer("var", torch.ones(()))
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("g_max", torch.zeros(()))

    @torch.no_grad()
    def update(self, reward: Tensor, done: Tensor, world: World = ALONE) -> None:
        """Fold in one step of every env; with several ranks, of every rank's envs (each rank keeps its own
        per-env returns), so all ranks keep the same statistics."""
        reward = reward.reshape(-1).to(self.running_return.dtype)
        keep = 1.0 - done.reshape(-1).to(self.running_return.dtype)
        returns = self.running_return.mul_(self.gamma).add_(reward)
        fold_moments_(self.mean, self.var, self.count, *world.moments(returns, self.mean))
        batch_max = returns.abs().max()
        world.maximum_(batch_max)
        torch.maximum(self.g_max, batch_max, out=self.g_max)
        self.running_return.mul_(keep)

    def scale(self) -> Tensor:
        """The denominator ``max(sqrt(Var(G)), G_max / divisor, eps)``, a 0-d tensor."""
        return torch.maximum(self.var.sqrt(), self.g_max / self.g_max_divisor).clamp_min(self.eps)

    def normalize(self, reward: Tensor) -> Tensor:
        return reward / self.scale()


def truncated_zipf_cdf(max_span: int, mu: float) -> Tensor:
    """CDF of ``P(k) proportional to k^-mu`` on ``k = 1..max_span``; the last entry is exactly 1 so that every
    uniform draw in [0, 1) lands on a valid span."""
    weights = torch.arange(1, max_span + 1, dtype=torch.float64).pow(-mu)
    cdf = (weights / weights.sum()).cumsum(0)
    cdf[-1] = 1.0
    return cdf.float()


def zipf_spans(u: Tensor, cdf: Tensor) -> Tensor:
    """Inverse-CDF draw: span ``k`` is ``1 +`` the number of CDF entries ``<= u``. ``searchsorted`` keeps it on the
    device, unlike ``torch.multinomial`` which may synchronise."""
    index = torch.searchsorted(cdf, u.to(cdf.dtype).contiguous(), right=True)
    return index.clamp_(max=cdf.shape[0] - 1) + 1


class HeldNoise(nn.Module):
    """Per-env exploration noise held fixed for a Zipf-distributed number of steps.

    Holding the noise gives temporally correlated exploration (a joint keeps pushing the same way for a while),
    with mostly short spans and occasionally long ones from the heavy tail. Randomness is passed in, so the caller
    owns the generator and the step stays capturable.

    A span of ``k`` means the same ``eps`` is returned by exactly ``k`` consecutive ``step`` calls, unless the env
    is done first. The counter starts at 0, so the first call draws noise for every env.
    """

    def __init__(self, num_envs: int, action_dim: int, max_span: int = 16, mu: float = 2.0) -> None:
        super().__init__()
        self.register_buffer("eps", torch.zeros(num_envs, action_dim))
        self.register_buffer("remaining", torch.zeros(num_envs, dtype=torch.long))
        self.register_buffer("cdf", truncated_zipf_cdf(max_span, mu), persistent=False)

    @torch.no_grad()
    def step(self, done: Tensor, u_span: Tensor, noise: Tensor | None = None) -> Tensor:
        """Noise for this env step.

        ``done`` (num_envs,): envs whose episode just ended (they get fresh noise). ``u_span`` (num_envs,): uniform
        [0, 1) draws for new spans. ``noise`` (num_envs, action_dim): standard-normal draws for the envs that
        resample; drawn with ``torch.randn`` when omitted. Draws of envs that keep their noise are ignored.
        """
        resample = (self.remaining <= 0) | done.reshape(-1).bool()
        if noise is None:
            noise = torch.randn_like(self.eps)
        self.eps.copy_(torch.where(resample.unsqueeze(-1), noise.to(self.eps.dtype), self.eps))
        spans = zipf_spans(u_span.reshape(-1), self.cdf)
        self.remaining.copy_(torch.where(resample, spans, self.remaining) - 1)
        return self.eps.clone()


# --------------------------------------------------------------------------------------------------------------------
# Loss
# --------------------------------------------------------------------------------------------------------------------


class FlashSACLoss(SoftActorCriticLoss):
    """FlashSAC objective: a min-Q distributional critic, a min-Q actor and an entropy-targeting temperature.

    Target: per sample, the target member with the smaller expected Q supplies the whole next-state distribution,
    which both online members regress onto (clipped double-Q carried over to distributions). Only ``terminated``
    cuts the bootstrap; a time-limit truncation is not the end of the task's return. Rewards pass through
    ``reward_normalizer.normalize`` when one is given; the loss never updates its statistics, the collector side
    does (``RewardNormalizer.update``).

    BatchNorm: the critic losses run online and target critic in training mode on one joint batch of current and
    next samples (``critic_loss``); the actor loss and the next-action draw use running statistics. Polyak
    averaging touches parameters only; the target's running statistics are its own.
    """

    def __init__(
        self,
        actor: FlashActor,
        critic: FlashCritic,
        *,
        target_entropy: float,
        gamma: float = 0.99,
        tau: float = 0.05,
        alpha_init: float = 0.01,
        reward_normalizer: RewardNormalizer | None = None,
    ) -> None:
        super().__init__(actor, critic, target_entropy=target_entropy, gamma=gamma, tau=tau, alpha_init=alpha_init)
        self.reward_normalizer = reward_normalizer

    def critic_loss(self, tensordict: TensorDictBase) -> TensorDict:
        """Sum over critic members of the mean cross-entropy to the min-Q soft Bellman target.

        Online and target critic both see the joint batch ``[(s, a); (s', a')]`` in training mode, and each keeps
        its half: BatchNorm then normalises predictions and targets with the same statistics. Normalised
        separately, an all-policy batch ``(s', a')`` would be re-centred on its own mean and the target could not
        tell a wide policy from a narrow one.
        """
        t = self.read_transition(tensordict)
        critic_obs, actions, next_log_prob = self._joint_batch(t)
        target = self._target(critic_obs, actions, next_log_prob, t)
        log_probs = self.critic(critic_obs, actions)[:, : t.action.shape[0]].float().log_softmax(-1)
        return self._cross_entropy(target, log_probs)

    def target_distribution(self, transition: Transition) -> Tensor:
        """Projected soft Bellman target (N, num_atoms) of ``transition``, as ``critic_loss`` builds it."""
        return self._target(*self._joint_batch(transition), transition)

    @torch.no_grad()
    def _joint_batch(self, t: Transition) -> tuple[Tensor, Tensor, Tensor]:
        """``[s; s']`` critic observations, ``[a; a']`` actions (a' drawn by the actor) and log pi(a'|s')."""
        # a' as the collector draws it: the actor's BatchNorms on their running statistics
        next_action, next_log_prob = self.actor.sample(t.next_observation, frozen=True)
        critic_obs = torch.cat([t.critic_observation, t.next_critic_observation])
        return critic_obs, torch.cat([t.action, next_action]), next_log_prob

    @torch.no_grad()
    def _target(self, critic_obs: Tensor, actions: Tensor, next_log_prob: Tensor, transition: Transition) -> Tensor:
        """Projected soft Bellman target (N, num_atoms) from the min-Q target member of each sample, the target
        critic run on the joint batch (its second half is the next-state half)."""
        n = next_log_prob.shape[0]
        next_probs = self._target_critic(critic_obs, actions)[:, n:].float().softmax(-1)
        support = self.critic.support
        next_q = (next_probs * support).sum(-1)
        pick = next_q.argmin(0).view(1, -1, 1).expand(1, -1, next_probs.shape[-1])
        chosen = next_probs.gather(0, pick).squeeze(0)
        reward = transition.reward.float()
        if self.reward_normalizer is not None:
            reward = self.reward_normalizer.normalize(reward)
        continuation = 1.0 - transition.terminated.float()
        soft_support = support - self.alpha * next_log_prob.float().unsqueeze(-1)
        atoms = reward.unsqueeze(-1) + self.gamma * continuation.unsqueeze(-1) * soft_support
        return project_distribution(atoms, chosen, self.critic.v_min, self.critic.v_max)

    def _frozen_critic(self, critic_obs: Tensor, action: Tensor) -> Tensor:
        """The critic with detached parameters, on running statistics: the actor's gradient reaches the critic
        input only.

        Running statistics matter: in training mode a batch of policy actions, which all share the policy's spread, is
        standardised by its own statistics, so Q could not see what a wider or narrower policy costs and nothing
        but the entropy bonus would act on the policy's standard deviation.
        """
        return self.critic(critic_obs, action, frozen=True)

    def actor_loss(self, tensordict: TensorDictBase) -> TensorDict:
        """``mean(alpha * log pi - min_i E[Q_i])``; also returns the detached per-sample ``log_prob``."""
        obs = flatten_batch(tensordict.get(self.tensor_keys.observation))
        critic_obs = flatten_batch(tensordict.get(self.tensor_keys.critic_observation))
        action, log_prob = self.actor.sample(obs)
        q = self.critic.expected_q(self._frozen_critic(critic_obs, action)).min(0).values
        loss = (self.alpha * log_prob - q).mean()
        return TensorDict(loss_actor=loss, entropy=-log_prob.detach().mean(), log_prob=log_prob.detach())

    def project_weights_(self) -> None:
        """Put actor and critic hidden weights back on the unit sphere; call after their optimiser steps. The
        target critic is left as the Polyak average of projected weights, which is close to unit-norm anyway."""
        project_weights_(self.actor)
        project_weights_(self.critic)


# --------------------------------------------------------------------------------------------------------------------
# Optimisers and learning-rate schedule
# --------------------------------------------------------------------------------------------------------------------


def cosine_lr(step: Tensor | float, lr: float, lr_final: float, total_steps: int) -> Tensor | float:
    """Cosine decay from ``lr`` at step 0 to ``lr_final`` at ``total_steps``, constant after; no warmup.

    Works on a tensor step (device arithmetic, no sync) or on a Python number.
    """
    if isinstance(step, Tensor):
        progress = (step.float() / total_steps).clamp(0.0, 1.0)
        return lr_final + 0.5 * (lr - lr_final) * (1 + torch.cos(math.pi * progress))
    progress = min(max(step / total_steps, 0.0), 1.0)
    return lr_final + 0.5 * (lr - lr_final) * (1 + math.cos(math.pi * progress))


class CosineLR:
    """Graph-safe cosine schedule over several optimisers.

    Every param group holds its learning rate as a 0-d tensor, and ``step`` rewrites those tensors in place from a
    device step counter. A captured optimiser step reads the lr through the tensor's address, so the schedule keeps
    working inside a replayed CUDA graph; torch's ``LRScheduler`` assigns new Python floats instead, which a graph
    would never see. Tensor learning rates were checked to work with CPU Adam (``foreach=False``, the default loop,
    and ``fused=True``); on CUDA they need ``capturable=True`` or ``fused=True``, which ``make_flashsac_optimizers``
    sets. The group's lr tensor is looked up at each step, so it survives ``load_state_dict`` replacing it.
    """

    def __init__(
        self, optimizers: Iterable[torch.optim.Optimizer], lr: float, lr_final: float, total_steps: int
    ) -> None:
        self.optimizers = list(optimizers)
        self.lr = lr
        self.lr_final = lr_final
        self.total_steps = total_steps
        device = self.optimizers[0].param_groups[0]["params"][0].device
        self.step_count = torch.zeros((), device=device)

    def step(self) -> None:
        self.step_count.add_(1)
        value = cosine_lr(self.step_count, self.lr, self.lr_final, self.total_steps)
        for optimizer in self.optimizers:
            for group in optimizer.param_groups:
                group["lr"].copy_(value)

    def state_dict(self) -> dict[str, Tensor]:
        return {"step_count": self.step_count.clone()}

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        self.step_count.copy_(state["step_count"])
        value = cosine_lr(self.step_count, self.lr, self.lr_final, self.total_steps)
        for optimizer in self.optimizers:
            for group in optimizer.param_groups:
                group["lr"].copy_(value)


class FlashSACOptimizers(NamedTuple):
    actor: torch.optim.Adam
    critic: torch.optim.Adam
    alpha: torch.optim.Adam
    scheduler: CosineLR


def make_flashsac_optimizers(
    loss: FlashSACLoss, lr: float = 3e-4, lr_final: float = 1.5e-4, total_steps: int = 500_000
) -> FlashSACOptimizers:
    """Plain Adam (no weight decay: the unit-norm projection already controls weight scale) with one cosine
    schedule shared by actor, critic and temperature. Fused and capturable on CUDA; on CPU the per-parameter loop,
    the only CPU path besides fused that accepts a tensor lr."""
    device = loss.log_alpha.device
    on_cuda = device.type == "cuda"
    common: dict[str, object] = {"capturable": True, "fused": True} if on_cuda else {"foreach": False}

    def adam(params: Iterable[nn.Parameter]) -> torch.optim.Adam:
        return torch.optim.Adam(params, lr=torch.tensor(lr, device=device), **common)  # type: ignore[arg-type]

    actor = adam(loss.actor.parameters())
    critic = adam(loss.critic.parameters())
    alpha = adam([loss.log_alpha])
    return FlashSACOptimizers(actor, critic, alpha, CosineLR([actor, critic, alpha], lr, lr_final, total_steps))
