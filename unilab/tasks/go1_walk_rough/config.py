"""``go1_walk_rough``'s env: the Go1's walk under domain randomisation, moved onto a generated terrain
(``unilab.tasks.walking``).

Actor observation (240): ``go1_walk_flat``'s 53, then the height scan (187, noise 0.1 m) under the trunk. Critic
(243): the flat walk's 56, then the scan without noise.

On rough ground the tilt no longer ends an episode (a quadruped on a slope or a step tilts far and recovers); the
trunk's or a hip's touching the ground does (``task.falls=knees``: a calf's origin, where the thigh ends, within 2 cm
of the surface under it). The orientation penalty measures the trunk's tilt from the plane of the ground under it
rather than from the vertical, and a swing pays the G1 rough walk's clearance penalty, its ground sought 10 cm ahead.
"""

from __future__ import annotations

import dataclasses

from unilab.envs.config import (
    ActionReach,
    ConstraintRows,
    ContactsPerWorld,
    FallRule,
    FootReach,
    NoiseScale,
    PairSearch,
    PenaltyWeight,
    SolverIterations,
    StumbleRatio,
    TaskConfig,
    TerrainColumns,
    TerrainLayout,
    TiltSpan,
)
from unilab.robots import go1
from unilab.tasks.go1_walk_flat.config import WALK
from unilab.tasks.randomization import Randomization
from unilab.tasks.walking import STUMBLE_RATIO, RoughSpec, make_walk
from unilab.terrain import TerrainConfig

RANDOMIZATION = Randomization(
    friction=(0.3, 1.5),
    payload_kg=(0.0, 1.0),
    com_offset_m=0.025,
    motor_strength=(0.9, 1.1),
    pd_gains=(0.9, 1.1),
    latency_s=(0.0, 0.02),
    push_speed=(0.3, 0.6),
    push_every_s=(3.0, 6.0),
)
"""The Go1 weighs 12.7 kg, so its payload and shoves are smaller than the G1's; its feet grip harder (condim 6)."""

# Stairs of boxes on a 5 cm map, as the G1's (ADR 16): vertical risers rather than ramps between samples. Steps rise to
# 10 cm, 36 % of the Go1's 0.278 m trunk height (the G1's 12 cm are 16 % of its pelvis height). On the top row in C
# MuJoCo, a Go1 acting at random made at most 20 contacts and 76 constraint rows a world on these stairs and the random
# surface (44 and 208 on height-field stairs), well within the buffers below.
# The random surface is scaled to the robot as its stairs are: on the top row its heights reach 6 cm in 1 cm steps (the
# G1's 10 cm in 2 cm steps, 36 % of the Go1's trunk height, as much as a riser), the range Isaac Lab scales its Go1's
# surface to for the robot's size (docs/tasks.md).
TERRAIN = TerrainConfig(
    rows=10,
    step_height=(0.0, 0.1),
    slope=(0.0, 0.3),
    roughness=(0.01, 0.06),
    roughness_step=0.01,
    horizontal_scale=0.05,
    layout="terraced",
)
# A Go1 foot is a 2.3 cm sphere. A trot at 2 Hz keeps each foot down about half the cycle, so a swing moves at about
# twice the trunk's speed, 4 cm a control step at 1 m/s: 5 cm around the foot (the sphere and 2.7 cm beyond) sees a
# step's top less than a control step before the toe meets its riser, 10 cm two steps ahead. Climbing out of the pit,
# 12 of 19 falls came within 0.5 s of a foot striking a riser, where 21 % of all steps did (docs/results.md).
FOOT_REACH = 0.1
# The G1 rough walk's penalty on a foot moving fast below or above the swing height (``feet_clearance_by_speed``:
# mjlab's foot clearance, at the weight mjlab gives every robot of its velocity tasks, the Go1 included). With it and
# the 10 cm reach, two seeds trained alone on the H200 passed the pit's top row at their last checkpoints, which no
# variant without them had (docs/results.md).
FEET_CLEARANCE = -2.0
# ``task.falls=knees`` ends an episode when a knee comes within 2 cm of the ground under it. Climbing out of the pit,
# the calves touched the steps in 38-49 % of the episodes; its knees bend backwards, so a Go1 climbing backwards leads
# with them into the risers. ``task.touchdown_penalty`` pays for the knees below 4 cm under either rule.
KNEES = tuple(f"{leg}_calf" for leg in go1.LEGS)
KNEE_CLEARANCE = 0.02  # m: the thigh capsule's radius is 1.5 cm
# A fall is the trunk's touching the ground (its box, the head's sphere, or a hip's capsule), as legged_gym and Isaac
# Lab end their quadrupeds' episodes on the base's contact (ADR 20). The hips count as the trunk: their capsules stand
# out past its box, so a Go1 on its back or side lies on them. Of the pit's episodes that the knee rule ended for a
# policy trained under it, most walked on to the time limit or off their tile with the rule off: there a knee near a
# step's tread is a knee brushing it, not a fall.
TRUNK_FALLS = (go1.ROBOT.base_body, *(f"{leg}_hip" for leg in go1.LEGS))
# The orientation penalty measures the trunk's tilt from the ground's plane 0.3 m either side of it: that spans the
# feet (0.19 m ahead of and behind the trunk's centre), and on the top row's flights (0.3 m treads, 0.1 m risers,
# 18.4 degrees) the fitted plane reads 15 to 18 degrees at every phase of the steps. Penalised for its tilt from the
# vertical, a Go1 climbing out of the pit held its trunk within 2 degrees of level on average, and its calves, hips
# and trunk touched the steps (docs/results.md, "the pit").
TILT_SPAN = 0.3
ROUGH = RoughSpec(
    terrain=TERRAIN,
    max_init_level=3,
    nconmax=64,
    njmax=400,
    foot_reach=FOOT_REACH,
    straight_commands=0.5,
    tilt_ends_episode=False,
    touchdown_bodies=KNEES,
    touchdown_height=KNEE_CLEARANCE,
    touchdown_ends_episode=False,
    ground_contact_ends=TRUNK_FALLS,
    tilt_span=TILT_SPAN,
)

