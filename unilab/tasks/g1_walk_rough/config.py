"""``g1_walk_rough``'s env: the randomised walk, moved onto a generated terrain (``unilab.tasks.walking``).

Actor observation (287): ``g1_walk_flat``'s 100, then the height scan (187, noise 0.1 m). Critic (290): the
flat walk's 103, then the scan without noise.
"""

from __future__ import annotations

import dataclasses

from unilab.envs.config import TaskConfig
from unilab.envs.randomization import Randomization
from unilab.tasks.g1_walk_flat_rand import RANDOMIZATION
from unilab.tasks.g1_walk_flat_rand import make_task as make_rand_task
from unilab.tasks.walking import RoughSpec, make_rough_walk
from unilab.terrain import TerrainConfig

TERRAIN = TerrainConfig(rows=10, step_height=(0.0, 0.12), slope=(0.0, 0.3))
ROUGH = RoughSpec(terrain=TERRAIN, max_init_level=3, nconmax=96, njmax=600)


def make_task(
    noise_scale: float = 1.0,
    randomization: Randomization = RANDOMIZATION,
    terrain: TerrainConfig = TERRAIN,
    terrain_level: int | None = None,
) -> TaskConfig:
    """The rough walk on ``terrain``; ``terrain_level`` pins every env to that row (eval at one difficulty), else
    the curriculum moves them. ``noise_scale`` multiplies the observation noise, the scan's included."""
    walk = make_rand_task(noise_scale=noise_scale, randomization=randomization)
    rough = dataclasses.replace(ROUGH, terrain=terrain)
    return make_rough_walk(walk, "g1_walk_rough", rough, noise_scale, terrain_level)
