"""A run's update compiled in a side process started with the command (``unilab.apps.early_update``):
it must compile the very update the run's first iteration looks up, start only where the caches are cold, and not
outlive a command that did not take it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_train import tiny
from unilab.apps import cli, early_update
from unilab.apps.compose import compose_config, resumed_groups
from unilab.apps.early import split_train_args
from unilab.core import side_process, warp_ahead
from unilab.run.training_run import TrainingRun
from unilab.train import prewarm
from unilab.train.prewarm import UpdatePrewarm
from unilab.train.update_key import update_key

REPO = Path(__file__).resolve().parents[1]


class Stop(Exception):
    """Ends ``TrainingRun.prepare`` once it has said which update it compiles."""


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The commands ``early_update`` launches, none run; a fresh once-a-process state."""
    commands: list[list[str]] = []
    monkeypatch.setattr(side_process, "launch", lambda name, command: commands.append(command) or "process")
    monkeypatch.setattr(early_update, "_side", side_process.Pending("update_prewarm"))
    monkeypatch.setattr(early_update.atexit, "register", lambda fn: None)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    return commands


@pytest.mark.parametrize(
    ("line", "wanted"),
    [
        (["--algo", "sac"], True),
        (["algo=flashsac", "task=g1_motion_tracking"], True),
        ([], True),  # the default algorithm, SAC
        (["--algo", "ppo"], True),
        (["algo=td3"], False),  # no such algorithm: the command says so
        (["--algo", "sac", "algo.compile=false"], False),
        (["--algo", "sac", "algo.compile=false", "algo.compile=true"], True),  # the last one counts
    ],
)
def test_it_is_wanted_for_a_run_whose_update_compiles(line: list[str], wanted: bool, launched: list) -> None:
    assert early_update.wanted(line) is wanted


def test_not_under_torchrun(launched: list, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert not early_update.wanted(["--algo", "sac"])
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert early_update.wanted(["--algo", "sac"])


def test_it_starts_once_and_is_taken_once(launched: list[list[str]]) -> None:
    line = ["--algo", "sac", "--task", "g1_walk_flat", "algo.batch_size=512"]
    assert early_update.start(line)
    assert launched == [[sys.executable, "-m", "unilab.apps.early_update", *line]]
    assert not early_update.start(line)  # one a process
    assert early_update.take() == "process"
    assert early_update.take() is None  # the run waits for it; nothing is left to end at exit


@pytest.mark.parametrize("cold", [True, False])
def test_the_command_starts_it_only_beside_warp_s_side_process(
    cold: bool, launched: list[list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold Warp kernel cache (a fresh machine or cache root) is where the update's caches are cold too."""
    monkeypatch.setattr(cli, "ahead_device", lambda arguments: "cuda:0")
    monkeypatch.setattr(warp_ahead, "start", lambda device: cold)
    cli.start_ahead(["--algo", "sac"])
    assert len(launched) == (1 if cold else 0)


def test_one_the_command_did_not_take_is_ended_at_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(early_update, "_side", side_process.Pending("update_prewarm"))
    exits: list[Any] = []
    monkeypatch.setattr(early_update.atexit, "register", exits.append)
    monkeypatch.setattr(early_update, "wanted", lambda arguments: True)
    monkeypatch.setattr(early_update.side_process, "launch", lambda name, command: subprocess.Popen(["sleep", "60"]))
    assert early_update.start([])
    process = early_update._side.process
    assert process is not None and process.poll() is None
    (end,) = exits
    end()
    assert process.poll() is not None  # ended, and waited for
    end()  # nothing left: a second call is harmless


@pytest.mark.parametrize("algo", ["sac", "ppo"])
def test_the_side_process_compiles_the_update_the_run_looks_up(
    algo: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The side process works out the settings and env layout from the command line alone; the run, from its
    composed config after every check. Both must name the same update (``update_key``), or the run finds nothing
    in the caches."""
    line = ["task=g1_walk_flat", *tiny(tmp_path, "mujoco", f"algo={algo}"), "training.device=cpu", "algo.seed=3"]
    seen: dict[str, Any] = {}
    monkeypatch.setattr(prewarm, "prewarm", lambda cfg, spec: seen.update(side=(cfg, spec)))
    early_update.main(line)

    def run_start(cfg: Any, spec: Any, started: Any = None) -> None:
        seen["run"] = (cfg, spec)
        raise Stop

    monkeypatch.setattr(UpdatePrewarm, "start", run_start)
    with pytest.raises(Stop):
        TrainingRun.prepare(compose_config(resumed_groups(split_train_args(line).overrides)))
    (side_cfg, side_spec), (run_cfg, run_spec) = seen["side"], seen["run"]
    assert side_spec == run_spec
    assert update_key(side_cfg, side_spec) == update_key(run_cfg, run_spec)
    assert side_cfg == run_cfg


def test_the_side_process_runs_from_a_command_line() -> None:
    """On the CPU it composes the run and ends without compiling: the losses run eagerly there."""
    line = ["--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco", "training.device=cpu", "algo.num_envs=4"]
    done = subprocess.run(
        [sys.executable, "-m", "unilab.apps.early_update", *line], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]


def test_the_run_waits_for_the_one_the_command_started(monkeypatch: pytest.MonkeyPatch) -> None:
    """Taken over as it is: the side process checked for itself whether the update needed compiling."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    monkeypatch.setattr(prewarm, "needed", lambda cfg, spec: pytest.fail("checked again"))
    taken = UpdatePrewarm.start(None, None, process)  # type: ignore[arg-type]
    assert taken is not None
    assert taken.wait() >= 0.0 and process.returncode == 0


def test_train_hands_the_run_what_the_command_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from unilab.apps import train

    monkeypatch.setattr(early_update, "take", lambda: "started")
    handed: list[Any] = []

    def prepare(cls: type, cfg: Any, signals: Any, update_started: Any) -> None:
        handed.append(update_started)
        raise Stop

    monkeypatch.setattr(TrainingRun, "prepare", classmethod(prepare))
    with pytest.raises(Stop):
        train.main(tiny(tmp_path, "mujoco"))
    assert handed == ["started"]


def test_a_command_on_a_cold_machine_waits_for_the_update_it_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole path through ``train``'s command, with the GPU's gates opened on the CPU: the side process starts
    before the run's stack is loaded, runs from the command line alone (on the CPU it composes the run and ends), and
    the run waits for it once, between its trainer's build and its first iteration, and reports its life."""
    launched: list[list[str]] = []
    launch = side_process.launch
    monkeypatch.setattr(side_process, "launch", lambda name, command: launched.append(command) or launch(name, command))
    monkeypatch.setattr(early_update, "_side", side_process.Pending("update_prewarm"))
    monkeypatch.setattr(cli, "ahead_device", lambda arguments: "cpu")
    monkeypatch.setattr(warp_ahead, "start", lambda device: True)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    side_process.take_lifetimes(0.0)  # what earlier tests in this process launched is theirs
    line = [*tiny(tmp_path, "mujoco"), "algo.max_iterations=2", "training.no_play=true"]
    cli.start_command("train", "train", line, line)
    assert launched == [[sys.executable, "-m", "unilab.apps.early_update", *line]]  # and no other side process
    assert early_update.take() is None  # the run took it
    recorded = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    phases = list(recorded["startup_sec"])
    assert phases.index("trainer_build") < phases.index("update_prewarm") < phases.index("prefill")
    life = recorded["startup_side"]["update_prewarm"]
    assert life["seconds"] is not None and life["seconds"] > 0.0
