"""A terrain as a height map: heights on a regular grid, and the surface MuJoCo's height field makes of them.

The map is a tensor of heights on a regular grid (``heights[y, x]``, samples ``scale`` apart, centred on the world
origin), as ``unilab.terrain.generate`` makes it and the scene's height field holds it. The surface between samples
is MuJoCo's: each cell is two triangles split along the diagonal from its (-x, -y) corner to its (+x, +y) corner. So a
lookup here lands where a ray cast onto the height field would, exactly, with a gather of four samples per point and
no ray cast: the terms that read the ground (``unilab.mdp.terrain``) run it inside the captured step like any other
tensor arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


def surface_height(heights: torch.Tensor, scale: float, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The height of the surface under world points ``(x, y)`` (any matching shapes); points past the map's edge
    read its edge."""
    ny, nx = heights.shape
    u = ((x + (nx - 1) * scale / 2) / scale).clamp(0, nx - 1)
    v = ((y + (ny - 1) * scale / 2) / scale).clamp(0, ny - 1)
    # The cell's lower corner; on the last sample the cell before it, at its far side.
    j = u.floor().clamp(max=nx - 2).long()
    i = v.floor().clamp(max=ny - 2).long()
    fu, fv = u - j, v - i
    flat = heights.reshape(-1)
    h00 = flat[i * nx + j]
    h10 = flat[i * nx + j + 1]  # +x
    h01 = flat[(i + 1) * nx + j]  # +y
    h11 = flat[(i + 1) * nx + j + 1]
    below = h00 + (h10 - h00) * fu + (h11 - h10) * fv  # the triangle on the +x side of the diagonal
    above = h00 + (h01 - h00) * fv + (h11 - h01) * fu
    return torch.where(fu >= fv, below, above)


def refine(coarse: np.ndarray, factor: int, shape: tuple[int, int]) -> np.ndarray:
    """``shape`` heights ``factor`` to each of ``coarse``'s sample spacings, read off the surface MuJoCo's triangles
    make of ``coarse`` (past its last sample, its edge), both grids starting at the same corner.

    Each fine cell lies in one coarse triangle, because the fine cells on a coarse cell's diagonal split along it
    too, so a height field of the result is the surface of ``coarse`` itself, with ``factor`` squared times the
    cells."""
    rows, cols = coarse.shape
    v = torch.arange(shape[0], dtype=torch.float64) / factor - (rows - 1) / 2
    u = torch.arange(shape[1], dtype=torch.float64) / factor - (cols - 1) / 2
    y, x = torch.meshgrid(v, u, indexing="ij")
    return surface_height(torch.from_numpy(np.asarray(coarse, dtype=np.float64)), 1.0, x, y).numpy()


@dataclass(frozen=True)
class HeightMap:
    """A terrain's height map as term params carry it: moved to the env's device once, when the env is built
    (``to``), and read by every term that needs the ground under a point (spawn, scan, feet, falls)."""

    heights: torch.Tensor  # (ny, nx) metres, centred on the world origin
    scale: float  # metres between samples

    def to(self, device: torch.device) -> HeightMap:
        return HeightMap(self.heights.to(device), self.scale)

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return surface_height(self.heights, self.scale, x, y)

    @property
    def half_extent(self) -> tuple[float, float]:
        """Half the map's size along x and y: the ground ends there."""
        ny, nx = self.heights.shape
        return (nx - 1) * self.scale / 2, (ny - 1) * self.scale / 2
