"""Run safety: no foreign code on load, stops that lose no work, one writer per run directory, resumes that never
overwrite later work or mix configs, bounded allocations, and one-line errors for what a user can get wrong."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from test_train import SMALL_CUDA_RUN, tiny

from unilab.apps import eval as eval_cli
from unilab.apps import play as play_cli
from unilab.apps.compose import compose_config
from unilab.apps.train import main, run
from unilab.motion import DEFAULT_MOTION
from unilab.run.checkpoint import CheckpointError, load_checkpoint
from unilab.run.run_dir import RunLock
from unilab.sim.base import SimBackend
from unilab.train.off_policy import OffPolicyTrainer

REPO = Path(__file__).resolve().parents[1]
QUIET = ["training.export_onnx=false"]


def _one_line_error(capsys: pytest.CaptureFixture[str], exit_info: pytest.ExceptionInfo[SystemExit]) -> str:
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def _signal_in_update(monkeypatch: pytest.MonkeyPatch, at_call: int, *signums: int) -> None:
    """Deliver ``signums`` to this process during the ``at_call``-th update, as a scheduler or a terminal would."""
    update, calls = OffPolicyTrainer.update, []

    def signalled(self):
        calls.append(None)
        if len(calls) == at_call:
            for signum in signums:
                os.kill(os.getpid(), signum)
        return update(self)

    monkeypatch.setattr(OffPolicyTrainer, "update", signalled)


# -- foreign code -------------------------------------------------------------------------------------------------


class _Payload:
    """Unpickling this creates ``marker``: proof that loading ran code from the file."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


@pytest.fixture
def hostile_checkpoint(tmp_path: Path) -> tuple[Path, Path]:
    marker = tmp_path / "payload_ran"
    path = tmp_path / "hostile" / "model_5.pt"
    path.parent.mkdir()
    state = {"loss": {}, "optim": {}, "iteration": 5, "env_steps": 0, "config": {}, "extra": _Payload(marker)}
    torch.save(state, path)
    return path, marker


@pytest.mark.parametrize("command", ["train", "eval", "play"])
def test_a_checkpoint_carrying_code_is_refused_and_the_code_never_runs(
    tmp_path: Path, hostile_checkpoint: tuple[Path, Path], command: str, capsys
) -> None:
    path, marker = hostile_checkpoint
    entry = {
        "train": lambda: main([*tiny(tmp_path, "mujoco", *QUIET), f"algo.resume={path}"]),
        "eval": lambda: eval_cli.main(["--checkpoint", str(path), "--num-envs", "2"]),
        "play": lambda: play_cli.main(["--checkpoint", str(path), "--seconds", "0.1"]),
    }[command]
    with pytest.raises(SystemExit) as exit_info:
        entry()
    err = _one_line_error(capsys, exit_info)
    assert f"refusing checkpoint {path}: it holds io.open, which is neither a tensor nor a plain value" in err
    assert not marker.exists()
    assert not (tmp_path / "run").exists()


