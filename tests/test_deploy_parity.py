"""The runtime's observation is the training env's (C MuJoCo backend, noise off) on recorded states, for every task.

Each task's env runs a few steps driven by the runtime itself (one ``Policy`` per env, acting on readings taken from
the env's state), and at every step the runtime's observation is compared with the env's, two ways:

- from the readings the env's float32 state holds: equal to the bit, except the projected gravity and the gait
  clock, within 2**-23 (float32's rounding at 1): torch fuses a multiply-add in its cross product and its float32
  sine is not NumPy's, so those two differ by at most one unit in the last place;
- through the MuJoCo adapter, its ``MjData`` set to the recorded positions and velocities: within float32 rounding
  (rtol 2e-6, atol 1e-6), since its poses and sensors are recomputed in float64 from the rounded state; the height
  scan, cast as rays by ``mj_ray`` where training looks the height map up, within the same bound (measured 3.6e-7 m).

The joint targets the runtime hands a robot are the env's action term's, to the bit.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.deploy_policies import export_tiny
from unilab.core.rng import advance, make_rng
from unilab.deploy import MetadataError, Policy, Readings
from unilab.deploy.check import load_scene
from unilab.deploy.mujoco_robot import MujocoRobot
from unilab.mdp.terrain import height_scan

TASKS = ("g1_walk_flat", "g1_walk_flat_rand", "g1_walk_rough", "go1_walk_flat", "go1_walk_rough")
ROUNDED_KINDS = ("projected_gravity", "gait_clock")  # float32 rounding differs between torch's kernels and NumPy's
ULP_AT_ONE = 2.0**-23
ENVS, STEPS = 3, 12


def _readings(env, state, policy: Policy, i: int) -> Readings:
    """What a robot would report for env ``i``, taken from the env's float32 state; the scan by the task's own term,
    unclipped (the runtime clips)."""
    sim, ctx, meta = state["sim"], env.ctx, policy.metadata
    scan = None
    if meta.scan is not None:
        params = env.task.observations["policy"]["height_scan"].params
        scan = height_scan(state, ctx, params["ground"], params["pattern"], params["body"], clip=1e9)[i].numpy()
    return Readings(
        joint_pos=sim["qpos"][i, ctx.joint_qpos].numpy(),
        joint_vel=sim["qvel"][i, ctx.joint_dof].numpy(),
        gyro=ctx.sensor(sim["sensordata"], meta.imu.gyro_sensor)[i].numpy(),
        quat=sim["xquat"][i, ctx.body_ids[meta.imu.orientation_body]].numpy(),
        height_scan=scan,
    )


def _compare_direct(policy: Policy, runtime: np.ndarray, trained: np.ndarray) -> None:
    start = 0
    for term in policy.metadata.observation:
        block = slice(start, start + term.width)
        start += term.width
        if term.kind in ROUNDED_KINDS:
            np.testing.assert_allclose(runtime[block], trained[block], rtol=0, atol=ULP_AT_ONE, err_msg=term.name)
        else:
            np.testing.assert_array_equal(runtime[block], trained[block], err_msg=term.name)


@pytest.mark.parametrize("task", TASKS)
def test_the_runtime_observes_what_the_training_env_observed(task: str, tmp_path: Path) -> None:
    path = tmp_path / "policy.onnx"
    env = export_tiny(task, path, weight_std=0.3, num_envs=ENVS)
    policies = [Policy(path) for _ in range(ENVS)]
    meta = policies[0].metadata
    robot = MujocoRobot(load_scene(policies[0]), meta)
    rng = make_rng(0, env.device)
    state = env.reset(rng)
    for i, policy in enumerate(policies):
        policy.reset(state["env", "gait_phase"][i].numpy())
    for _ in range(STEPS):
        trained = state["obs", "policy"].numpy()
        actions = []
        for i, policy in enumerate(policies):
            command = state["env", "velocity"][i].numpy()
            readings = _readings(env, state, policy, i)
            _compare_direct(policy, policy.observe(readings, command)[0].copy(), trained[i])
            robot.reset(state["sim", "qpos"][i].double().numpy(), state["sim", "qvel"][i].double().numpy())
            simulated = policy.observe(robot.read(), command)[0]
            np.testing.assert_allclose(simulated, trained[i], rtol=2e-6, atol=1e-6)
            targets = policy.act(readings, command)
            actions.append(policy.action.copy())
            expected = env.task.action.func(torch.from_numpy(policy.action)[None], env.ctx, **env.task.action.params)
            np.testing.assert_array_equal(targets.position, expected[0].numpy())
        rng = advance(rng)
        state, transition = env.step(state, torch.from_numpy(np.stack(actions)), rng)
        for i in np.flatnonzero(transition["next", "done"].numpy()):
            policies[i].reset(state["env", "gait_phase"][i].numpy())  # the env reset it: so does its runtime
    assert np.abs(np.stack(actions)).max() > 0.05  # the runtime drove the env, not a policy of zeros


def test_a_tracking_policy_is_refused_in_one_line_naming_why(tmp_path: Path) -> None:
    path = tmp_path / "policy.onnx"
    export_tiny("g1_motion_tracking", path)
    with pytest.raises(MetadataError) as info:
        Policy(path)
    message = str(info.value)
    assert "\n" not in message and "g1_motion_tracking policies cannot run on the runtime" in message
    assert "reads a reference motion clip, which the runtime does not carry" in message
