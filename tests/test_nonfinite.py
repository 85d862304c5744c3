"""A NaN or an infinity from a task's own term never becomes a saved policy: the run stops at the next log point or
checkpoint, names the reward term or observation group, keeps the last good checkpoint as the summary's, and ends in
one line; under SAC, FlashSAC and PPO alike."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from tensordict import TensorDict
from test_train import tiny

from unilab.apps.train import main
from unilab.core.spec import Mirror
from unilab.managers.terms import ObsTerm, RewardTerm
from unilab.run.checkpoint import list_checkpoints, nonfinite_tensors
from unilab.tasks import registry
from unilab.train.loop import NonFiniteValueError, Report, nonfinite_message

QUIET = ["training.export_onnx=false", "training.log_interval=3", "algo.save_interval=4", "algo.max_iterations=40"]
# Env steps before the bad value appears: past the pre-fill and the first checkpoint of every algorithm's tiny run.
CLEAN_STEPS = {"sac": 40, "flashsac": 40, "ppo": 24 * 5}


def _late(steps: int, value: float) -> Callable[..., torch.Tensor]:
    """A term that is 0 until its ``steps``-th call, then ``value`` for env 0: a user's term that breaks mid-run."""
    calls = [0]

    def term(state, ctx) -> torch.Tensor:
        calls[0] += 1
        out = torch.zeros(ctx.num_envs, device=ctx.device)
        if calls[0] > steps:
            out[0] = value
        return out

    return term


def _register(monkeypatch: pytest.MonkeyPatch, where: str, steps: int, value: float) -> None:
    """``g1_walk_bad``: the flat walk with one more reward term (``where="reward"``) or policy observation term."""
    monkeypatch.setattr(registry, "_registered", {})
    base = registry.get_task("g1_walk_flat").make_config

    def bad_walk(**kwargs):
        config = base(**kwargs)
        # An env step computes observations twice (the terminal one and the one after a reset), rewards once.
        term = _late(steps if where == "reward" else 2 * steps, value)
        if where == "reward":
            return dataclasses.replace(config, rewards={**config.rewards, "broken_bonus": RewardTerm(term, 1.0)})
        broken = ObsTerm(lambda state, ctx: term(state, ctx).unsqueeze(-1), mirror=Mirror.signs(1.0))
        policy = {**config.observations["policy"], "broken_sensor": broken}
        return dataclasses.replace(config, observations={**config.observations, "policy": policy})

    registry.register_task("g1_walk_bad", bad_walk)


def _checkpoints_are_finite(run_dir: Path) -> list[Path]:
    saved = [path for _, path in list_checkpoints(run_dir)]
    for path in saved:
        assert not nonfinite_tensors(torch.load(path, weights_only=True)), path
    return saved


