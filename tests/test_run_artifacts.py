"""Run artifacts: the tail-rate acceptance metric, run directories, the run summary and ONNX export."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
import torch

from torchrl_ext import export
from torchrl_ext.networks import Actor
from unilab.run import run_dir
from unilab.run.metrics import TailRateMeter
from unilab.run.run_dir import Progress, RunRecord, RunSummary, environment_info, make_run_dir, write_json_atomic
from unilab.run.startup import StartupClock

# ---------------------------------------------------------------------------------------------------------------
# TailRateMeter


def test_tail_rate_is_aggregate_not_mean_of_rates() -> None:
    meter = TailRateMeter(window=20)
    for _ in range(5):  # older iterations that must fall out of the window
        meter.record(10, 1.0)
    for i in range(20):
        meter.record(1000, 0.1 if i % 2 == 0 else 0.3)

    mean_of_rates = (10 * 1000 / 0.1 + 10 * 1000 / 0.3) / 20
    assert meter.tail_env_steps_per_sec() == pytest.approx(5000.0)
    assert mean_of_rates == pytest.approx(6666.67, rel=1e-4)
    assert not math.isclose(meter.tail_env_steps_per_sec(), mean_of_rates, rel_tol=1e-3)
    assert meter.completed_iterations == 25
    assert meter.tail_iteration_count == 20
    assert meter.total_env_steps == 5 * 10 + 20 * 1000
    assert meter.final_env_steps_per_sec() == pytest.approx(1000 / 0.3)


def test_fewer_iterations_than_window() -> None:
    meter = TailRateMeter(window=20)
    meter.record(300, 0.5)
    meter.record(100, 1.5)
    assert meter.tail_iteration_count == 2
    assert meter.completed_iterations == 2
    assert meter.tail_env_steps_per_sec() == pytest.approx(400 / 2.0)
    assert meter.final_env_steps_per_sec() == pytest.approx(100 / 1.5)


def test_phase_split_is_the_tail_mean_per_iteration() -> None:
    meter = TailRateMeter(window=2)
    meter.record(10, 9.0, {"collect": 4.0, "update": 5.0})  # falls out of the window
    meter.record(10, 1.0, {"collect": 0.25, "update": 0.75})
    meter.record(10, 3.0, {"collect": 0.75, "update": 2.25})
    assert meter.tail_phase_seconds() == pytest.approx({"collect": 0.5, "update": 1.5})
    meter.record(10, 1.0)  # an iteration without a split hides the phases rather than skewing them
    assert meter.tail_phase_seconds() == {}


def test_no_rate_before_any_record() -> None:
    meter = TailRateMeter()
    assert meter.tail_env_steps_per_sec() is None
    assert meter.final_env_steps_per_sec() is None
    assert meter.completed_iterations == 0
    assert meter.tail_iteration_count == 0
    assert meter.total_env_steps == 0


def test_memory_is_bounded_by_window() -> None:
    meter = TailRateMeter(window=3)
    for _ in range(1000):
        meter.record(1, 1.0)
    assert len(meter._tail) == 3
    assert meter.completed_iterations == 1000


@pytest.mark.parametrize(
    ("steps", "seconds", "named"),
    [(10, 0.0, "0.0"), (10, -1.0, "-1.0"), (-5, 1.0, "-5"), (10, float("nan"), "nan"), (10, float("inf"), "inf")],
)
def test_bad_record_raises_naming_value(steps: int, seconds: float, named: str) -> None:
    meter = TailRateMeter()
    with pytest.raises(ValueError, match=named):
        meter.record(steps, seconds)
    assert meter.completed_iterations == 0


def test_fractional_steps_and_bad_window_rejected() -> None:
    with pytest.raises(TypeError):
        TailRateMeter().record(1.5, 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="0"):
        TailRateMeter(window=0)


# ---------------------------------------------------------------------------------------------------------------
# make_run_dir


def test_auto_run_dir_layout_and_no_overwrite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_dir, "_timestamp", lambda: "2026-01-02_03-04-05")
    first = make_run_dir(None, "sac", "G1Walk", "warp", root=tmp_path)
    assert first == tmp_path / "sac" / "G1Walk" / "2026-01-02_03-04-05_warp"
    assert first.is_dir()
    (first / "keep.txt").write_text("data")

    second = make_run_dir(None, "sac", "G1Walk", "warp", root=tmp_path)
    third = make_run_dir(None, "sac", "G1Walk", "warp", root=str(tmp_path))
    assert second.name == "2026-01-02_03-04-05_warp_1"
    assert third.name == "2026-01-02_03-04-05_warp_2"
    assert (first / "keep.txt").read_text() == "data"


def test_real_timestamp_format(tmp_path: Path) -> None:
    path = make_run_dir(None, "flashsac", "task", "mjx", root=tmp_path)
    date, clock, sim = path.name.split("_")
    assert sim == "mjx"
    assert len(date.split("-")) == 3 and len(clock.split("-")) == 3


def test_explicit_log_dir_used_exactly(tmp_path: Path) -> None:
    wanted = tmp_path / "deep" / "my_run"
    assert make_run_dir(str(wanted), "sac", "task", "warp", root=tmp_path / "ignored") == wanted
    assert wanted.is_dir()
    assert not (tmp_path / "ignored").exists()
    assert make_run_dir(str(wanted), "sac", "task", "warp") == wanted  # an existing dir is reused, e.g. on resume


# ---------------------------------------------------------------------------------------------------------------
# write_json_atomic


def test_write_json_atomic_round_trip_leaves_no_temp(tmp_path: Path) -> None:
    obj = {
        "z_first": 1,
        "a_second": Path("/x/y"),
        "np_float": np.float32(0.5),
        "np_int": np.int64(7),
        "tensor": torch.tensor(2.5),
        "array": np.arange(3),
        "nested": {"b": [1, 2], "a": None},
    }
    target = tmp_path / "out.json"
    write_json_atomic(target, obj)

    assert sorted(os.listdir(tmp_path)) == ["out.json"]
    loaded = json.loads(target.read_text())
    assert list(loaded) == list(obj)  # insertion order, not sorted
    assert loaded == {
        "z_first": 1,
        "a_second": "/x/y",
        "np_float": 0.5,
        "np_int": 7,
        "tensor": 2.5,
        "array": [0, 1, 2],
        "nested": {"b": [1, 2], "a": None},
    }
    assert '\n  "z_first": 1' in target.read_text()  # indent 2


def test_unserialisable_value_raises_and_keeps_old_file(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    write_json_atomic(target, {"version": 1})
    with pytest.raises(TypeError):
        write_json_atomic(target, {"version": 2, "bad": object()})
    assert json.loads(target.read_text()) == {"version": 1}
    assert sorted(os.listdir(tmp_path)) == ["out.json"]


@pytest.mark.parametrize("broken", ["json.dumps", "os.replace", "os.fsync"])
def test_crash_mid_write_keeps_previous_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, broken: str) -> None:
    target = tmp_path / "run_summary.json"
    write_json_atomic(target, {"version": 1})

    def crash(*args: object, **kwargs: object) -> None:
        raise OSError("simulated crash")

    module_name, func_name = broken.split(".")
    monkeypatch.setattr(getattr(run_dir, module_name), func_name, crash)
    with pytest.raises(OSError, match="simulated crash"):
        write_json_atomic(target, {"version": 2})
    monkeypatch.undo()

    assert json.loads(target.read_text()) == {"version": 1}
    assert sorted(os.listdir(tmp_path)) == ["run_summary.json"]


def test_a_checkpoint_cut_off_mid_write_leaves_the_previous_one_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A signal's KeyboardInterrupt (or any error) halfway through torch.save never leaves a truncated model_N.pt."""
    from unilab.run import checkpoint

    target = tmp_path / "model_10.pt"
    checkpoint.save_checkpoint({"weights": torch.ones(1000)}, target)
    save = torch.save

    def cut_off(obj: object, handle) -> None:
        save(obj, handle)
        handle.truncate(100)
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoint.torch, "save", cut_off)
    with pytest.raises(KeyboardInterrupt):
        checkpoint.save_checkpoint({"weights": torch.zeros(1000)}, target)
    monkeypatch.undo()
    assert torch.equal(torch.load(target, weights_only=True)["weights"], torch.ones(1000))
    assert sorted(os.listdir(tmp_path)) == ["model_10.pt"]


