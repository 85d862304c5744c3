"""``task.reward_weights.<term>=w`` replaces a reward term's weight from the command line, as Isaac Lab's and mjlab's
users set ``rewards.<term>.weight``; a name the task lacks, or a weight that is not a finite number, is one line."""

from __future__ import annotations

import dataclasses
import functools
import json
from pathlib import Path

import pytest
from test_train import TINY

from unilab.apps.compose import compose_config
from unilab.apps.eval import main as evaluate_main
from unilab.apps.train import main
from unilab.run.config import task_overrides
from unilab.tasks import registry
from unilab.tasks.registry import make_task


def test_a_weight_replaces_only_its_term() -> None:
    cfg = compose_config(["sim=mujoco", "task=g1_walk_flat", "task.reward_weights.penalty_action_rate=-0.1"])
    task, stock = make_task("g1_walk_flat", **task_overrides(cfg)), make_task("g1_walk_flat")
    assert task.rewards["penalty_action_rate"].weight == -0.1
    assert {k: t.weight for k, t in task.rewards.items() if k != "penalty_action_rate"} == {
        k: t.weight for k, t in stock.rewards.items() if k != "penalty_action_rate"
    }


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("task.reward_weights.nope=1", "task.reward_weights.nope: g1_walk_flat has no such reward term; its terms: "),
        ("task.reward_weights.alive=nan", "task.reward_weights.alive must be a finite number, got nan"),
    ],
)
def test_a_bad_weight_is_one_line_before_any_work(override: str, message: str, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--cfg", "sim=mujoco", "task=g1_walk_flat", override])
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"train: error: {message}")


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ({"nope": 1.0}, r"^reward_weights\.nope: g1_walk_flat has no such reward term; its terms: tracking_lin_vel, "),
        ({"alive": float("inf")}, r"^reward_weights\.alive must be a finite number, got inf$"),
    ],
)
def test_python_callers_get_the_same_one_line_check(weights: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_task("g1_walk_flat", reward_weights=weights)


def test_a_run_records_its_weights_and_trains_with_them(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    main([*TINY, "task.reward_weights.alive=0.5", "training.export_onnx=false", f"training.log_dir={run_dir}"])
    config = json.loads((run_dir / "run_config.json").read_text())["config"]
    assert config["task"]["reward_weights"] == {"alive": 0.5}
    last = max(run_dir.glob("model_*.pt"), key=lambda path: int(path.stem.split("_")[1]))
    result = evaluate_main(["--checkpoint", str(last), "--num-envs", "2", "--episode-s", "0.1"])  # the run's task
    assert result["task"] == "g1_walk_flat" and result["steps"] > 0


def test_a_config_without_weights_does_not_build_its_task(monkeypatch: pytest.MonkeyPatch) -> None:
    """The check reads a task's reward terms only where weights are given: composing a rough walk's config would
    otherwise generate its terrain and compile its model once more than the run needs."""
    real = registry.get_task("g1_walk_rough")
    built = []

    @functools.wraps(real.make_config)  # its signature names the task's overrides
    def counting(**build):
        built.append(build)
        return real.make_config(**build)

    counted = dataclasses.replace(real, make_config=counting)
    monkeypatch.setattr(registry, "get_task", lambda name: counted if name == real.name else real)
    cfg = compose_config(["algo=sac", "task=g1_walk_rough", "sim=mujoco"])
    assert cfg.task.reward_weights == {} and built == []
    compose_config(["algo=sac", "task=g1_walk_rough", "sim=mujoco", "task.reward_weights.alive=0.5"])
    assert len(built) == 1
