"""A task's own knobs (its config factory's plain keyword arguments) are set as ``task.<knob>=value`` on the command
line; a knob the task lacks, or a value of the wrong type, is refused in one line that names the valid ones."""

from __future__ import annotations

import pytest

from unilab.apps.compose import compose_config, task_knobs
from unilab.apps.train import main
from unilab.run.config import task_overrides
from unilab.tasks.registry import make_task


def test_a_task_knob_set_on_the_command_line_reaches_the_task() -> None:
    cfg = compose_config(["sim=mujoco", "task.noise_scale=0.5"])
    assert cfg.task.knobs == {"noise_scale": 0.5}
    config = make_task(cfg.task.name, **task_overrides(cfg))
    assert config.observations["policy"]["joint_pos"].noise == pytest.approx(0.005)  # 0.01 at noise_scale 1
    tracking = compose_config(["sim=mujoco", "task=g1_motion_tracking", "task.start=first_frame"])
    assert task_overrides(tracking)["start"] == "first_frame"


def test_each_task_declares_its_plain_knobs() -> None:
    assert task_knobs("g1_walk_flat") == {"noise_scale": 1.0}
    assert task_knobs("g1_walk_flat_rand") == {"noise_scale": 1.0}  # its Randomization is the Python API's
    assert {"reset_noise_scale", "start"} <= set(task_knobs("g1_motion_tracking"))


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "task.push=1.0",
            "train: error: task.push does not apply to task 'g1_walk_flat'; its task keys are task.obs_noise, "
            "task.episode_length_s, task.reward_weights, task.noise_scale",
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
