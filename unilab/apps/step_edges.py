"""Where a terrain's steps are, for drawing: each riser's top edge as a segment in the world.

A height field is drawn with smooth shading, so a riser a few centimetres wide blends into its treads whatever the
light, and a box riser that faces away from the camera leaves two treads of one grey: ``unilab play`` draws each
step's top edge as a line.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from unilab.terrain.heightmap import surface_height
from unilab.terrain.scene import TERRAIN


def terrain_geoms(model: mujoco.MjModel) -> np.ndarray:
    """The terrain's pieces: the height fields and boxes fixed to the world under the terrain's names (a stair of
    boxes included); none in a scene without a terrain."""
    kinds = (mujoco.mjtGeom.mjGEOM_HFIELD, mujoco.mjtGeom.mjGEOM_BOX)
    named = np.array([model.geom(i).name.startswith(TERRAIN) for i in range(model.ngeom)], dtype=bool)
    return np.flatnonzero((model.geom_bodyid == 0) & np.isin(model.geom_type, kinds) & named)


# On a height field an edge is where the surface rises by at least ``EDGE_RISE`` from one sample to the next, by the
# same amount over at least ``EDGE_MIN_LENGTH``, with level samples on both sides: a step, not a slope (equal rises
# side by side) nor the random surface (unequal ones).
EDGE_RISE, EDGE_MIN_LENGTH, EDGE_WIDTH = 0.03, 0.5, 2.0
EDGE_RGBA = np.array([0.15, 0.17, 0.2, 1.0], dtype=np.float32)


def _runs(mask: np.ndarray) -> list[tuple[int, int]]:
    """The [start, stop) index ranges where a 1-D boolean array is true."""
    padded = np.concatenate([[False], mask, [False]])
    changes = np.flatnonzero(padded[1:] != padded[:-1])
    return list(zip(changes[::2], changes[1::2], strict=True))


def _edges_along_x(heights: np.ndarray, spacing: float) -> list[tuple[int, int, int, float]]:
    """Step edges of a grid (``heights[y, x]``) that run along y, where the surface steps between columns ``j`` and
    ``j + 1``: each (x, y0, y1, z) in grid units from the first sample, x and z at the step's top."""
    rise = np.diff(heights, axis=1)
    step = np.abs(rise) >= EDGE_RISE
    level = np.zeros_like(step)
    level[:, 1:-1] = (rise[:, :-2] == 0) & (rise[:, 2:] == 0)
    found = []
    for j in np.flatnonzero((step & level).any(axis=0)):
        column = rise[:, j]
        for start, stop in _runs(step[:, j] & level[:, j]):
            same = column[start:stop] == column[start]
            if not same.all() or (stop - start - 1) * spacing < EDGE_MIN_LENGTH:
                continue
            top = j + 1 if column[start] > 0 else j
            found.append((top, start, stop - 1, heights[start, top]))
    return found


def step_edges(model: mujoco.MjModel) -> np.ndarray:
    """The terrain's step edges in the world, (k, 2, 3): each a segment along the top of a riser, on a height field
    or on a box."""
    return np.concatenate([_field_edges(model), _box_edges(model)]).reshape(-1, 2, 3)


def _field(model: mujoco.MjModel, geom: int) -> tuple[np.ndarray, float, float]:
    """A height-field geom's samples as heights above its base (``[y, x]``), and its sample spacings in x and y."""
    field = model.geom_dataid[geom]
    rows, cols = model.hfield_nrow[field], model.hfield_ncol[field]
    size = model.hfield_size[field]
    start = model.hfield_adr[field]
    heights = model.hfield_data[start : start + rows * cols].reshape(rows, cols).astype(np.float64) * size[2]
    return heights, 2 * size[0] / (cols - 1), 2 * size[1] / (rows - 1)


def _field_edges(model: mujoco.MjModel) -> np.ndarray:
    segments = []
    for geom in terrain_geoms(model):
        if model.geom_type[geom] != mujoco.mjtGeom.mjGEOM_HFIELD:
            continue
        heights, dx, dy = _field(model, geom)
        (rows, cols), pos = heights.shape, model.geom_pos[geom]
        origin = pos - np.array([dx * (cols - 1) / 2, dy * (rows - 1) / 2, 0.0])
        for x, y0, y1, z in _edges_along_x(heights, dy):
            segments.append(origin + np.array([[x * dx, y0 * dy, z], [x * dx, y1 * dy, z]]))
        for y, x0, x1, z in _edges_along_x(heights.T, dx):
            segments.append(origin + np.array([[x0 * dx, y * dy, z], [x1 * dx, y * dy, z]]))
    return np.array(segments, dtype=np.float64).reshape(-1, 2, 3)


