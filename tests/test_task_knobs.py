"""A task's own knobs (its config factory's plain keyword arguments) are set as ``task.<knob>=value`` on the command
line; a knob the task lacks, or a value of the wrong type, is refused in one line that names the valid ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.test_train import tiny
from unilab.apps.args import InputError, task_knob_values
from unilab.apps.compose import check_knobs, compose_config, task_knobs
from unilab.apps.policy import policy_source
from unilab.apps.train import main, run
from unilab.run.config import task_overrides
from unilab.tasks.registry import list_tasks, make_task


def test_a_task_knob_set_on_the_command_line_reaches_the_task() -> None:
    cfg = compose_config(["sim=mujoco", "task.noise_scale=0.5"])
    assert cfg.task.knobs == {**task_knobs(cfg.task.name), "noise_scale": 0.5}
    config = make_task(cfg.task.name, **task_overrides(cfg))
    assert config.observations["policy"]["joint_pos"].noise == pytest.approx(0.005)  # 0.01 at noise_scale 1
    tracking = compose_config(["sim=mujoco", "task=g1_motion_tracking", "task.start=first_frame"])
    assert task_overrides(tracking)["start"] == "first_frame"


def test_each_task_declares_its_plain_knobs() -> None:
    physics = {"nconmax": 64, "njmax": 400, "solver_iterations": None, "ls_iterations": None}
    assert task_knobs("g1_walk_flat") == {"noise_scale": 1.0, **physics}
    assert task_knobs("g1_walk_flat_rand") == {"noise_scale": 1.0, **physics}  # its Randomization is the Python API's
    assert {"reset_noise_scale", "start"} <= set(task_knobs("g1_motion_tracking"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "task.push=1.0",
            "train: error: task.push does not apply to task 'g1_walk_flat'; its task keys are task.obs_noise, "
            "task.episode_length_s, task.reward_weights, task.noise_scale, task.nconmax, task.njmax, "
            "task.solver_iterations, task.ls_iterations",
        ),
        ("task.noise_scale=abc", "train: error: task.noise_scale must be of the type of its default, 1.0; got 'abc'"),
        ("task.noise_scale=true", "train: error: task.noise_scale must be of the type of its default, 1.0; got True"),
    ],
)
def test_an_unknown_knob_or_a_wrong_value_is_one_line(override: str, message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--cfg", "sim=mujoco", override])
    assert exit_info.value.code == 2 and capsys.readouterr().err.splitlines() == [message]


def test_cfg_shows_the_task_s_knobs_with_their_values(capsys) -> None:
    main(["--cfg", "sim=mujoco", "task.noise_scale=0.25"])
    assert "  noise_scale: 0.25\n" in capsys.readouterr().out


@pytest.mark.parametrize("task", list_tasks())
def test_every_knob_s_default_is_a_value_the_task_takes(task: str) -> None:
    check_knobs(task, task_knobs(task))  # what a run's config records for a knob it was not given


def test_a_checkpoint_records_every_knob_so_a_later_default_cannot_change_its_task(tmp_path: Path) -> None:
    """The run names one knob and SAC's tuning two more; the checkpoint holds them all, and eval rebuilds the task
    from them, not from the factory's defaults of the day."""
    config = tiny(tmp_path, "mujoco", "task=go1_walk_rough", "task.action_reach=1.5", "algo.max_iterations=1")
    assert run(compose_config(config)).status == "completed"
    checkpoint = tmp_path / "run" / "model_1.pt"
    knobs = torch.load(checkpoint, weights_only=False)["config"]["task"]["knobs"]
    assert knobs == {**task_knobs("go1_walk_rough"), "action_reach": 1.5, "stumble": -1.0, "stumble_ratio": 2.0}
    overrides = policy_source(checkpoint, None, None).overrides
    assert {key: overrides[key] for key in knobs} == knobs


def test_knob_values_on_a_command_line_are_read_as_train_reads_them() -> None:
    values = task_knob_values(["task.falls=knees", "task.action_reach=1.5", "task.terrain_level=9", "task.x=true"])
    assert values == {"falls": "knees", "action_reach": 1.5, "terrain_level": 9, "x": True}
    assert type(values["terrain_level"]) is int and type(values["action_reach"]) is float
    for bad in ("falls=knees", "task.=1", "task.falls", "task.a-b=1", "task.falls="):
        with pytest.raises(InputError, match="is not a task knob's value"):
            task_knob_values([bad])