def test_pruning_keeps_the_newest_and_the_one_just_written(tmp_path: Path) -> None:
    from unilab.run.checkpoint import prune_checkpoints

    for iteration in (5, 10, 100, 20):
        (tmp_path / f"model_{iteration}.pt").write_bytes(b"x")
    (tmp_path / "model_best.pt").write_bytes(b"x")  # not a model_<iteration>.pt: never pruned
    prune_checkpoints(tmp_path, 2, just_written=tmp_path / "model_5.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model_100.pt", "model_20.pt", "model_5.pt", "model_best.pt"]
    prune_checkpoints(tmp_path, 0, just_written=tmp_path / "model_100.pt")  # 0 keeps all
    assert len(list(tmp_path.iterdir())) == 4


def test_memory_check_names_the_parts_and_the_remedy(monkeypatch: pytest.MonkeyPatch) -> None:
    from unilab.run import resources

    monkeypatch.setattr(resources, "available_bytes", lambda device: 1024**3)
    resources.check_fits({"replay": 1024**2}, torch.device("cpu"), "lower it")
    with pytest.raises(
        resources.InsufficientMemoryError,
        match=r"at least 3\.0 GB \(replay 2\.0 GB, envs 1\.0 GB\) but cpu has 1\.0 GB free; lower it",
    ):
        resources.check_fits({"replay": 2 * 1024**3, "envs": 1024**3}, torch.device("cpu"), "lower it")
    assert resources.replay_row_bytes({"policy": 100, "critic": 103}, 29) == 4 * (200 + 206 + 29 + 1) + 2