# A box's faces are shaded flat, but a riser that faces away from the camera leaves two treads of one grey: a box's
# top edge is outlined where the ground just beyond it lies ``EDGE_RISE`` or more lower, sampled every
# ``EDGE_SAMPLE`` along the edge (half the finest map spacing in use), and the pieces of one line are joined.
EDGE_SAMPLE, EDGE_OUTSIDE, SURFACE_CHUNK = 0.025, 1e-3, 2048


def _surface(model: mujoco.MjModel, geoms: np.ndarray, points: np.ndarray) -> np.ndarray:
    """The height of the terrain ``geoms`` at ``points`` (n, 2): the highest box top or height-field surface over each;
    -inf off the terrain."""
    top = np.full(len(points), -np.inf)
    boxes = geoms[model.geom_type[geoms] == mujoco.mjtGeom.mjGEOM_BOX]
    centres, halves = model.geom_pos[boxes], model.geom_size[boxes]
    tops = centres[:, 2] + halves[:, 2]
    for first in range(0, len(points), SURFACE_CHUNK):  # (points, boxes) at a time, a few MB
        block = points[first : first + SURFACE_CHUNK, None]
        inside = np.all(np.abs(block - centres[None, :, :2]) <= halves[None, :, :2] + 1e-9, axis=2)
        top[first : first + len(block)] = np.where(inside, tops, -np.inf).max(axis=1, initial=-np.inf)
    for geom in geoms[model.geom_type[geoms] == mujoco.mjtGeom.mjGEOM_HFIELD]:
        heights, dx, dy = _field(model, geom)
        (rows, cols), pos = heights.shape, model.geom_pos[geom]
        x, y = points[:, 0] - pos[0], points[:, 1] - pos[1]
        inside = (np.abs(x) <= dx * (cols - 1) / 2) & (np.abs(y) <= dy * (rows - 1) / 2)
        # MuJoCo's triangles, as the terms read them; y scaled onto x's spacing (a cell's triangles are affine in it).
        level = surface_height(
            torch.from_numpy(heights), dx, torch.from_numpy(x[inside]), torch.from_numpy(y[inside] * dx / dy)
        )
        top[inside] = np.maximum(top[inside], level.numpy() + pos[2])
    return top


def _box_edges(model: mujoco.MjModel) -> np.ndarray:
    geoms = terrain_geoms(model)
    sides, points = [], []  # each box side's line and samples, then the ground beyond every sample at once
    for geom in geoms[model.geom_type[geoms] == mujoco.mjtGeom.mjGEOM_BOX]:
        pos, size = model.geom_pos[geom], model.geom_size[geom]
        for axis in (0, 1):  # the sides that run along x (axis 0), then along y
            across = 1 - axis
            count = max(int(np.ceil(2 * size[axis] / EDGE_SAMPLE)), 1)
            along = pos[axis] - size[axis] + (np.arange(count) + 0.5) * (2 * size[axis] / count)
            for side in (-1.0, 1.0):
                at = pos[across] + side * size[across]
                beyond = np.empty((count, 2))
                beyond[:, axis], beyond[:, across] = along, at + side * EDGE_OUTSIDE
                sides.append((axis, at, pos[2] + size[2], along, size[axis] / count))
                points.append(beyond)
    if not sides:
        return np.zeros((0, 2, 3))
    ground = np.split(_surface(model, geoms, np.concatenate(points)), np.cumsum([len(p) for p in points])[:-1])
    lines: dict[tuple[int, float, float], list[tuple[float, float]]] = {}
    for (axis, at, z, along, half), beyond in zip(sides, ground, strict=True):
        lower = np.isfinite(beyond) & (beyond <= z - EDGE_RISE)  # a step down, not the terrain's outer edge
        for first, stop in _runs(lower):
            span = (along[first] - half, along[stop - 1] + half)
            lines.setdefault((axis, round(at, 6), round(z, 6)), []).append(span)
    segments = []
    for (axis, at, z), spans in lines.items():
        for start, end in _joined(sorted(spans)):
            a, b = np.array([at, at, z]), np.array([at, at, z])
            a[axis], b[axis] = start, end
            segments.append([a, b])
    return np.array(segments, dtype=np.float64).reshape(-1, 2, 3)


def _joined(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted intervals with those that touch or overlap merged."""
    joined = [spans[0]]
    for start, end in spans[1:]:
        if start <= joined[-1][1] + 1e-6:
            joined[-1] = (joined[-1][0], max(joined[-1][1], end))
        else:
            joined.append((start, end))
    return joined
