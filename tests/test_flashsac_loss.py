"""FlashSAC (torchrl_ext.flashsac): networks, the min-Q distributional target, gradient routing, the reward
normaliser, held exploration noise and the cosine schedule, on CPU-sized problems; and the options its learner
refuses."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from torch import Tensor, nn

from torchrl_ext.flashsac import (
    FLASH_LOG_STD_MAX,
    FLASH_LOG_STD_MIN,
    CosineLR,
    FlashActor,
    FlashCritic,
    FlashSACLoss,
    HeldNoise,
    RewardNormalizer,
    UnitNormLinear,
    cosine_lr,
    flashsac_target_entropy,
    make_flashsac_optimizers,
    project_weights_,
    truncated_zipf_cdf,
    zipf_spans,
)
from unilab.train.registry import ALGORITHMS

OBS, CRITIC_OBS, ACT, BATCH = 10, 13, 4, 64
ATOMS, V_MIN, V_MAX = 21, -5.0, 5.0


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def make_loss(**kwargs: object) -> FlashSACLoss:
    actor = FlashActor(OBS, ACT, width=16, num_blocks=2)
    critic = FlashCritic(CRITIC_OBS, ACT, width=32, num_blocks=2, num_atoms=ATOMS, v_min=V_MIN, v_max=V_MAX)
    return FlashSACLoss(actor, critic, target_entropy=flashsac_target_entropy(ACT), **kwargs)  # type: ignore[arg-type]


def make_batch(n: int = BATCH, terminated: bool = False, truncated: bool = False) -> TensorDict:
    return TensorDict(
        {
            "policy": torch.randn(n, OBS),
            "critic": torch.randn(n, CRITIC_OBS),
            "action": torch.rand(n, ACT) * 2 - 1,
            "next": {
                "reward": torch.randn(n, 1),
                "terminated": torch.full((n, 1), terminated),
                "truncated": torch.full((n, 1), truncated),
                "policy": torch.randn(n, OBS),
                "critic": torch.randn(n, CRITIC_OBS),
            },
        },
        batch_size=[n],
    )


def randomise_heads(actor: FlashActor) -> None:
    """Zero-initialised heads block gradients into the trunk; give them weights so routing tests see the trunk."""
    with torch.no_grad():
        for head in (actor.mean_head, actor.log_std_head):
            head.weight.normal_(0, 0.3)


# --------------------------------------------------------------------------------------------------------------------
# Networks
# --------------------------------------------------------------------------------------------------------------------


def test_target_entropy_matches_reference_value() -> None:
    assert flashsac_target_entropy(29, 0.15) == pytest.approx(-13.867, abs=1e-3)
    assert flashsac_target_entropy(1, 1.0) == pytest.approx(0.5 * math.log(2 * math.pi * math.e))


def test_shapes() -> None:
    loss = make_loss()
    obs = torch.randn(BATCH, OBS)
    mean, log_std = loss.actor.distribution(obs)
    assert mean.shape == log_std.shape == (BATCH, ACT)
    action, log_prob = loss.actor.sample(obs)
    assert action.shape == (BATCH, ACT) and log_prob.shape == (BATCH,)
    assert action.abs().max() <= 1.0 and torch.isfinite(log_prob).all()
    assert loss.actor(obs).shape == (BATCH, ACT)
    logits = loss.critic(torch.randn(4, 8, CRITIC_OBS), torch.randn(4, 8, ACT))
    assert logits.shape == (2, 4, 8, ATOMS)
    assert loss.critic.expected_q(logits).shape == (2, 4, 8)
    out = loss(make_batch())
    assert set(loss.out_keys) <= set(out.keys())
    assert all(out[key].shape == () for key in loss.out_keys)


def test_actor_initial_log_std_is_the_requested_value() -> None:
    actor = FlashActor(OBS, ACT, width=16, init_log_std=math.log(0.3))
    _, log_std = actor.distribution(torch.randn(8, OBS))
    torch.testing.assert_close(log_std, torch.full_like(log_std, math.log(0.3)), atol=1e-5, rtol=0)


def test_the_frozen_actor_is_the_eval_mode_actor_and_moves_nothing() -> None:
    """Acting and the next-action draw read the actor frozen: its BatchNorms on running statistics that the draw
    does not move, whatever the module's mode, and no gradient reaches its parameters."""
    actor = FlashActor(OBS, ACT, width=16)
    randomise_heads(actor)
    obs, noise = torch.randn(16, OBS) * 2 + 1, torch.randn(16, ACT)
    actor.sample(obs * 3)  # training mode: the running statistics move away from their initial values
    running = [b.clone() for b in actor.buffers()]
    action, log_prob = actor.sample(obs.requires_grad_(), noise, frozen=True)
    (action.sum() + log_prob.sum()).backward()
    assert actor.training and all(p.grad is None for p in actor.parameters()) and obs.grad is not None
    assert all(torch.equal(b, r) for b, r in zip(actor.buffers(), running, strict=True))
    actor.eval()
    with torch.no_grad():
        want_action, want_log_prob = actor.sample(obs, noise)
    assert torch.equal(action, want_action) and torch.equal(log_prob, want_log_prob)