# ---------------------------------------------------------------------------------------------------------------
# environment_info and RunSummary

ENV_KEYS = {"git_commit", "git_commit_short", "git_dirty", "versions", "cuda_available"}
ENV_KEYS |= {"cuda_visible_devices", "gpu_name", "hostname"}
VERSION_KEYS = {"python", "torch", "warp", "mujoco", "mujoco_warp", "tensordict", "torchrl"}


def test_environment_info_keys_and_versions() -> None:
    info = environment_info()
    assert set(info) == ENV_KEYS
    assert set(info["versions"]) == VERSION_KEYS
    assert info["versions"]["torch"] == torch.__version__
    assert info["cuda_available"] == torch.cuda.is_available()
    assert isinstance(info["hostname"], str) and info["hostname"]
    json.dumps(info)  # must be serialisable as is


def test_environment_info_git_of_this_checkout() -> None:
    repo = Path(__file__).resolve().parent.parent
    probe = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        pytest.skip("not running from a git checkout")
    info = environment_info(repo)
    assert info["git_commit"] == probe.stdout.strip()
    assert info["git_commit"].startswith(info["git_commit_short"])
    assert isinstance(info["git_dirty"], bool)


def test_environment_info_outside_git_and_without_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    outside = environment_info(tmp_path)
    assert (outside["git_commit"], outside["git_commit_short"], outside["git_dirty"]) == (None, None, None)

    def no_git(*args: object, **kwargs: object) -> None:
        raise FileNotFoundError("git")

    monkeypatch.setattr(run_dir.subprocess, "run", no_git)
    assert environment_info()["git_commit"] is None


def _filled_summary() -> RunSummary:
    meter = TailRateMeter(window=2)
    for steps, seconds in [(100, 1.0), (200, 0.5), (300, 0.5)]:
        meter.record(steps, seconds)
    record = RunRecord(
        algo="sac",
        task="G1Walk",
        sim="warp",
        num_envs=4096,
        world_size=1,
        config={"lr": 3e-4, "hidden": [32, 32]},
        environment={"hostname": "h", "versions": {"torch": torch.__version__}},
    )
    progress = Progress(
        status="completed",
        start_time_utc="2026-01-02T03:04:05+00:00",
        last_checkpoint="ckpt/model_3.pt",
        last_episodes={"episode_return": 1.25, "episode_length": 500.0},
    )
    return RunSummary.of(
        "completed",
        record,
        progress,
        meter,
        StartupClock(None),
        iterations=3,
        env_steps=600,
        loop_seconds=12.5,
        stopped_by=None,
    )


def test_the_summary_reads_each_figure_from_its_source() -> None:
    summary = _filled_summary()
    assert summary.completed_iterations == 3
    assert summary.tail_iteration_count == 2
    assert summary.total_env_steps == 600
    assert summary.tail_env_steps_per_sec == pytest.approx(500 / 1.0)
    assert summary.final_env_steps_per_sec == pytest.approx(600.0)
    assert (summary.final_mean_reward, summary.mean_episode_length) == (1.25, 500.0)
    assert summary.algo == "sac" and summary.num_envs == 4096 and summary.end_time_utc is not None


def test_run_summary_write_round_trip(tmp_path: Path) -> None:
    summary = _filled_summary()
    path = summary.write(tmp_path)
    assert path == tmp_path / "run_summary.json"
    assert sorted(os.listdir(tmp_path)) == ["run_summary.json"]
    loaded = json.loads(path.read_text())
    field_names = [f.name for f in dataclasses.fields(RunSummary)]
    assert list(loaded) == field_names
    assert loaded == dataclasses.asdict(summary)
    assert RunSummary(**loaded) == summary


