"""``unilab deploy check`` runs the runtime in C MuJoCo and agrees with ``unilab eval --onnx --sim mujoco`` on the
same conditions; on its own it writes a summary, judges it against the task's thresholds and refuses bad conditions
in one line.

Agreement: with noise, latency and jitter off and eval's own starts (its env's reset under the same seed: pose,
command, gait phase, gains), the check's figures are eval's: fall rate and mean episode length equal, velocity and
yaw-rate errors and distance within 1e-4 (measured: 2e-7 on the flat walk, 2e-6 on the rough one, where the scan is
cast as rays). What is left is float64 physics here against the backend's float32 state, and onnxruntime's batch of
one against eval's batch. The rough walk is compared over half a second, before its robots fall: a robot falling
onto the terrain's cells turns those differences into 1e-3 in the yaw rate within a second.
A randomised task is compared without its physics randomisation, which the check does not
draw (it adds noise, latency and jitter instead).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.deploy_policies import export_tiny
from unilab.apps.deploy import main
from unilab.apps.eval import evaluate, rollout, score
from unilab.apps.policy import onnx_policy
from unilab.core.proportions import rate_interval
from unilab.core.rng import make_rng
from unilab.deploy import Policy
from unilab.deploy.check import load_scene, run
from unilab.deploy.episodes import Conditions, Ends, EpisodeStart
from unilab.deploy.mujoco_robot import MujocoRobot
from unilab.envs.functional import FunctionalEnv
from unilab.sim.contact_sensors import ground_contact_sensor, sensed_body
from unilab.tasks.randomization import Randomization

SAME = ("fall_rate", "mean_episode_length")
CLOSE = ("lin_vel_error", "yaw_rate_error", "distance_walked")
AGREEMENT = 1e-4
ENVS, SEED = 6, 3


def eval_starts(env: FunctionalEnv, seed: int) -> list[EpisodeStart]:
    """The episodes eval's rollout plays: its env's reset under ``seed``, one start per env."""
    state, ctx = env.reset(make_rng(seed, env.device)), env.ctx
    sim = state["sim"]
    return [
        EpisodeStart(
            qpos=sim["qpos"][i].double().numpy(),
            qvel=sim["qvel"][i].double().numpy(),
            command=state["env", "velocity"][i].double().numpy(),
            phase=state["env", "gait_phase"][i].numpy(),
            gain_scale=(
                float(sim["actuator_kp"][i, 0] / ctx.default_kp[0]),
                float(sim["actuator_kv"][i, 0] / ctx.default_kv[0]),
            ),
        )
        for i in range(env.num_envs)
    ]


def _check(path: Path, env: FunctionalEnv, seconds: float) -> dict:
    policy = Policy(path)
    clean = Conditions(episodes=env.num_envs, seconds=seconds, noise_scale=0.0, latency_s=(0.0, 0.0), jitter_s=0.0)
    return run(policy, load_scene(policy), clean, eval_starts(env, SEED))


def _agree(checked: dict, evaluated: dict) -> None:
    for key in SAME:
        assert checked[key] == pytest.approx(evaluated[key], rel=1e-6), key
    for key in CLOSE:
        assert checked[key] == pytest.approx(evaluated[key], abs=AGREEMENT, rel=0), key


def test_the_check_agrees_with_eval_on_the_same_conditions(tmp_path: Path) -> None:
    path, seconds = tmp_path / "policy.onnx", 2.0
    env = export_tiny("g1_walk_flat", path, weight_std=0.3, num_envs=ENVS, episode_length_s=seconds)
    evaluated = evaluate(None, path, sim="mujoco", num_envs=ENVS, seed=SEED, episodes_s=seconds, out=tmp_path / "eval")
    checked = _check(path, env, seconds)
    _agree(checked, evaluated)
    assert 0 < evaluated["mean_episode_length"] < seconds / env.ctx.dt  # robots fell: the figures are not all trivial
    assert checked["meets_thresholds"] == evaluated["meets_thresholds"] is False


def test_the_check_agrees_with_eval_on_the_terrain(tmp_path: Path) -> None:
    """The rough walk, its physics randomisation left out on both sides: starts on the terrain's tiles, the scan by
    rays, heights above the ground under the robot."""
    path, seconds = tmp_path / "policy.onnx", 0.5
    quiet = {"num_envs": ENVS, "episode_length_s": seconds, "randomization": Randomization()}
    env = export_tiny("g1_walk_rough", path, weight_std=0.05, **quiet)
    evaluated = score(env, rollout(env, onnx_policy(path, env, "g1_walk_rough"), SEED))
    _agree(_check(path, env, seconds), evaluated)


def test_the_check_ends_an_episode_where_the_go1_s_trunk_touches_the_ground(tmp_path: Path) -> None:
    """The Go1's rough walk ends a fall on its trunk's or a hip's contact with the ground: the check finds it among C
    MuJoCo's contacts where the env counts it with sensors. One Go1 stands on row 0's level ground, the other lies on
    its back (trunk and hips 5 mm into the ground, legs in the air); both envs and both checked robots hold the default
    pose for a control step."""
    path = tmp_path / "policy.onnx"
    env = export_tiny("go1_walk_rough", path, num_envs=2, terrain_level=0, randomization=Randomization())
    check = Policy(path).metadata.check
    assert [t.kind for t in check.terminations] == ["ground_contact", "off_terrain"]
    assert check.terminations[0].bodies == ("trunk", "FR_hip", "FL_hip", "RR_hip", "RL_hip")
    policy = Policy(path)
    robot = MujocoRobot(load_scene(policy), policy.metadata)
    state = env.reset(make_rng(0))
    x, y = state["sim", "qpos"][1, :2].double().numpy()
    on_back = robot.ground_height(np.array([x]), np.array([y]))[0] + 0.045
    state["sim", "qpos"][1, 2:7] = torch.tensor([on_back, 0.0, 1.0, 0.0, 0.0])
    _, transition = env.step(state, torch.zeros(2, env.action_dim), make_rng(1))
    assert transition["next", "terminated"].reshape(-1).tolist() == [False, True]
    for i, fallen in enumerate((False, True)):
        robot.reset(state["sim", "qpos"][i].double().numpy(), np.zeros(robot.model.nv))
        robot.advance(policy.control_dt)
        assert Ends(check, robot)() == (fallen, False)


def test_a_ground_contact_sensor_names_its_body_both_ways() -> None:
    assert sensed_body(ground_contact_sensor("FR_hip")) == "FR_hip"
    for name in ("FR_hip", "_ground_contacts", "trunk_ground_contact"):
        with pytest.raises(ValueError, match="is not a ground contact sensor"):
            sensed_body(name)


def test_deploy_check_writes_its_summary_and_judges_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    path = tmp_path / "policy.onnx"
    export_tiny("go1_walk_flat", path)
    args = ["check", str(path), "--episodes", "2", "--seconds", "0.4", "--latency-ms", "0", "20", "--jitter-ms", "2"]
    result = main(args)
    out = capsys.readouterr().out
    saved = json.loads((tmp_path / "deploy_check_policy.json").read_text())
    assert saved == json.loads(json.dumps(result)) and saved["task"] == "go1_walk_flat" and saved["episodes"] == 2
    assert 0.0 <= saved["survival_rate"] <= 1.0 and np.isfinite(saved["lin_vel_error"])
    assert saved["thresholds"] == {"fall_rate": ["<=", 0.05], "lin_vel_error": ["<=", 0.25]}
    assert saved["joint_limit_margin"]["joint"] in Policy(path).joint_names and saved["torque_margin"]["fraction"] <= 1
    assert 0 < saved["step_time_us"]["median"] <= saved["step_time_us"]["p99"]
    assert "verdict: " in out and "latency 0-20 ms, jitter +-2 ms" in out
    # the fall rate's interval over the two episodes; unless both fell it holds the 5 % bound: no verdict settled
    low, high = rate_interval(saved["fall_rate"], 2)
    assert saved["intervals"] == {"fall_rate": [round(low, 6), round(high, 6)]}
    assert saved["unsettled"] == (["fall_rate"] if low <= 0.05 <= high else [])
    assert f", 95 % {low:.3f}-{high:.3f} over 2 episodes (needs <= 0.05)" in out
    assert ("unsettled: fall_rate" in out) == bool(saved["unsettled"])
    with pytest.raises(SystemExit) as exit_info:
        main(args)  # the summary is there: replaced only when asked
    assert exit_info.value.code == 2 and "--force replaces it" in capsys.readouterr().err
    assert main([*args, "--force"])["episodes"] == 2


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--jitter-ms", "15"], "jitter must be 0 to half a control step (10 ms)"),
        (["--latency-ms", "20", "5"], "latency must be 0 <= low <= high <= 1 s"),
        (["--episodes", "0"], "episodes must be >= 1"),
        (["--noise-scale", "nan"], "noise scale must be a finite number >= 0"),
        (["--seconds", "0.001"], "seconds must be at least one control step (0.02 s)"),
    ],
)
def test_conditions_the_check_cannot_run_are_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, flags: list[str], message: str
) -> None:
    path = tmp_path / "policy.onnx"
    export_tiny("go1_walk_flat", path)
    with pytest.raises(SystemExit) as exit_info:
        main(["check", str(path), *flags])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err == f"unilab deploy check: error: {message}\n"
    assert not (tmp_path / "deploy_check_policy.json").exists()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "nowhere.onnx"], "unilab deploy check: error: policy not found: nowhere.onnx"),
        (["export", "--checkpoint", "nowhere.pt"], "unilab deploy export: error: checkpoint not found: nowhere.pt"),
        (
            ["export", "--checkpoint", "{file}", "--out", "p.txt"],
            "unilab deploy export: error: --out p.txt must end in .onnx",
        ),
        (["run"], "unilab deploy: error: unknown command 'run'; commands: check, export"),
    ],
    ids=["no-policy", "no-checkpoint", "out-not-onnx", "unknown-command"],
)
def test_bad_input_to_deploy_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture, argv: list[str], message: str
) -> None:
    (tmp_path / "model_1.pt").write_bytes(b"")
    argv = [a.format(file=tmp_path / "model_1.pt") for a in argv]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2 and capsys.readouterr().err == message + "\n"
