"""The custom-task tutorial (docs/custom_task.md), followed step by step: a standing task defined outside the
package, registered, checked by TorchRL and trained through ``train``; and the entry-point route."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest
import torch
from torchrl.envs.utils import check_env_specs

import unilab
from unilab.apps.compose import compose_config
from unilab.apps.train import run
from unilab.context import EnvContext
from unilab.envs.config import TaskConfig
from unilab.managers.terms import ActionTerm, EventTerm, ObsTerm, RewardTerm, TerminationTerm
from unilab.mdp import actions, events, observations, rewards, terminations
from unilab.robots import g1
from unilab.sim import SimConfig
from unilab.tasks import registry
from unilab.tasks.task import Task

# -- the tutorial's task ---------------------------------------------------------------------------------------


def root_height_exp(state, ctx: EnvContext, target: float, sigma: float) -> torch.Tensor:
    """1 at the target pelvis height, falling off as a Gaussian: the task's own reward term."""
    return torch.exp(-((state["sim", "qpos"][:, 2] - target) ** 2) / sigma**2)


def make_stand_config(push: float = 0.5, push_every_s: tuple[float, float] = (1.0, 3.0)) -> TaskConfig:
    """The G1 standing still; shoves of up to ``push`` m/s at the start of every episode and then every
    ``push_every_s`` seconds."""
    policy = {
        "gyro": ObsTerm(observations.sensor, {"name": "torso_gyro"}, scale=0.25),
        "gravity": ObsTerm(observations.projected_gravity, {"body": g1.TORSO_BODY}),
        "joint_pos": ObsTerm(observations.joint_pos_rel, noise=0.01),
        "joint_vel": ObsTerm(observations.joint_vel, scale=0.05),
        "actions": ObsTerm(observations.last_action),
    }
    critic = {**policy, "linvel": ObsTerm(observations.sensor, {"name": "pelvis_local_linvel"})}
    return TaskConfig(
        name="g1_stand",
        scene=g1.SCENE,
        robot=g1.ROBOT,
        physics=SimConfig(substeps=3),
        episode_length_s=10.0,
        action=ActionTerm(actions.joint_position_offsets, {"scale": 0.5}),
        observations={"policy": policy, "critic": critic},
        rewards={
            "height": RewardTerm(root_height_exp, 2.0, {"target": g1.ROOT_HEIGHT, "sigma": 0.1}),
            "upright": RewardTerm(rewards.upvector_xy_l2, -5.0, {"upvector": "torso_upvector"}),
            "action_rate": RewardTerm(rewards.action_rate_l2, -0.05),
            "alive": RewardTerm(rewards.alive, 1.0),
        },
        terminations={
            "fall": TerminationTerm(terminations.root_height_below, {"min_height": 0.4}),
            "time_out": TerminationTerm(terminations.time_out, time_out=True),
        },
        events={
            "start": EventTerm(
                events.reset_to_default_pose, {"xy_range": 0.0, "yaw_range": 3.14, "root_vel_range": push}
            ),
            "shove": EventTerm(events.push_root, {"speed_range": (0.0, push)}, interval_s=push_every_s),
        },
    )


TASK = Task("g1_stand", make_stand_config)  # what an entry point names


# -- the tutorial, checked --------------------------------------------------------------------------------------


@pytest.fixture
def clean_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks registered in a test are gone after it."""
    monkeypatch.setattr(registry, "_registered", {})


def test_a_registered_task_passes_torchrl_checks_and_trains(tmp_path: Path, clean_registry: None) -> None:
    tuning = tmp_path / "sac.yaml"
    tuning.write_text("# @package algo\ntau: 0.2\ngamma: 0.95\n")
    unilab.register_task("g1_stand", make_stand_config, tuning={"sac": tuning})
    assert "g1_stand" in unilab.list_tasks()

    env = unilab.make_env("g1_stand", sim="mujoco", num_envs=2, push=1.0)
    check_env_specs(env)
    assert env.observation_spec["policy"].shape == (2, 3 + 3 + 29 + 29 + 29)

    overrides = [
        "task=g1_stand",
        "sim=mujoco",
        "algo.num_envs=4",
        "algo.batch_size=32",
        "algo.replay_buffer_n=16",
        "algo.max_iterations=3",
        "algo.actor_hidden=[16]",
        "algo.critic_hidden=[16]",
        "training.no_play=true",
        "training.export_onnx=false",
        "training.progress=false",
        f"training.log_dir={tmp_path / 'run'}",
    ]
    cfg = compose_config(overrides)
    assert cfg.algo.gamma == 0.95 and cfg.algo.tau == 0.2  # the task's tuning for sac was applied
    summary = run(cfg)
    assert summary.status == "completed" and summary.completed_iterations == 3
    recorded = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    assert recorded["task"] == "g1_stand"


def test_a_task_named_by_an_entry_point_is_found(monkeypatch: pytest.MonkeyPatch, clean_registry: None) -> None:
    point = EntryPoint(name="g1_stand", value=f"{__name__}:TASK", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [point] if group == point.group else [])
    monkeypatch.setattr(registry, "_discovered", None)
    assert registry.get_task("g1_stand").make_config is make_stand_config
    assert {"g1_walk_flat", "g1_motion_tracking", "g1_stand"} <= set(unilab.list_tasks())


def test_an_entry_point_that_is_not_a_task_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    point = EntryPoint(name="broken", value=f"{__name__}:make_stand_config", group=registry.ENTRY_POINT_GROUP)
    monkeypatch.setattr(registry, "entry_points", lambda group: [point])
    monkeypatch.setattr(registry, "_discovered", None)
    with pytest.raises(TypeError, match=r"entry point broken = .* is not a unilab Task"):
        unilab.list_tasks()


def test_interval_pushes_fire_on_their_timer_and_donation_matches(clean_registry: None) -> None:
    from unilab.core.rng import make_rng
    from unilab.tasks.registry import make_functional_env

    unilab.register_task("g1_stand", make_stand_config)
    pushed = make_functional_env("g1_stand", sim="mujoco", num_envs=3, push=0.5, push_every_s=(0.04, 0.04))
    calm = make_functional_env("g1_stand", sim="mujoco", num_envs=3, push=0.0, push_every_s=(0.04, 0.04))
    rng = make_rng(0)
    a, b = pushed.reset(rng), calm.reset(rng)
    assert a["env", "shove_timer"].tolist() == pytest.approx([0.04] * 3)
    zero = torch.zeros(3, 29)
    # The start event draws from the same stream, with range 0 for the calm env: align the two starts.
    b = b.update({"sim": a["sim"].clone(), "obs": a["obs"].clone()})
    a1, _ = pushed.step(a, zero, rng + torch.tensor([0, 1]))
    b1, _ = calm.step(b, zero, rng + torch.tensor([0, 1]))
    assert a1["env", "shove_timer"].tolist() == pytest.approx([0.02] * 3)
    assert torch.equal(a1["sim", "qvel"], b1["sim", "qvel"])  # not fired yet
    a2, _ = pushed.step(a1, zero, rng + torch.tensor([0, 2]))
    b2, _ = calm.step(b1, zero, rng + torch.tensor([0, 2]))
    assert a2["env", "shove_timer"].tolist() == pytest.approx([0.04] * 3)  # fired and rearmed
    assert (a2["sim", "qvel"][:, :2] - b2["sim", "qvel"][:, :2]).abs().max() > 0.05
    donated, _ = pushed.step_(a1.clone(), zero, rng + torch.tensor([0, 2]))
    for key in a2.keys(True, True):
        assert torch.equal(donated[key], a2[key]), key