def test_run_summary_defaults_and_status_validation(tmp_path: Path) -> None:
    running = RunSummary(status="running", algo="sac", task="t", sim="warp", num_envs=8)
    assert running.tail_env_steps_per_sec is None and running.end_time_utc is None
    assert running.start_time_utc.endswith("+00:00")
    with pytest.raises(ValueError, match="finished"):
        RunSummary(status="finished", algo="sac", task="t", sim="warp", num_envs=8)
    running.status = "bogus"
    with pytest.raises(ValueError, match="bogus"):
        running.write(tmp_path)
    assert not (tmp_path / "run_summary.json").exists()


# ---------------------------------------------------------------------------------------------------------------
# ONNX export

OBS_DIM, ACT_DIM = 11, 4


@pytest.fixture(scope="module")
def trained_actor() -> Actor:
    torch.manual_seed(0)
    actor = Actor(OBS_DIM, ACT_DIM, hidden=(32, 32), normalize_obs=True)
    actor.obs_norm.update(torch.randn(100, OBS_DIM) * 3 + 1)
    with torch.no_grad():  # the heads start at zero; give them weights so the action actually depends on obs
        actor.mean_head.weight.normal_(0.0, 0.5)
        actor.mean_head.bias.normal_(0.0, 0.1)
    return actor


def test_onnx_export_matches_torch(tmp_path: Path, trained_actor: Actor) -> None:
    trained_actor.train()
    before = {k: v.clone() for k, v in trained_actor.state_dict().items()}
    rng_state = torch.get_rng_state()
    path = tmp_path / "policy" / "actor.onnx"

    max_diff = export.export_policy_onnx(trained_actor, OBS_DIM, path)

    assert 0.0 <= max_diff <= 1e-4
    assert trained_actor.training  # the caller's module is untouched
    assert all(torch.equal(before[k], v) for k, v in trained_actor.state_dict().items())
    assert torch.equal(torch.get_rng_state(), rng_state)
    assert sorted(os.listdir(path.parent)) == ["actor.onnx"]

    graph = onnx.load(str(path)).graph
    assert [i.name for i in graph.input] == ["obs"]
    assert [o.name for o in graph.output] == ["action"]
    assert graph.input[0].type.tensor_type.shape.dim[0].dim_param  # symbolic batch axis

    for batch in (1, 5):
        obs = torch.randn(batch, OBS_DIM) * 3 + 1
        with torch.no_grad():
            expected = trained_actor.eval()(obs).numpy()
        actual = export.run_onnx(path, obs.numpy())
        assert actual.shape == (batch, ACT_DIM)
        np.testing.assert_allclose(actual, expected, atol=1e-4, rtol=0)
    assert np.abs(expected).max() > 1e-3  # the comparison above is not between two all-zero outputs


def test_onnx_export_without_check_returns_zero(tmp_path: Path, trained_actor: Actor) -> None:
    path = tmp_path / "actor.onnx"
    assert export.export_policy_onnx(trained_actor, OBS_DIM, path, check=False) == 0.0
    assert path.is_file()


def test_onnx_mismatch_raises_and_keeps_old_file(
    tmp_path: Path, trained_actor: Actor, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "actor.onnx"
    path.write_bytes(b"previous good policy")
    monkeypatch.setattr(export, "run_onnx", lambda p, obs: np.full((obs.shape[0], ACT_DIM), 5.0, np.float32))
    with pytest.raises(RuntimeError, match="differs from torch by"):
        export.export_policy_onnx(trained_actor, OBS_DIM, path)
    assert path.read_bytes() == b"previous good policy"
    assert sorted(os.listdir(tmp_path)) == ["actor.onnx"]


def test_export_works_on_copy_in_eval_mode(tmp_path: Path) -> None:
    """Dropout in train mode would make torch and ONNX disagree, and float64 weights would be cast in place, if the
    export touched the caller's module instead of an eval-mode float32 copy."""
    torch.manual_seed(1)
    policy = torch.nn.Sequential(torch.nn.Linear(OBS_DIM, 16), torch.nn.Dropout(0.5), torch.nn.Linear(16, ACT_DIM))
    policy.double().train()

    max_diff = export.export_policy_onnx(policy, OBS_DIM, tmp_path / "p.onnx")

    assert max_diff <= 1e-4
    assert policy.training and policy[1].training
    assert all(p.dtype == torch.float64 for p in policy.parameters())
