"""What the eval says about the robots that fell: the kind of command each followed (the kinds partition the envs)
and which termination ended its episode, per terrain row where the task has rows."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from unilab.apps import eval as eval_app
from unilab.apps.eval import breakdown_lines, breakdown_table, rollout, score
from unilab.core.rng import make_rng
from unilab.envs.functional import FunctionalEnv
from unilab.robots import g1
from unilab.tasks.registry import make_functional_env, make_task
from unilab.tasks.walking_metrics import TURN_RATE, command_kinds, falls_by_command


def test_the_command_kinds_partition_the_envs() -> None:
    commands = torch.tensor(
        [
            [0.5, 0.1, 0.0],  # forward
            [-0.4, 0.3, 0.1],  # backward, turning too slowly to count
            [0.2, -0.3, 0.0],  # sideways: the lateral part is the larger
            [0.8, 0.0, 0.5],  # turning, whatever the walk
            [0.0, 0.0, -0.5],  # turning on the spot
            [0.0, 0.0, 0.0],  # standing
            [0.0, 0.0, 0.1],  # standing: a turn too slow to count
            [0.3, 0.3, 0.0],  # a tie goes to the forward-backward axis
        ]
    )
    kinds = command_kinds(commands)
    expected = ["forward", "backward", "sideways", "turning", "turning", "standing", "standing", "forward"]
    assert [next(kind for kind, envs in kinds.items() if envs[i]) for i in range(8)] == expected
    drawn = torch.rand(4096, 3) * 2 - 1
    drawn[::3, :2] = 0.0  # the deadzone's zeros
    drawn[::2, 2] = 0.0  # the straight half
    drawn[::5, 2] = TURN_RATE  # on the threshold
    counts = torch.stack(list(command_kinds(drawn).values())).long().sum(0)
    assert torch.equal(counts, torch.ones(4096, dtype=torch.long))  # every env in exactly one kind


def test_the_falls_are_counted_within_each_kind_of_command() -> None:
    command = torch.tensor([[0.5, 0.0, 0.0], [0.6, 0.0, 0.0], [0.0, 0.0, 0.7], [0.0, 0.0, 0.0]])
    split = falls_by_command(command, torch.tensor([True, False, True, False]))
    assert split == {
        "forward": {"num_envs": 2, "fall_rate": 0.5},
        "backward": {"num_envs": 0},
        "sideways": {"num_envs": 0},
        "turning": {"num_envs": 1, "fall_rate": 1.0},
        "standing": {"num_envs": 1, "fall_rate": 0.0},
    }


def _walk(tilt_limit_deg: float = 65.0) -> FunctionalEnv:
    """Six flat G1 walks of 2 s whose transitions carry their termination terms, tilting out at ``tilt_limit_deg``."""
    terms = dict(make_task("g1_walk_flat").terminations)
    tilt = terms["tilt"]
    terms["tilt"] = dataclasses.replace(tilt, params={**tilt.params, "limit": math.radians(tilt_limit_deg)})
    return make_functional_env(
        "g1_walk_flat", sim="mujoco", num_envs=6, episode_length_s=2.0, record_terminations=True, terminations=terms
    )


def _crouch(env: FunctionalEnv):
    """A policy that always falls: hips, knees and ankles bent as far as an action reaches."""
    bend = {"hip_pitch": -1.0, "knee": 1.0, "ankle_pitch": -1.0}
    action = torch.tensor([bend.get(g1.short_name(joint), 0.0) for joint in g1.JOINT_NAMES])
    return lambda obs: action.expand(obs.shape[0], -1)


def test_a_robot_that_always_falls_is_ended_by_the_termination_that_caught_it() -> None:
    # The crouch topples the robots: most torsos pass 65 degrees of tilt before the pelvis sinks below 0.3 m (which
    # comes first for a robot depends on its drawn start), and each fall is booked once, to what ended it.
    env = _walk()
    toppled = score(env, rollout(env, _crouch(env), seed=0))
    ended = toppled["ended_by"]
    assert toppled["fall_rate"] == 1.0 and ended["diverged"] == 0 and ended["tilt"] + ended["fall"] == 6
    assert ended["tilt"] >= 4
    # With the tilt out of reach the same robots sit down: the pelvis height ends them, later.
    env = _walk(tilt_limit_deg=179.0)
    sat = score(env, rollout(env, _crouch(env), seed=0))
    assert sat["fall_rate"] == 1.0 and sat["ended_by"] == {"tilt": 0, "fall": 6, "diverged": 0}
    assert sat["mean_episode_length"] > toppled["mean_episode_length"]
    assert sum(kind["num_envs"] for kind in sat["falls_by_command"].values()) == 6


def test_the_termination_terms_travel_only_where_asked() -> None:
    recording = _walk()
    plain = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=6, episode_length_s=2.0)
    action = torch.zeros(6, plain.action_dim)
    _, transition = recording.step(recording.reset(make_rng(0)), action, make_rng(1))
    _, untouched = plain.step(plain.reset(make_rng(0)), action, make_rng(1))
    assert list(transition["termination_terms"].keys()) == ["tilt", "fall", "time_out"]
    assert "termination_terms" not in untouched  # training's transitions keep their layout
    assert (transition.exclude("termination_terms") == untouched).all()


def test_the_breakdown_is_printed_per_row_and_for_the_judged_figures() -> None:
    kinds = {"forward": {"num_envs": 4, "fall_rate": 0.25}, "standing": {"num_envs": 0}}
    rows = {
        "row_0": {"num_envs": 0},
        "row_1": {"num_envs": 4, "falls_by_command": kinds, "ended_by": {"tilt": 1, "fall": 0}},
    }
    assert breakdown_table(rows) == [
        "  row        forward  standing |      tilt      fall",
        "  row_0            -         - |         -         -",
        "  row_1          1/4       0/0 |         1         0",
    ]
    assert breakdown_lines(rows["row_1"]) == [
        "  falls by command (fell/envs): forward 1/4, standing 0/0",
        "  falls ended by: tilt 1, fall 0",
    ]
    assert breakdown_table({"row_0": {"num_envs": 0}}) == [] and breakdown_lines({"fall_rate": 0.0}) == []


@pytest.mark.parametrize("every", [7, 50])
def test_a_rollout_read_every_few_steps_ends_where_one_read_every_step_does(monkeypatch, every: int) -> None:
    """The host reads whether every first episode has ended only every few steps; the rows stepped past the end are
    dropped, so the rollout is the one a read at every step gives."""
    env = _walk(tilt_limit_deg=179.0)
    monkeypatch.setattr(eval_app, "ENDED_CHECK_STEPS", 1)
    each = rollout(env, _crouch(env), seed=0)
    monkeypatch.setattr(eval_app, "ENDED_CHECK_STEPS", every)
    few = rollout(env, _crouch(env), seed=0)
    assert each["active"].shape[0] < env.ctx.max_episode_steps and not each["active"][-1].any()
    assert each["active"].shape[0] % every != 0  # the last fall came between two reads
    for key in ("active", "failed", "length"):
        assert torch.equal(each[key], few[key]), key
    assert each["readings"].keys() == few["readings"].keys() and each["nonfinite_actions"] == few["nonfinite_actions"]
    assert all(torch.equal(each["readings"][k], few["readings"][k]) for k in each["readings"])
    assert all(torch.equal(each["ended_by"][k], few["ended_by"][k]) for k in each["ended_by"])