# SAC's actions are bounded to [-1, 1], so the action scale is all the reach a leg has. At the Go1's own scale
# (mjlab's, a quarter of each servo's torque limit per unit: 0.37 rad at hip and thigh, 0.25 at the calf) a foot
# lifts at most 10.6 cm above where it stands, and only with the thigh and calf both at their bounds, while a 10 cm
# step under an 8 cm swing asks 18 cm; at twice that scale the reach is 24 cm up and 18 cm forward
# (``tests/test_go1_reach.py`` checks both on the model). The G1's legs reach a full radian either way.
ACTION_REACH = 2.0


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
    action_reach: ActionReach = ACTION_REACH,
    tilt_span: TiltSpan = TILT_SPAN,
    touchdown_penalty: PenaltyWeight = 0.0,
    falls: FallRule = "trunk",
    feet_clearance: PenaltyWeight = FEET_CLEARANCE,
    foot_reach: FootReach = ROUGH.foot_reach,
    stumble: PenaltyWeight = 0.0,
    stumble_ratio: StumbleRatio = STUMBLE_RATIO,
    solver_iterations: SolverIterations = None,
    ls_iterations: SolverIterations = None,
) -> TaskConfig:
    """The rough walk on ``terrain``; ``terrain_level`` pins every env to that row (eval at one difficulty) or, with
    ``"all"``, spreads them over every row (eval at each difficulty), else the curriculum moves them. ``noise_scale``
    multiplies the observation noise, the scan's included; the terrain's knobs are ``RoughSpec.with_knobs``'s
    (``ROUGH``'s comment says why the buffers are what they are, ``FOOT_REACH``'s why the Go1's is 10 cm);
    ``action_reach`` multiplies the Go1's action scale (``ACTION_REACH`` says why); ``tilt_span`` is how far either side
    of the trunk the orientation penalty fits the ground's plane (``TILT_SPAN`` says why; 0: the vertical);
    ``touchdown_penalty``, unless 0, weights a penalty on the knees coming within twice ``KNEE_CLEARANCE`` of the ground
    (``KNEES`` says why); ``falls`` is what ends an episode as a fall (``TRUNK_FALLS`` and ``KNEES`` say why there
    are two); ``feet_clearance``, unless 0, weights the G1 rough walk's penalty on a foot moving fast away from the
    swing height (``FEET_CLEARANCE`` says why); ``stumble``, unless 0, weights a penalty on each foot pushed sideways
    more than ``stumble_ratio`` times as hard as vertically (the comment by ``chosen`` says why);
    ``solver_iterations`` and ``ls_iterations`` cap the Newton solver's iterations (None: the MJCF's)."""
    geoms = (hfield_geoms, box_geoms)
    rough = ROUGH.with_knobs(terrain, nconmax, njmax, broadphase, geoms, layout, terrain_columns, foot_reach)
    rough = dataclasses.replace(rough, tilt_span=tilt_span)
    if falls == "knees":
        rough = dataclasses.replace(rough, touchdown_ends_episode=True, ground_contact_ends=())
    robot = dataclasses.replace(go1.ROBOT, action_scale=tuple(action_reach * s for s in go1.ACTION_SCALE))
    # ``stumble`` pays for each foot the ground pushes sideways more than ``stumble_ratio`` times as hard as it holds
    # it up: a foot that struck a riser. With the clearance, most falls out of the pit still came within 0.5 s of a
    # strike, and feet struck risers in four episodes of five (docs/results.md, 324436f). At legged_gym's ratio of 5
    # the rule counts few of those strikes: a Go1's sphere meets a riser while the tread under it still bears most of
    # its load. Of the steps where a foot met a riser in the pit, it counted 11 % at 5 and 27 % at 2, and 0.4 % of
    # the other steps at 2 (docs/results.md, a919cdd). Its feet grip at a friction of at most 1.5 (the
    # randomisation's top) under an elliptic cone, so at 2 a foot on a tread still never counts.
    chosen = {
        "penalty_touchdown_clearance": touchdown_penalty,
        "penalty_feet_clearance": feet_clearance,
        "penalty_feet_stumble": stumble,
    }
    weights = {**WALK.weights, **{name: weight for name, weight in chosen.items() if weight}}
    walk = dataclasses.replace(WALK, robot=robot, weights=weights, stumble_ratio=stumble_ratio)
    physics = walk.physics.with_solver(solver_iterations, ls_iterations)
    return make_walk(walk, noise_scale, randomization, rough, terrain_level, name="go1_walk_rough", physics=physics)
