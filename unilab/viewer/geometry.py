"""Triangle meshes of the MuJoCo geom shapes that viser has no primitive for in MuJoCo's conventions (capsules,
cylinders along z, height fields, planes).

Each function returns ``(vertices (V, 3) float32, faces (F, 3) uint32)`` in the geom's own frame, with MuJoCo's
size conventions, so a geom's node carries only the geom's pose and the shapes match what MuJoCo collides with.
"""

from __future__ import annotations

import numpy as np

Mesh = tuple[np.ndarray, np.ndarray]


def _grid_faces(rows: int, cols: int) -> np.ndarray:
    """Two triangles per cell of a ``rows`` x ``cols`` vertex grid (row-major), counter-clockwise seen from +z."""
    r, c = np.meshgrid(np.arange(rows - 1), np.arange(cols - 1), indexing="ij")
    a = (r * cols + c).ravel()
    b, d = a + 1, a + cols
    lower = np.stack([a, b, d + 1], axis=1)
    upper = np.stack([a, d + 1, d], axis=1)
    return np.concatenate([lower, upper]).astype(np.uint32)


def _revolve(radii: np.ndarray, heights: np.ndarray, segments: int) -> Mesh:
    """The surface swept by the profile (``radii[k]``, ``heights[k]``), bottom to top, turned about z."""
    lon = np.linspace(0.0, 2 * np.pi, segments + 1)
    r, lo = np.meshgrid(radii, lon, indexing="ij")
    z = np.broadcast_to(heights[:, None], r.shape)
    vertices = np.stack([r * np.cos(lo), r * np.sin(lo), z], axis=-1).reshape(-1, 3)
    return vertices.astype(np.float32), _grid_faces(len(radii), segments + 1)


def capsule(radius: float, half_length: float, segments: int = 16, rings: int = 6) -> Mesh:
    """A capsule along z: a cylinder of ``2 * half_length`` between two hemispheres of ``radius``."""
    lat = np.concatenate([np.linspace(-np.pi / 2, 0.0, rings + 1), np.linspace(0.0, np.pi / 2, rings + 1)])
    shift = np.where(np.arange(len(lat)) <= rings, -half_length, half_length)
    return _revolve(radius * np.cos(lat), radius * np.sin(lat) + shift, segments)


def cylinder(radius: float, half_length: float, segments: int = 24) -> Mesh:
    """A closed cylinder along z (MuJoCo's axis; three.js's own cylinder stands along y)."""
    radii = np.array([0.0, radius, radius, 0.0])
    heights = np.array([-half_length, -half_length, half_length, half_length])
    return _revolve(radii, heights, segments)


def height_field(size: np.ndarray, elevation: np.ndarray) -> Mesh:
    """A height field's surface: ``size`` is MuJoCo's (radius x, radius y, elevation z, base z), ``elevation`` the
    (rows, cols) data in [0, 1]; row 0 lies at y = -radius y, column 0 at x = -radius x, as MuJoCo lays it out."""
    rows, cols = elevation.shape
    x = np.linspace(-size[0], size[0], cols)
    y = np.linspace(-size[1], size[1], rows)
    gx, gy = np.meshgrid(x, y)
    vertices = np.stack([gx, gy, elevation * size[2]], axis=-1).reshape(-1, 3)
    return vertices.astype(np.float32), _grid_faces(rows, cols)


def plane(half_x: float, half_y: float) -> Mesh:
    """A rectangle in the geom's xy-plane facing +z; MuJoCo's infinite plane (size 0) is drawn ``half_x`` wide."""
    vertices = np.array([[-half_x, -half_y, 0], [half_x, -half_y, 0], [half_x, half_y, 0], [-half_x, half_y, 0]])
    return vertices.astype(np.float32), np.array([[0, 1, 2], [0, 2, 3]], dtype=np.uint32)