def test_log_std_bounds_for_extreme_inputs() -> None:
    actor = FlashActor(OBS, ACT, width=16)
    with torch.no_grad():
        actor.log_std_head.weight.normal_(0, 100.0)
    obs = torch.cat([torch.randn(32, OBS) * 1e4, -torch.randn(32, OBS) * 1e4, torch.zeros(1, OBS)])
    _, log_std = actor.distribution(obs)
    assert torch.isfinite(log_std).all()
    assert log_std.min() >= FLASH_LOG_STD_MIN and log_std.max() <= FLASH_LOG_STD_MAX
    # With huge head weights the squash saturates: both ends of the range are actually reached.
    assert log_std.min() < FLASH_LOG_STD_MIN + 1e-3 and log_std.max() > FLASH_LOG_STD_MAX - 1e-3
    action, log_prob = actor.sample(obs)
    assert torch.isfinite(action).all() and torch.isfinite(log_prob).all()


def test_log_prob_matches_change_of_variables() -> None:
    actor = FlashActor(OBS, ACT, width=16)
    randomise_heads(actor)
    obs = torch.randn(16, OBS)
    noise = torch.randn(16, ACT)
    action, log_prob = actor.sample(obs, noise)
    mean, log_std = actor.distribution(obs)
    mean, log_std, noise = mean.double(), log_std.double(), noise.double()
    pre_tanh = mean + noise * log_std.exp()
    gaussian = torch.distributions.Normal(mean, log_std.exp()).log_prob(pre_tanh).sum(-1)
    # float64 reference; log(1 - tanh(u)^2) = -2 log cosh(u), exact in double for the magnitudes seen here
    expected = gaussian + 2 * torch.log(torch.cosh(pre_tanh)).sum(-1)
    torch.testing.assert_close(action.double(), torch.tanh(pre_tanh), atol=1e-6, rtol=0)
    torch.testing.assert_close(log_prob.double(), expected, atol=1e-3, rtol=1e-5)


def test_weight_projection_gives_unit_rows_and_finite_outputs() -> None:
    loss = make_loss()
    hidden = [m for net in (loss.actor, loss.critic) for m in net.modules() if isinstance(m, UnitNormLinear)]
    # input projection + 2 linears per block, for the actor and each of the two critic members
    assert len(hidden) == 3 * (1 + 2 * 2)
    for m in hidden:  # rows start unit-norm
        torch.testing.assert_close(m.weight.norm(dim=1), torch.ones(m.weight.shape[0]))
    heads = [loss.actor.mean_head, *(member[-1] for member in loss.critic.members)]
    with torch.no_grad():
        for p in [*loss.actor.parameters(), *loss.critic.parameters()]:
            p.mul_(7.0).add_(torch.randn_like(p))
    head_weights = [h.weight.clone() for h in heads]
    project_weights_(loss.actor)
    project_weights_(loss.critic)
    for m in hidden:
        torch.testing.assert_close(m.weight.norm(dim=1), torch.ones(m.weight.shape[0]), atol=1e-5, rtol=0)
    for head, before in zip(heads, head_weights, strict=True):
        assert torch.equal(head.weight, before), "output heads are not hidden layers and must not be projected"
    out = loss(make_batch())
    assert all(torch.isfinite(out[key]).all() for key in loss.out_keys)


