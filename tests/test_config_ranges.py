"""Every config value has a range with an upper end: a finite but absurd value is refused in one line naming the
key, before any work, instead of overflowing deep inside the env build, the critic or a timedelta."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_train import tiny

from unilab.apps.train import main
from unilab.run.config import schema, settings_fields
from unilab.train.registry import ALGORITHMS


def _refused(capsys: pytest.CaptureFixture, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["task.episode_length_s=1e300"], "task.episode_length_s must be in (0, 3600], got 1e+300"),
        (["algo.lr=1e10"], "algo.lr must be in (0, 1]"),
        (["algo.alpha_init=1e300"], "algo.alpha_init must be in (0, 100]"),
        (["algo.v_min=-1e308", "algo.v_max=1e308"], "algo.v_min must be in [-1000000, 1000000]"),
        (["algo=flashsac", "task=g1_motion_tracking", "algo.target_sigma=1e300"], "algo.target_sigma must be in"),
        (["algo=flashsac", "algo.noise_max_span=4611686018427387904"], "algo.noise_max_span must be in [1, 10000]"),
        (["training.dist_timeout_s=1e300"], "training.dist_timeout_s must be in (0, 86400]"),
        (["task=g1_motion_tracking", "task.failure_look_back=1000000000"], "task.failure_look_back must be in"),
        (["training.play_envs=1000000"], "training.play_envs must be in [1, 64]"),
        (["algo.critic_hidden=[100000,100000]"], "algo.critic_hidden must be a list of 1 to 64 sizes"),
        (["sim.name=bullet"], "sim.name must be one of mjwarp, mujoco, got 'bullet'"),
        (["sim.warp_output=sass"], "sim.warp_output must be one of ptx, cubin, got 'sass'"),
        (["sim.warp_output=cubin"], "sim.warp_output is Warp's: it needs sim=mjwarp, not sim=mujoco"),
        (["algo.name=td3"], "algo.name must be one of sac, flashsac, ppo, got 'td3'"),
    ],
)
def test_an_absurd_value_is_refused_in_one_line(capsys: pytest.CaptureFixture, overrides, message) -> None:
    assert message in _refused(capsys, ["--cfg", "sim=mujoco", *overrides])


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_every_numeric_key_of_the_schema_has_a_range(algo: str) -> None:
    """A new numeric key (or list of sizes) without a range would let a finite but absurd value through again."""
    numeric = {
        key
        for key, _, value in settings_fields(schema(algo))
        if (isinstance(value, int | float | list) and not isinstance(value, bool)) or value is None
    }
    ranged = {key for key, f, _ in settings_fields(schema(algo)) if f.metadata.get("bounds") is not None}
    nullable_text = {"training.device", "training.log_dir", "algo.resume", "task.motion_file", "sim.warp_output"}
    assert numeric - ranged - nullable_text == set()


@pytest.mark.parametrize("algo", list(ALGORITHMS))
def test_every_key_has_a_line_of_help(algo: str) -> None:
    """``train --help`` prints each setting with its help: a key without one would show a blank."""
    leaves = settings_fields(schema(algo))
    assert [key for key, f, _ in leaves if key != "task.knobs" and not f.metadata.get("help")] == []


def test_networks_too_large_for_memory_are_refused_before_any_work(tmp_path: Path, capsys) -> None:
    err = _refused(capsys, tiny(tmp_path, "mujoco", "algo.critic_hidden=[60000,60000]"))
    assert re.search(r"networks 10\d\.\d GB\)", err) and "or the network sizes" in err
    assert not (tmp_path / "run").exists()
