"""A terrain built into a scene: the scene's floor plane replaced by the terrain's map, in one of three layouts.

- ``single``: one MuJoCo height field of the whole map. One geom for the broad phase, but its elevation range is the
  map's, so on every tile a robot's knees and arms sit inside the field's bounding box and go to the narrow phase.
- ``tiled`` (the default): the map cut along the tile and border lines into pieces, each level piece a box and each
  other piece a height field of its own samples and range. A robot meets only the pieces under it, and those only
  with the geoms that reach down into their range; boxes take MuJoCo's box colliders instead of the height field's
  convex path.
- ``terraced``: ``tiled``, with every piece that stands in a few flat levels (the stairs) made of stacked boxes
  (``unilab.terrain.terraces``): vertical risers halfway between the samples either side, where the map ramps over
  the cell between them. The scene is the map everywhere but within half a sample spacing of a riser.

``single`` and ``tiled`` are exactly the map: adjacent pieces share their edge samples, every cell of the map lies in
one piece, and each piece's cells split along the same diagonal as the map's, so
``unilab.mdp.terrain.surface_height`` reads what a ray cast onto either scene hits. A tiled piece whose samples lie
on the triangles of every ``surface_factor``-th of them (the slopes and the random surface, drawn at
``surface_scale``) is built from those: the same surface, with fewer cells for a contact to test (a height-field
contact tests every cell under the geom, one by one). The config's ``hfield_geoms`` narrows which robot geoms touch
the height-field pieces, through a contact bit of their own that no other geom carries. The model is built through
``MjSpec`` from the terrain's data alone, so the C MuJoCo and the MuJoCo Warp backends are handed the same compiled
model.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import mujoco
import numpy as np

from unilab.terrain.generator import Terrain
from unilab.terrain.heightmap import refine
from unilab.terrain.terraces import Terrace, terraces

FLOOR = "floor"
TERRAIN = "terrain"
# The solid the terrain stands on, below its lowest point: deep enough that no contact reaches its bottom.
BASE_DEPTH = 1.0
# A flat height field still needs an elevation range: MuJoCo scales the normalised samples by it.
MIN_RANGE = 1e-3


def _cuts(samples: int, border: int, tile: int, tiles: int) -> list[int]:
    """Sample indices where the pieces along one axis meet: the border's inner edges and the tiles' edges."""
    lines = {0, samples - 1, *(min(border + k * tile, samples - 1) for k in range(tiles + 1))}
    return sorted(lines)


def _pieces(terrain: Terrain) -> Iterator[tuple[str, np.ndarray, float, float]]:
    """Each piece of the tiled layout: its name, its samples (edges included) and its centre's x and y."""
    cfg, heights = terrain.config, terrain.heights.astype(np.float64)
    ny, nx = heights.shape
    scale = cfg.horizontal_scale
    rows = _cuts(ny, cfg.border_samples, cfg.tile_samples, cfg.rows)
    cols = _cuts(nx, cfg.border_samples, cfg.tile_samples, cfg.cols)
    for i, (y0, y1) in enumerate(itertools.pairwise(rows)):
        for j, (x0, x1) in enumerate(itertools.pairwise(cols)):
            centre = ((x0 + x1) / 2 - (nx - 1) / 2) * scale, ((y0 + y1) / 2 - (ny - 1) / 2) * scale
            yield f"{TERRAIN}_{i}_{j}", heights[y0 : y1 + 1, x0 : x1 + 1], *centre


def _coarsest(heights: np.ndarray, scale: float, factor: int) -> tuple[np.ndarray, float]:
    """A piece's samples and their spacing: every ``factor``-th sample where the others lie on its triangles (within
    float32's rounding), else all of them."""
    ny, nx = heights.shape
    if factor == 1 or (ny - 1) % factor or (nx - 1) % factor:
        return heights, scale
    coarse = heights[::factor, ::factor]
    if np.allclose(refine(coarse, factor, heights.shape), heights, rtol=0, atol=1e-6):
        return coarse, scale * factor
    return heights, scale


def _add_height_field(
    spec: mujoco.MjSpec, name: str, heights: np.ndarray, centre: tuple[float, float], scale: float, floor
) -> None:
    low, span = float(heights.min()), max(float(np.ptp(heights)), MIN_RANGE)
    ny, nx = heights.shape
    spec.add_hfield(
        name=name,
        size=[(nx - 1) * scale / 2, (ny - 1) * scale / 2, span, BASE_DEPTH],
        nrow=ny,
        ncol=nx,
        userdata=((heights - low) / span).ravel().tolist(),  # row 0 at -y, column 0 at -x, as the map's
    )
    _add_geom(spec, name, floor, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=name, pos=[*centre, low])


