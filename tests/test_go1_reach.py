"""The Go1's reach on rough ground: how high a bounded action can lift a foot, on the model itself."""

from __future__ import annotations

import itertools

import mujoco
import numpy as np
import pytest
import torch

from unilab.robots import go1
from unilab.tasks.go1_walk_flat.config import WALK
from unilab.tasks.go1_walk_rough.config import ACTION_REACH, TERRAIN
from unilab.tasks.registry import make_task


def _highest_lift(scale: np.ndarray) -> float:
    """The most the front-right foot rises above its standing height over actions in [-1, 1] for that leg's hip,
    thigh and calf (a grid of 11 a joint, the targets held by the joint limits), with the trunk held still."""
    model = go1.load_model()
    data = mujoco.MjData(model)
    q0 = np.asarray(go1.DEFAULT_JOINT_POS[:3])
    joints = [model.joint(name) for name in go1.JOINT_NAMES[:3]]
    lower = np.array([j.range[0] for j in joints])
    upper = np.array([j.range[1] for j in joints])
    site = model.site("FR").id

    def foot_height(q: np.ndarray) -> float:
        mujoco.mj_resetDataKeyframe(model, data, model.key(go1.ROBOT.keyframe).id)
        for joint, value in zip(joints, q, strict=True):
            data.qpos[joint.qposadr[0]] = value
        mujoco.mj_kinematics(model, data)
        return float(data.site_xpos[site, 2])

    stand = foot_height(q0)
    grid = np.linspace(-1.0, 1.0, 11)
    return max(
        foot_height(np.clip(q0 + scale * np.array(action), lower, upper)) - stand
        for action in itertools.product(grid, repeat=3)
    )


def test_a_bounded_action_lifts_a_foot_over_the_top_step_and_the_swing_only_at_the_rough_walks_reach() -> None:
    needed = TERRAIN.step_height[1] + WALK.gait.swing_height
    own = np.asarray(go1.ACTION_SCALE[:3])
    assert _highest_lift(own) < needed  # the reason for the rough walk's reach
    scale = make_task("go1_walk_rough").action.params["scale"]
    torch.testing.assert_close(scale, ACTION_REACH * torch.tensor(go1.ACTION_SCALE))
    assert _highest_lift(scale[:3].numpy()) > needed + 0.03


@pytest.mark.parametrize("reach", [1.0, 0.5])
def test_the_reach_is_a_task_parameter_and_the_flat_walk_keeps_the_robots_scale(reach: float) -> None:
    scale = make_task("go1_walk_rough", action_reach=reach).action.params["scale"]
    torch.testing.assert_close(scale, reach * torch.tensor(go1.ACTION_SCALE))
    torch.testing.assert_close(make_task("go1_walk_flat").action.params["scale"], torch.tensor(go1.ACTION_SCALE))
