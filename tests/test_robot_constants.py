"""The G1 constants module and the shipped MJCF describe the same robot."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from unilab.robots import g1


def test_sizes_and_mass(model: mujoco.MjModel) -> None:
    assert (model.nbody, model.nq, model.nv, model.nu) == (31, 36, 35, 29)
    assert model.body_mass.sum() == pytest.approx(33.34, abs=0.01)
    assert model.opt.timestep == pytest.approx(1 / 150)
    assert model.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    assert model.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    assert (model.opt.iterations, model.opt.ls_iterations) == (100, 50)


def test_joint_and_body_order(model: mujoco.MjModel) -> None:
    joints = [model.joint(i).name for i in range(1, model.njnt)]
    assert tuple(joints) == g1.JOINT_NAMES
    assert tuple(model.body(i).name for i in range(model.nbody)) == g1.BODY_NAMES
    actuated = [model.joint(model.actuator_trnid[i, 0]).name for i in range(model.nu)]
    assert tuple(actuated) == g1.JOINT_NAMES


def test_stand_keyframe(model: mujoco.MjModel) -> None:
    key = model.key("stand")
    np.testing.assert_allclose(key.qpos[:7], [0, 0, g1.ROOT_HEIGHT, 1, 0, 0, 0])
    np.testing.assert_allclose(key.qpos[7:], g1.DEFAULT_JOINT_POS)
    np.testing.assert_allclose(key.ctrl, g1.DEFAULT_JOINT_POS)
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, key.id)
    mujoco.mj_forward(model, data)
    for site in g1.FOOT_SITES:
        assert data.site(site).xpos[2] == pytest.approx(-0.004, abs=0.002)


def test_actuators_match_groups(model: mujoco.MjModel) -> None:
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], g1.JOINT_KP)
    np.testing.assert_allclose(model.actuator_biasprm[:, 1], -np.array(g1.JOINT_KP))
    np.testing.assert_allclose(model.actuator_biasprm[:, 2], -np.array(g1.JOINT_KV))
    np.testing.assert_allclose(model.actuator_forcerange[:, 1], g1.JOINT_EFFORT_LIMIT)
    assert not model.actuator_ctrllimited.any()
    assert g1.actuator_group("left_knee_joint") == "B"
    assert g1.actuator_group("right_wrist_yaw_joint") == "E"
    hinge = slice(6, None)
    np.testing.assert_allclose(model.dof_armature[hinge], 0.01)
    np.testing.assert_allclose(model.dof_frictionloss[hinge], 0.3)


def test_feet_contacts(model: mujoco.MjModel) -> None:
    for side in ("left", "right"):
        body = model.body(f"{side}_ankle_roll_link").id
        geoms = [i for i in range(model.ngeom) if model.geom_bodyid[i] == body]
        spheres = [i for i in geoms if model.geom_type[i] == mujoco.mjtGeom.mjGEOM_SPHERE]
        capsules = [i for i in geoms if model.geom_type[i] == mujoco.mjtGeom.mjGEOM_CAPSULE]
        assert (len(spheres), len(capsules)) == (4, 7)
        for i in spheres:
            assert model.geom_size[i, 0] == pytest.approx(0.005)
        for i in geoms:
            assert (model.geom_condim[i], model.geom_priority[i]) == (3, 1)
            assert model.geom_friction[i, 0] == pytest.approx(0.6)


def test_sensors(model: mujoco.MjModel) -> None:
    names = {model.sensor(i).name: int(model.sensor_dim[i]) for i in range(model.nsensor)}
    assert names == g1.SENSORS
    assert model.sensor("torso_gyro").cutoff[0] == pytest.approx(34.9)


def test_mirror_map_is_an_involution() -> None:
    index = np.array(g1.MIRROR_JOINT_INDEX)
    sign = np.array(g1.MIRROR_JOINT_SIGN)
    x = np.random.default_rng(0).normal(size=g1.NUM_JOINTS)
    once = x[index] * sign
    np.testing.assert_allclose(once[index] * sign, x)
    assert g1.JOINT_NAMES[index[g1.JOINT_NAMES.index("left_knee_joint")]] == "right_knee_joint"
    assert index[g1.JOINT_NAMES.index("waist_yaw_joint")] == g1.JOINT_NAMES.index("waist_yaw_joint")
    # Mirroring the default pose (left/right symmetric by construction) gives it back.
    np.testing.assert_allclose(np.array(g1.DEFAULT_JOINT_POS)[index] * sign, g1.DEFAULT_JOINT_POS)
