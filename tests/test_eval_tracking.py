"""`unilab eval` on tracking: every env from the first frame of a clip (the primary figures, judged by the
thresholds), the adaptive starts beside them, and both broken down per clip of a motion library."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_eval import TINY
from test_motion_library import write_library

from unilab.apps.compose import compose_config
from unilab.apps.eval import format_table, main, rollout, score, summary_name
from unilab.apps.train import run
from unilab.run.checkpoint import load_checkpoint, save_checkpoint
from unilab.tasks.registry import make_functional_env

SLICES = {"a_start": (0, 51, 0.0), "b_squat": (200, 241, 1.5), "c_arms": (350, 381, -0.7)}
"""Short enough for the replay policy below to play through from their first frames."""
CLIPS = sorted(SLICES)
LENGTHS = {name: end - first for name, (first, end, _) in SLICES.items()}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_library(tmp_path_factory.mktemp("eval_library") / "clips", SLICES)


def _first_frame_env(library: Path, num_envs: int):
    return make_functional_env(
        "g1_motion_tracking",
        sim="mujoco",
        num_envs=num_envs,
        obs_noise=False,
        reset_noise_scale=0.0,
        motion_file=library,
        start="first_frame",
    )


def _replay(env):
    """A policy that aims every joint at the reference the observation shows: with PD alone the robot keeps its
    balance for about a second of these slow clips, long enough for the short ones here."""
    q0, scale = env.ctx.default_joint_pos, env.task.action.params["scale"]
    return lambda obs: ((obs[:, :29] - q0) / scale).clamp(-1.0, 1.0)


def test_from_the_first_frame_surviving_means_playing_the_clip_to_its_end(library: Path) -> None:
    env = _first_frame_env(library, 6)
    data = rollout(env, _replay(env), seed=0)
    figures = score(env, data)
    assert data["active"].shape[0] == max(LENGTHS.values()) - 1
    assert figures["survival_rate"] == 1.0 and figures["body_pos_error"] < 0.1
    assert list(figures["per_clip"]) == CLIPS
    for name, clip in figures["per_clip"].items():
        assert clip["num_envs"] == 2 and clip["survival_rate"] == 1.0
        assert clip["mean_episode_length"] == LENGTHS[name] - 1  # ended by its own clip's end, not a time-out
        assert 0.0 <= clip["body_pos_error"] < 0.1


def test_a_fall_counts_against_its_clip_only(library: Path) -> None:
    env = _first_frame_env(library, 3)
    replay = _replay(env)

    def limp_on_clip_b(obs: torch.Tensor) -> torch.Tensor:  # env 1 plays clip b and lets every joint go
        action = replay(obs)
        action[1] = -1.0
        return action

    figures = score(env, rollout(env, limp_on_clip_b, seed=0))
    per_clip = figures["per_clip"]
    assert per_clip["b_squat"]["survival_rate"] == 0.0
    assert per_clip["b_squat"]["mean_episode_length"] < LENGTHS["b_squat"] - 1
    assert per_clip["a_start"]["survival_rate"] == per_clip["c_arms"]["survival_rate"] == 1.0
    assert figures["survival_rate"] == pytest.approx(2 / 3)


@pytest.fixture(scope="module")
def library_checkpoint(tmp_path_factory: pytest.TempPathFactory, library: Path) -> Path:
    """A tiny tracking run whose config names the library, as a run trained on it would."""
    run_dir = tmp_path_factory.mktemp("eval_tracking") / "run"
    run(compose_config([*TINY, "task=g1_motion_tracking", "training.export_onnx=false", f"training.log_dir={run_dir}"]))
    path = run_dir / "model_3.pt"
    ckpt = load_checkpoint(path)
    ckpt["config"]["task"]["motion_file"] = str(library)
    save_checkpoint(ckpt, path)
    return path


def test_the_summary_leads_with_from_start_and_keeps_both_starts_per_clip(library_checkpoint: Path, capsys) -> None:
    result = main(["--checkpoint", str(library_checkpoint), "--num-envs", "2"])
    saved = json.loads((library_checkpoint.parent / summary_name(library_checkpoint)).read_text())
    assert saved["primary_start"] == "from_start"
    starts = {name: saved[name] for name in ("from_start", "adaptive_start")}
    for key in ("survival_rate", "body_pos_error", "anchor_pos_error", "joint_pos_error", "steps"):
        assert saved[key] == starts["from_start"][key], key  # the thresholds read the from_start figures
    assert saved["meets_thresholds"] is False  # clip c, which no env played, shows nothing: not met whatever the rest
    assert saved["episode_length_s"] == pytest.approx((max(LENGTHS.values()) - 1) * 0.02)
    assert starts["adaptive_start"]["episode_length_s"] == 10.0
    assert "per_clip" not in saved
    for figures in starts.values():
        assert list(figures["per_clip"]) == CLIPS
        assert sum(clip["num_envs"] for clip in figures["per_clip"].values()) == 2
    # two envs, three clips: from the first frame, env 0 plays clip a and env 1 clip b; clip c gets none
    assert starts["from_start"]["per_clip"]["c_arms"] == {"num_envs": 0}
    assert starts["from_start"]["per_clip"]["a_start"]["num_envs"] == 1
    table = capsys.readouterr().out
    assert "adaptive_start.survival_rate" in table and result["summary_path"].endswith(summary_name(library_checkpoint))
    assert "adaptive_start.survival_rate" in format_table(result)


def test_a_library_that_is_gone_is_named(library_checkpoint: Path, tmp_path: Path, capsys) -> None:
    ckpt = load_checkpoint(library_checkpoint)
    ckpt["config"]["task"]["motion_file"] = str(tmp_path / "moved")
    moved = save_checkpoint(ckpt, tmp_path / "model_3.pt")
    with pytest.raises(SystemExit):
        main(["--checkpoint", str(moved)])
    assert f"the motion the policy was trained on is gone: motion file not found: {tmp_path / 'moved'}" in (
        capsys.readouterr().err
    )