def _add_boxes(
    spec: mujoco.MjSpec,
    name: str,
    boxes: list[Terrace],
    shape: tuple[int, int],
    centre: tuple[float, float],
    scale: float,
    floor,
) -> None:
    """A piece's boxes (a level piece's one, or a terraced piece's stack), each from ``BASE_DEPTH`` below the piece's
    lowest level to its top, its sides halfway between samples (at the piece's edge, on its edge samples). A piece of
    one box keeps the piece's name."""
    rows, cols = shape
    for k, box in enumerate(boxes):
        y0, y1 = max(box.rows[0] - 0.5, 0), min(box.rows[1] + 0.5, rows - 1)
        x0, x1 = max(box.cols[0] - 0.5, 0), min(box.cols[1] + 0.5, cols - 1)
        depth = box.top - boxes[0].top + BASE_DEPTH
        pos = [
            centre[0] + ((x0 + x1) / 2 - (cols - 1) / 2) * scale,
            centre[1] + ((y0 + y1) / 2 - (rows - 1) / 2) * scale,
            box.top - depth / 2,
        ]
        size = [(x1 - x0) * scale / 2, (y1 - y0) * scale / 2, depth / 2]
        label = name if len(boxes) == 1 else f"{name}_{k}"
        _add_geom(spec, label, floor, type=mujoco.mjtGeom.mjGEOM_BOX, size=size, pos=pos)


def _add_geom(spec: mujoco.MjSpec, name: str, floor, **kwargs) -> None:
    """A terrain geom with the floor's contact settings and material."""
    spec.worldbody.add_geom(
        name=name, contype=floor["contype"], conaffinity=floor["conaffinity"], material=floor["material"], **kwargs
    )


def _height_field_contacts(spec: mujoco.MjSpec, floor: dict, pattern: str | None) -> dict:
    """The height-field pieces' contact settings: the floor's, or, where ``pattern`` names the robot geoms that touch
    them, a contact type bit no geom of the scene uses, which only those geoms' affinity then carries."""
    if pattern is None:
        return floor
    used = 0
    for geom in spec.geoms:
        used |= geom.contype | geom.conaffinity
    free = [1 << k for k in range(31) if not used & (1 << k)]
    if not free:
        raise ValueError("terrain hfield_geoms needs a contact bit the scene leaves free; its geoms use all 31")
    on_floor = [
        geom
        for geom in spec.geoms
        if geom.parent.name != spec.worldbody.name
        and (geom.contype & floor["conaffinity"] or geom.conaffinity & floor["contype"])
    ]
    named = [geom for geom in on_floor if re.fullmatch(pattern, geom.name)]
    if not named:
        raise ValueError(f"terrain hfield_geoms {pattern!r} matches no robot geom that touches the floor")
    for geom in named:
        geom.conaffinity |= free[0]
    return {**floor, "contype": free[0], "conaffinity": 0}


def terrain_spec(scene: Path, terrain: Terrain) -> mujoco.MjSpec:
    """``scene`` (an MJCF with a geom named ``floor``) with that floor replaced by ``terrain`` in its config's
    ``layout``, keeping the floor's contact settings and material."""
    spec = mujoco.MjSpec.from_file(str(scene))
    geom = spec.geom(FLOOR)
    if geom is None:
        raise ValueError(f"{scene} has no geom named {FLOOR!r} for the terrain to replace")
    floor = {"contype": geom.contype, "conaffinity": geom.conaffinity, "material": geom.material}
    spec.delete(geom)
    fields = _height_field_contacts(spec, floor, terrain.config.hfield_geoms)
    scale = terrain.config.horizontal_scale
    if terrain.config.layout == "single":
        _add_height_field(spec, TERRAIN, terrain.heights.astype(np.float64), (0.0, 0.0), scale, fields)
        return spec
    for name, heights, x, y in _pieces(terrain):
        # A level piece is one terrace: a box in every layout but ``single``.
        level = np.ptp(heights) == 0
        boxes = terraces(heights) if level or terrain.config.layout == "terraced" else None
        if boxes is None:
            samples, spacing = _coarsest(heights, scale, terrain.config.surface_factor)
            _add_height_field(spec, name, samples, (x, y), spacing, fields)
        else:
            _add_boxes(spec, name, boxes, heights.shape, (x, y), scale, floor)
    return spec


def terrain_model(scene: Path, terrain: Terrain) -> mujoco.MjModel:
    """``terrain_spec`` compiled."""
    return terrain_spec(scene, terrain).compile()
