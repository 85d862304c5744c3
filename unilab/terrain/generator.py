"""Terrain as data: a seeded grid of sub-terrains, rows by difficulty and columns by type, as one height map.

Each tile is ``tile_size`` metres square; row ``r`` of ``rows`` has difficulty ``r / (rows - 1)`` (0 to 1), and each
type's parameters follow from it: the stairs' step height, the pyramids' slope, the noise's amplitude. A flat border
surrounds the grid, so a robot that walks off its tile meets level ground, not an edge. The map is a function of the
config alone (its ``seed`` included), so every backend and every process that builds it builds the same terrain.

A height field cannot hold a vertical face: between two samples its surface is a ramp. So a step's riser is a ramp
one sample spacing (``horizontal_scale``) wide, and at 0.1 m a 12 cm step is a 50 degree ramp that leaves 0.2 m of
a 0.3 m tread level, about a G1 foot's length. Terrain generators built on meshes make such faces vertical (a slope
threshold above which a ramp becomes a wall); here the map is sampled more finely instead. Only the stairs need it:
the slopes and the random surface are drawn at ``surface_scale`` and refined onto the map's samples along the
surface's own triangles, so they stay the same surface at any spacing and the scene builds them from their own
coarser samples (``unilab.terrain.scene``).

The defaults follow mjlab's rough-terrain grid for legged robots: 8 m tiles sampled every 0.1 m, five steps of
0.3 m treads rising up to 0.1 m each to a 3 m platform inside a 1 m border, pyramids sloping up to 45 degrees to a
2 m platform inside a 0.25 m border, and a random surface of up to 0.1 m.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from unilab.terrain.heightmap import HeightMap, refine, surface_height

LAYOUTS = ("tiled", "single", "terraced", "solid")
MAX_SAMPLES = 4096 * 4096
"""Height samples one map may hold: 64 MiB of float32 in the model, and a grid of about 400 m square at 0.1 m."""


@dataclass(frozen=True)
class TerrainConfig:
    """A terrain grid. Lengths in metres; ``types`` names the columns, in order (``TERRAIN_TYPES``)."""

    rows: int = 10
    types: tuple[str, ...] = (
        "flat",
        "pyramid_stairs",
        "pyramid_stairs_inv",
        "pyramid_slope",
        "pyramid_slope_inv",
        "random_rough",
    )
    tile_size: float = 8.0
    border: float = 8.0
    horizontal_scale: float = 0.1  # the map's sample spacing: how steep a step's riser can be
    surface_scale: float = 0.1  # the slopes' and the random surface's own spacing, a whole multiple of the map's
    seed: int = 0
    step_height: tuple[float, float] = (0.0, 0.1)  # at difficulty 0 and 1
    step_width: float = 0.3
    stairs_platform: float = 3.0
    stairs_border: float = 1.0  # flat ground inside the tile's edge, before the first step
    slope: tuple[float, float] = (0.0, 1.0)  # rise over run
    slope_platform: float = 2.0
    slope_border: float = 0.25
    roughness: tuple[float, float] = (0.02, 0.1)  # the random surface's largest height
    roughness_step: float = 0.02  # the random surface's heights are multiples of this
    layout: str = "tiled"  # how the scene holds the map (``LAYOUTS``, ``unilab.terrain.scene``)
    # The robot geoms (a regular expression their whole name matches) that touch the height-field pieces; None: every
    # geom that touches the floor. Each geom against a height field tests every cell under it, one by one, so a foot
    # of many overlapping capsules costs that many times a contact; its boxes (level pieces, stairs) touch them all.
    hfield_geoms: str | None = None
    # The robot geoms that touch every other piece (the boxes, and the ``solid`` layout's solids); None: every geom
    # that touches the floor. MuJoCo Warp's pair search tests each robot geom against each such piece in every world
    # (with 41 G1 geoms, nine pairs in ten of the rough scene's), whether or not they are near.
    box_geoms: str | None = None

    @property
    def cols(self) -> int:
        return len(self.types)

    @property
    def tile_samples(self) -> int:
        return round(self.tile_size / self.horizontal_scale)

    @property
    def border_samples(self) -> int:
        return round(self.border / self.horizontal_scale)

    @property
    def surface_factor(self) -> int:
        """Map samples to one of the slopes' and the random surface's own spacings."""
        return round(self.surface_scale / self.horizontal_scale)

    def difficulty(self, row: int) -> float:
        return row / (self.rows - 1) if self.rows > 1 else 0.0


@dataclass(frozen=True)
class Terrain:
    """The height map (metres, ``[y, x]`` samples ``horizontal_scale`` apart, the grid centred on the origin) and
    each tile's spawn origin (``[row, col]`` -> world x, y, z: the tile's centre on its surface)."""

    config: TerrainConfig
    heights: np.ndarray = field(repr=False)  # (ny, nx) float32
    origins: np.ndarray = field(repr=False)  # (rows, cols, 3) float32

    @property
    def size(self) -> tuple[float, float]:
        """The map's extent in x and y."""
        ny, nx = self.heights.shape
        return (nx - 1) * self.config.horizontal_scale, (ny - 1) * self.config.horizontal_scale

    def height_map(self) -> HeightMap:
        """The map as the terrain terms read it."""
        return HeightMap(torch.from_numpy(self.heights), self.config.horizontal_scale)

    def height_at(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The surface height under world points ``(x, y)``, between samples as MuJoCo's height field has it
        (``unilab.mdp.terrain.surface_height``)."""
        heights = torch.from_numpy(self.heights.astype(np.float64))
        as_tensor = [torch.as_tensor(np.asarray(value, dtype=np.float64)) for value in (x, y)]
        return surface_height(heights, self.config.horizontal_scale, *as_tensor).numpy()


def _centred(n: int, scale: float) -> np.ndarray:
    """Each sample's offset from the tile's centre along one axis, in metres."""
    return (np.arange(n) - (n - 1) / 2) * scale


def _ring_distance(n: int, scale: float) -> np.ndarray:
    """For every sample of a tile, its distance from the tile's centre in the max norm: pyramids are square."""
    offsets = np.abs(_centred(n, scale))
    return np.maximum(offsets[:, None], offsets[None, :])


def flat(cfg: TerrainConfig, difficulty: float, rng: np.random.Generator) -> np.ndarray:
    return np.zeros((cfg.tile_samples, cfg.tile_samples))


def pyramid_stairs(cfg: TerrainConfig, difficulty: float, rng: np.random.Generator) -> np.ndarray:
    """Steps rising towards a square platform in the centre, each ``step_width`` deep."""
    low, high = cfg.step_height
    step = low + (high - low) * difficulty
    distance = _ring_distance(cfg.tile_samples, cfg.horizontal_scale)
    # Counted inwards from the border's inner edge; the platform holds the top step's height.
    steps_in = np.floor((cfg.tile_size / 2 - cfg.stairs_border - distance) / cfg.step_width) + 1
    top = math.floor((cfg.tile_size - 2 * cfg.stairs_border - cfg.stairs_platform) / 2 / cfg.step_width)
    return np.clip(steps_in, 0, top) * step


def pyramid_stairs_inv(cfg: TerrainConfig, difficulty: float, rng: np.random.Generator) -> np.ndarray:
    """Steps descending towards a square pit in the centre."""
    return -pyramid_stairs(cfg, difficulty, rng)


@dataclass(frozen=True)
class Pyramid:
    """A pyramid slope tile's shape, which its samples are drawn from and the scene's ``solid`` layout builds its
    solids to: faces rising ``slope`` per metre from the border line, ``edge`` from the centre in the max norm, to the
    platform, ``platform`` from it. The centre lies ``centre`` from the tile's first sample along both axes: halfway
    across the samples the slope is drawn on, half of their spacing short of the tile's middle."""

    slope: float
    edge: float
    platform: float
    centre: float


def pyramid(cfg: TerrainConfig, difficulty: float) -> Pyramid:
    """The shape of the pyramids at ``difficulty``, on the samples ``_tile`` draws them on."""
    drawn = _drawn(cfg, "pyramid_slope")
    low, high = cfg.slope
    return Pyramid(
        slope=low + (high - low) * difficulty,
        edge=cfg.tile_size / 2 - cfg.slope_border,
        platform=cfg.slope_platform / 2,
        centre=(drawn.tile_samples - 1) * drawn.horizontal_scale / 2,
    )


def pyramid_slope(cfg: TerrainConfig, difficulty: float, rng: np.random.Generator) -> np.ndarray:
    """Four faces of slope ``slope`` rising from the tile's edge to a square platform in the centre."""
    shape = pyramid(cfg, difficulty)
    distance = _ring_distance(cfg.tile_samples, cfg.horizontal_scale)
    run = np.clip(shape.edge - distance, 0, shape.edge - shape.platform)
    return shape.slope * run


def pyramid_slope_inv(cfg: TerrainConfig, difficulty: float, rng: np.random.Generator) -> np.ndarray:
    return -pyramid_slope(cfg, difficulty, rng)


def random_rough(cfg: TerrainConfig, difficulty: float, rng: np.random.Generator) -> np.ndarray:
    """Uniform random heights in multiples of ``roughness_step`` up to the difficulty's amplitude, one per sample;
    the tile's edge is kept at 0 so that neighbouring tiles meet without a step."""
    low, high = cfg.roughness
    amplitude = low + (high - low) * difficulty
    levels = max(round(amplitude / cfg.roughness_step), 0)
    n = cfg.tile_samples
    heights = rng.integers(0, levels + 1, size=(n, n)) * cfg.roughness_step
    heights[[0, -1], :] = 0.0
    heights[:, [0, -1]] = 0.0
    return heights


def _drawn(cfg: TerrainConfig, name: str) -> TerrainConfig:
    """The config a tile of type ``name`` is drawn at: the stairs and the flat ground at the map's spacing, the
    others (``SURFACES``) at ``surface_scale``."""
    if name not in SURFACES or cfg.surface_factor == 1:
        return cfg
    return dataclasses.replace(cfg, horizontal_scale=cfg.surface_scale)


def _tile(cfg: TerrainConfig, name: str, difficulty: float, rng: np.random.Generator) -> np.ndarray:
    """A tile of type ``name`` on the map's samples: drawn at its own spacing (``_drawn``) and refined onto the map's,
    so the map's spacing changes no surface but the stairs' risers."""
    drawn = _drawn(cfg, name)
    tile = SUB_TERRAINS[name](drawn, difficulty, rng)
    if drawn is cfg:
        return tile
    return refine(tile, cfg.surface_factor, (cfg.tile_samples, cfg.tile_samples))


SUB_TERRAINS: dict[str, Callable[[TerrainConfig, float, np.random.Generator], np.ndarray]] = {
    "flat": flat,
    "pyramid_stairs": pyramid_stairs,
    "pyramid_stairs_inv": pyramid_stairs_inv,
    "pyramid_slope": pyramid_slope,
    "pyramid_slope_inv": pyramid_slope_inv,
    "random_rough": random_rough,
}
TERRAIN_TYPES = tuple(SUB_TERRAINS)
SURFACES = ("pyramid_slope", "pyramid_slope_inv", "random_rough")


def check(cfg: TerrainConfig) -> None:
    """``ValueError`` in one line for a grid that makes no terrain or does not fit in a model, before any is built."""
    numbers = {
        "tile_size": cfg.tile_size,
        "border": cfg.border,
        "horizontal_scale": cfg.horizontal_scale,
        "step_width": cfg.step_width,
        "stairs_platform": cfg.stairs_platform,
        "stairs_border": cfg.stairs_border,
        "slope_platform": cfg.slope_platform,
        "slope_border": cfg.slope_border,
        "roughness_step": cfg.roughness_step,
        "surface_scale": cfg.surface_scale,
        **{f"step_height[{i}]": v for i, v in enumerate(cfg.step_height)},
        **{f"slope[{i}]": v for i, v in enumerate(cfg.slope)},
        **{f"roughness[{i}]": v for i, v in enumerate(cfg.roughness)},
    }
    for name, value in numbers.items():
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"terrain {name} must be a finite length >= 0, got {value}")
    for name in ("tile_size", "horizontal_scale", "step_width", "roughness_step", "surface_scale"):
        if numbers[name] <= 0:
            raise ValueError(f"terrain {name} must be > 0, got {numbers[name]}")
    ratio = cfg.surface_scale / cfg.horizontal_scale
    if round(ratio) < 1 or abs(ratio - round(ratio)) > 1e-6:
        raise ValueError(
            f"terrain surface_scale {cfg.surface_scale:g} m must be a whole multiple of horizontal_scale "
            f"{cfg.horizontal_scale:g} m"
        )
    if cfg.rows < 1 or not cfg.types:
        raise ValueError(f"terrain needs at least one row and one type, got {cfg.rows} rows and types {cfg.types}")
    unknown = [name for name in cfg.types if name not in SUB_TERRAINS]
    if unknown:
        raise ValueError(f"unknown terrain type {unknown[0]!r}; known types: {', '.join(TERRAIN_TYPES)}")
    if cfg.layout not in LAYOUTS:
        raise ValueError(f"unknown terrain layout {cfg.layout!r}; known layouts: {', '.join(LAYOUTS)}")
    for knob in ("hfield_geoms", "box_geoms"):
        pattern = getattr(cfg, knob)
        if pattern is None:
            continue
        try:
            re.compile(pattern)
        except re.error as error:
            raise ValueError(f"terrain {knob} {pattern!r} is not a regular expression: {error}") from None
    if not 0 <= cfg.seed < 2**63:
        raise ValueError(f"terrain seed must be in [0, 2**63), got {cfg.seed}")
    for what, taken in (
        ("stairs", cfg.stairs_platform + 2 * cfg.stairs_border),
        ("slope", cfg.slope_platform + 2 * cfg.slope_border),
    ):
        if taken > cfg.tile_size:
            raise ValueError(f"terrain {what} platform and borders take {taken:g} m of a {cfg.tile_size:g} m tile")
    if cfg.tile_samples < 2:
        raise ValueError(f"terrain tile_size {cfg.tile_size} m is under two samples {cfg.horizontal_scale} m apart")
    ny = cfg.rows * cfg.tile_samples + 2 * cfg.border_samples
    nx = cfg.cols * cfg.tile_samples + 2 * cfg.border_samples
    if ny * nx > MAX_SAMPLES:
        raise ValueError(
            f"a terrain of {cfg.rows} x {cfg.cols} tiles of {cfg.tile_size:g} m with a {cfg.border:g} m border is "
            f"{nx} x {ny} samples at {cfg.horizontal_scale:g} m; a model holds at most {MAX_SAMPLES} "
            "(fewer tiles, smaller tiles or a coarser horizontal_scale)"
        )