def test_loss_method_projects_both_networks() -> None:
    loss = make_loss()
    with torch.no_grad():
        for m in loss.modules():
            if isinstance(m, UnitNormLinear):
                m.weight.mul_(3.0)
    loss.project_weights_()
    norms = torch.cat(
        [m.weight.norm(dim=1) for m in (*loss.actor.modules(), *loss.critic.modules()) if isinstance(m, UnitNormLinear)]
    )
    torch.testing.assert_close(norms, torch.ones_like(norms), atol=1e-5, rtol=0)


# --------------------------------------------------------------------------------------------------------------------
# Critic target
# --------------------------------------------------------------------------------------------------------------------


class FixedLogits(nn.Module):
    """Stands in for the target critic with prescribed per-member, per-sample logits for the next-state half of
    the joint ``[current; next]`` batch it is given (the current half gets uniform logits)."""

    def __init__(self, logits: Tensor) -> None:
        super().__init__()
        self.logits = logits

    def forward(self, obs: Tensor, action: Tensor) -> Tensor:
        assert obs.shape[0] == 2 * self.logits.shape[1]
        return torch.cat([torch.zeros_like(self.logits), self.logits], dim=1)


def test_min_q_target_picks_the_smaller_q_member_per_sample() -> None:
    loss = make_loss(gamma=1.0)
    with torch.no_grad():
        loss.log_alpha.fill_(-60.0)  # alpha ~ 0, so the target is the chosen distribution shifted by r = 0
    n = 4
    high = torch.full((ATOMS,), -20.0)
    high[-3] = 20.0  # mass on +4
    low = torch.full((ATOMS,), -20.0)
    low[2] = 20.0  # mass on -4
    # member 0 is lower on samples 0 and 2, member 1 on samples 1 and 3
    member0 = torch.stack([low, high, low, high])
    member1 = torch.stack([high, low, high, low])
    loss._target_critic = FixedLogits(torch.stack([member0, member1]))
    batch = make_batch(n)
    batch["next", "reward"].zero_()
    target = loss.target_distribution(loss.read_transition(batch))
    assert target.shape == (n, ATOMS)
    expected = low.softmax(-1).expand(n, ATOMS)
    torch.testing.assert_close(target, expected, atol=1e-5, rtol=0)
    # And the other way round: when the high member moves lower than the low one, the choice follows it.
    shifted_high = torch.full((ATOMS,), -20.0)
    shifted_high[0] = 20.0  # mass on -5, below -4
    loss._target_critic = FixedLogits(torch.stack([member0, torch.stack([shifted_high, low, shifted_high, low])]))
    target = loss.target_distribution(loss.read_transition(batch))
    torch.testing.assert_close(target[0], shifted_high.softmax(-1), atol=1e-5, rtol=0)
    torch.testing.assert_close(target[1], low.softmax(-1), atol=1e-5, rtol=0)


def test_terminated_cuts_bootstrap_and_truncated_does_not() -> None:
    loss = make_loss()
    batch = make_batch(16)
    support = loss.critic.support
    batch["next", "reward"] = support[torch.randint(0, ATOMS, (16, 1))]  # rewards on grid points
    ended = batch.clone()
    ended["next", "terminated"].fill_(True)
    target = loss.target_distribution(loss.read_transition(ended))
    index = ((batch["next", "reward"].reshape(-1) - V_MIN) / (V_MAX - V_MIN) * (ATOMS - 1)).round().long()
    torch.testing.assert_close(target, torch.nn.functional.one_hot(index, ATOMS).float())

    torch.manual_seed(1)
    plain = loss.target_distribution(loss.read_transition(batch))
    truncated = batch.clone()
    truncated["next", "truncated"].fill_(True)
    torch.manual_seed(1)
    with_truncation = loss.target_distribution(loss.read_transition(truncated))
    torch.testing.assert_close(with_truncation, plain)
    assert not torch.allclose(plain, target), "a non-terminal target must bootstrap, not collapse onto the reward"


