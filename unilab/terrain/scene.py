"""A terrain built into a scene: the scene's floor plane replaced by one MuJoCo height field of the terrain's map.

One height field, not a geom per tile: the whole grid is a single geom for the broad phase, and MuJoCo's and
MuJoCo Warp's height-field colliders test only the cells under a body. The model is built through ``MjSpec`` from
the terrain's data alone, so the C MuJoCo and the MuJoCo Warp backends are handed the same compiled model.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np

from unilab.terrain.generator import Terrain

FLOOR = "floor"
TERRAIN = "terrain"
# The solid the height field stands on, below its lowest point: deep enough that no contact reaches its bottom.
BASE_DEPTH = 1.0
# A flat map still needs an elevation range: MuJoCo scales the normalised samples by it.
MIN_RANGE = 1e-3


def terrain_spec(scene: Path, terrain: Terrain) -> mujoco.MjSpec:
    """``scene`` (an MJCF with a geom named ``floor``) with that floor replaced by ``terrain``, keeping the floor's
    contact settings and material."""
    spec = mujoco.MjSpec.from_file(str(scene))
    floor = spec.geom(FLOOR)
    if floor is None:
        raise ValueError(f"{scene} has no geom named {FLOOR!r} for the terrain to replace")
    contype, conaffinity, material = floor.contype, floor.conaffinity, floor.material
    spec.delete(floor)
    heights = terrain.heights.astype(np.float64)
    low, span = float(heights.min()), max(float(heights.max() - heights.min()), MIN_RANGE)
    width, depth = terrain.size
    ny, nx = heights.shape
    spec.add_hfield(
        name=TERRAIN,
        size=[width / 2, depth / 2, span, BASE_DEPTH],
        nrow=ny,
        ncol=nx,
        userdata=((heights - low) / span).ravel().tolist(),  # row 0 at -y, column 0 at -x, as the map's
    )
    spec.worldbody.add_geom(
        name=TERRAIN,
        type=mujoco.mjtGeom.mjGEOM_HFIELD,
        hfieldname=TERRAIN,
        pos=[0.0, 0.0, low],
        contype=contype,
        conaffinity=conaffinity,
        material=material,
    )
    return spec


def terrain_model(scene: Path, terrain: Terrain) -> mujoco.MjModel:
    """``terrain_spec`` compiled."""
    return terrain_spec(scene, terrain).compile()