@pytest.mark.parametrize("algo", ["sac", "flashsac", "ppo"])
@pytest.mark.parametrize(
    ("where", "value", "named"),
    [
        ("reward", float("nan"), "reward term 'broken_bonus'"),
        ("observation", float("nan"), "observation group 'policy'"),
        ("reward", float("inf"), "reward term 'broken_bonus'"),
    ],
)
def test_a_term_that_turns_non_finite_stops_the_run_before_it_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, algo: str, where: str, value: float, named: str
) -> None:
    _register(monkeypatch, where, CLEAN_STEPS[algo], value)
    with pytest.raises(SystemExit) as exit_info:
        main(tiny(tmp_path, "mujoco", f"algo={algo}", "task=g1_walk_bad", *QUIET))
    err = capsys.readouterr().err
    assert exit_info.value.code == 1, err
    errors = [line for line in err.splitlines() if line.startswith("train: error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert named in errors[0] and " env steps of " in errors[0]
    run_dir = tmp_path / "run"
    summary = json.loads((run_dir / "run_summary.json").read_text())
    assert summary["status"] == "failed" and named in summary["error"]
    kind = "nonfinite_rewards" if where == "reward" else "nonfinite_observations"
    assert summary["health"][kind] > 0 and summary["completed_iterations"] < 40
    saved = _checkpoints_are_finite(run_dir)
    assert saved and summary["last_checkpoint"] == str(saved[-1])
    assert f"the last good checkpoint: {saved[-1]}" in err


def test_a_non_finite_term_from_the_start_leaves_no_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    _register(monkeypatch, "reward", 0, float("nan"))
    with pytest.raises(SystemExit):
        main(tiny(tmp_path, "mujoco", "task=g1_walk_bad", *QUIET))
    assert "the last good checkpoint: none" in capsys.readouterr().err
    assert not list_checkpoints(tmp_path / "run")
    assert json.loads((tmp_path / "run" / "run_summary.json").read_text())["last_checkpoint"] is None


def test_the_message_puts_the_cause_before_what_it_poisoned() -> None:
    health = {"nonfinite_losses": 3, "nonfinite_actions": 8}
    report = Report({"loss_critic": float("nan")}, {}, health, {"observation group 'policy'": (5, 1)}, 12)
    assert nonfinite_message(report) == (
        "NaN or infinite values: observation group 'policy' in 5 env steps of 1 env, by iteration 12; "
        "the run stopped without saving it"
    )
    losses = nonfinite_message(report._replace(nonfinite={}))
    assert losses is not None and losses.startswith("the losses (loss_critic) turned NaN or infinite in 3 update")
    assert nonfinite_message(report._replace(nonfinite={}, health={"nonfinite_losses": 0})) is None


def test_a_checkpoint_write_checks_the_counters_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The counters are read before a save, not only at log points: a save between two log points is refused."""
    from unilab.apps.compose import compose_config
    from unilab.apps.train import run

    _register(monkeypatch, "reward", CLEAN_STEPS["sac"], float("nan"))
    overrides = tiny(tmp_path, "mujoco", "task=g1_walk_bad", "training.export_onnx=false", "algo.save_interval=2")
    with pytest.raises(NonFiniteValueError, match="broken_bonus"):
        run(compose_config([*overrides, "training.log_interval=1000", "algo.max_iterations=40"]))
    _checkpoints_are_finite(tmp_path / "run")


def test_the_guards_read_nothing_back_to_the_host() -> None:
    """The counting runs inside the recorded steps: it traces whole (``fullgraph``; a graph break is the CPU-visible
    form of a host read) and counts what the eager code counts."""
    from unilab.apps.compose import compose_config
    from unilab.tasks.registry import make_functional_env
    from unilab.train.off_policy import OffPolicyTrainer

    small = ["algo.batch_size=16", "algo.replay_buffer_n=8", "algo.actor_hidden=[16]", "algo.critic_hidden=[16]"]
    cfg = compose_config(["sim=mujoco", "algo.num_envs=2", *small]).algo
    trainer = OffPolicyTrainer(make_functional_env("g1_walk_flat", sim="mujoco", num_envs=2), cfg)
    transition = trainer.runner.step().clone()
    transition["policy"][1, 3] = float("nan")
    transition["reward_terms", "alive"][0] = float("inf")
    terms = torch.stack([transition["reward_terms", name] for name in trainer._term_names])
    torch.compile(trainer._guard_step, fullgraph=True, backend="aot_eager")(terms, transition)
    losses = torch.compile(trainer._guard_losses, fullgraph=True, backend="aot_eager")
    losses(TensorDict({"loss_critic": torch.tensor(1.0), "q_mean": torch.tensor(float("nan"))}, batch_size=[]))
    report = trainer.report_now()
    assert report.nonfinite == {"reward term 'alive'": (1, 1), "observation group 'policy'": (1, 1)}
    assert report.health["nonfinite_rewards"] == report.health["nonfinite_observations"] == 1
    assert report.health["nonfinite_losses"] == 1


def _nan_at_step(state, ctx, step: int) -> torch.Tensor:
    """NaN for every env at its ``step``-th control step of an episode, else 0: pure, so it compiles and replays
    inside the captured env step, as a Python counter would not."""
    at = state["env", "episode_step"] == step
    return torch.where(at, float("nan"), 0.0)


@pytest.mark.gpu
@pytest.mark.parametrize(("algo", "step", "save"), [("sac", 20, 5), ("flashsac", 20, 5), ("ppo", 30, 1)])
def test_a_nan_reward_in_a_captured_compiled_run_stops_it_before_it_is_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys, algo: str, step: int, save: int
) -> None:
    """On CUDA: the env step compiled and captured, the guards counting inside the recorded steps."""
    from test_train import SMALL_CUDA_RUN, for_algo

    monkeypatch.setattr(registry, "_registered", {})
    base = registry.get_task("g1_walk_flat").make_config

    def bad_walk(**kwargs):
        config = base(**kwargs)
        broken = RewardTerm(_nan_at_step, 1.0, {"step": step})
        return dataclasses.replace(config, rewards={**config.rewards, "broken_bonus": broken})

    registry.register_task("g1_walk_bad", bad_walk)
    overrides = [
        f"algo={algo}",
        "task=g1_walk_bad",
        *for_algo(algo, SMALL_CUDA_RUN),
        f"algo.save_interval={save}",
        "algo.max_iterations=100",
        "training.log_interval=7",
        "training.progress=false",
        "training.no_play=true",
        *QUIET[:1],
        f"training.log_dir={tmp_path / 'run'}",
    ]
    with pytest.raises(SystemExit) as exit_info:
        main(overrides)
    err = capsys.readouterr().err
    assert exit_info.value.code == 1 and "reward term 'broken_bonus'" in err and "Traceback" not in err, err
    summary = json.loads((tmp_path / "run" / "run_summary.json").read_text())
    saved = _checkpoints_are_finite(tmp_path / "run")
    assert saved and summary["last_checkpoint"] == str(saved[-1]) and summary["health"]["nonfinite_rewards"] > 0