def test_reward_normalizer_scales_rewards_in_the_target() -> None:
    normalizer = RewardNormalizer(num_envs=2, gamma=0.9)
    normalizer.update(torch.tensor([10.0, 10.0]), torch.zeros(2))  # Var 0, G_max 10 -> scale 2
    loss = make_loss(reward_normalizer=normalizer)
    batch = make_batch(8, terminated=True)
    batch["next", "reward"] = torch.full((8, 1), 4.0)
    target = loss.target_distribution(loss.read_transition(batch))
    index = int((2.0 - V_MIN) / (V_MAX - V_MIN) * (ATOMS - 1))
    torch.testing.assert_close(target, torch.nn.functional.one_hot(torch.full((8,), index), ATOMS).float())


# --------------------------------------------------------------------------------------------------------------------
# Gradient routing and target update
# --------------------------------------------------------------------------------------------------------------------


def grads_of(module: nn.Module) -> list[Tensor | None]:
    return [p.grad for p in module.parameters()]


def has_signal(grads: list[Tensor | None]) -> bool:
    return any(g is not None and g.abs().sum() > 0 for g in grads)


def is_silent(grads: list[Tensor | None]) -> bool:
    return all(g is None or g.abs().sum() == 0 for g in grads)


@pytest.mark.parametrize("which", ["critic", "actor", "alpha"])
def test_gradients_reach_only_the_intended_parameters(which: str) -> None:
    loss = make_loss()
    randomise_heads(loss.actor)
    batch = make_batch()
    if which == "critic":
        loss.critic_loss(batch)["loss_critic"].backward()
    elif which == "actor":
        loss.actor_loss(batch)["loss_actor"].backward()
    else:
        log_prob = loss.actor_loss(batch)["log_prob"]
        loss.zero_grad(set_to_none=True)
        loss.alpha_loss(log_prob)["loss_alpha"].backward()
    actor, critic, alpha = grads_of(loss.actor), grads_of(loss.critic), loss.log_alpha.grad
    assert is_silent(grads_of(loss.target_critic))
    if which == "critic":
        assert has_signal(critic) and is_silent(actor) and alpha is None
        trunk_grads = [p.grad for p in loss.critic.members[0][0].project.parameters()]
        assert has_signal(trunk_grads)
    elif which == "actor":
        assert has_signal(actor) and is_silent(critic) and alpha is None
        assert has_signal([p.grad for p in loss.actor.trunk.parameters()])
    else:
        assert is_silent(actor) and is_silent(critic) and alpha is not None and alpha.abs() > 0