class _ShellPayload:
    """Unpickling this runs a shell command: torch words its refusal of ``os.system`` unlike that of ``open``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_checkpoint_calling_a_shell_is_refused_in_the_same_words(tmp_path: Path, capsys) -> None:
    marker, path = tmp_path / "payload_ran", tmp_path / "model_5.pt"
    torch.save({"loss": {}, "iteration": 5, "extra": _ShellPayload(marker)}, path)
    with pytest.raises(SystemExit) as exit_info:
        eval_cli.main(["--checkpoint", str(path), "--num-envs", "2"])
    err = _one_line_error(capsys, exit_info)
    assert f"refusing checkpoint {path}: it holds {os.system.__module__}.system" in err and "weights_only" not in err
    assert not marker.exists()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"iteration": "abc"}, "its 'iteration' is 'abc', not a count >= 0"),
        ({"env_steps": -5}, "its 'env_steps' is -5, not a count >= 0"),
        ({"loss": {"actor.w": torch.tensor([1.0, float("nan")])}}, "holds non-finite weights (NaN or inf) in actor.w"),
    ],
)
def test_a_checkpoint_with_impossible_contents_is_refused(tmp_path: Path, change: dict, message: str) -> None:
    state = {"loss": {}, "optim": {}, "iteration": 5, "env_steps": 0, "config": {}}
    state |= {"train_wall_time_sec": 1.0, "loop_wall_time_sec": 1.0, **change}
    path = tmp_path / "model_5.pt"
    torch.save(state, path)
    with pytest.raises(CheckpointError, match=re.escape(message)):
        load_checkpoint(path)


def test_a_directory_given_as_a_checkpoint_is_named_as_one(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match=re.escape(f"{tmp_path} is a directory, not a checkpoint file")):
        load_checkpoint(tmp_path)


# -- stops ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_each_stop_signal_ends_with_a_final_checkpoint_and_summary(
    tmp_path: Path, signum: signal.Signals, monkeypatch: pytest.MonkeyPatch
) -> None:
    _signal_in_update(monkeypatch, 7, signum)
    before = signal.getsignal(signum)  # not always the default: under nohup, SIGHUP starts ignored
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", "algo.max_iterations=20", *QUIET))
    assert exit_info.value.code == 128 + signum  # the shell's convention for a process ended by a signal
    run_dir = tmp_path / "run"
    data = json.loads((run_dir / "run_summary.json").read_text())
    assert data["status"] == "interrupted" and data["stopped_by"] == signal.Signals(signum).name
    assert data["completed_iterations"] == 7 and data["last_checkpoint"] == str(run_dir / "model_7.pt")
    assert torch.load(run_dir / "model_7.pt", weights_only=True)["iteration"] == 7  # the iteration completed
    assert signal.getsignal(signum) == before


def test_signals_during_the_stop_do_not_cut_it_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _signal_in_update(monkeypatch, 7, signal.SIGINT, signal.SIGINT, signal.SIGTERM)
    summary = run(compose_config(tiny(tmp_path, "mujoco", "algo.max_iterations=20", *QUIET)))
    assert summary.status == "interrupted" and summary.stopped_by == "SIGINT"
    assert torch.load(tmp_path / "run" / "model_7.pt", weights_only=True)["iteration"] == 7


def test_a_handler_a_library_installs_mid_run_does_not_take_the_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Something the run loads late (a compiler, a storage) sets its own SIGTERM handler in the second update; the
    SIGTERM of the seventh still stops the run with its work saved, and the replacement is named."""
    swallowed: list[int] = []

    def foreign(signum: int, frame: object) -> None:
        swallowed.append(signum)

    update, calls = OffPolicyTrainer.update, []

    def replacing(self):
        calls.append(None)
        if len(calls) == 2:
            signal.signal(signal.SIGTERM, foreign)
        if len(calls) == 7:
            os.kill(os.getpid(), signal.SIGTERM)
        return update(self)

    monkeypatch.setattr(OffPolicyTrainer, "update", replacing)
    summary = run(compose_config(tiny(tmp_path, "mujoco", "algo.max_iterations=20", *QUIET)))
    assert not swallowed
    assert summary.status == "interrupted" and summary.stopped_by == "SIGTERM"
    assert torch.load(tmp_path / "run" / "model_7.pt", weights_only=True)["iteration"] == 7
    err = capsys.readouterr().err
    assert "SIGTERM's handler had been replaced by " in err and "foreign" in err


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _iterations_logged(summary: Path, count: int) -> bool:
    try:
        return json.loads(summary.read_text())["completed_iterations"] >= count
    except (OSError, ValueError):
        return False


