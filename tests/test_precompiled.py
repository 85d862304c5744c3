"""A compiled function kept on disk: saved by one process, loaded by the next, reading the live objects, and a file
that does not load compiled again; and the name a run's env step is kept under."""

from __future__ import annotations

import copy
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from unilab.core.precompiled import KeptCompile
from unilab.run.config import schema
from unilab.run.precompile import step_file, step_key

# A target whose step reads a tensor through an object holding a ctypes library, which does not pickle (a MuJoCo Warp
# backend holds such handles): the case the saved function must load without pickling anything it reached. Its code
# lives in a module of its own, as a user's task would, outside this package.
MODULE = """
import ctypes

import torch

SCALE = {scale}


class Backend:
    def __init__(self, offset):
        self.library = ctypes.CDLL(None)
        self.offset = torch.full((4,), offset)


class Target:
    def __init__(self, weight, offset):
        self.backend = Backend(offset)
        self.weight = torch.full((4,), weight)

    def step(self):
        return torch.sin(self.weight) * SCALE + self.backend.offset
"""

SCRIPT = """
import json, sys
from pathlib import Path

sys.path.insert(0, sys.argv[4])
from unilab.core.precompiled import KeptCompile
from user_steps import Target

target = Target(float(sys.argv[2]), float(sys.argv[3]))
kept = KeptCompile(target.step, Path(sys.argv[1]))
first = kept()
target.weight.add_(1.0)  # in place, as an optimizer changes the acting weights
print(json.dumps({"outcome": kept.outcome, "first": first.tolist(), "second": kept().tolist()}))
"""


def _run(path: Path, weight: float, offset: float, scale: float = 3.0) -> tuple[dict, str]:
    code = path.parent / "code"
    code.mkdir(parents=True, exist_ok=True)
    (code / "user_steps.py").write_text(MODULE.format(scale=scale))
    args = [sys.executable, "-c", SCRIPT, str(path), str(weight), str(offset), str(code)]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def _expected(weight: float, offset: float, scale: float = 3.0) -> list[float]:
    return [math.sin(weight) * scale + offset] * 4


def _notices(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("unilab: the saved compiled step")]


def test_a_function_saved_by_one_process_is_loaded_by_the_next_and_reads_the_live_objects(tmp_path: Path) -> None:
    path = tmp_path / "kept" / "step.bin"
    saved, _ = _run(path, 0.5, 1.0)
    assert saved["outcome"] == "saved" and path.is_file()
    assert saved["first"] == pytest.approx(_expected(0.5, 1.0))
    loaded, stderr = _run(path, 1.5, -2.0)  # other values: the loaded function reads this process's tensors
    assert loaded["outcome"] == "loaded" and not _notices(stderr)
    assert loaded["first"] == pytest.approx(_expected(1.5, -2.0))
    assert loaded["second"] == pytest.approx(_expected(2.5, -2.0))


def _breaks(x: torch.Tensor) -> torch.Tensor:
    torch._dynamo.graph_break()
    return x + 1