def test_actor_loss_returns_detached_log_prob_and_uses_min_q() -> None:
    loss = make_loss()
    out = loss.actor_loss(make_batch())
    assert out["log_prob"].shape == (BATCH,) and not out["log_prob"].requires_grad
    assert torch.isclose(out["entropy"], -out["log_prob"].mean())

    # Swap in a critic whose members have known Q: the loss must use the smaller one.
    class ConstantQ(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.support = loss.critic.support
            self.shift = nn.Parameter(torch.zeros(()))

        def forward(self, obs: Tensor, action: Tensor, frozen: bool = False) -> Tensor:
            assert frozen, "the actor's loss must see the critic frozen"
            logits = torch.full((2, obs.shape[0], ATOMS), -30.0)
            logits[0, :, -1] = 30.0  # Q = +5
            logits[1, :, 5] = 30.0  # Q = -2.5
            return logits + self.shift

        def expected_q(self, logits: Tensor) -> Tensor:
            return (logits.float().softmax(-1) * self.support).sum(-1)

    loss.critic = ConstantQ()
    out = loss.actor_loss(make_batch())
    expected = (loss.alpha * out["log_prob"]).mean() + 2.5
    torch.testing.assert_close(out["loss_actor"], expected, atol=1e-4, rtol=0)


def test_polyak_update_moves_target_by_tau() -> None:
    loss = make_loss(tau=0.05)
    with torch.no_grad():
        for p in loss.critic.parameters():
            p.add_(torch.randn_like(p))
    before = [p.clone() for p in loss.target_critic.parameters()]
    online = [p.clone() for p in loss.critic.parameters()]
    loss.update_target()
    for target, old, new in zip(loss.target_critic.parameters(), before, online, strict=True):
        torch.testing.assert_close(target, old + 0.05 * (new - old))


# --------------------------------------------------------------------------------------------------------------------
# Reward normaliser
# --------------------------------------------------------------------------------------------------------------------


def test_reward_normalizer_hand_computed_values() -> None:
    norm = RewardNormalizer(num_envs=2, gamma=0.5)
    assert norm.normalize(torch.tensor(3.0)) == 3.0  # untouched before any statistics
    norm.update(torch.tensor([1.0, 2.0]), torch.tensor([False, True]))
    # G = [1, 2]; env 1 ended so its return restarts
    torch.testing.assert_close(norm.running_return, torch.tensor([1.0, 0.0]))
    torch.testing.assert_close(norm.var, torch.tensor(0.25))
    norm.update(torch.tensor([1.0, -3.0]), torch.tensor([False, False]))
    # G = [0.5 * 1 + 1, 0.5 * 0 - 3] = [1.5, -3]; all returns seen: {1, 2, 1.5, -3}
    torch.testing.assert_close(norm.running_return, torch.tensor([1.5, -3.0]))
    torch.testing.assert_close(norm.mean, torch.tensor(0.375))
    torch.testing.assert_close(norm.var, torch.tensor(3.921875))  # (0.625^2 + 1.625^2 + 1.125^2 + 3.375^2) / 4
    torch.testing.assert_close(norm.g_max, torch.tensor(3.0))
    torch.testing.assert_close(norm.normalize(torch.tensor(2.0)), torch.tensor(2.0 / math.sqrt(3.921875)))

    # G_max / 5 wins when returns do not vary across envs
    flat = RewardNormalizer(num_envs=3, gamma=0.5)
    flat.update(torch.full((3,), 10.0), torch.zeros(3))
    torch.testing.assert_close(flat.normalize(torch.tensor([4.0, -1.0])), torch.tensor([2.0, -0.5]))

    # and the denominator never reaches zero
    zero = RewardNormalizer(num_envs=2, gamma=0.5, eps=1e-6)
    zero.update(torch.zeros(2), torch.zeros(2))
    torch.testing.assert_close(zero.scale(), torch.tensor(1e-6))
    assert {"running_return", "mean", "var", "count", "g_max"} <= set(zero.state_dict())


def test_reward_normalizer_constant_stream_converges() -> None:
    gamma, reward, steps = 0.9, 1.0, 300
    norm = RewardNormalizer(num_envs=4, gamma=gamma)
    seen = []
    for _ in range(steps):
        norm.update(torch.full((4,), reward), torch.zeros(4))
        seen.append(norm.running_return.clone())
    limit = reward / (1 - gamma)
    torch.testing.assert_close(norm.running_return, torch.full((4,), limit), atol=1e-4, rtol=0)
    returns = torch.cat(seen)
    var = returns.var(correction=0)
    torch.testing.assert_close(norm.var, var, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(norm.g_max, returns.abs().max())
    expected = reward / max(var.sqrt().item(), returns.abs().max().item() / 5)
    torch.testing.assert_close(norm.normalize(torch.tensor(reward)), torch.tensor(expected), atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------------------------------------------------
# Held noise and Zipf spans
# --------------------------------------------------------------------------------------------------------------------


def test_zipf_spans_stay_in_range() -> None:
    cdf = truncated_zipf_cdf(16, 2.0)
    u = torch.cat([torch.tensor([0.0, 1e-9, 0.5, 1 - 1e-7, 0.9999999]), torch.rand(10_000)])
    spans = zipf_spans(u, cdf)
    assert spans.min() >= 1 and spans.max() <= 16
    assert spans[0] == 1


def test_zipf_inverse_cdf_frequencies() -> None:
    max_span, mu, n = 16, 2.0, 400_000
    spans = zipf_spans(torch.rand(n), truncated_zipf_cdf(max_span, mu))
    frequencies = torch.bincount(spans, minlength=max_span + 1)[1:].double() / n
    weights = torch.arange(1, max_span + 1, dtype=torch.float64).pow(-mu)
    pmf = weights / weights.sum()
    assert pmf[0] == pytest.approx(0.6303, abs=1e-3)  # 1 / sum_{k<=16} k^-2
    torch.testing.assert_close(frequencies, pmf, atol=3e-3, rtol=0)  # ~4 sigma at the largest cell


def test_held_noise_is_held_for_the_span_and_resampled_on_done() -> None:
    num_envs, action_dim = 5, 3
    held = HeldNoise(num_envs, action_dim)
    cdf = truncated_zipf_cdf(16, 2.0)
    u = torch.tensor([0.0, 0.7, 0.85, 0.95, 0.999])
    spans = zipf_spans(u, cdf)
    assert spans.tolist() == sorted(spans.tolist()) and spans[0] == 1 and spans[-1] > 4
    no_done = torch.zeros(num_envs, dtype=torch.bool)
    first = held.step(no_done, u)  # the counter starts at zero: everyone draws
    history = [first]
    for _ in range(20):
        history.append(held.step(no_done, u))
    for env in range(num_envs):
        k = int(spans[env])
        for t in range(min(k, 21)):
            assert torch.equal(history[t][env], first[env]), f"env {env} changed noise inside its span at step {t}"
        if k < 21:
            assert not torch.equal(history[k][env], first[env]), f"env {env} kept its noise past its span"
            if 2 * k < 21:  # the redrawn noise is held for another span of the same length
                assert torch.equal(history[2 * k - 1][env], history[k][env])

    # done forces a redraw even in the middle of a long span
    held = HeldNoise(num_envs, action_dim)
    long_u = torch.full((num_envs,), 0.9999)
    start = held.step(no_done, long_u)
    done = torch.tensor([True, False, False, False, False])
    given = torch.randn(num_envs, action_dim)
    after = held.step(done, long_u, given)
    assert torch.equal(after[0], given[0])
    assert torch.equal(after[1:], start[1:])
    assert held.remaining[0] == int(zipf_spans(long_u[:1], cdf)[0]) - 1


# --------------------------------------------------------------------------------------------------------------------
# Optimisers and schedule
# --------------------------------------------------------------------------------------------------------------------


def test_cosine_lr_values() -> None:
    assert cosine_lr(0, 3e-4, 1.5e-4, 500_000) == pytest.approx(3e-4)
    assert cosine_lr(250_000, 3e-4, 1.5e-4, 500_000) == pytest.approx(2.25e-4)
    assert cosine_lr(500_000, 3e-4, 1.5e-4, 500_000) == pytest.approx(1.5e-4)
    assert cosine_lr(900_000, 3e-4, 1.5e-4, 500_000) == pytest.approx(1.5e-4)
    as_tensor = cosine_lr(torch.tensor([0.0, 250_000.0, 500_000.0]), 3e-4, 1.5e-4, 500_000)
    assert isinstance(as_tensor, Tensor)
    torch.testing.assert_close(as_tensor, torch.tensor([3e-4, 2.25e-4, 1.5e-4]))


def test_scheduler_writes_tensor_lr_that_adam_uses() -> None:
    loss = make_loss()
    optimizers = make_flashsac_optimizers(loss, lr=3e-4, lr_final=1.5e-4, total_steps=10)
    groups = [g for opt in (optimizers.actor, optimizers.critic, optimizers.alpha) for g in opt.param_groups]
    assert all(isinstance(g["lr"], Tensor) for g in groups)
    assert isinstance(optimizers.scheduler, CosineLR)
    for _ in range(5):
        optimizers.scheduler.step()
    assert all(g["lr"].item() == pytest.approx(2.25e-4) for g in groups)
    # Adam's first step moves a parameter by about lr: the optimiser really reads the rewritten tensor.
    before = loss.log_alpha.detach().clone()
    loss.log_alpha.grad = torch.ones(())
    optimizers.alpha.step()
    assert (before - loss.log_alpha.detach()).item() == pytest.approx(2.25e-4, rel=1e-3)
    state = optimizers.scheduler.state_dict()
    for _ in range(20):
        optimizers.scheduler.step()
    assert all(g["lr"].item() == pytest.approx(1.5e-4) for g in groups)
    optimizers.scheduler.load_state_dict(state)
    assert all(g["lr"].item() == pytest.approx(2.25e-4) for g in groups)


def test_a_few_steps_reduce_the_critic_loss() -> None:
    loss = make_loss()
    batch = make_batch(BATCH, terminated=True)  # a stationary target: the projected reward
    optimizers = make_flashsac_optimizers(loss, lr=3e-3, lr_final=3e-3)
    losses = []
    for _ in range(40):
        out = loss.critic_loss(batch)
        optimizers.critic.zero_grad(set_to_none=True)
        out["loss_critic"].backward()
        optimizers.critic.step()
        loss.project_weights_()
        loss.update_target()
        losses.append(out["loss_critic"].item())
    assert losses[-1] < 0.7 * losses[0]


def test_bf16_autocast_keeps_distribution_math_in_float32() -> None:
    loss = make_loss()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = loss(make_batch())
        log_prob = loss.actor_loss(make_batch())["log_prob"]
    assert out["loss_critic"].dtype == torch.float32 and log_prob.dtype == torch.float32
    assert all(torch.isfinite(out[key]) for key in loss.out_keys)


def test_the_frozen_critic_is_the_eval_mode_critic_with_gradients_to_its_inputs_only() -> None:
    loss = make_loss()
    critic_obs, action = torch.randn(BATCH, CRITIC_OBS), torch.rand(BATCH, ACT, requires_grad=True)
    loss.critic(critic_obs * 3 + 1, action.detach())  # running statistics away from their initial values
    running = {k: v.clone() for k, v in loss.critic.named_buffers()}
    frozen = loss.critic(critic_obs, action, frozen=True)
    frozen.square().sum().backward()
    assert loss.critic.training and all(p.grad is None for p in loss.critic.parameters())
    for name, value in loss.critic.named_buffers():
        assert torch.equal(value, running[name]), name
    loss.critic.eval()
    plain = loss.critic(critic_obs, action)
    (plain_grad,) = torch.autograd.grad(plain.square().sum(), action)
    assert torch.equal(frozen, plain) and torch.equal(action.grad, plain_grad)


def test_actor_sees_the_critic_on_running_statistics() -> None:
    """In training mode BatchNorm would standardise a batch of policy actions by its own statistics, hiding the
    policy's spread from Q; the actor loss must score each sample on the critic's running statistics."""
    loss = make_loss()
    critic_obs, action = torch.randn(BATCH, CRITIC_OBS), torch.rand(BATCH, ACT) * 2 - 1
    loss.critic(critic_obs * 3 + 1, action)  # move the running statistics away from their initial values
    running = {k: v.clone() for k, v in loss.critic.named_buffers()}
    whole = loss._frozen_critic(critic_obs, action)
    half = loss._frozen_critic(critic_obs[: BATCH // 2], action[: BATCH // 2])
    torch.testing.assert_close(whole[:, : BATCH // 2], half)  # per-sample, not batch-dependent
    assert loss.critic.training
    for name, value in loss.critic.named_buffers():
        torch.testing.assert_close(value, running[name])


# --------------------------------------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------------------------------------


def test_every_algorithm_has_a_one_line_summary() -> None:
    assert all(settings.summary and "\n" not in settings.summary for settings in ALGORITHMS.values())
