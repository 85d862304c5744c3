"""The mjwarp backend's height-field contacts against C MuJoCo's (``unilab.sim.hfield_fix``)."""

from __future__ import annotations

import subprocess
import sys

import mujoco
import numpy as np
import pytest

from unilab.sim import make_backend

# A 4 x 4 field of 10 cm cells with 2 cm steps between neighbours' heights, and a capsule (a G1 foot's kind of
# geom) resting across three cells, one corner of which (row 2, column 2) is 8 cm below the capsule. Without the
# fix, MuJoCo Warp reports an 83 mm deep contact whose normal points straight down there; C MuJoCo's deepest is
# 15.7 mm with the normal of the triangle the capsule lies on.
HEIGHTS = np.array([[0.02, 0.08, 0.04, 0.10], [0.08, 0.08, 0.10, 0.06], [0.08, 0.02, 0.0, 0.08], [0.0, 0.06, 0.0, 0.0]])
POSE = [0.0104, 0.0215, 0.0980, 0.5540, 0.0, 0.0, 0.8325]  # x, y, z, then the quaternion of a 112.8 degree yaw


def _model() -> mujoco.MjModel:
    top = HEIGHTS.max()
    model = mujoco.MjModel.from_xml_string(
        f"""<mujoco><asset><hfield name="field" nrow="4" ncol="4" size="0.15 0.15 {top} 1.0"/></asset>
        <worldbody><geom type="hfield" hfield="field"/>
        <body><freejoint/><geom type="capsule" size="0.015" fromto="-0.09 0 0 0.09 0 0"/></body>
        </worldbody></mujoco>"""
    )
    model.hfield_data[:] = (HEIGHTS / top).ravel()
    return model


def _deepest_c(model: mujoco.MjModel) -> tuple[float, np.ndarray]:
    data = mujoco.MjData(model)
    data.qpos[:] = POSE
    mujoco.mj_forward(model, data)
    deepest = min(data.contact[: data.ncon], key=lambda contact: contact.dist)
    return float(deepest.dist), deepest.frame[:3].copy()


def test_a_resting_capsule_touches_the_field_as_in_c_mujoco() -> None:
    """Through the mjwarp backend's engine: building a backend puts the fix in before any kernel is built."""
    import mujoco_warp as mjw
    import warp as wp

    model = _model()
    make_backend("mjwarp", model, 1, device="cpu")
    with wp.ScopedDevice("cpu"):
        data = mjw.make_data(model, nworld=1, nconmax=16, njmax=64)
        data.qpos = wp.array(np.array([POSE], dtype=np.float32), dtype=float)
        mjw.forward(mjw.put_model(model), data)
        count = int(data.nacon.numpy()[0])
        dist, normal = data.contact.dist.numpy()[:count], data.contact.frame.numpy()[:count, 0]
    assert count > 0, "the capsule rests in the field: MuJoCo Warp found no contact"
    assert (normal[:, 2] > -0.01).all(), f"a contact pulls the capsule into the ground: normals {normal.tolist()}"
    expected_dist, expected_normal = _deepest_c(model)
    deepest = int(np.argmin(dist))
    assert dist[deepest] == pytest.approx(expected_dist, abs=1e-3)
    assert float(np.dot(normal[deepest], expected_normal)) > np.cos(np.radians(2.0))


# Convex shapes whose contacts go through the two wrapped functions (a cylinder on a box and on another cylinder:
# GJK and EPA), stepped through their landing on mujoco_warp directly.
_STEP_CONVEX_PAIRS = """
import hashlib, sys
import mujoco, mujoco_warp as mjw, numpy as np, warp as wp
from unilab.sim import hfield_fix
if sys.argv[1] == "fixed":
    assert hfield_fix.install()
model = mujoco.MjModel.from_xml_string(
    '<mujoco><worldbody><geom type="box" size="1 1 0.1"/>'
    '<body pos="0 0 0.3" euler="20 30 0"><freejoint/><geom type="cylinder" size="0.05 0.08"/></body>'
    '<body pos="0.02 0 0.6" euler="70 10 0"><freejoint/><geom type="cylinder" size="0.04 0.06"/></body>'
    '</worldbody></mujoco>'
)
with wp.ScopedDevice("cpu"):
    m, d = mjw.put_model(model), mjw.make_data(model, nworld=1, nconmax=32, njmax=128)
    for _ in range(300):
        mjw.step(m, d)
    qpos, contacts = d.qpos.numpy(), int(d.nacon.numpy()[0])
assert contacts > 0
print(hashlib.sha256(qpos.tobytes()).hexdigest())
"""


@pytest.mark.slow
def test_shapes_other_than_a_height_field_collide_bit_for_bit_as_without_the_fix() -> None:
    """The fix changes what a height field's contacts compile to and nothing else: convex pairs that take the same
    two functions land the same to the bit with it and with the engine as shipped (each in its own process: the fix
    is process-wide)."""
    digests = [
        subprocess.run(
            [sys.executable, "-c", _STEP_CONVEX_PAIRS, engine], capture_output=True, text=True, check=True, timeout=900
        ).stdout.split()[-1]
        for engine in ("fixed", "shipped")
    ]
    assert digests[0] == digests[1]