def _stop_from_outside(tmp_path: Path, overrides: list[str], signals: tuple[str, ...], group: bool) -> None:
    """Start ``train`` as its console command would run (run directory ``tmp_path / "run"``), wait for four
    logged iterations, send ``signals`` 50 ms apart (to its whole process group when ``group``: what Ctrl-C in a
    terminal and ``timeout`` do, so helper processes such as Inductor's compile workers get them too) and check
    that the work was saved."""
    run_dir = tmp_path / "run"
    code = "from unilab.apps.train import main; main()"  # as the console command: arguments from sys.argv
    child = subprocess.Popen(
        [sys.executable, "-c", code, *overrides, "training.log_interval=2"],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=group,  # its own process group, as a shell gives a foreground job
    )
    try:
        # A child that died (a bad import, a crash at start-up) fails the test at once, not after the whole bound.
        summary = run_dir / "run_summary.json"
        _wait_for(lambda: child.poll() is not None or _iterations_logged(summary, 4), 600, "four logged iterations")
        assert child.poll() is None, f"train ended before four logged iterations: {child.communicate()[1][-2000:]}"
        for name in signals:
            (os.killpg if group else os.kill)(child.pid, getattr(signal, name))
            time.sleep(0.05)
        _, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            (os.killpg if group else os.kill)(child.pid, signal.SIGKILL)
    assert child.returncode == 128 + getattr(signal, signals[0]), err
    data = json.loads((run_dir / "run_summary.json").read_text())
    assert data["status"] == "interrupted" and data["stopped_by"] == signals[0]
    checkpoint = torch.load(data["last_checkpoint"], weights_only=True)
    assert checkpoint["iteration"] == data["completed_iterations"] >= 4
    assert not [p.name for p in run_dir.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize(
    ("signals", "group"),
    # One process each; the hangup and the double Ctrl-C also reach a run in process, in the fast tests above.
    [
        pytest.param(("SIGHUP",), False, marks=pytest.mark.slow),
        pytest.param(("SIGINT", "SIGINT"), False, marks=pytest.mark.slow),
        (("SIGINT",), True),
    ],
    ids=["hangup", "double-ctrl-c", "ctrl-c-to-the-group"],
)
def test_a_train_process_stopped_from_outside_keeps_its_work(
    tmp_path: Path, signals: tuple[str, ...], group: bool
) -> None:
    """A real process and real signals: a terminal closing (SIGHUP), an impatient double Ctrl-C 50 ms apart, and
    Ctrl-C as a terminal sends it, to the whole process group."""
    overrides = tiny(tmp_path, "mujoco", "algo.max_iterations=100000", "algo.save_interval=100000", *QUIET)
    _stop_from_outside(tmp_path, overrides, signals, group)


@pytest.mark.gpu
def test_ctrl_c_to_the_group_of_a_captured_cuda_run_keeps_its_work(tmp_path: Path) -> None:
    """The same on CUDA with everything a canonical run has: torch.compile (and so Inductor's compile workers in
    the process group), both CUDA graphs, and the env step beside the updates."""
    overrides = [
        *SMALL_CUDA_RUN,
        "algo.max_iterations=1000000",
        "algo.save_interval=1000000",
        "training.progress=false",
        "training.no_play=true",
        f"training.log_dir={tmp_path / 'run'}",
        *QUIET,
    ]
    _stop_from_outside(tmp_path, overrides, ("SIGINT",), group=True)


# -- one writer per run directory, resume never overwrites ------------------------------------------------------


def test_a_second_writer_is_refused_with_the_holder_named(tmp_path: Path, capsys) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = RunLock(run_dir)
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(tiny(tmp_path, "mujoco", "algo.max_iterations=2", *QUIET))
        err = _one_line_error(capsys, exit_info)
        assert f"run directory {run_dir} is in use by pid {os.getpid()} on host" in err
        assert [p.name for p in run_dir.iterdir()] == [".lock"]
    finally:
        holder.release()


def test_the_lock_is_held_while_the_run_trains_and_released_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from unilab.run.run_dir import RunDirInUse

    run_dir, update, refusals = tmp_path / "run", OffPolicyTrainer.update, []

    def second_writer_mid_run(self):
        with pytest.raises(RunDirInUse, match=f"in use by pid {os.getpid()}") as refused:
            RunLock(run_dir)
        refusals.append(refused)
        return update(self)

    monkeypatch.setattr(OffPolicyTrainer, "update", second_writer_mid_run)
    run(compose_config(tiny(tmp_path, "mujoco", "algo.max_iterations=3", *QUIET)))
    assert len(refusals) == 3
    RunLock(run_dir).release()


def test_a_run_directory_that_cannot_be_created_is_one_line(tmp_path: Path, capsys) -> None:
    (tmp_path / "taken").write_text("a file, not a directory")
    argv = [o for o in tiny(tmp_path, "mujoco", *QUIET) if not o.startswith("training.log_dir")]
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, f"training.log_dir={tmp_path / 'taken'}"])
    assert f"cannot create or lock the run directory under {tmp_path / 'taken'}" in _one_line_error(capsys, exit_info)


def test_the_lock_of_a_process_that_died_does_not_block_the_directory(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    code = f"import os; from unilab.run.run_dir import RunLock; RunLock({str(run_dir)!r}); os._exit(9)"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO, check=False).returncode == 9
    assert (run_dir / ".lock").read_text().startswith("pid ")
    summary = run(compose_config(tiny(tmp_path, "mujoco", "algo.max_iterations=2", *QUIET)))
    assert summary.status == "completed"


def test_an_interrupted_run_continues_in_place_and_its_counters_carry_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    base = tiny(tmp_path, "mujoco", "algo.save_interval=5", *QUIET)
    run_dir = tmp_path / "run"
    with monkeypatch.context() as patch:
        _signal_in_update(patch, 7, signal.SIGTERM)
        first = run(compose_config([*base, "algo.max_iterations=20"]))
    assert first.status == "interrupted" and {p.name for p in run_dir.glob("model_*.pt")} == {
        "model_5.pt",
        "model_7.pt",
    }
    saved = torch.load(run_dir / "model_7.pt", weights_only=True)
    capsys.readouterr()

    with pytest.raises(SystemExit) as exit_info:  # an older checkpoint would overwrite model_7.pt
        main([*base, "algo.max_iterations=20", f"algo.resume={run_dir / 'model_5.pt'}"])
    err = _one_line_error(capsys, exit_info)
    assert "refusing to resume model_5.pt" in err and "holds later checkpoints (model_7.pt)" in err

    resumed = run(compose_config([*base, "algo.max_iterations=12", f"algo.resume={run_dir / 'model_7.pt'}"]))
    assert resumed.status == "completed" and resumed.completed_iterations == 12
    prefill = 64 // 4  # the replay buffer is not saved: the resumed run refills it
    assert saved["env_steps"] == first.total_env_steps == (prefill + 7) * 4
    assert resumed.total_env_steps == saved["env_steps"] + (prefill + 5) * 4
    assert resumed.training_wall_time_sec > first.training_wall_time_sec
    final = torch.load(run_dir / "model_12.pt", weights_only=True)
    assert final["train_wall_time_sec"] > saved["train_wall_time_sec"]


