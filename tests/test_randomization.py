"""Domain randomisation: each event draws what it should, within its range, and only for the envs it resets;
latency delays the targets by whole substeps (and 0 is the undelayed step, bit for bit); a randomisation term
works as an interval event; impossible ranges are refused in one line naming the field."""

from __future__ import annotations

import dataclasses
import itertools

import pytest
import torch

from unilab.context import ACTION_DELAY
from unilab.core.rng import advance, make_rng
from unilab.envs.functional import FunctionalEnv
from unilab.managers.terms import EventTerm
from unilab.mdp import events, randomization
from unilab.robots import g1
from unilab.sim import SimConfig
from unilab.tasks.randomization import Randomization, randomize
from unilab.tasks.registry import make_functional_env, make_task

RANGES = Randomization(
    friction=(0.3, 1.2),
    link_mass_scale=(0.8, 1.2),
    payload_kg=(1.0, 3.0),
    com_offset_m=0.05,
    motor_strength=(0.8, 1.2),
    pd_gains=(0.9, 1.1),
    latency_s=(0.0, 0.02),
)
PARAMS = ("geom_friction", "body_mass", "body_ipos", "body_inertia", "actuator_strength", "actuator_kp")


def randomized_env(ranges: Randomization, sim: str = "mujoco", num_envs: int = 4, **overrides) -> FunctionalEnv:
    """``g1_walk_flat`` with ``ranges`` applied, built the way the eval suites build theirs."""
    config = randomize(make_task("g1_walk_flat", **overrides), ranges)
    return make_functional_env(
        "g1_walk_flat", sim=sim, num_envs=num_envs, events=config.events, physics=config.physics, **overrides
    )


@pytest.fixture(scope="module")
def env() -> FunctionalEnv:
    return randomized_env(RANGES)


def test_a_reset_draws_every_parameter_within_its_range(env: FunctionalEnv) -> None:
    state = env.reset(make_rng(0))
    sim, ctx = state["sim"], env.ctx
    friction = sim["geom_friction"]
    assert torch.equal(friction[..., 1:], ctx.default_geom_friction[..., 1:].expand_as(friction[..., 1:]))
    assert (friction[..., 0] == friction[:, :1, 0]).all(), "one sliding friction per env, on every geom"
    assert friction[:, 0, 0].min() >= 0.3 and friction[:, 0, 0].max() <= 1.2 and friction[:, 0, 0].unique().numel() > 1

    torso = ctx.body_ids[g1.TORSO_BODY]
    nominal = ctx.default_body_mass
    scale = sim["body_mass"] / nominal.clamp_min(1e-9)
    links = [i for i in range(1, nominal.shape[0]) if i != torso]
    assert scale[:, links].min() >= 0.8 and scale[:, links].max() <= 1.2
    assert sim["body_mass"][:, 0].eq(0).all()
    torso_mass = sim["body_mass"][:, torso]
    assert torso_mass.min() >= 0.8 * nominal[torso] + 1.0 and torso_mass.max() <= 1.2 * nominal[torso] + 3.0
    ratio = sim["body_inertia"][:, 1:] / ctx.default_body_inertia[1:]
    torch.testing.assert_close(ratio, scale[:, 1:].unsqueeze(-1).expand_as(ratio))

    shift = sim["body_ipos"] - ctx.default_body_ipos
    assert shift[:, torso].abs().max() <= 0.05 and shift[:, torso].abs().min() > 0
    assert not shift[:, links].any(), "only the payload body's centre of mass moves"

    strength = sim["actuator_strength"]
    assert strength.min() >= 0.8 and strength.max() <= 1.2 and strength[0].unique().numel() == env.action_dim
    kp_scale = sim["actuator_kp"] / ctx.default_kp
    assert kp_scale.min() >= 0.9 - 1e-6 and kp_scale.max() <= 1.1 + 1e-6
    delay = state["env", ACTION_DELAY]
    assert set(delay.tolist()) <= {0.0, 1.0, 2.0, 3.0}