def test_a_function_that_does_not_compile_whole_is_traced_or_refused_as_fullgraph_asks(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Without ``fullgraph`` a graph break falls back to ``torch.compile`` in pieces, with one line; with it, the break
    fails at the first call, as ``torch.compile(fullgraph=True)`` fails, and nothing is kept either way."""
    loose = KeptCompile(_breaks, tmp_path / "loose.bin")
    assert loose(torch.zeros(3)).tolist() == [1.0, 1.0, 1.0]
    assert loose.outcome == "traced" and "does not compile whole" in capsys.readouterr().err
    strict = KeptCompile(_breaks, tmp_path / "strict.bin", fullgraph=True)
    with pytest.raises(torch._dynamo.exc.Unsupported):
        strict(torch.zeros(3))
    assert not list(tmp_path.glob("*.bin"))


@pytest.mark.slow
def test_an_edit_to_a_file_the_trace_read_compiles_the_function_again(tmp_path: Path) -> None:
    path = tmp_path / "step.bin"
    _run(path, 0.5, 1.0)
    edited, stderr = _run(path, 0.5, 1.0, scale=4.0)  # the same key: only the module's file tells
    assert edited["outcome"] == "saved"
    assert edited["first"] == pytest.approx(_expected(0.5, 1.0, scale=4.0))
    (notice,) = _notices(stderr)
    assert "user_steps.py, which has changed since" in notice and notice.endswith("compiling it again")


def test_a_file_that_does_not_load_is_compiled_again_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "step.bin"
    path.write_bytes(b"not a saved function")
    path.with_suffix(".sources.json").write_text("{}")
    result, stderr = _run(path, 0.5, 1.0)
    assert result["outcome"] == "saved"
    assert result["first"] == pytest.approx(_expected(0.5, 1.0))
    (notice,) = _notices(stderr)
    assert str(path) in notice and "did not load" in notice
    assert path.read_bytes() != b"not a saved function"


@pytest.mark.slow
def test_a_function_without_its_record_is_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "step.bin"
    path.write_bytes(b"a function cut off before its record was written")
    result, stderr = _run(path, 0.5, 1.0)
    assert result["outcome"] == "saved" and "no readable record" in _notices(stderr)[0]
    assert path.with_suffix(".sources.json").is_file()


def _config(**changes: object):
    cfg = schema("sac")
    cfg.task.name = "g1_walk_flat"
    cfg.sim.name = "mjwarp"
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        setattr(getattr(cfg, section), key, value)
    return cfg


@pytest.fixture(scope="module")
def model():
    from unilab.tasks.registry import make_task, task_model

    return task_model(make_task("g1_walk_flat"))


def test_the_step_key_ignores_the_seed_and_run_length_and_nothing_the_step_reads(model) -> None:
    base = step_key(_config(), "cpu", model)
    assert step_key(_config(algo__seed=7, algo__max_iterations=3, algo__precompile=True), "cpu", model) == base
    for changed in (
        _config(algo__num_envs=8),
        _config(task__name="g1_walk_rough"),
        _config(task__obs_noise=False),
        _config(task__knobs={"nconmax": 32}),
        _config(algo__actor_hidden=[64, 64]),
    ):
        assert step_key(changed, "cpu", model) != base
    other = copy.copy(model)
    other.opt.timestep *= 2
    assert step_key(_config(), "cpu", other) != base


def test_the_step_key_reads_a_motion_library_by_its_bytes(tmp_path: Path, model) -> None:
    clip = tmp_path / "clip.npz"
    clip.write_bytes(b"one")
    cfg = _config(task__name="g1_motion_tracking", task__motion_file=str(clip))
    before = step_key(cfg, "cpu", model)
    clip.write_bytes(b"two")
    assert step_key(cfg, "cpu", model) != before


def test_a_run_keeps_a_step_only_where_it_compiles_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, model) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr("unilab.run.precompile.step_key", lambda *_: "KEY")  # the GPU's name is not read
    kept = tmp_path / "unilab-precompiled" / "env_step-KEY.bin"
    assert step_file(_config(algo__precompile=True), "cuda", model) == kept
    assert step_file(_config(algo__precompile=False), "cuda", model) is None
    assert step_file(_config(algo__precompile=True, algo__compile=False), "cuda", model) is None
    assert step_file(_config(algo__precompile=True), "cpu", model) is None  # only a CUDA run compiles its step
    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR")
    assert step_file(_config(algo__precompile=True), "cuda", model) is None


@pytest.mark.gpu
@pytest.mark.parametrize("algo", [["algo=sac", "algo.batch_size=256"], ["algo=ppo"]], ids=["sac", "ppo"])
def test_a_second_cuda_run_loads_what_the_first_saved(tmp_path: Path, algo: list[str]) -> None:
    script = Path(__file__).resolve().parents[1] / "scripts" / "train.py"
    environment = {**os.environ, "UNILAB_CACHE_DIR": str(tmp_path / "cache")}
    parts = []
    for name in ("first", "second"):
        args = [*algo, "task=g1_walk_flat", "sim=mjwarp", "algo.num_envs=64"]
        args += ["algo.max_iterations=3", "algo.precompile=true", "training.no_play=true"]
        args += ["training.export_onnx=false", f"training.log_dir={tmp_path / name}"]
        done = subprocess.run(
            [sys.executable, str(script), *args], capture_output=True, text=True, env=environment, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        summary = json.loads((tmp_path / name / "run_summary.json").read_text())
        assert summary["status"] == "completed"
        parts.append(summary)
    assert "env_step_saved" in parts[0]["startup_sec"] and "env_step_loaded" in parts[1]["startup_sec"]
    # The second run traced nothing: the env step and the losses were loaded.
    assert parts[1]["startup_graphs"] == [], parts[1]["startup_graphs"]
    # Each graph the trainer records shows its first call as two start-up parts (``Trainer.take_capture_split``).
    graphs = ("rollout_step", "update") if "algo=ppo" in algo else ("record", "update")
    halves = {f"{graph}_{half}" for graph in graphs for half in ("eager", "capture")}
    assert halves <= set(parts[1]["startup_sec"]), parts[1]["startup_sec"]


UPDATE = """
import json, sys

import torch

from torchrl_ext.distributed import ALONE
from unilab.envs.layout import task_layout
from unilab.tasks.registry import make_task
from unilab.train.learner import learner_class
from unilab.train.prewarm import zero_batch
from unilab.train.flashsac.config import FlashSACConfig
from unilab.train.sac.config import SACConfig

torch.manual_seed(0)
spec = task_layout(make_task("g1_walk_flat")).spec(4, torch.device("cpu"))
config = {"sac": SACConfig, "flashsac": FlashSACConfig}[sys.argv[1]]
cfg = config(num_envs=4, batch_size=32, updates_per_step=2, policy_frequency=1, precompile=True)
learner = learner_class(cfg)(spec, cfg, ALONE, acting_copy=True)
learner.compile = True  # as on CUDA, where a learner compiles its losses
batch = zero_batch(spec, 64)
batch.apply_(lambda t: t.normal_(generator=torch.Generator().manual_seed(1)) if t.is_floating_point() else t)
out = learner.update(batch)
kept = {name: getattr(learner, name).outcome for name in ("_critic_loss", "_actor_loss")}
print(json.dumps({"kept": kept, "out": {k: v.item() for k, v in out.items()}}))
"""


PPO_UPDATE = """
import json

import torch

from unilab.envs.layout import task_layout
from unilab.tasks.registry import make_task
from unilab.train.on_policy import rollout_buffer
from unilab.train.ppo.config import PPOConfig
from unilab.train.ppo.learner import PPOLearner

spec = task_layout(make_task("g1_walk_flat")).spec(4, torch.device("cpu"))
cfg = PPOConfig(num_envs=4, num_steps_per_env=3, num_mini_batches=2, num_learning_epochs=1, precompile=True)
learner = PPOLearner(spec, cfg)
learner.compile = True  # as on CUDA, where the learner compiles its loss
rollout = rollout_buffer(spec, cfg.num_steps_per_env)
rollout.apply_(lambda t: t.normal_(generator=torch.Generator().manual_seed(1)) if t.is_floating_point() else t)
out = learner.update(rollout)
print(json.dumps({"kept": {"_loss_fn": learner._loss_fn.outcome}, "out": {k: v.item() for k, v in out.items()}}))
"""


SAC_LOSSES = ["actor_loss", "critic_loss"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("algo", "script", "files"),
    [("sac", UPDATE, SAC_LOSSES), ("flashsac", UPDATE, SAC_LOSSES), ("ppo", PPO_UPDATE, ["ppo_loss"])],
    ids=["sac", "flashsac", "ppo"],
)
def test_a_learner_keeps_its_compiled_losses_and_a_second_process_loads_them(
    tmp_path: Path, algo: str, script: str, files: list[str]
) -> None:
    """The second process's update, from the same draws, equals the first's: FlashSAC's BatchNorm statistics, which
    its losses update in place, included."""
    environment = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    results = []
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-c", script, algo], capture_output=True, text=True, env=environment, check=False
        )
        assert done.returncode == 0, done.stderr[-3000:]
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    saved, loaded = results
    assert set(saved["kept"].values()) == {"saved"} and set(loaded["kept"].values()) == {"loaded"}
    assert loaded["kept"].keys() == saved["kept"].keys()
    assert loaded["out"] == pytest.approx(saved["out"], rel=1e-5, abs=1e-6)  # the same draws, the same update
    kept = sorted(path.name.split("-")[0] for path in (tmp_path / "inductor" / "unilab-precompiled").glob("*.bin"))
    assert kept == files
