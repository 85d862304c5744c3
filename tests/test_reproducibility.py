"""One ``algo.seed`` fixes a whole CPU run: the same seed writes the same checkpoints and metrics, another does not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.test_train import TINY, for_algo
from unilab.apps.compose import compose_config
from unilab.apps.train import run

# The shared tiny sizes, with a checkpoint every 6 iterations and a log point every 3.
SIZES = [
    *TINY,
    "algo.max_iterations=12",
    "algo.save_interval=6",
    "training.log_interval=3",
    "training.export_onnx=false",
]
SMALL_PPO = ("algo.num_steps_per_env=4", "algo.num_learning_epochs=2", "algo.num_mini_batches=2")
SMALL_FLASHSAC = ("algo.actor_width=32", "algo.critic_width=32", "algo.actor_blocks=1", "algo.critic_blocks=1")


def train(directory: Path, *overrides: str) -> Path:
    algo = next((o.split("=", 1)[1] for o in overrides if o.startswith("algo=")), "sac")
    run(compose_config([*for_algo(algo, SIZES), f"training.log_dir={directory}", *overrides]))
    return directory


def tensors(checkpoint: Path) -> dict[str, torch.Tensor]:
    """Every tensor of a checkpoint by its path in the nested dict."""
    out: dict[str, torch.Tensor] = {}

    def walk(prefix: str, value) -> None:
        if isinstance(value, torch.Tensor):
            out[prefix] = value
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}/{key}", item)
        elif isinstance(value, list | tuple):
            for i, item in enumerate(value):
                walk(f"{prefix}/{i}", item)

    walk("", torch.load(checkpoint, map_location="cpu", weights_only=True))
    return out


def metrics(run_dir: Path) -> dict[str, list[tuple[int, float]]]:
    """TensorBoard scalars other than timings."""
    events = EventAccumulator(str(next(run_dir.glob("events.out.tfevents.*"))))
    events.Reload()
    return {
        tag: [(e.step, e.value) for e in events.Scalars(tag)]
        for tag in events.Tags()["scalars"]
        if not tag.startswith("perf/")
    }


def differing(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> list[str]:
    assert a.keys() == b.keys()
    return [key for key in a if not torch.equal(a[key], b[key])]


@pytest.mark.parametrize(
    ("algo", "task", "sim"),
    [
        ("sac", "g1_walk_flat", "mujoco"),
        ("sac", "g1_walk_flat", "mjwarp"),
        ("flashsac", "g1_motion_tracking", "mujoco"),
        ("ppo", "g1_walk_flat", "mujoco"),
        ("ppo", "g1_walk_flat", "mjwarp"),
    ],
)
def test_same_seed_same_run_other_seed_other_run(tmp_path: Path, algo: str, task: str, sim: str) -> None:
    small = {"flashsac": SMALL_FLASHSAC, "ppo": SMALL_PPO}.get(algo, ())
    common = (f"algo={algo}", f"task={task}", f"sim={sim}", *small)
    a = train(tmp_path / "a", *common, "algo.seed=7")
    b = train(tmp_path / "b", *common, "algo.seed=7")
    c = train(tmp_path / "c", *common, "algo.seed=8")
    for name in ("model_6.pt", "model_12.pt"):
        assert differing(tensors(a / name), tensors(b / name)) == [], name
    assert metrics(a) == metrics(b)
    summary_a, summary_b = (json.loads((d / "run_summary.json").read_text()) for d in (a, b))
    for key in ("total_env_steps", "completed_iterations", "final_mean_reward", "mean_episode_length"):
        assert summary_a[key] == summary_b[key], key
    assert json.loads((a / "run_config.json").read_text())["config"]["algo"]["seed"] == 7
    other = differing(tensors(a / "model_12.pt"), tensors(c / "model_12.pt"))
    weights = [key for key in tensors(a / "model_12.pt") if "weight" in key and "/loss/" in key]
    assert set(weights) <= set(other), "another seed gives other weights"