def generate(cfg: TerrainConfig = TerrainConfig()) -> Terrain:
    """The terrain of ``cfg``: every tile built by its type at its row's difficulty, each from a generator seeded by
    the config's seed and the tile's place, so a tile does not change when another is added or reordered.

    Built once per config and process: a rough task reads the map for its terms and builds it into its scene, and a
    run builds its task more than once (the memory check's probe, then the envs). Each call returns its own copy of
    the arrays, so a caller that writes into them changes neither the kept map nor another caller's. A config
    holding a list where a tuple belongs cannot key the memo, and is built afresh."""
    try:
        hash(cfg)
    except TypeError:
        kept = _generate.__wrapped__(cfg)
    else:
        kept = _generate(cfg)
    return Terrain(cfg, kept.heights.copy(), kept.origins.copy())


@functools.lru_cache(maxsize=4)  # a map holds at most MAX_SAMPLES float32 (64 MiB); a process uses one or two
def _generate(cfg: TerrainConfig) -> Terrain:
    """``generate``'s terrain, kept per config; its arrays are read-only, so nothing can change what later calls
    copy."""
    check(cfg)
    n, border = cfg.tile_samples, cfg.border_samples
    heights = np.zeros((cfg.rows * n + 2 * border, cfg.cols * n + 2 * border))
    origins = np.zeros((cfg.rows, cfg.cols, 3))
    width = (heights.shape[1] - 1) * cfg.horizontal_scale
    depth = (heights.shape[0] - 1) * cfg.horizontal_scale
    for row in range(cfg.rows):
        for col, name in enumerate(cfg.types):
            rng = np.random.default_rng([cfg.seed, row, col])
            tile = _tile(cfg, name, cfg.difficulty(row), rng)
            y0, x0 = border + row * n, border + col * n
            heights[y0 : y0 + n, x0 : x0 + n] = tile
            # On the sample nearest the tile's centre, so the surface there is the sample's height, not a blend.
            origins[row, col] = (
                (x0 + n // 2) * cfg.horizontal_scale - width / 2,
                (y0 + n // 2) * cfg.horizontal_scale - depth / 2,
                tile[n // 2, n // 2],
            )
    terrain = Terrain(cfg, heights.astype(np.float32), origins.astype(np.float32))
    terrain.heights.flags.writeable = False
    terrain.origins.flags.writeable = False
    return terrain
