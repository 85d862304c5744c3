"""The garbage collector's thresholds while a training run starts: raised by the ``train`` command from its first
moment, put back once the run's first iteration is done, so the iterations it times collect as usual."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from unilab.core import startup_gc

PLAIN = (321, 7, 9)  # thresholds no library sets, so a test sees whose they are


@pytest.fixture
def plain_thresholds() -> Iterator[None]:
    """The process's thresholds set to ``PLAIN`` for the test, and the ones it had put back after it."""
    had = gc.get_threshold()
    startup_gc.release()
    gc.set_threshold(*PLAIN)
    try:
        yield
    finally:
        startup_gc.release()
        gc.set_threshold(*had)


def test_hold_raises_the_youngest_threshold_once_and_release_puts_back_what_it_found(plain_thresholds) -> None:
    startup_gc.hold()
    assert gc.get_threshold() == (startup_gc.HELD_THRESHOLD, 7, 9)
    startup_gc.hold()  # a second hold must not take the held thresholds for the ones to put back
    startup_gc.release()
    assert gc.get_threshold() == PLAIN
    startup_gc.release()
    assert gc.get_threshold() == PLAIN


def test_a_collector_turned_off_by_its_threshold_stays_off(plain_thresholds) -> None:
    gc.set_threshold(0, 7, 9)
    startup_gc.hold()
    assert gc.get_threshold() == (0, 7, 9)
    startup_gc.release()
    assert gc.get_threshold() == (0, 7, 9)


def test_a_process_that_never_held_keeps_its_thresholds(plain_thresholds) -> None:
    startup_gc.release()
    assert gc.get_threshold() == PLAIN


def test_held_releases_when_its_block_raises(plain_thresholds) -> None:
    with pytest.raises(RuntimeError), startup_gc.held():
        assert gc.get_threshold()[0] == startup_gc.HELD_THRESHOLD
        raise RuntimeError("start-up failed")
    assert gc.get_threshold() == PLAIN


@pytest.mark.parametrize("entry", ["train", "unilab train"])
def test_the_train_command_holds_while_it_runs(plain_thresholds, monkeypatch: pytest.MonkeyPatch, entry: str) -> None:
    from unilab.apps import cli

    seen = []
    command = SimpleNamespace(main=lambda *args: seen.append(gc.get_threshold()))
    monkeypatch.setattr(cli, "import_command", lambda prog, module: command)
    monkeypatch.setattr(cli, "configure", lambda: None)  # the test's caches stay where the suite put them
    arguments = ["--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco"]
    if entry == "train":
        monkeypatch.setattr(sys, "argv", ["train", *arguments])
        cli.train()
    else:
        cli.main(["train", *arguments])
    assert seen == [(startup_gc.HELD_THRESHOLD, 7, 9)]
    assert gc.get_threshold() == PLAIN


def test_a_run_releases_before_the_iterations_it_times(
    plain_thresholds, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from test_train import tiny

    from unilab.apps.compose import compose_config
    from unilab.apps.train import run
    from unilab.train.off_policy import OffPolicyTrainer

    seen, update = [], OffPolicyTrainer.update

    def recording(self):
        seen.append(gc.get_threshold())
        return update(self)

    monkeypatch.setattr(OffPolicyTrainer, "update", recording)
    startup_gc.hold()
    summary = run(compose_config(tiny(tmp_path, "mujoco", "algo.max_iterations=3", "training.export_onnx=false")))
    assert summary.status == "completed"
    assert seen == [(startup_gc.HELD_THRESHOLD, 7, 9), PLAIN, PLAIN]  # the first, untimed update held; then none


class _Seen(Exception):
    """Raised by a side process's stubbed work once it has seen the thresholds."""


def test_each_side_process_holds_while_it_compiles(
    plain_thresholds, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import pickle

    from unilab.core import warp_ahead
    from unilab.sim import kernels_ahead
    from unilab.train import prewarm

    seen = []

    def work(*args, **kwargs):
        seen.append(gc.get_threshold())
        startup_gc.release()  # each side process is a process of its own: start the next one unheld
        gc.set_threshold(*PLAIN)
        raise _Seen

    monkeypatch.setattr(warp_ahead, "load_step_modules", work)
    monkeypatch.setattr(kernels_ahead.mujoco.MjModel, "from_binary_path", work)
    monkeypatch.setattr(prewarm, "compile_update", work)
    payload = tmp_path / "payload.pkl"
    payload.write_bytes(pickle.dumps((None, None, None)))
    for entry in (
        lambda: warp_ahead.build("cpu"),
        lambda: kernels_ahead.build(tmp_path / "model.mjb", tmp_path / "settings.json", 1, "cpu"),
        lambda: prewarm.main([str(payload)]),
    ):
        with pytest.raises(_Seen):
            entry()
    assert seen == [(startup_gc.HELD_THRESHOLD, 7, 9)] * 3


def test_eval_holds_for_its_whole_life_and_puts_the_thresholds_back(
    plain_thresholds, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from test_train import tiny

    from unilab.apps import cli
    from unilab.apps import eval as eval_app
    from unilab.apps.compose import compose_config
    from unilab.apps.train import run
    from unilab.envs.runner import EnvRunner

    run(compose_config(tiny(tmp_path, "mujoco", "algo.max_iterations=2", "training.export_onnx=false")))
    started, stepped = [], []
    source, step = eval_app.policy_source, EnvRunner.step

    def starting(*args, **kwargs):
        started.append(gc.get_threshold())
        return source(*args, **kwargs)

    def stepping(self):
        stepped.append(gc.get_threshold())
        return step(self)

    monkeypatch.setattr(eval_app, "policy_source", starting)
    monkeypatch.setattr(EnvRunner, "step", stepping)
    monkeypatch.setattr(cli, "configure", lambda: None)  # the test's caches stay where the suite put them
    checkpoint = str(tmp_path / "run" / "model_2.pt")
    cli.main(["eval", "--checkpoint", checkpoint, "--num-envs", "2", "--episode-s", "0.1", "--out", str(tmp_path)])
    held = (startup_gc.HELD_THRESHOLD, 7, 9)
    assert started == [held] and stepped and set(stepped) == {held}
    assert gc.get_threshold() == PLAIN
