"""Terms over a terrain's height map (``unilab.terrain.heightmap``): the height scan a policy sees, heights above
the ground, and each env's tile."""

from __future__ import annotations

import torch
from torch import Tensor

from unilab.context import EnvContext, State
from unilab.core.math import quat_yaw
from unilab.terrain.heightmap import HeightMap


def env_columns(num_envs: int, cols: int, device: torch.device) -> torch.Tensor:
    """The terrain column (N,) each env walks: env ``i`` walks column ``i % cols``, so the types share the envs
    equally."""
    return torch.arange(num_envs, device=device) % cols


def tile_origins(origins: torch.Tensor, level: torch.Tensor) -> torch.Tensor:
    """Each env's tile centre (N, 3) from the tiles' ``origins`` (rows, cols, 3): in its column (``env_columns``), at
    row ``level[i]`` clamped into the grid."""
    rows, cols = origins.shape[:2]
    return origins[level.long().clamp(0, rows - 1), env_columns(level.shape[0], cols, level.device)]


def distance_from_tile(state: State, origins: torch.Tensor) -> torch.Tensor:
    """How far (N,) each env's base stands, in x and y, from the centre of the tile its curriculum row gives it."""
    origin = tile_origins(origins, state["env", "terrain_level"])[:, :2]
    return torch.linalg.vector_norm(state["sim", "qpos"][:, :2] - origin, dim=-1)


def scan_pattern(size: tuple[float, float] = (1.6, 1.0), resolution: float = 0.1) -> torch.Tensor:
    """Points of a regular grid ``size`` metres long (x) and wide (y) centred on the origin, ``resolution`` apart:
    (points, 2). The defaults give mjlab's 17 x 11 = 187 points."""
    nx, ny = (round(extent / resolution) + 1 for extent in size)
    xs = (torch.arange(nx) - (nx - 1) / 2) * resolution
    ys = (torch.arange(ny) - (ny - 1) / 2) * resolution
    grid_x, grid_y = torch.meshgrid(xs, ys, indexing="xy")
    return torch.stack([grid_x.reshape(-1), grid_y.reshape(-1)], dim=-1)


def _scan_xy(state: State, ctx: EnvContext, pattern: torch.Tensor, body: str) -> tuple[Tensor, Tensor, Tensor]:
    """``body``'s world position (N, 3), and the world x and y (N, points) of ``pattern`` turned with its yaw and
    centred under it."""
    pos = state["sim", "xpos"][:, ctx.body_ids[body]]
    yaw = quat_yaw(state["sim", "xquat"][:, ctx.body_ids[body]])
    cos, sin = torch.cos(yaw).unsqueeze(-1), torch.sin(yaw).unsqueeze(-1)
    px, py = pattern[:, 0], pattern[:, 1]
    return pos, pos[:, :1] + cos * px - sin * py, pos[:, 1:2] + sin * px + cos * py


def scan_points(state: State, ctx: EnvContext, ground: HeightMap, pattern: torch.Tensor, body: str) -> Tensor:
    """The surface points (N, points, 3) a height scan reads, for drawing them."""
    _, x, y = _scan_xy(state, ctx, pattern, body)
    return torch.stack((x, y, ground(x, y)), dim=-1)


def height_scan(
    state: State,
    ctx: EnvContext,
    ground: HeightMap,
    pattern: torch.Tensor,
    body: str,
    clip: float = 1.0,
) -> torch.Tensor:
    """How far ``body`` stands above the surface at each point of ``pattern``, the pattern turned with the body's
    yaw and centred under it: (N, points), clipped to ``[-clip, clip]``. Level ground under a standing body reads its
    height everywhere; a step up ahead reads less there."""
    pos, x, y = _scan_xy(state, ctx, pattern, body)
    return (pos[:, 2:3] - ground(x, y)).clamp(-clip, clip)


def scan_mirror_index(size: tuple[float, float] = (1.6, 1.0), resolution: float = 0.1) -> tuple[int, ...]:
    """Where each point of ``scan_pattern(size, resolution)`` goes under the left-right mirror (y to -y): the same
    column of the grid, the opposite row."""
    nx, ny = (round(extent / resolution) + 1 for extent in size)
    return tuple((ny - 1 - iy) * nx + ix for iy in range(ny) for ix in range(nx))


def footprint(radius: float, points: int = 8) -> torch.Tensor:
    """A point and ``points`` around it on a circle of ``radius`` metres: (points + 1, 2) offsets in x and y."""
    angle = torch.arange(points, dtype=torch.float64) * (2 * torch.pi / points)
    ring = radius * torch.stack((torch.cos(angle), torch.sin(angle)), dim=-1)
    return torch.cat((torch.zeros(1, 2, dtype=torch.float64), ring)).float()


def ground_normal(ground: HeightMap, xy: torch.Tensor, span: float, points: int = 5) -> torch.Tensor:
    """The unit normal (N, 3) of the plane the ground under world points ``xy`` (N, 2) makes over ``span`` metres
    either side along x and along y: each slope is the least-squares line through ``points`` heights on that
    stretch. On stairs the fitted plane follows the flight (a run of 0.3 m and a rise of 0.1 m read about 18
    degrees wherever the stretch covers two steps or more), where two heights a step apart would jump from flat to
    a riser's and back."""
    offsets = torch.linspace(-span, span, points, device=xy.device, dtype=xy.dtype)
    x, y = xy[:, 0:1], xy[:, 1:2]
    weight = offsets / offsets.square().sum()
    slope_x = (ground(x + offsets, y.expand(-1, points)) * weight).sum(-1)
    slope_y = (ground(x.expand(-1, points), y + offsets) * weight).sum(-1)
    normal = torch.stack((-slope_x, -slope_y, torch.ones_like(slope_x)), dim=-1)
    return normal / torch.linalg.vector_norm(normal, dim=-1, keepdim=True)


def bodies_height(
    state: State, ctx: EnvContext, bodies: tuple[str, ...], ground: HeightMap | None = None
) -> torch.Tensor:
    """How high (N, len(bodies)) the origins of ``bodies`` are above the ground under them, or above z = 0 without a
    terrain."""
    xpos = state["sim", "xpos"]
    points = torch.stack([xpos[:, ctx.body_ids[name]] for name in bodies], dim=1)  # static ids: no index tensor
    return points[..., 2] if ground is None else height_above_ground(ground, points)


def height_above_ground(ground: HeightMap, points: torch.Tensor, around: torch.Tensor | None = None) -> torch.Tensor:
    """How high world ``points`` (..., 3) are above the surface under them; with ``around`` (``footprint``'s
    offsets), above the highest surface under any of those offsets from each point, so a foot approaching a step
    up measures its height from the step's top before its toe reaches the riser."""
    if around is None:
        return points[..., 2] - ground(points[..., 0], points[..., 1])
    x = points[..., 0:1] + around[:, 0]
    y = points[..., 1:2] + around[:, 1]
    return points[..., 2] - ground(x, y).amax(-1)
