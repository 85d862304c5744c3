"""Data-parallel training on the CPU: two ranks over gloo on the C MuJoCo backend, launched as torchrun launches them.

The runs are real processes: one through ``torch.distributed.run`` itself, the others started with the variables
torchrun sets (so a test can signal or kill one rank and watch what the other does, without torchrun's agent
tearing the survivor down first).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import torch.distributed as dist

from tests.test_train import TINY, for_algo
from torchrl_ext.distributed import World, digest
from unilab.apps.compose import compose_config
from unilab.core.rng import derive_seed
from unilab.run.config import task_overrides
from unilab.tasks.registry import make_functional_env
from unilab.train.off_policy import OffPolicyTrainer
from unilab.train.seeding import rank_seed

REPO = Path(__file__).resolve().parents[1]
SIZES = [*TINY, "sim=mujoco", "training.export_onnx=false"]
ENDLESS = ["algo.max_iterations=100000", "algo.save_interval=100000"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ranks(overrides: list[str], size: int = 2) -> list[subprocess.Popen]:
    """``size`` ``train`` processes with the variables torchrun gives its workers."""
    port = free_port()
    ranks = []
    for rank in range(size):
        env = {
            **os.environ,
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "WORLD_SIZE": str(size),
            "LOCAL_WORLD_SIZE": str(size),
            "RANK": str(rank),
            "LOCAL_RANK": str(rank),
            "OMP_NUM_THREADS": "1",
        }
        command = [sys.executable, "scripts/train.py", *overrides]
        ranks.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    return ranks


def finish(ranks: list[subprocess.Popen], timeout: float) -> list[tuple[int, str]]:
    """Each rank's exit status and stderr; a rank still running after ``timeout`` seconds fails the test."""
    deadline = time.monotonic() + timeout
    results = []
    for process in ranks:
        _, err = process.communicate(timeout=max(deadline - time.monotonic(), 0.1))
        results.append((process.returncode, err.decode()))
    return results


def kill(ranks: list[subprocess.Popen]) -> None:
    for process in ranks:
        process.kill()
        process.communicate()


