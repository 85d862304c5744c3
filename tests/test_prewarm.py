"""``unilab.train.prewarm``: the side process runs an update block on zeros laid out as the trainer's data (the
replay's rows, PPO's rollout), so its compile fills the caches with the graphs the run's own first update looks
up."""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.test_train import small_algo, tiny
from torchrl_ext.replay import DeviceReplay
from unilab.apps.compose import compose_config
from unilab.apps.train import run
from unilab.core import side_process
from unilab.envs.layout import task_layout
from unilab.envs.runner import EnvRunner
from unilab.tasks.registry import make_functional_env, make_task
from unilab.train import prewarm
from unilab.train.off_policy import TRANSITION_KEYS
from unilab.train.prewarm import UpdatePrewarm, record_path, zero_batch
from unilab.train.update_key import update_key

REPO = Path(__file__).resolve().parents[1]


def test_the_zero_batch_is_laid_out_as_the_replay_s_rows() -> None:
    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4, device="cpu")
    runner = EnvRunner(env, lambda obs: torch.zeros(4, env.action_dim), seed=0)
    replay = DeviceReplay(16, 4, seed=0, device=torch.device("cpu"))
    replay.extend(runner.step().select(*TRANSITION_KEYS))
    real, zeros = replay.sample(8), zero_batch(env.spec(), 8)
    assert set(zeros.keys(True, True)) == set(real.keys(True, True)) and zeros.batch_size == real.batch_size
    for key in real.keys(True, True):
        a, b = real[key], zeros[key]
        assert (a.shape, a.dtype, a.stride(), a.device) == (b.shape, b.dtype, b.stride(), b.device), key
        assert not b.any()


@pytest.mark.parametrize("algo", ["sac", "flashsac", "ppo"])
def test_the_side_process_runs_an_update_block_on_zeros(algo: str, tmp_path: Path) -> None:
    env = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4, device="cpu")
    payload, record = tmp_path / "payload.pkl", tmp_path / "records" / "key"
    payload.write_bytes(pickle.dumps((small_algo(algo), env.spec(), record)))
    done = subprocess.run(
        [sys.executable, "-m", "unilab.train.prewarm", str(payload)], cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert record.exists()  # what it compiled is recorded once the update ran


def test_the_record_names_the_update_not_the_run() -> None:
    spec = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4, device="cpu").spec()
    key = update_key(small_algo("sac"), spec)
    assert update_key(small_algo("sac", "algo.seed=7", "algo.max_iterations=9", "algo.save_interval=3"), spec) == key
    assert update_key(small_algo("sac", "algo.batch_size=32"), spec) != key
    assert update_key(small_algo("flashsac"), spec) != key
    assert update_key(small_algo("sac"), dataclasses.replace(spec, num_envs=8)) != key


def test_a_recorded_update_starts_no_side_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA with ``algo.compile`` a side process starts unless one recorded compiling the same update before."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    started = []
    monkeypatch.setattr(prewarm.side_process, "launch", lambda name, command: started.append(command) or "process")
    cfg = small_algo("sac")
    spec = dataclasses.replace(
        make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4, device="cpu").spec(), device=torch.device("cuda")
    )
    first = UpdatePrewarm.start(cfg, spec)
    assert first is not None and len(started) == 1
    _, _, record = pickle.loads(Path(started[0][-1]).read_bytes())
    assert record == record_path(cfg, spec) and record.parent.parent == tmp_path
    record.parent.mkdir(parents=True)
    record.touch()  # what the side process does once its update ran
    assert UpdatePrewarm.start(cfg, spec) is None and len(started) == 1
    assert UpdatePrewarm.start(small_algo("sac", "algo.seed=3"), spec) is None  # another seed: the same graphs
    assert UpdatePrewarm.start(small_algo("sac", "algo.batch_size=32"), spec) is not None and len(started) == 2
    for command in started:
        Path(command[-1]).unlink()  # the payloads the side processes that never ran would have removed


def test_a_side_process_past_its_limit_is_ended(tmp_path: Path) -> None:
    payload = tmp_path / "payload.pkl"
    payload.write_bytes(b"")
    stuck = UpdatePrewarm(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]), payload)
    assert stuck.wait(limit_s=0.5) < 10.0 and not payload.exists()


