"""Two boxes on the mjwarp backend collide as on the C MuJoCo backend (``unilab.sim.warp_model.device_model``)."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from unilab.sim.base import SimConfig

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]

# A tilted box resting on a slab: two corners below the slab's top. MuJoCo Warp's general convex collision put them
# 1.4 mm and 1.6 mm off C MuJoCo's and 0.12-0.14 mm shallower.
BOXES = """<mujoco><worldbody>
<geom type="box" size="1 1 0.1"/>
<body pos="0.3 0.2 0.25" euler="0 5 10"><freejoint/><geom type="box" size="0.3 0.15 0.16"/></body>
</worldbody></mujoco>"""


def _c_contacts(model: mujoco.MjModel) -> tuple[np.ndarray, np.ndarray]:
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    order = np.lexsort(data.contact.pos[: data.ncon].T)
    return data.contact.pos[: data.ncon][order], data.contact.dist[: data.ncon][order]


@pytest.mark.parametrize("device", DEVICES)
def test_two_boxes_touch_as_in_c_mujoco(device: str) -> None:
    import mujoco_warp as mjw
    import warp as wp

    from unilab.sim.warp_model import device_model, init_warp

    model = mujoco.MjModel.from_xml_string(BOXES)
    init_warp()
    with wp.ScopedDevice(device):
        data = mjw.make_data(model, nworld=1, nconmax=16, njmax=64)
        mjw.forward(device_model(model, 1, SimConfig()), data)
        count = int(data.nacon.numpy()[0])
        pos, dist = data.contact.pos.numpy()[:count], data.contact.dist.numpy()[:count]
    order = np.lexsort(pos.T)
    expected_pos, expected_dist = _c_contacts(model)
    assert count == len(expected_dist) == 2
    np.testing.assert_allclose(pos[order], expected_pos, atol=1e-5)
    np.testing.assert_allclose(dist[order], expected_dist, atol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_two_boxes_build_no_general_convex_kernel(device: str) -> None:
    """The kernels a step of the model launches: the box pair is among the primitive pairs' kernel, and no GJK/EPA
    kernel (``ccd_kernel``) is made."""
    import warp as wp

    from unilab.sim.kernel_prebuild import launched_kernels
    from unilab.sim.warp_model import device_model, init_warp, scratch_data, step_and_refresh

    model = mujoco.MjModel.from_xml_string(BOXES)
    init_warp()
    with wp.ScopedDevice(device):
        m = device_model(model, 1, SimConfig())
        names = [
            module.name
            for module, _ in launched_kernels(lambda: step_and_refresh(m, scratch_data(model, SimConfig())), device)
        ]
    assert any("primitive_narrowphase" in name for name in names), names
    assert not any(name.startswith("ccd_kernel") for name in names), names


def test_c_mujoco_collides_two_boxes_alike_with_native_convex_collision_on_or_off() -> None:
    """Why the flag is set on the device model only: C MuJoCo's box pair does not depend on it."""
    model = mujoco.MjModel.from_xml_string(BOXES)
    native_pos, native_dist = _c_contacts(model)
    model.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_NATIVECCD)
    pos, dist = _c_contacts(model)
    np.testing.assert_array_equal(pos, native_pos)
    np.testing.assert_array_equal(dist, native_dist)
