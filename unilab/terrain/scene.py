"""A terrain built into a scene: the scene's floor plane replaced by the terrain's map, in one of four layouts.

- ``single``: one MuJoCo height field of the whole map. One geom for the broad phase, but its elevation range is the
  map's, so on every tile a robot's knees and arms sit inside the field's bounding box and go to the narrow phase.
- ``tiled`` (the default): the map cut along the tile and border lines into pieces, each level piece a box and each
  other piece a height field of its own samples and range. A robot meets only the pieces under it, and those only
  with the geoms that reach down into their range; boxes take MuJoCo's box colliders instead of the height field's
  convex path.
- ``terraced``: ``tiled``, with every piece that stands in a few flat levels (the stairs) made of stacked boxes
  (``unilab.terrain.terraces``): vertical risers halfway between the samples either side, where the map ramps over
  the cell between them. The scene is the map everywhere but within half a sample spacing of a riser.
- ``solid``: ``terraced``, with each pyramid slope tile that is not level made of solids (``unilab.terrain.solids``):
  a pit of tilted boxes, a raised pyramid of one convex mesh on a box. A robot's capsules and spheres meet a height
  field through the convex collider, prism by prism under each geom (in MuJoCo Warp one thread a geom and field pair,
  looping over the prisms), which makes the slopes the largest cost of the rough walk's physics on the GPU; on the
  solids they take the box colliders and one convex run a pair instead. The map's triangles cut across a pyramid's
  edges where they cross its cells: along one of its diagonals (the cells there split the other way), and along the
  platform's rim and the border line where no sample lies on them. Within a sample spacing (``surface_scale``) of
  those edges the scene lies above or below the map by up to the slope times half that spacing; elsewhere it is the
  map.

``single`` and ``tiled`` are exactly the map: adjacent pieces share their edge samples, every cell of the map lies in
one piece, and each piece's cells split along the same diagonal as the map's, so
``unilab.mdp.terrain.surface_height`` reads what a ray cast onto either scene hits. A tiled piece whose samples lie
on the triangles of every ``surface_factor``-th of them (the slopes and the random surface, drawn at
``surface_scale``) is built from those: the same surface, with fewer cells for a contact to test (a height-field
contact tests every cell under the geom, one by one). The config's ``hfield_geoms`` narrows which robot geoms touch
the height-field pieces, and its ``box_geoms`` which touch the rest (boxes, and the ``solid`` layout's solids), each
through a contact bit of its own that no other geom carries: MuJoCo Warp's pair search then lists only those pairs.
The model is built through ``MjSpec`` from the terrain's data alone, so the C MuJoCo and the MuJoCo Warp backends are
handed the same compiled model.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import mujoco
import numpy as np

from unilab.terrain.generator import Terrain, pyramid
from unilab.terrain.heightmap import refine
from unilab.terrain.solids import Hull, pit, raised
from unilab.terrain.terraces import Terrace, terraces

FLOOR = "floor"
TERRAIN = "terrain"
# The solid the terrain stands on, below its lowest point: deep enough that no contact reaches its bottom.
BASE_DEPTH = 1.0
# A flat height field still needs an elevation range: MuJoCo scales the normalised samples by it.
MIN_RANGE = 1e-3
# The tile types the ``solid`` layout builds from solids.
SLOPES = ("pyramid_slope", "pyramid_slope_inv")


def _cuts(samples: int, border: int, tile: int, tiles: int) -> list[int]:
    """Sample indices where the pieces along one axis meet: the border's inner edges and the tiles' edges."""
    lines = {0, samples - 1, *(min(border + k * tile, samples - 1) for k in range(tiles + 1))}
    return sorted(lines)


class Piece(NamedTuple):
    """A piece of the tiled layout: its name, its samples (edges included), its centre's x and y, and the tile it
    is (row, column), None for the border's."""

    name: str
    heights: np.ndarray
    x: float
    y: float
    tile: tuple[int, int] | None


def _tile_index(start: int, border: int, tile: int, tiles: int) -> int | None:
    """The tile along one axis whose piece starts on sample ``start``; None for the border's pieces."""
    return (start - border) // tile if border <= start < border + tiles * tile else None


def _pieces(terrain: Terrain) -> Iterator[Piece]:
    """Each piece of the tiled layout, cut along the border's inner edges and the tiles' edges."""
    cfg, heights = terrain.config, terrain.heights.astype(np.float64)
    ny, nx = heights.shape
    scale = cfg.horizontal_scale
    rows = _cuts(ny, cfg.border_samples, cfg.tile_samples, cfg.rows)
    cols = _cuts(nx, cfg.border_samples, cfg.tile_samples, cfg.cols)
    for i, (y0, y1) in enumerate(itertools.pairwise(rows)):
        row = _tile_index(y0, cfg.border_samples, cfg.tile_samples, cfg.rows)
        for j, (x0, x1) in enumerate(itertools.pairwise(cols)):
            col = _tile_index(x0, cfg.border_samples, cfg.tile_samples, cfg.cols)
            centre = ((x0 + x1) / 2 - (nx - 1) / 2) * scale, ((y0 + y1) / 2 - (ny - 1) / 2) * scale
            tile = None if row is None or col is None else (row, col)
            yield Piece(f"{TERRAIN}_{i}_{j}", heights[y0 : y1 + 1, x0 : x1 + 1], *centre, tile)


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