def test_a_masked_reset_redraws_only_the_masked_envs(env: FunctionalEnv) -> None:
    before = env.reset(make_rng(1))
    mask = torch.tensor([True, False, True, False])
    after = env.reset_where(before, mask, make_rng(2))
    for name in PARAMS:
        old, new = before["sim", name], after["sim", name]
        assert torch.equal(new[~mask], old[~mask]), name
        assert all(not torch.equal(new[i], old[i]) for i in (0, 2)), name
    old, new = before["env", ACTION_DELAY], after["env", ACTION_DELAY]
    assert torch.equal(new[~mask], old[~mask])


def test_draws_are_the_same_on_both_backends() -> None:
    """The events are torch code over the state: the backends see the same parameters from the same seed."""
    states = {sim: randomized_env(RANGES, sim=sim, num_envs=2).reset(make_rng(3)) for sim in ("mujoco", "mjwarp")}
    for name in PARAMS:
        assert torch.equal(states["mujoco"]["sim", name], states["mjwarp"]["sim", name]), name


def test_pushes_have_a_speed_within_their_range(env: FunctionalEnv) -> None:
    state = env.reset(make_rng(4))
    pushed = events.push_root(state, env.ctx, torch.ones(4, dtype=torch.bool), make_rng(5), speed_range=(0.5, 1.0))
    kick = pushed["sim", "qvel"][:, :2] - state["sim", "qvel"][:, :2]
    speed = torch.linalg.vector_norm(kick, dim=-1)
    assert speed.min() >= 0.5 - 1e-5 and speed.max() <= 1.0 + 1e-5
    assert torch.equal(pushed["sim", "qvel"][:, 2:], state["sim", "qvel"][:, 2:])


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_latency_zero_is_the_undelayed_step_bit_for_bit(sim: str) -> None:
    delayed = randomized_env(Randomization(latency_s=(0.0, 0.0)), sim=sim, num_envs=3, episode_length_s=0.1)
    plain = make_functional_env("g1_walk_flat", sim=sim, num_envs=3, episode_length_s=0.1)
    rng = make_rng(6)
    a, b = delayed.reset(rng), plain.reset(rng)
    gen = torch.Generator().manual_seed(0)
    for k in range(1, 8):  # through an auto-reset
        action = torch.rand(3, 29, generator=gen) * 2 - 1
        a, ta = delayed.step(a, action, advance(rng, k))
        b, tb = plain.step(b, action, advance(rng, k))
        assert not a["env", ACTION_DELAY].any()
        for key in b.keys(True, True):
            assert torch.equal(a[key], b[key]), key
        for key in tb.keys(True, True):
            assert torch.equal(ta[key], tb[key]), key


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_a_delay_of_one_substep_applies_the_previous_targets_first(sim: str) -> None:
    """One substep late (1/150 s): the first substep still holds the previous action's targets, then the new."""
    env = randomized_env(Randomization(latency_s=(0.0066, 0.0067)), sim=sim, num_envs=2)
    rng = make_rng(7)
    state = env.reset(rng)
    assert state["env", ACTION_DELAY].tolist() == [1.0, 1.0]
    first, second = (torch.rand(2, 29, generator=torch.Generator().manual_seed(s)) * 2 - 1 for s in (1, 2))
    state, _ = env.step(state, first, advance(rng, 1))
    physics = {name: value.clone() for name, value in state["sim"].items()}
    after, _ = env.step(state, second, advance(rng, 2))
    scale = env.task.action.params["scale"]
    targets = [env.ctx.default_joint_pos + scale * a.clamp(-1, 1) for a in (first, second, second)]
    env.sim.step_(physics, torch.stack(targets))
    for name in ("qpos", "qvel", "sensordata"):
        assert torch.equal(after["sim", name], physics[name]), name


