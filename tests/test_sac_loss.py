"""FastSAC networks and loss (torchrl_ext): shapes, the C51 projection, gradient routing, targets, symmetry and
normalisation, on small CPU-sized problems."""

from __future__ import annotations

import math

import pytest
import torch
from tensordict import TensorDict
from torch.utils._python_dispatch import TorchDispatchMode
from torchrl.data import LazyTensorStorage, ReplayBuffer

from torchrl_ext.networks import ALIGNMENT, Actor, EnsembleCritic, EnsembleLinear, RunningNorm
from torchrl_ext.sac import SACLoss, Symmetry, make_optimizers, project_distribution, target_entropy_from_ratio
from unilab.core.spec import Mirror

OBS, CRITIC_OBS, ACT, BATCH = 10, 13, 4, 64
ATOMS, V_MIN, V_MAX = 21, -5.0, 5.0
SUPPORT = torch.linspace(V_MIN, V_MAX, ATOMS)


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


def pair_swap_mirror(dim: int) -> Mirror:
    """Swaps features (0,1), (2,3), ... with a sign shared inside each pair, so applying it twice is the identity."""
    perm = torch.arange(dim)
    for i in range(0, dim - 1, 2):
        perm[i], perm[i + 1] = i + 1, i
    sign = torch.where((torch.arange(dim) // 2) % 2 == 0, 1.0, -1.0)
    return Mirror(tuple(perm.tolist()), tuple(sign.tolist()))


def make_symmetry() -> Symmetry:
    return Symmetry(pair_swap_mirror(OBS), pair_swap_mirror(CRITIC_OBS), pair_swap_mirror(ACT))


def make_loss(mirror: Symmetry | None = None, normalize_obs: bool = False, **kwargs) -> SACLoss:
    actor = Actor(OBS, ACT, hidden=(32, 16), normalize_obs=normalize_obs)
    critic = EnsembleCritic(
        CRITIC_OBS, ACT, hidden=(32, 16), num_atoms=ATOMS, v_min=V_MIN, v_max=V_MAX, normalize_obs=normalize_obs
    )
    return SACLoss(actor, critic, target_entropy=target_entropy_from_ratio(ACT, 0.5), mirror=mirror, **kwargs)


def make_batch(
    batch: int = BATCH,
    reward: float | None = None,
    terminated: bool | None = None,
    truncated: bool = False,
) -> TensorDict:
    rewards = torch.randn(batch, 1) if reward is None else torch.full((batch, 1), reward)
    dones = torch.rand(batch, 1) < 0.2 if terminated is None else torch.full((batch, 1), terminated)
    return TensorDict(
        {
            "policy": torch.randn(batch, OBS),
            "critic": torch.randn(batch, CRITIC_OBS),
            "action": torch.rand(batch, ACT) * 2 - 1,
            "next": {
                "policy": torch.randn(batch, OBS),
                "critic": torch.randn(batch, CRITIC_OBS),
                "reward": rewards,
                "terminated": dones,
                "truncated": torch.full((batch, 1), truncated),
            },
        },
        batch_size=[batch],
    )


def grads_are_none(module: torch.nn.Module) -> bool:
    return all(p.grad is None for p in module.parameters())


def grads_are_set(module: torch.nn.Module) -> bool:
    grads = [p.grad for p in module.parameters()]
    return all(g is not None for g in grads) and any(g.abs().sum() > 0 for g in grads)


# ---------------------------------------------------------------- shapes


def test_network_shapes() -> None:
    loss = make_loss()
    obs, critic_obs = torch.randn(BATCH, OBS), torch.randn(BATCH, CRITIC_OBS)
    mean, log_std = loss.actor.distribution(obs)
    action, log_prob = loss.actor.sample(obs)
    assert mean.shape == log_std.shape == action.shape == (BATCH, ACT)
    assert log_prob.shape == (BATCH,)
    assert loss.actor(obs).shape == (BATCH, ACT)
    logits = loss.critic(critic_obs, action)
    assert logits.shape == (2, BATCH, ATOMS)
    assert loss.critic.expected_q(logits).shape == (2, BATCH)
    assert loss.critic(torch.randn(3, 5, CRITIC_OBS), torch.randn(3, 5, ACT)).shape == (2, 3, 5, ATOMS)


def test_critic_members_are_independent() -> None:
    critic = EnsembleCritic(CRITIC_OBS, ACT, hidden=(32, 16), num_atoms=ATOMS)
    obs, action = torch.randn(8, CRITIC_OBS), torch.randn(8, ACT)
    logits = critic(obs, action)
    assert not torch.allclose(logits[0], logits[1])
    with torch.no_grad():
        critic.net[0].weight[1].add_(1.0)
    changed = critic(obs, action)
    torch.testing.assert_close(changed[0], logits[0])
    assert not torch.allclose(changed[1], logits[1])


def test_an_ensemble_layer_is_each_members_own_affine_map() -> None:
    layer = EnsembleLinear(2, 6, 4)
    x = torch.randn(2, 5, 6)
    out = layer(x)
    for member in range(2):
        torch.testing.assert_close(out[member], x[member] @ layer.weight[member] + layer.bias[member])
    with torch.autocast("cpu", torch.bfloat16):  # the bias joins the product in the product's precision
        assert layer(x).dtype == torch.bfloat16


def test_the_critic_s_zero_columns_leave_its_map_unchanged() -> None:
    critic = EnsembleCritic(CRITIC_OBS, ACT, hidden=(32, 16), num_atoms=ATOMS)
    assert (CRITIC_OBS + ACT + critic.input_pad) % ALIGNMENT == 0 and critic.input_pad > 0
    obs, action = torch.randn(3, 5, CRITIC_OBS), torch.randn(3, 5, ACT)
    x = torch.cat([obs, action], dim=-1).reshape(1, 15, -1).expand(2, -1, -1)
    for layer in critic.net:  # the unpadded widths, each layer's map written out
        x = torch.bmm(x, layer.weight) + layer.bias if isinstance(layer, EnsembleLinear) else layer(x)
    torch.testing.assert_close(critic(obs, action), x.reshape(2, 3, 5, ATOMS))
    assert critic.net[0].weight.shape == (2, CRITIC_OBS + ACT, 32)  # checkpoints keep the parameter's shape


class _ProductShapes(TorchDispatchMode):
    """Records the operand shapes of every batched matmul dispatched, backward ones included."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        if func is torch.ops.aten.bmm.default:
            self.shapes += [tuple(args[0].shape), tuple(args[1].shape)]
        return func(*args, **(kwargs or {}))


def test_the_critic_s_first_layer_multiplies_at_an_aligned_width() -> None:
    """Forward and both gradients of the first layer: no operand keeps the unaligned input width, so no compiler
    has a padding of its own to decide."""
    critic = EnsembleCritic(CRITIC_OBS, ACT, hidden=(32, 16), num_atoms=ATOMS)
    action = torch.randn(BATCH, ACT, requires_grad=True)
    with _ProductShapes() as products:
        critic(torch.randn(BATCH, CRITIC_OBS), action).sum().backward()
    widths = {width for shape in products.shapes for width in shape}
    assert CRITIC_OBS + ACT not in widths
    assert CRITIC_OBS + ACT + critic.input_pad in widths
    assert critic.net[0].weight.grad is not None and action.grad is not None


def test_loss_outputs() -> None:
    loss = make_loss()
    out = loss(make_batch())
    assert set(out.keys()) == set(loss.out_keys)
    for key in loss.out_keys:
        assert out[key].shape == ()
        assert torch.isfinite(out[key])
    actor_out = loss.actor_loss(make_batch())
    assert actor_out["log_prob"].shape == (BATCH,)
    assert loss.target_distribution(loss.read_transition(make_batch())).shape == (2, BATCH, ATOMS)


def test_bf16_autocast_keeps_distributions_in_float32() -> None:
    loss = make_loss()
    batch = make_batch()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = loss(batch)
        target = loss.target_distribution(loss.read_transition(batch))
    assert all(value.dtype == torch.float32 and torch.isfinite(value) for value in out.values())
    assert target.dtype == torch.float32
    torch.testing.assert_close(target.sum(-1), torch.ones(2, BATCH))


# ---------------------------------------------------------------- C51 projection


def test_projection_is_a_distribution() -> None:
    atoms = torch.empty(2, 32, ATOMS).uniform_(-8.0, 8.0)
    probs = torch.randn(2, 32, ATOMS).softmax(-1)
    projected = project_distribution(atoms, probs, V_MIN, V_MAX)
    assert projected.shape == (2, 32, ATOMS)
    assert (projected >= 0).all()
    torch.testing.assert_close(projected.sum(-1), torch.ones(2, 32))


def test_projection_onto_own_support_is_identity() -> None:
    probs = torch.randn(5, ATOMS).softmax(-1)
    torch.testing.assert_close(project_distribution(SUPPORT, probs, V_MIN, V_MAX), probs)


def test_projection_point_mass_on_atom() -> None:
    probs = torch.randn(1, ATOMS).softmax(-1)
    projected = project_distribution(SUPPORT[7].expand(1, ATOMS), probs, V_MIN, V_MAX)
    torch.testing.assert_close(projected, torch.nn.functional.one_hot(torch.tensor([7]), ATOMS).float())


def test_projection_splits_halfway_value_evenly() -> None:
    halfway = (SUPPORT[3] + SUPPORT[4]) / 2
    projected = project_distribution(halfway.expand(1, ATOMS), torch.randn(1, ATOMS).softmax(-1), V_MIN, V_MAX)
    expected = torch.zeros(1, ATOMS)
    expected[0, 3] = expected[0, 4] = 0.5
    torch.testing.assert_close(projected, expected)


def test_projection_clamps_out_of_range_values() -> None:
    probs = torch.randn(2, ATOMS).softmax(-1)
    atoms = torch.stack([torch.full((ATOMS,), V_MAX + 3.0), torch.full((ATOMS,), V_MIN - 100.0)])
    projected = project_distribution(atoms, probs, V_MIN, V_MAX)
    torch.testing.assert_close(projected[0, -1], torch.tensor(1.0))
    torch.testing.assert_close(projected[1, 0], torch.tensor(1.0))


# ---------------------------------------------------------------- bootstrap


def test_terminated_cuts_bootstrap() -> None:
    loss = make_loss()
    reward = SUPPORT[12].item()
    target = loss.target_distribution(loss.read_transition(make_batch(reward=reward, terminated=True)))
    torch.testing.assert_close(target, torch.nn.functional.one_hot(torch.tensor(12), ATOMS).float().expand_as(target))
    bootstrapped = loss.target_distribution(loss.read_transition(make_batch(reward=reward, terminated=False)))
    assert (bootstrapped.amax(-1) < 0.9).all()


def test_truncated_does_not_cut_bootstrap() -> None:
    loss = make_loss()
    batch = make_batch(terminated=False)
    truncated = batch.clone()
    truncated["next", "truncated"] = torch.ones(BATCH, 1, dtype=torch.bool)
    torch.manual_seed(1)
    expected = loss.target_distribution(loss.read_transition(batch))
    torch.manual_seed(1)
    torch.testing.assert_close(loss.target_distribution(loss.read_transition(truncated)), expected)
    terminated = batch.clone()
    terminated["next", "terminated"] = torch.ones(BATCH, 1, dtype=torch.bool)
    torch.manual_seed(1)
    assert not torch.allclose(loss.target_distribution(loss.read_transition(terminated)), expected)


def test_target_mean_is_soft_bellman_backup() -> None:
    # With every shifted atom inside the support, the projection preserves the mean, so the target's mean must be
    # gamma * (E_target[z] - alpha * log pi(a'|s')) for zero reward.
    loss = make_loss(gamma=0.9, alpha_init=0.02)
    transition = loss.read_transition(make_batch(reward=0.0, terminated=False))
    torch.manual_seed(1)
    target = loss.target_distribution(transition)
    torch.manual_seed(1)
    next_action, next_log_prob = loss.actor.sample(transition.next_observation)
    next_q = loss.critic.expected_q(loss.target_critic(transition.next_critic_observation, next_action))
    torch.testing.assert_close((target * SUPPORT).sum(-1), 0.9 * (next_q - 0.02 * next_log_prob))


def test_each_member_bootstraps_from_its_own_target() -> None:
    loss = make_loss(gamma=1.0)
    batch = make_batch(reward=0.0, terminated=False)
    with torch.no_grad():
        loss.target_critic.net[-1].bias[0].add_(torch.linspace(-3.0, 3.0, ATOMS))
    torch.manual_seed(1)
    target = loss.target_distribution(loss.read_transition(batch))
    with torch.no_grad():
        loss.target_critic.net[-1].bias[0].zero_()
    torch.manual_seed(1)
    reset = loss.target_distribution(loss.read_transition(batch))
    assert not torch.allclose(target[0], reset[0])
    torch.testing.assert_close(target[1], reset[1])


# ---------------------------------------------------------------- gradient routing


def test_the_frozen_critic_is_the_critic_with_gradients_to_its_inputs_only() -> None:
    critic = EnsembleCritic(CRITIC_OBS, ACT, hidden=(32, 16), num_atoms=ATOMS, normalize_obs=True)
    critic.obs_norm.update(torch.randn(32, CRITIC_OBS) * 2 + 1)
    obs, action = torch.randn(8, CRITIC_OBS), torch.randn(8, ACT, requires_grad=True)
    frozen = critic(obs, action, frozen=True)
    frozen.square().sum().backward()
    assert grads_are_none(critic)
    plain = critic(obs, action)
    (plain_grad,) = torch.autograd.grad(plain.square().sum(), action)
    assert torch.equal(frozen, plain) and torch.equal(action.grad, plain_grad)


def test_the_frozen_actor_is_the_actor_with_gradients_to_its_inputs_only() -> None:
    actor = Actor(OBS, ACT, hidden=(32, 16), normalize_obs=True)
    with torch.no_grad():
        for head in (actor.mean_head, actor.log_std_head):
            head.weight.normal_(0, 0.3)
    actor.obs_norm.update(torch.randn(32, OBS) * 2 + 1)
    obs, noise = torch.randn(8, OBS, requires_grad=True), torch.randn(8, ACT)
    action, log_prob = actor.sample(obs, noise, frozen=True)
    (action.sum() + log_prob.sum()).backward()
    assert grads_are_none(actor) and obs.grad is not None
    want_action, want_log_prob = actor.sample(obs, noise)
    assert torch.equal(action, want_action) and torch.equal(log_prob, want_log_prob)


def test_critic_loss_only_reaches_critic() -> None:
    loss = make_loss()
    loss.critic_loss(make_batch())["loss_critic"].backward()
    assert grads_are_set(loss.critic)
    assert grads_are_none(loss.actor)
    assert grads_are_none(loss.target_critic)
    assert loss.log_alpha.grad is None


def test_actor_loss_only_reaches_actor() -> None:
    loss = make_loss()
    loss.actor_loss(make_batch())["loss_actor"].backward()
    assert grads_are_set(loss.actor.mean_head) and grads_are_set(loss.actor.log_std_head)
    assert grads_are_none(loss.critic)
    assert grads_are_none(loss.target_critic)
    assert loss.log_alpha.grad is None


def test_alpha_loss_only_reaches_log_alpha() -> None:
    loss = make_loss()
    log_prob = loss.actor_loss(make_batch())["log_prob"]
    loss.alpha_loss(log_prob)["loss_alpha"].backward()
    assert loss.log_alpha.grad is not None
    assert grads_are_none(loss.actor)
    assert grads_are_none(loss.critic)


def test_alpha_loss_raises_temperature_when_entropy_is_below_target() -> None:
    loss = make_loss(alpha_init=0.5)
    log_prob = torch.full((BATCH,), -loss.target_entropy + 1.0)  # entropy 1 nat below target
    out = loss.alpha_loss(log_prob)
    torch.testing.assert_close(out["loss_alpha"], torch.tensor(-0.5))
    out["loss_alpha"].backward()
    assert loss.log_alpha.grad < 0


# ---------------------------------------------------------------- target network


def test_polyak_update_moves_target_by_tau() -> None:
    loss = make_loss(tau=0.25)
    for online, target in zip(loss.critic.parameters(), loss.target_critic.parameters(), strict=True):
        torch.testing.assert_close(online, target)
    with torch.no_grad():
        for param in loss.critic.parameters():
            param.add_(torch.randn_like(param))
    before = [p.clone() for p in loss.target_critic.parameters()]
    loss.update_target()
    for old, online, new in zip(before, loss.critic.parameters(), loss.target_critic.parameters(), strict=True):
        torch.testing.assert_close(new, 0.75 * old + 0.25 * online)


def test_target_is_not_a_loss_parameter() -> None:
    loss = make_loss()
    own = {id(p) for p in loss.parameters()}
    assert not own & {id(p) for p in loss.target_critic.parameters()}
    assert any(key.startswith("_target_critic.") for key in loss.state_dict())


# ---------------------------------------------------------------- actor distribution


def test_actor_starts_centred_with_mid_range_std() -> None:
    mean, log_std = Actor(OBS, ACT, hidden=(32, 16)).distribution(torch.randn(BATCH, OBS))
    torch.testing.assert_close(mean, torch.zeros(BATCH, ACT))
    torch.testing.assert_close(log_std, torch.full((BATCH, ACT), -2.5))


def test_actor_bounds_hold_for_extreme_inputs() -> None:
    actor = Actor(OBS, ACT, hidden=(32, 16))
    with torch.no_grad():
        for head in (actor.mean_head, actor.log_std_head):
            head.weight.normal_(std=100.0)
    obs = torch.randn(512, OBS) * 1e4
    mean, log_std = actor.distribution(obs)
    assert log_std.min() >= -5.0 and log_std.max() <= 0.0
    assert log_std.min() < -4.99 and log_std.max() > -0.01
    assert mean.abs().max() <= 10.0
    action, log_prob = actor.sample(obs)
    assert action.abs().max() <= 1.0
    assert torch.isfinite(log_prob).all()


def test_log_prob_matches_tanh_transformed_normal() -> None:
    actor = Actor(OBS, ACT, hidden=(32, 16))
    with torch.no_grad():
        for head in (actor.mean_head, actor.log_std_head):
            head.weight.normal_(std=0.3)
    obs = torch.randn(BATCH, OBS)
    torch.manual_seed(3)
    action, log_prob = actor.sample(obs)
    mean, log_std = actor.distribution(obs)
    torch.manual_seed(3)
    pre_tanh = mean + torch.randn_like(mean) * log_std.exp()
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(mean, log_std.exp()), [torch.distributions.TanhTransform()]
    ).log_prob(torch.tanh(pre_tanh))
    torch.testing.assert_close(action, torch.tanh(pre_tanh))
    torch.testing.assert_close(log_prob, reference.sum(-1), atol=2e-3, rtol=1e-3)


# ---------------------------------------------------------------- symmetry


def test_mirror_twice_is_identity() -> None:
    for dim in (OBS, CRITIC_OBS, ACT):
        mirror = pair_swap_mirror(dim)
        x = torch.randn(7, dim)
        assert not torch.allclose(mirror(x), x)
        torch.testing.assert_close(mirror(mirror(x)), x)


def test_the_loss_reflects_bit_for_bit_like_the_mirrors_it_was_given() -> None:
    symmetry = make_symmetry()
    loss = make_loss(mirror=symmetry)
    for space in ("observation", "critic_observation", "action"):
        mirror = getattr(symmetry, space)
        x = torch.randn(7, 3, len(mirror.index))
        by_definition = x[..., list(mirror.index)] * torch.tensor(mirror.sign)
        assert torch.equal(loss.mirror(space)(x), mirror(x)) and torch.equal(mirror(x), by_definition)
        assert mirror(x.double()).dtype == torch.float64  # a Mirror keeps its input's dtype


def test_mirror_doubles_the_batch() -> None:
    symmetry = make_symmetry()
    loss = make_loss(mirror=symmetry)
    batch = make_batch()
    transition = loss.read_transition(batch)
    assert all(value.shape[0] == 2 * BATCH for value in transition)
    torch.testing.assert_close(transition.observation[BATCH:], symmetry.observation(batch["policy"]))
    mirrored_next_critic = symmetry.critic_observation(batch["next", "critic"])
    torch.testing.assert_close(transition.next_critic_observation[BATCH:], mirrored_next_critic)
    torch.testing.assert_close(transition.action[BATCH:], symmetry.action(batch["action"]))
    torch.testing.assert_close(transition.reward[BATCH:], transition.reward[:BATCH])

    seen: list[int] = []
    loss.critic.register_forward_hook(lambda _module, args, _out: seen.append(args[0].shape[0]))
    loss.critic_loss(batch)
    assert seen == [2 * BATCH]
    assert loss.actor_loss(batch)["log_prob"].shape == (2 * BATCH,)
    assert torch.isfinite(loss(batch)["loss_critic"])


# ---------------------------------------------------------------- observation normalisation


def test_running_norm_normalises() -> None:
    data = 3.0 + 2.0 * torch.randn(4096, 5)
    norm = RunningNorm(5)
    for chunk in data.split(1000):  # uneven chunks exercise the merge
        norm.update(chunk)
    var, mean = torch.var_mean(data, dim=0, correction=0)
    torch.testing.assert_close(norm.mean, mean, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(norm.var, var, rtol=1e-4, atol=1e-4)
    assert norm.count == 4096
    normalised = norm(data)
    torch.testing.assert_close(normalised.mean(0), torch.zeros(5), atol=1e-3, rtol=0)
    torch.testing.assert_close(normalised.std(0), torch.ones(5), atol=1e-3, rtol=0)
    torch.testing.assert_close(norm.mean, torch.full((5,), 3.0), atol=0.15, rtol=0)
    torch.testing.assert_close(norm.var.sqrt(), torch.full((5,), 2.0), atol=0.15, rtol=0)


def test_running_norm_state_dict_and_clip() -> None:
    norm = RunningNorm(5, clip=1.0)
    norm.update(3.0 + 2.0 * torch.randn(256, 5))
    assert {"mean", "var", "count"} <= set(norm.state_dict())
    restored = RunningNorm(5, clip=1.0)
    restored.load_state_dict(norm.state_dict())
    x = 3.0 + 10.0 * torch.randn(64, 5)
    torch.testing.assert_close(restored(x), norm(x))
    assert norm(x).abs().max() <= 1.0


def test_networks_apply_their_normaliser() -> None:
    loss = make_loss(normalize_obs=True)
    assert "obs_norm.mean" in loss.actor.state_dict() and "obs_norm.var" in loss.critic.state_dict()
    assert loss.target_critic.obs_norm is loss.critic.obs_norm
    batch = make_batch()
    batch["policy"] = 5.0 + 3.0 * batch["policy"]
    loss.update_normalizers(batch)
    assert loss.actor.obs_norm.count == BATCH and loss.critic.obs_norm.count == BATCH
    torch.testing.assert_close(loss.actor.obs_norm.mean, batch["policy"].mean(0))

    plain = Actor(OBS, ACT, hidden=(32, 16))
    with torch.no_grad():
        loss.actor.mean_head.weight.normal_()
    plain.load_state_dict({k: v for k, v in loss.actor.state_dict().items() if not k.startswith("obs_norm")})
    obs = batch["policy"]
    torch.testing.assert_close(loss.actor(obs), plain(loss.actor.obs_norm(obs)))
    assert not torch.allclose(loss.actor(obs), plain(obs))


def test_symmetric_normaliser_sees_mirrored_data() -> None:
    loss = make_loss(mirror=make_symmetry(), normalize_obs=True)
    loss.update_normalizers(make_batch())
    assert loss.actor.obs_norm.count == 2 * BATCH
    mirror = loss.mirror("observation")
    torch.testing.assert_close(mirror(loss.actor.obs_norm.mean), loss.actor.obs_norm.mean)


# ---------------------------------------------------------------- keys and integration


def test_set_keys_renames_inputs() -> None:
    loss = make_loss()
    loss.set_keys(observation="obs", next_observation=("next", "obs"))
    assert "obs" in loss.in_keys and ("next", "obs") in loss.in_keys and "policy" not in loss.in_keys
    batch = make_batch()
    batch.rename_key_("policy", "obs")
    batch.rename_key_(("next", "policy"), ("next", "obs"))
    assert torch.isfinite(loss(batch)["loss_actor"])
    with pytest.raises(ValueError):
        loss.set_keys(not_a_key="x")


def test_loss_on_replay_buffer_sample() -> None:
    buffer = ReplayBuffer(storage=LazyTensorStorage(256), batch_size=32)
    buffer.extend(make_batch(200))
    sample = buffer.sample()
    loss = make_loss()
    out = loss(sample)
    (out["loss_critic"] + out["loss_actor"] + out["loss_alpha"]).backward()
    assert grads_are_set(loss.critic)
    assert all(torch.isfinite(p.grad).all() for p in loss.parameters() if p.grad is not None)


def test_make_optimizers_splits_parameters() -> None:
    loss = make_loss()
    optimizers = make_optimizers(loss)
    groups = {name: opt.param_groups[0] for name, opt in optimizers._asdict().items()}
    assert {id(p) for p in groups["actor"]["params"]} == {id(p) for p in loss.actor.parameters()}
    assert {id(p) for p in groups["critic"]["params"]} == {id(p) for p in loss.critic.parameters()}
    assert groups["alpha"]["params"] == [loss.log_alpha]
    assert groups["actor"]["weight_decay"] == groups["critic"]["weight_decay"] == 1e-3
    assert groups["alpha"]["weight_decay"] == 0.0
    assert all(g["betas"] == (0.9, 0.95) and g["lr"] == 3e-4 and not g["capturable"] for g in groups.values())


def test_target_entropy_from_ratio() -> None:
    assert target_entropy_from_ratio(29, 0.5) == -14.5
    assert target_entropy_from_ratio(29, 0.0) == 0.0


def test_critic_learns_constant_terminal_reward() -> None:
    loss = make_loss()
    optimizer = make_optimizers(loss, lr=1e-2).critic
    batch = make_batch(reward=1.0, terminated=True)
    losses, q_means = [], []
    for _ in range(40):
        out = loss.critic_loss(batch)
        optimizer.zero_grad()
        out["loss_critic"].backward()
        optimizer.step()
        loss.update_target()
        losses.append(out["loss_critic"].item())
        q_means.append(out["q_mean"].item())
    assert losses[-1] < 0.05 * losses[0]
    assert math.isclose(q_means[-1], 1.0, abs_tol=0.05)


@pytest.mark.gpu
def test_update_is_sync_free_and_graph_capturable() -> None:
    device = torch.device("cuda")
    loss = make_loss(mirror=make_symmetry(), normalize_obs=True).to(device)
    optimizers = make_optimizers(loss)
    batch = make_batch().to(device)

    def update() -> torch.Tensor:
        loss.update_normalizers(batch)
        for optimizer in optimizers:
            optimizer.zero_grad(set_to_none=True)
        critic_loss = loss.critic_loss(batch)["loss_critic"]
        critic_loss.backward()
        optimizers.critic.step()
        actor = loss.actor_loss(batch)
        actor["loss_actor"].backward()
        optimizers.actor.step()
        loss.alpha_loss(actor["log_prob"])["loss_alpha"].backward()
        optimizers.alpha.step()
        loss.update_target()
        return critic_loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        update()  # optimiser state is created on the first step
        torch.cuda.set_sync_debug_mode("error")
        try:
            update()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    torch.cuda.current_stream().wait_stream(side)

    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = update()
    before = [p.clone() for p in loss.target_critic.parameters()]
    alpha_before = loss.log_alpha.detach().clone()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert torch.isfinite(captured)
    assert any(not torch.equal(old, new) for old, new in zip(before, loss.target_critic.parameters(), strict=True))
    assert not torch.equal(alpha_before, loss.log_alpha.detach())
