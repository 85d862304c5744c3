"""``g1_walk_rough``'s env: the randomised walk, moved onto a generated terrain.

Actor observation (287): ``g1_walk_flat``'s 100, then the height scan (187, noise 0.1 m). Critic (290): the
flat walk's 103, then the scan without noise.
"""

from __future__ import annotations

import dataclasses

import torch

from unilab.core.spec import Mirror
from unilab.envs.config import TaskConfig
from unilab.envs.randomization import Randomization
from unilab.managers.terms import CurriculumTerm, EventTerm, ObsTerm, TerminationTerm
from unilab.mdp import curricula, events, terminations
from unilab.mdp.terrain import HeightMap, height_scan, scan_mirror_index, scan_pattern
from unilab.tasks.g1_walk_flat_rand import RANDOMIZATION
from unilab.tasks.g1_walk_flat_rand import make_task as make_rand_task
from unilab.terrain import TerrainConfig, generate

TERRAIN = TerrainConfig(rows=10, step_height=(0.0, 0.12), slope=(0.0, 0.3))
SCAN_SIZE, SCAN_RESOLUTION = (1.6, 1.0), 0.1
SCAN_BODY = "pelvis"
MAX_INIT_LEVEL = 3
# The pelvis of a standing G1 is about 0.75 m above its feet; the scan keeps a step of up to this far either side.
SCAN_CLIP = 1.5


def _scan_term(ground: HeightMap, noise: float) -> ObsTerm:
    index = scan_mirror_index(SCAN_SIZE, SCAN_RESOLUTION)
    params = {"ground": ground, "pattern": scan_pattern(SCAN_SIZE, SCAN_RESOLUTION), "body": SCAN_BODY}
    return ObsTerm(height_scan, {**params, "clip": SCAN_CLIP}, noise=noise, mirror=Mirror(index, (1.0,) * len(index)))


def make_task(
    noise_scale: float = 1.0,
    randomization: Randomization = RANDOMIZATION,
    terrain: TerrainConfig = TERRAIN,
    terrain_level: int | None = None,
) -> TaskConfig:
    """The rough walk on ``terrain``; ``terrain_level`` pins every env to that row (eval at one difficulty), else
    the curriculum moves them. ``noise_scale`` multiplies the observation noise, the scan's included."""
    if terrain_level is not None and not 0 <= terrain_level < terrain.rows:
        raise ValueError(f"terrain_level must be a row of the terrain, 0 to {terrain.rows - 1}, got {terrain_level}")
    walk = make_rand_task(noise_scale=noise_scale, randomization=randomization)
    built = generate(terrain)
    ground = built.height_map()
    origins = torch.from_numpy(built.origins)
    observations = {
        "policy": {**walk.observations["policy"], "height_scan": _scan_term(ground, 0.1 * noise_scale)},
        "critic": {**walk.observations["critic"], "height_scan": _scan_term(ground, 0.0)},
    }
    feet = walk.rewards["feet_phase"]
    rewards = {**walk.rewards, "feet_phase": dataclasses.replace(feet, params={**feet.params, "ground": ground})}
    fall = walk.terminations["fall"]
    term = {
        **walk.terminations,
        "fall": dataclasses.replace(fall, params={**fall.params, "ground": ground}),
        "off_terrain": TerminationTerm(terminations.off_terrain, {"ground": ground, "margin": 1.0}, time_out=True),
    }
    spawn = EventTerm(
        events.spawn_on_terrain,
        {"ground": ground, "origins": origins, "max_init_level": MAX_INIT_LEVEL, "level": terrain_level},
        state={"terrain_level": ((), -1.0)},
    )
    ordered = iter(walk.events.items())
    first = dict([next(ordered)])  # the pose event draws about the origin; the spawn carries it onto the tile
    if set(first) != {"root_pose"}:
        raise ValueError(f"g1_walk_rough expects the walk's first event to be root_pose, got {list(first)}")
    levels = CurriculumTerm(
        curricula.terrain_levels,
        state={"terrain_level_mean": 0.0},
        params={
            "origins": origins,
            "tile_size": terrain.tile_size,
            "command": "velocity",
            "episode_length_s": walk.episode_length_s,
        },
    )
    return dataclasses.replace(
        walk,
        name="g1_walk_rough",
        terrain=terrain,
        physics=dataclasses.replace(walk.physics, nconmax=96, njmax=600),
        observations=observations,
        rewards=rewards,
        terminations=term,
        events={**first, "terrain_spawn": spawn, **dict(ordered)},
        curricula={**walk.curricula, "terrain_levels": levels},
    )