def test_a_randomisation_term_works_as_an_interval_event() -> None:
    """Friction redrawn every control step during the episode; the step stays pure."""
    config = make_task("g1_walk_flat")
    slippery = EventTerm(randomization.set_friction, {"friction_range": (0.1, 1.0)}, interval_s=(0.02, 0.02))
    env = make_functional_env(
        "g1_walk_flat",
        sim="mujoco",
        num_envs=2,
        events={**config.events, "friction": slippery},
        physics=dataclasses.replace(config.physics, per_world=("geom_friction",)),
    )
    rng = make_rng(8)
    state = env.reset(rng)
    assert torch.equal(state["sim", "geom_friction"][0], env.ctx.default_geom_friction)  # not fired yet
    seen = []
    for k in range(1, 4):
        saved = state.clone()
        new, _ = env.step(state, torch.zeros(2, 29), advance(rng, k))
        assert torch.equal(state["sim", "geom_friction"], saved["sim", "geom_friction"])  # the input is not written
        seen.append(new["sim", "geom_friction"][:, 0, 0])
        state = new
    assert all(not torch.equal(a, b) for a, b in itertools.pairwise(seen))
    assert min(value.min() for value in seen) >= 0.1 and max(value.max() for value in seen) <= 1.0


@pytest.mark.parametrize(
    ("ranges", "field"),
    [
        (dict(friction=(1.2, 0.3)), "friction"),
        (dict(friction=(-0.1, 0.5)), "friction"),
        (dict(link_mass_scale=(-0.5, 1.0)), "link_mass_scale"),
        (dict(link_mass_scale=(0.0, 1.0)), "link_mass_scale"),
        (dict(payload_kg=(-1.0, 2.0)), "payload_kg"),
        (dict(com_offset_m=-0.02), "com_offset_m"),
        (dict(motor_strength=(1.1, 0.9)), "motor_strength"),
        (dict(pd_gains=(0.9, float("nan"))), "pd_gains"),
        (dict(latency_s=(-0.01, 0.01)), "latency_s"),
        (dict(push_speed=(1.0,)), "push_speed"),
        (dict(push_every_s=(0.0, 2.0)), "push_every_s"),
    ],
)
def test_an_impossible_range_is_refused_in_one_line_naming_the_field(ranges: dict, field: str) -> None:
    with pytest.raises(ValueError, match=rf"^Randomization\.{field} must be") as info:
        Randomization(**ranges)
    assert "\n" not in str(info.value)


def test_latency_beyond_the_control_step_is_refused_when_applied() -> None:
    with pytest.raises(ValueError, match=r"^Randomization\.latency_s must end within one control step \(20 ms\)"):
        randomize(make_task("g1_walk_flat"), Randomization(latency_s=(0.0, 0.03)))


def test_unknown_per_world_parameter_and_uncarried_event_writes_are_named() -> None:
    with pytest.raises(ValueError, match=r"^SimConfig\.per_world: unknown model parameter\(s\) \['mass'\]"):
        SimConfig(per_world=("mass",))
    config = make_task("g1_walk_flat")
    friction = EventTerm(randomization.set_friction, {"friction_range": (0.3, 1.2)})
    with pytest.raises(ValueError, match=r"event 'friction' sets \('sim', 'geom_friction'\).*SimConfig\.per_world"):
        make_functional_env("g1_walk_flat", sim="mujoco", num_envs=1, events={**config.events, "friction": friction})


def test_the_randomised_walk_variant_carries_its_ranges() -> None:
    from unilab.tasks.g1_walk_flat_rand import RANDOMIZATION

    config = make_task("g1_walk_flat_rand")
    assert config.name == "g1_walk_flat_rand" and config.obs_noise
    assert set(config.physics.per_world) == {"geom_friction", "body_mass", "body_inertia", "body_ipos"} | {
        "actuator_strength"
    }
    assert config.events["friction"].params["friction_range"] == RANDOMIZATION.friction == (0.3, 1.2)
    assert config.events["mass"].params["payload_range"] == (0.0, 3.0)
    assert config.events["push"].interval_s == RANDOMIZATION.push_every_s
    assert config.events["latency"].params["latency_s"] == (0.0, 0.02)
    walk = make_task("g1_walk_flat")
    assert set(walk.events) < set(config.events) and not walk.physics.per_world
