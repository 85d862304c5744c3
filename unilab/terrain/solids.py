"""A pyramid slope tile as solids, for the scene's ``solid`` layout.

A capsule or a sphere meets a height field through the convex collider, one prism of the field at a time: MuJoCo
Warp gives each geom and field pair one thread, which runs GJK on every prism under the geom in turn, and on the
rough walk that is the largest part of the physics on the GPU. A pyramid's faces are planes, so solids can make them
exactly, and a robot's geoms then meet them through MuJoCo's closed-form box colliders and, for a convex mesh, one
GJK run a pair.

- A pit (``pyramid_slope_inv``) is the highest of its faces' planes, its platform and its border: the union of
  boxes is the highest of their tops, so each face is a box tilted to the face's slope, its top in the face's plane,
  from the border line to ``INNER_MARGIN`` past the platform's edge; beyond its own face its top sinks under the
  others. The platform is a box at the floor, and the border a ring of boxes around the border lines.
- A raised pyramid (``pyramid_slope``) is the lowest of its faces' planes, which no union of boxes makes, but it is
  convex: one convex mesh, the frustum from the border square up to the platform on a block with vertical sides down
  to the base, on one box under the whole piece at the border's level.

Every solid reaches ``base_depth`` below the piece's lowest point, as the stacked boxes do, so a geom resting on the
surface is far from any solid's bottom. A face box's end faces are square to its top, so both lean outwards going
down: the outer one under the border, below a line falling ``1 / slope`` per metre from the border line (so under a
neighbouring tile that falls less steeply), the inner one under the platform, ``INNER_MARGIN / slope`` and more
below the floor. The mesh's block keeps the frustum from ending in a thin wedge at its foot.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from unilab.terrain.generator import Pyramid


@dataclass(frozen=True)
class Block:
    """A box: its centre, half sizes and orientation (a unit quaternion, scalar first), in the pyramid's frame (the
    origin at its centre, on the border's level)."""

    centre: tuple[float, float, float]
    half: tuple[float, float, float]
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Hull:
    """A convex mesh: the hull of ``vertices`` (k, 3), in the pyramid's frame."""

    vertices: np.ndarray


Extent = tuple[float, float, float, float]
"""A piece's footprint in the pyramid's frame: its lowest and highest x, then y."""


def _upright(x: tuple[float, float], y: tuple[float, float], top: float, bottom: float) -> Block:
    """An untilted box over ``x`` by ``y`` from ``bottom`` to ``top``."""
    centre = ((x[0] + x[1]) / 2, (y[0] + y[1]) / 2, (top + bottom) / 2)
    return Block(centre, ((x[1] - x[0]) / 2, (y[1] - y[0]) / 2, (top - bottom) / 2))


INNER_MARGIN = 0.5
"""How far (m) a pit's face box reaches past the platform's edge, inwards. Its inner end leans outwards going down,
so under that end the ground is solid to ``INNER_MARGIN / slope`` below the floor and more (the platform's box and
the face's); reaching no further keeps each face box's bounding box off the far side of the pit, where every geom
of every robot would otherwise go to its narrow phase."""


def _face(shape: Pyramid, turns: int, bottom: float) -> Block:
    """The box of one face of a pit: before ``turns`` quarter turns about the vertical, the face beyond +y, whose
    plane is z = slope * (y - edge). Its top spans the square's width along the face, and across it from the border
    line, where it meets the border's level, to ``INNER_MARGIN`` inside the platform's edge, where it has sunk below
    the platform; beyond its own face it sinks below the neighbouring faces. It is thick enough that its bottom is at
    or below ``bottom`` everywhere."""
    tilt = math.atan(shape.slope)
    edge = shape.edge
    inner = max(shape.platform - INNER_MARGIN, -edge)
    # Square to the top: the drop from the top's highest point (on the border line, at the border's level) to
    # ``bottom``, tilted.
    thickness = -bottom * math.cos(tilt)
    # The top's centre, then the box's: half its thickness below, along the top's normal.
    middle = (inner + edge) / 2
    y = middle + thickness / 2 * math.sin(tilt)
    z = shape.slope * (middle - edge) - thickness / 2 * math.cos(tilt)
    turn = turns * math.pi / 2
    centre = (-y * math.sin(turn), y * math.cos(turn), z)
    # The tilt about x, then the turn about z: (cos(turn/2), 0, 0, sin(turn/2)) * (cos(tilt/2), sin(tilt/2), 0, 0).
    a, b = math.cos(turn / 2), math.sin(turn / 2)
    c, s = math.cos(tilt / 2), math.sin(tilt / 2)
    return Block(centre, (edge, (edge - inner) / 2 / math.cos(tilt), thickness / 2), (a * c, a * s, b * s, b * c))


def pit(shape: Pyramid, extent: Extent, base_depth: float) -> list[Block]:
    """A ``pyramid_slope_inv`` piece: the border's ring and the platform (those with any width), then the four
    faces."""
    edge, platform = shape.edge, shape.platform
    low = -shape.slope * (edge - platform)
    bottom = low - base_depth
    x0, x1, y0, y1 = extent
    spans = [
        ((x0, x1), (edge, y1), 0.0),
        ((x0, x1), (y0, -edge), 0.0),
        ((edge, x1), (-edge, edge), 0.0),
        ((x0, -edge), (-edge, edge), 0.0),
        ((-platform, platform), (-platform, platform), low),
    ]
    flat = [_upright(x, y, top, bottom) for x, y, top in spans if x[1] > x[0] and y[1] > y[0]]
    return flat + [_face(shape, turns, bottom) for turns in range(4)]


def raised(shape: Pyramid, extent: Extent, base_depth: float) -> list[Block | Hull]:
    """A ``pyramid_slope`` piece: a box under the whole piece at the border's level, then the pyramid's mesh (whose
    platform is one vertex where the pyramid has none)."""
    x0, x1, y0, y1 = extent
    base = _upright((x0, x1), (y0, y1), 0.0, -base_depth)
    corners = np.array([(-1.0, -1.0), (1.0, -1.0), (1.0, 1.0), (-1.0, 1.0)])
    top = shape.slope * (shape.edge - shape.platform)
    rings = [(shape.platform, top), (shape.edge, 0.0), (shape.edge, -base_depth)]
    vertices = np.concatenate([np.column_stack([corners * d, np.full(4, z)]) for d, z in rings])
    return [base, Hull(np.unique(vertices, axis=0))]