# -- mismatched resume ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sac_walk_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("sac_walk")
    run(compose_config(tiny(tmp_path, "mujoco", "algo.max_iterations=2", *QUIET)))
    return tmp_path / "run" / "model_2.pt"


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (
            ["algo=flashsac", "task=g1_motion_tracking"],
            "is sac on g1_walk_flat; the config is flashsac on g1_motion_tracking",
        ),
        (
            ["algo.actor_hidden=[16,16]"],
            "is sac on g1_walk_flat with algo.actor_hidden=[32, 32]; "
            "the config is sac on g1_walk_flat with algo.actor_hidden=[16, 16]",
        ),
        (
            ["algo.num_atoms=11"],
            "is sac on g1_walk_flat with algo.num_atoms=21; the config is sac on g1_walk_flat with algo.num_atoms=11",
        ),
    ],
)
def test_a_checkpoint_for_another_config_is_named_as_such_before_any_work(
    tmp_path: Path, sac_walk_checkpoint: Path, overrides: list[str], expected: str, capsys
) -> None:
    argv = tiny(tmp_path, "mujoco", "algo.max_iterations=4", *QUIET, *overrides)
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, f"algo.resume={sac_walk_checkpoint}"])
    err = _one_line_error(capsys, exit_info)
    assert f"checkpoint {sac_walk_checkpoint} {expected}" in err
    assert not (tmp_path / "run").exists()


def test_a_checkpoint_already_past_max_iterations_is_refused(tmp_path: Path, sac_walk_checkpoint: Path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*tiny(tmp_path, "mujoco", "algo.max_iterations=2", *QUIET), f"algo.resume={sac_walk_checkpoint}"])
    assert "is at iteration 2, not below algo.max_iterations=2" in _one_line_error(capsys, exit_info)


# -- bounded allocations --------------------------------------------------------------------------------------------


def test_sixteen_million_envs_are_refused_at_once(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    """At once: before the run's physics is built. Counting the builds says so however loaded the machine is, which
    a bound on the seconds it took (1 s) did not."""
    built: list[int] = []  # the number of worlds of every physics build
    build = SimBackend.__init__

    def counted(self, model, num_worlds: int, *args, **kwargs) -> None:
        built.append(num_worlds)
        build(self, model, num_worlds, *args, **kwargs)

    monkeypatch.setattr(SimBackend, "__init__", counted)
    with pytest.raises(SystemExit) as exit_info:
        main([*tiny(tmp_path, "mujoco"), "algo.num_envs=16000000"])
    err = _one_line_error(capsys, exit_info)
    assert "this run needs at least" in err and "(replay " in err and "lower algo.num_envs" in err
    assert built == []  # the estimate is sized from the task's layout, with no physics built
    assert not (tmp_path / "run").exists()


def test_old_checkpoints_are_pruned_after_each_save(tmp_path: Path) -> None:
    argv = tiny(tmp_path, "mujoco", "algo.max_iterations=25", "algo.save_interval=5", *QUIET)
    run(compose_config([*argv, "training.keep_checkpoints=2"]))
    assert {p.name for p in (tmp_path / "run").glob("model_*.pt")} == {"model_20.pt", "model_25.pt"}


# -- user errors ----------------------------------------------------------------------------------------------------


def test_a_bad_motion_file_is_one_line_naming_the_problem(tmp_path: Path, capsys) -> None:
    with np.load(DEFAULT_MOTION) as archive:
        arrays = {key: archive[key] for key in archive.files}
    arrays["fps"] = np.array(0.02)
    bad = tmp_path / "slow.npz"
    np.savez(bad, **arrays)
    with pytest.raises(SystemExit) as exit_info:
        main([*tiny(tmp_path, "mujoco"), "task=g1_motion_tracking", f"task.motion_file={bad}"])
    err = _one_line_error(capsys, exit_info)
    assert f"{bad}: key 'fps' must be a finite positive frame rate in [1, 1000] Hz, got 0.02" in err
    assert not (tmp_path / "run").exists()