@pytest.mark.parametrize(("algo", "started"), [("sac", True), ("ppo", True), ("sac", False)])
def test_a_run_waits_for_its_side_process_before_its_first_update(
    algo: str, started: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Off-policy and on-policy alike; a run for which none started (a recorded update, the CPU) waits for none."""
    calls = []
    side_process.take_lifetimes(0.0)  # what earlier tests in this process launched is theirs, not this run's

    class Side:
        def __init__(self) -> None:
            self.process = side_process.launch("update_prewarm", [sys.executable, "-c", "pass"])

        def wait(self) -> float:
            calls.append("wait")
            return side_process.join(self.process, 10.0)

        def stop(self) -> None:
            calls.append("stop")

    def start(cfg: object, spec: object, given: object) -> Side | None:
        calls.append(spec)
        return Side() if started else None

    monkeypatch.setattr("unilab.run.training_run.UpdatePrewarm.start", start)
    summary = run(compose_config(tiny(tmp_path, "mujoco", f"algo={algo}", "algo.max_iterations=2")))
    assert summary.status == "completed"
    recorded = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    startup = recorded["startup_sec"]
    assert calls[0].num_envs == 4  # asked with the envs' spec
    if started:  # waited for once, between the trainer's build and the first iteration
        assert calls[1:] == ["wait"]
        phases = list(startup)
        assert phases.index("trainer_build") < phases.index("update_prewarm") < phases.index("prefill")
        life = recorded["startup_side"]["update_prewarm"]  # its own length, from its start within the run's
        assert 0.0 < life["began_s"] < recorded["startup_total_sec"] and life["seconds"] is not None
    else:
        assert calls[1:] == [] and "update_prewarm" not in startup and recorded["startup_side"] == {}


def test_nothing_is_started_where_the_learner_does_not_compile() -> None:
    spec = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4, device="cpu").spec()
    assert UpdatePrewarm.start(small_algo("sac"), spec) is None  # on the CPU the losses run eagerly
    assert UpdatePrewarm.start(small_algo("sac", "algo.compile=false"), spec) is None


FIRST_UPDATE = """
import json, sys
from unilab.core.cache_dirs import configure
configure()
import pickle, torch
from torch._dynamo.utils import counters
from unilab.train.prewarm import UpdatePrewarm, compile_update
cfg, spec = pickle.loads(open(sys.argv[1], "rb").read())
if sys.argv[2] == "prewarm":
    UpdatePrewarm.start(cfg, spec).wait()
compile_update(cfg, spec)
print(json.dumps({**counters["inductor"], **counters["aot_autograd"]}))
"""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("algo", ["sac", "flashsac", "ppo"])
def test_after_the_side_process_the_first_update_loads_its_graphs_from_the_caches(algo: str, tmp_path: Path) -> None:
    """Two fresh cache roots: in one the update compiles alone (every graph a miss), in the other after the side
    process (every graph a hit in both Inductor's and AOTAutograd's caches)."""
    spec = task_layout(make_task("g1_walk_flat")).spec(64, torch.device("cuda"))
    payload = tmp_path / "payload.pkl"
    payload.write_bytes(pickle.dumps((small_algo(algo, "algo.num_envs=64"), spec)))
    script = tmp_path / "first_update.py"
    script.write_text(FIRST_UPDATE)
    counts = {}
    for mode in ("alone", "prewarm"):
        env = {**os.environ, "UNILAB_CACHE_DIR": str(tmp_path / mode)}
        command = [sys.executable, str(script), str(payload), mode]
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
        counts[mode] = json.loads(done.stdout.splitlines()[-1])
    assert counts["alone"].get("fxgraph_cache_miss", 0) > 0 and counts["alone"].get("fxgraph_cache_hit", 0) == 0
    prewarmed = counts["prewarm"]
    assert prewarmed.get("fxgraph_cache_hit", 0) > 0 and prewarmed.get("fxgraph_cache_miss", 0) == 0, prewarmed
    assert prewarmed.get("autograd_cache_hit", 0) > 0 and prewarmed.get("autograd_cache_miss", 0) == 0, prewarmed
