"""``g1_walk_rough``'s env: the randomised walk, moved onto a generated terrain (``unilab.tasks.walking``).

Actor observation (287): ``g1_walk_flat``'s 100, then the height scan (187, noise 0.1 m). Critic (290): the
flat walk's 103, then the scan without noise.
"""

from __future__ import annotations

import dataclasses

from unilab.envs.config import (
    ConstraintRows,
    ContactsPerWorld,
    FootReach,
    NoiseScale,
    PairSearch,
    PenaltyWeight,
    SolverIterations,
    StumbleRatio,
    TaskConfig,
    TerrainColumns,
    TerrainLayout,
)
from unilab.tasks.g1_walk_flat.config import WALK as FLAT_WALK
from unilab.tasks.g1_walk_flat_rand import RANDOMIZATION
from unilab.tasks.randomization import Randomization
from unilab.tasks.walking import STUMBLE_RATIO, RoughSpec, make_walk
from unilab.terrain import TerrainConfig

# A foot that sweeps forward low catches a riser with its toe: the walk on terrain pays for a foot's speed away from
# the swing height (mjlab's G1 foot clearance, weight -2.0 there). mjlab's reward manager multiplies every weight by
# the control step, 0.02 s; ours does too (``RewardManager``: dt * sum(w * term), dt 0.02 s), and our velocity
# tracking has mjlab's weight and kernel (2.0, exp(-e^2 / 0.25)), so the weight carries over as it is: -2.0, that
# is -0.04 times the term per step. Like our other penalties it starts at half weight under the penalty curriculum
# and reaches -2.0 once episodes last. The flat walks leave it out.
WALK = dataclasses.replace(
    FLAT_WALK, name="g1_walk_rough", weights={**FLAT_WALK.weights, "penalty_feet_clearance": -2.0}
)

# The stairs are stacked boxes (the ``terraced`` layout, ADR 16): vertical risers with closed-form contacts. On a
# height field a riser is a ramp between two samples, where the foot's contacts came out wrong in MuJoCo Warp (ADR 17);
# trained side by side on the H200 at equal steps, box stairs fell 0-6 % at their top row where the ramps had fallen
# 8-30 %. The map the terms read is sampled every 5 cm, so it differs from the boxes within 2.5 cm of a riser; the
# slopes and the random surface keep their 10 cm samples.
TERRAIN = TerrainConfig(rows=10, step_height=(0.0, 0.12), slope=(0.0, 0.3), horizontal_scale=0.05, layout="terraced")
# The foot's site sits 9.5 cm behind its toe; 15 cm lifts a swing 5 cm before the toe would meet a riser. A foot on a
# box edge touches two boxes: in C MuJoCo, 12 G1s acting at random on the top row made up to 93 contacts a world, so
# the buffers hold 160 contacts and 900 constraint rows (no overflow in 26 M env steps on the H200).
ROUGH = RoughSpec(terrain=TERRAIN, max_init_level=3, nconmax=160, njmax=900, foot_reach=0.15, straight_commands=0.5)


def make_task(
    noise_scale: NoiseScale = 1.0,
    randomization: Randomization = RANDOMIZATION,
    terrain: TerrainConfig = TERRAIN,
    terrain_level: int | str | None = None,
    nconmax: ContactsPerWorld = ROUGH.nconmax,
    njmax: ConstraintRows = ROUGH.njmax,
    broadphase: PairSearch = None,
    hfield_geoms: str | None = TERRAIN.hfield_geoms,
    box_geoms: str | None = TERRAIN.box_geoms,
    layout: TerrainLayout = TERRAIN.layout,
    terrain_columns: TerrainColumns = None,
    foot_reach: FootReach = ROUGH.foot_reach,
    solver_iterations: SolverIterations = None,
    ls_iterations: SolverIterations = None,
    stumble: PenaltyWeight = 0.0,
    stumble_ratio: StumbleRatio = STUMBLE_RATIO,
) -> TaskConfig:
    """The rough walk on ``terrain``; ``terrain_level`` pins every env to that row (eval at one difficulty) or, with
    ``"all"``, spreads them over every row (eval at each difficulty), else the curriculum moves them.
    ``noise_scale`` multiplies the observation noise, the scan's included; the terrain's knobs are
    ``RoughSpec.with_knobs``'s (``ROUGH``'s comment says why the buffers are what they are); ``solver_iterations``
    and ``ls_iterations`` cap the Newton solver's iterations (None: the MJCF's); ``stumble``, unless 0, weights a
    penalty on each foot the ground pushes sideways more than ``stumble_ratio`` times as hard as vertically: a sole
    that struck a riser (the G1's falls in the pit come mostly under backward commands, climbing out heel first)."""
    geoms = (hfield_geoms, box_geoms)
    rough = ROUGH.with_knobs(terrain, nconmax, njmax, broadphase, geoms, layout, terrain_columns, foot_reach)
    weights = {**WALK.weights, "penalty_feet_stumble": stumble} if stumble else WALK.weights
    walk = dataclasses.replace(WALK, weights=weights, stumble_ratio=stumble_ratio)
    physics = walk.physics.with_solver(solver_iterations, ls_iterations)
    return make_walk(walk, noise_scale, randomization, rough, terrain_level, name="g1_walk_rough", physics=physics)