def _add_solids(spec: mujoco.MjSpec, piece: Piece, terrain: Terrain, floor: dict) -> None:
    """A pyramid slope tile's piece as solids (``unilab.terrain.solids``), placed where the map has the pyramid: its
    geoms named as a terraced piece's boxes are, its mesh after the piece."""
    cfg, scale = terrain.config, terrain.config.horizontal_scale
    row, col = piece.tile
    shape = pyramid(cfg, cfg.difficulty(row))
    rows, cols = piece.heights.shape
    # The pyramid's centre, from the piece's first sample (at its -x, -y corner), and the piece around it.
    origin = (piece.x - (cols - 1) * scale / 2 + shape.centre, piece.y - (rows - 1) * scale / 2 + shape.centre)
    extent = (-shape.centre, (cols - 1) * scale - shape.centre, -shape.centre, (rows - 1) * scale - shape.centre)
    build = raised if cfg.types[col] == "pyramid_slope" else pit
    for k, solid in enumerate(build(shape, extent, BASE_DEPTH)):
        label = f"{piece.name}_{k}"
        if isinstance(solid, Hull):
            spec.add_mesh(name=piece.name, uservert=solid.vertices.ravel().tolist())
            _add_geom(spec, label, floor, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=piece.name, pos=[*origin, 0.0])
            continue
        pos = [origin[0] + solid.centre[0], origin[1] + solid.centre[1], solid.centre[2]]
        _add_geom(spec, label, floor, type=mujoco.mjtGeom.mjGEOM_BOX, size=solid.half, pos=pos, quat=solid.quat)


def _add_geom(spec: mujoco.MjSpec, name: str, floor, **kwargs) -> None:
    """A terrain geom with the floor's contact settings and material."""
    spec.worldbody.add_geom(
        name=name, contype=floor["contype"], conaffinity=floor["conaffinity"], material=floor["material"], **kwargs
    )


def _narrowed_contacts(spec: mujoco.MjSpec, floor: dict, pattern: str | None, knob: str) -> dict:
    """Contact settings for a kind of terrain piece: the floor's, or, where ``pattern`` names the robot geoms that
    touch that kind, a contact type bit no geom of the scene uses yet, which only those geoms' affinity then carries
    (``knob`` is the setting's name, for the errors)."""
    if pattern is None:
        return floor
    used = 0
    for geom in spec.geoms:
        used |= geom.contype | geom.conaffinity
    free = [1 << k for k in range(31) if not used & (1 << k)]
    if not free:
        raise ValueError(f"terrain {knob} needs a contact bit the scene leaves free; its geoms use all 31")
    on_floor = [
        geom
        for geom in spec.geoms
        if geom.parent.name != spec.worldbody.name
        and (geom.contype & floor["conaffinity"] or geom.conaffinity & floor["contype"])
    ]
    named = [geom for geom in on_floor if re.fullmatch(pattern, geom.name)]
    if not named:
        raise ValueError(f"terrain {knob} {pattern!r} matches no robot geom that touches the floor")
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
    cfg = terrain.config
    fields = _narrowed_contacts(spec, floor, cfg.hfield_geoms, "hfield_geoms")
    solids = _narrowed_contacts(spec, floor, cfg.box_geoms, "box_geoms")
    scale = cfg.horizontal_scale
    if cfg.layout == "single":
        _add_height_field(spec, TERRAIN, terrain.heights.astype(np.float64), (0.0, 0.0), scale, fields)
        return spec
    for piece in _pieces(terrain):
        name, heights, centre = piece.name, piece.heights, (piece.x, piece.y)
        # A level piece is one terrace: a box in every layout but ``single``.
        level = np.ptp(heights) == 0
        if cfg.layout == "solid" and not level and piece.tile is not None and cfg.types[piece.tile[1]] in SLOPES:
            _add_solids(spec, piece, terrain, solids)
            continue
        boxes = terraces(heights) if level or cfg.layout in ("terraced", "solid") else None
        if boxes is None:
            samples, spacing = _coarsest(heights, scale, cfg.surface_factor)
            _add_height_field(spec, name, samples, centre, spacing, fields)
        else:
            _add_boxes(spec, name, boxes, heights.shape, centre, scale, solids)
    return spec


def terrain_model(scene: Path, terrain: Terrain) -> mujoco.MjModel:
    """``terrain_spec`` compiled."""
    return terrain_spec(scene, terrain).compile()
