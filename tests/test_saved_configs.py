"""A checkpoint's stored config from another version: keys this version lacks are left out (eval and play work, as
resume does); a value of the wrong type or an algorithm this version lacks is refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_eval import tiny_run  # noqa: F401  (the fixture)

from unilab.apps import eval as eval_cli
from unilab.apps import play as play_cli
from unilab.apps.policy import policy_source
from unilab.run.checkpoint import load_checkpoint, save_checkpoint

FAST = ["--num-envs", "2", "--episode-s", "0.1"]


def _edited(tiny_run: Path, tmp_path: Path, edit) -> Path:  # noqa: F811
    ckpt = load_checkpoint(tiny_run / "model_3.pt")
    edit(ckpt["config"])
    return save_checkpoint(ckpt, tmp_path / "model_3.pt")


def test_keys_from_another_version_are_left_out(tiny_run: Path, tmp_path: Path) -> None:  # noqa: F811
    def newer(config: dict) -> None:
        config["algo"]["a_later_setting"] = 3
        config["a_later_group"] = {"x": 1}
        # An earlier version kept every algorithm's settings in one flat ``algo``: FlashSAC's and PPO's in SAC's run.
        config["algo"].update(target_sigma=0.15, num_steps_per_env=24, overlap_updates=True)

    result = eval_cli.main(["--checkpoint", str(_edited(tiny_run, tmp_path, newer)), *FAST])
    assert result["iteration"] == 3 and result["task"] == "g1_walk_flat"


def test_a_checkpoint_is_judged_on_the_task_as_its_knobs_made_it(tiny_run: Path, tmp_path: Path) -> None:  # noqa: F811
    def noisier(config: dict) -> None:
        config["task"]["knobs"]["noise_scale"] = 2.0

    solver = {"nconmax": 64, "njmax": 400, "solver_iterations": None, "ls_iterations": None}
    source = policy_source(_edited(tiny_run, tmp_path, noisier), None, None)
    assert source.overrides == {"obs_noise": False, "noise_scale": 2.0, **solver}
    # The run recorded its knobs at their defaults; another task does not take the run's knobs.
    assert policy_source(tiny_run / "model_3.pt", None, None).overrides == {
        "obs_noise": False,
        "noise_scale": 1.0,
        **solver,
    }
    assert policy_source(tiny_run / "model_3.pt", None, "g1_walk_flat_rand").overrides == {"obs_noise": False}


@pytest.mark.parametrize("command", ["eval", "play"])
@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda c: c["algo"].update(num_atoms="many"), "algo.num_atoms is not one this version reads"),
        (lambda c: c["algo"].update(name="td3"), "was trained with algo 'td3', which this version lacks"),
        (lambda c: c["task"]["knobs"].update(falls="hips"), "task.falls does not apply to task 'g1_walk_flat'"),
        (lambda c: c["task"]["knobs"].update(noise_scale=1e9), "task.noise_scale must be in [0, 10]"),
    ],
    ids=["wrong-type", "unknown-algo", "foreign-knob", "knob-out-of-range"],
)
def test_a_stored_config_this_version_cannot_read_is_refused_in_one_line(
    tiny_run: Path,  # noqa: F811
    tmp_path: Path,
    capsys: pytest.CaptureFixture,
    command: str,
    edit,
    message: str,
) -> None:
    path = str(_edited(tiny_run, tmp_path, edit))
    with pytest.raises(SystemExit) as exit_info:
        if command == "eval":
            eval_cli.main(["--checkpoint", path, *FAST])
        else:
            play_cli.main(["--checkpoint", path, "--seconds", "0.1"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and message in err, err