def wait_for_iterations(summary: Path, count: int, ranks: list[subprocess.Popen], timeout: float = 300) -> None:
    """Until rank 0's summary counts ``count`` iterations; ``timeout`` only bounds a broken run, so it leaves room for
    two ranks starting at once on a loaded machine."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert all(process.poll() is None for process in ranks), "a rank ended early"
        try:
            if json.loads(summary.read_text())["completed_iterations"] >= count:
                return
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise AssertionError(f"rank 0 logged fewer than {count} iterations in {timeout} s")


def test_two_ranks_under_torchrun_train_one_set_of_weights(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    overrides = [*SIZES, "algo.max_iterations=12", f"training.log_dir={run_dir}"]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    done = subprocess.run(
        [*launcher, "scripts/train.py", *overrides], cwd=REPO, capture_output=True, text=True, timeout=150
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("run directory:") == 1  # rank 0 alone reports (and writes) the run
    assert [p.name for p in tmp_path.iterdir()] == ["run"]

    data = json.loads((run_dir / "run_summary.json").read_text())
    assert data["status"] == "completed" and data["world_size"] == 2 and data["num_envs"] == 4
    assert data["ranks_in_sync"] is True and data["error"] is None
    checkpoint = torch.load(run_dir / "model_12.pt", weights_only=True)
    assert data["total_env_steps"] == 2 * checkpoint["env_steps"]  # the checkpoint counts rank 0's own
    # The tail rate counts the env steps of both ranks: 2 x 4 per iteration over the seconds of an iteration.
    seconds = sum(data["tail_seconds_per_iteration"].values())
    assert data["tail_env_steps_per_sec"] == pytest.approx(2 * 4 / seconds, rel=1e-6)
    # The observation normaliser saw every row of both ranks (each doubled by its mirror image).
    assert checkpoint["loss"]["actor.obs_norm.count"] == 2 * data["total_env_steps"]

    # The weights every rank agreed on are the ones rank 0 saved.
    cfg = compose_config(overrides)
    env = make_functional_env(cfg.task.name, sim="mujoco", num_envs=4, **task_overrides(cfg))
    trainer = OffPolicyTrainer(env, cfg.algo)
    trainer.load_state_dict(checkpoint)
    assert digest(trainer.learner.shared_tensors()) == data["weights_digest"]


def test_two_ppo_ranks_under_torchrun_take_the_same_steps(tmp_path: Path) -> None:
    """PPO's update block averages gradients, the KL its learning rate follows and the normaliser statistics, so
    ranks with different rollouts end with the same weights and learning rate."""
    run_dir = tmp_path / "run"
    ppo = ["algo=ppo", "algo.num_steps_per_env=4", "algo.num_learning_epochs=2", "algo.num_mini_batches=2"]
    overrides = [
        *for_algo("ppo", SIZES),
        *ppo,
        "algo.max_iterations=4",
        "algo.save_interval=4",
        f"training.log_dir={run_dir}",
    ]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
    done = subprocess.run(
        [*launcher, "scripts/train.py", *overrides], cwd=REPO, capture_output=True, text=True, timeout=150
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((run_dir / "run_summary.json").read_text())
    assert data["status"] == "completed" and data["world_size"] == 2 and data["ranks_in_sync"] is True
    assert data["total_env_steps"] == 2 * 4 * 4 * 4  # ranks x iterations x steps per env x envs
    checkpoint = torch.load(run_dir / "model_4.pt", weights_only=True)
    assert checkpoint["loss"]["actor.obs_norm.count"] == data["total_env_steps"]  # every row of both ranks


@pytest.mark.parametrize("how", ["killed", pytest.param("hung", marks=pytest.mark.slow)])
def test_a_lost_rank_ends_the_run_with_an_error_not_a_hang(tmp_path: Path, how: str) -> None:
    """Killed: the survivor's next collective finds the connection gone. Hung (SIGSTOP): it waits out the
    collective timeout, here 5 s."""
    run_dir = tmp_path / "run"
    overrides = [*SIZES, *ENDLESS, "training.log_interval=2", "training.dist_timeout_s=5"]
    ranks = start_ranks([*overrides, f"training.log_dir={run_dir}"])
    try:
        wait_for_iterations(run_dir / "run_summary.json", 4, ranks)
        ranks[1].send_signal(signal.SIGKILL if how == "killed" else signal.SIGSTOP)
        lost = time.monotonic()
        code, err = finish(ranks[:1], timeout=60)[0]
        waited = time.monotonic() - lost
    finally:
        kill(ranks)
    assert code == 1, err[-3000:]
    assert waited < 30  # a hung rank costs the timeout (5 s) and the final checkpoint, no more
    line = err.strip().splitlines()[-1]
    assert line.startswith("train: error: rank 0 of 2:") and "another rank died or did not arrive within" in line
    data = json.loads((run_dir / "run_summary.json").read_text())
    assert data["status"] == "failed" and data["error"].startswith("RankLost: rank 0 of 2")


def test_a_stop_signal_to_one_rank_stops_every_rank_after_the_same_iteration(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    ranks = start_ranks([*SIZES, *ENDLESS, "training.log_interval=3", f"training.log_dir={run_dir}"])
    try:
        wait_for_iterations(run_dir / "run_summary.json", 3, ranks)
        ranks[1].send_signal(signal.SIGTERM)
        results = finish(ranks, timeout=60)
    finally:
        kill(ranks)
    assert [code for code, _ in results] == [128 + signal.SIGTERM] * 2, results[0][1][-3000:]
    data = json.loads((run_dir / "run_summary.json").read_text())
    assert data["status"] == "interrupted" and data["stopped_by"] == "SIGTERM"  # rank 0 adopted rank 1's signal
    assert data["ranks_in_sync"] is True  # both stopped after the same iteration, a log point
    assert data["completed_iterations"] % 3 == 0
    assert torch.load(data["last_checkpoint"], weights_only=True)["iteration"] == data["completed_iterations"]


@pytest.mark.slow  # four processes on two cores; a single process's refusals are checked in the fast tests
def test_bad_input_and_a_refused_run_directory_fail_on_every_rank_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "held").mkdir()
    (tmp_path / "held" / "run_summary.json").write_text("{}")
    bad = start_ranks([*SIZES, "algo.num_envs=0", f"training.log_dir={tmp_path / 'never'}"])
    held = start_ranks([*SIZES, f"training.log_dir={tmp_path / 'held'}"])
    try:
        results = finish(bad + held, timeout=120)
    finally:
        kill(bad + held)
    for code, err in results:
        assert code == 2 and len(err.strip().splitlines()) == 1, err[-3000:]
    assert all("algo.num_envs must be in [1, 16777216]" in err for _, err in results[:2])
    assert "already holds a run" in results[2][1]
    assert "rank 0 could not claim the run directory" in results[3][1]
    assert not (tmp_path / "never").exists()


@pytest.mark.parametrize("shape", [(3,), ()], ids=["observations", "returns"])
def test_pooled_moments_are_those_of_every_rank_s_rows(monkeypatch: pytest.MonkeyPatch, shape: tuple) -> None:
    """The normaliser merge: rank 0's moments after the all-reduce are the moments of both ranks' rows together."""
    mine, theirs = torch.randn(7, *shape) * 2 + 5, torch.randn(4, *shape) + 3
    reference = torch.full(shape, 4.5)
    world = World(rank=0, size=2)
    sent: list[torch.Tensor] = []
    monkeypatch.setattr(dist, "all_reduce", lambda tensor, op=None: sent.append(tensor.clone()))
    world.moments(theirs, reference)  # what the other rank contributes
    monkeypatch.setattr(dist, "all_reduce", lambda tensor, op=None: tensor.add_(sent[0]))
    count, mean, var = world.moments(mine, reference)
    want_var, want_mean = torch.var_mean(torch.cat([mine, theirs]), dim=0, correction=0)
    assert count == 11
    torch.testing.assert_close(mean, want_mean)
    torch.testing.assert_close(var, want_var)


def test_rank_0_keeps_the_single_process_seeds_and_other_ranks_get_their_own() -> None:
    for stream in ("env", "explore", "replay", "loss"):
        assert rank_seed(7, stream, 0) == derive_seed(7, stream)
        assert len({rank_seed(7, stream, rank) for rank in range(4)}) == 4


def test_without_torchrun_variables_the_world_is_this_process_alone() -> None:
    assert World.from_env({}) == World()
    world = World.from_env({"WORLD_SIZE": "4", "RANK": "3", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert (world.rank, world.size, world.local_rank, world.local_size, world.leader) == (3, 4, 1, 2, False)
    with pytest.raises(ValueError, match="launch the ranks with torchrun"):
        World.from_env({"WORLD_SIZE": "2"})
