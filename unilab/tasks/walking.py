"""The velocity-walking task, written once for any robot: a robot's walk is its ``RobotConfig`` plus a ``WalkSpec``.

What every walk shares is here: the observations (trunk gyro, gravity in the torso frame, joint positions and
velocities, last action, velocity command, gait clock; the critic adds the trunk's body-frame velocity), the reward
terms, the terminations, the reset events and the penalty curriculum, in that order. What differs between robots is
data in the spec: the command ranges, the reward weights (a reward without a weight is left out), the pose
penalty's per-joint weights, the gait (clock frequency, each foot's phase offset, swing height), the tilt and
height at which an episode ends, and the physics settings. ``make_walk`` builds it on flat ground, or, given a
``RoughSpec``, on a generated terrain with a height scan hung from the robot's base and a terrain curriculum; a
``Randomization`` adds the per-env draws. A task package states these as typed values and never edits the built
terms.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from unilab.context import RobotConfig
from unilab.core.spec import Mirror
from unilab.envs.config import ConstraintRows, ContactsPerWorld, NoiseScale, SolverIterations, TaskConfig
from unilab.managers.terms import (
    ActionTerm,
    CommandTerm,
    CurriculumTerm,
    EventTerm,
    ObsTerm,
    RewardTerm,
    TermFn,
    TerminationTerm,
)
from unilab.mdp import actions, commands, curricula, events, observations, rewards, terminations
from unilab.mdp.terrain import footprint, height_scan, scan_mirror_index, scan_pattern
from unilab.sim import SimConfig
from unilab.sim.contact_sensors import ground_contact_sensor, ground_force_sensor
from unilab.tasks.randomization import Randomization, randomize
from unilab.terrain import TerrainConfig, generate
from unilab.terrain.heightmap import HeightMap

ANGULAR = Mirror.signs(-1, 1, -1)  # a pseudo-vector under the sagittal mirror
LINEAR = Mirror.signs(1, -1, 1)
COMMAND = Mirror.signs(1, -1, -1)  # (vx, vy, wz)

REWARDS = (
    "tracking_lin_vel",
    "tracking_ang_vel",
    "penalty_ang_vel_xy",
    "penalty_orientation",
    "penalty_action_rate",
    "pose",
    "penalty_feet_ori",
    "penalty_feet_clearance",
    "penalty_touchdown_clearance",
    "penalty_feet_stumble",
    "feet_phase",
    "alive",
)
"""The walk's reward terms, in the order they are summed; a spec weights any subset of them."""
STUMBLE_RATIO = 5.0
"""A foot stumbles where the ground pushes it more than this many times as hard sideways as vertically: it struck a
riser rather than stood on a tread (legged_gym's stumble rule and ratio)."""


@dataclass(frozen=True)
class Gait:
    """The gait clock: each foot's phase advances at ``frequency`` Hz, ``offsets[i]`` radians after the first
    foot's (in the robot's foot order); the swing reward asks a foot to rise ``swing_height`` m at its phase 0."""

    frequency: float
    offsets: tuple[float, ...]
    swing_height: float
    sigma: float = 0.04


@dataclass(frozen=True)
class WalkSpec:
    """One robot's walk. ``commands`` are ``uniform_velocity``'s ranges (``lin_vel_x``, ``lin_vel_y``,
    ``ang_vel_z``, ``deadzone``); ``weights`` map names of ``REWARDS`` to weights; ``pose_weights`` weigh each
    joint's offset from the default pose; an episode ends past ``tilt_limit_deg`` of trunk tilt or, where
    ``min_root_height`` is set, with the base below it; ``penalty_feet_stumble`` counts a foot pushed sideways more
    than ``stumble_ratio`` times as hard as vertically."""

    name: str
    robot: RobotConfig
    scene: Path
    physics: SimConfig
    commands: Mapping[str, float | tuple[float, float]]
    gait: Gait
    weights: Mapping[str, float]
    pose_weights: tuple[float, ...]
    tilt_limit_deg: float
    min_root_height: float | None = None
    stumble_ratio: float = STUMBLE_RATIO

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weights) - set(REWARDS))
        if unknown:
            raise ValueError(f"walk {self.name}: unknown reward(s) {unknown}; known: {list(REWARDS)}")
        if len(self.gait.offsets) != len(self.robot.foot_sites):
            raise ValueError(f"walk {self.name}: {len(self.gait.offsets)} gait offsets for {self.robot.name}'s feet")
        if len(self.pose_weights) != len(self.robot.joint_names):
            raise ValueError(f"walk {self.name}: {len(self.pose_weights)} pose weights for {self.robot.name}")
        if "penalty_feet_ori" in self.weights and not self.robot.foot_quat_sensors:
            raise ValueError(f"walk {self.name}: penalty_feet_ori needs foot orientation sensors")
        if "penalty_feet_clearance" in self.weights and not self.robot.foot_linvel_sensors:
            raise ValueError(f"walk {self.name}: penalty_feet_clearance needs foot velocity sensors")
        if "penalty_feet_stumble" in self.weights and not self.robot.foot_force_parts:
            raise ValueError(f"walk {self.name}: penalty_feet_stumble needs the feet's collision geoms or bodies")


def joint_mirror(robot: RobotConfig) -> Mirror:
    return Mirror(robot.mirror_joint_index, robot.mirror_joint_sign)


def clock_mirror(robot: RobotConfig) -> Mirror:
    """The gait clock ``[sin phi_1..k, cos phi_1..k]`` mirrored: each foot's phases move to its twin's."""
    feet = robot.mirror_foot_index
    return Mirror(tuple(feet) + tuple(len(feet) + i for i in feet), (1.0,) * (2 * len(feet)))


def _actor_terms(robot: RobotConfig, noise_scale: float) -> dict[str, ObsTerm]:
    joints = joint_mirror(robot)
    return {
        "gyro": ObsTerm(observations.sensor, {"name": robot.gyro_sensor}, scale=0.25, mirror=ANGULAR),
        "gravity": ObsTerm(observations.projected_gravity, {"body": robot.torso_body}, mirror=LINEAR),
        "joint_pos": ObsTerm(observations.joint_pos_rel, noise=0.01 * noise_scale, mirror=joints),
        "joint_vel": ObsTerm(observations.joint_vel, noise=0.1 * noise_scale, scale=0.05, mirror=joints),
        "actions": ObsTerm(observations.last_action, mirror=joints),
        "command": ObsTerm(observations.command, {"name": "velocity"}, mirror=COMMAND),
        "gait_phase": ObsTerm(observations.phase_sin_cos, {"name": "gait_phase"}, mirror=clock_mirror(robot)),
    }


def _rewards(spec: WalkSpec, ground: Ground | None) -> dict[str, RewardTerm]:
    """The weighted rewards of ``REWARDS``, in that order; the third entry of each marks a penalty the curriculum
    scales. On a terrain the swing height counts from the highest ground within the feet's reach. The clearance
    penalty asks a moving foot for the gait's swing height, so that it and the gait reward ask for one swing."""
    robot, gait = spec.robot, spec.gait
    gyro, linvel = robot.gyro_sensor, robot.linvel_sensor
    heights = {} if ground is None else {"ground": ground.heights, "around": footprint(ground.rough.foot_reach)}
    feet = {"phase": "gait_phase", "foot_pos_sensors": robot.foot_pos_sensors, "swing_height": gait.swing_height}
    clearance = {
        "command": "velocity",
        "foot_pos_sensors": robot.foot_pos_sensors,
        "foot_linvel_sensors": robot.foot_linvel_sensors,
        "target_height": gait.swing_height,
        "deadzone": spec.commands["deadzone"],
        **heights,
    }
    lin_vel = {"velocity_sensor": linvel, "command": "velocity", "sigma": 0.25}
    stumble = {"force_sensors": tuple(map(ground_force_sensor, robot.foot_force_parts)), "ratio": spec.stumble_ratio}
    terms = {
        "tracking_lin_vel": (rewards.track_lin_vel_xy_exp, lin_vel, False),
        "tracking_ang_vel": (rewards.track_ang_vel_z_exp, {"command": "velocity", "gyro": gyro, "sigma": 0.25}, False),
        "penalty_ang_vel_xy": (rewards.ang_vel_xy_l2, {"gyro": gyro}, True),
        "penalty_orientation": _tilt(spec, ground),
        "penalty_action_rate": (rewards.action_rate_l2, {}, True),
        "pose": (rewards.joint_pose_weighted_l2, {"weights": torch.tensor(spec.pose_weights)}, True),
        "penalty_feet_ori": (rewards.quat_xy_l2, {"quat_sensors": robot.foot_quat_sensors}, True),
        "penalty_feet_clearance": (rewards.feet_clearance_by_speed, clearance, True),
        "penalty_feet_stumble": (rewards.feet_stumble, stumble, True),
        "feet_phase": (rewards.feet_phase_height_exp, {**feet, **heights, "sigma": gait.sigma}, False),
        "alive": (rewards.alive, {}, False),
    }
    if ground is not None and ground.rough.touchdown_bodies:  # graded, from twice the height that ends the episode
        touchdown = {"bodies": ground.rough.touchdown_bodies, "margin": 2 * ground.rough.touchdown_height}
        terms["penalty_touchdown_clearance"] = (
            rewards.bodies_clearance_deficit, {**touchdown, "ground": ground.heights}, True
        )  # fmt: skip
    return {
        name: RewardTerm(terms[name][0], spec.weights[name], terms[name][1], curriculum_scaled=terms[name][2])
        for name in REWARDS
        if name in spec.weights
    }


def _tilt(spec: WalkSpec, ground: Ground | None) -> tuple[TermFn, dict[str, Any], bool]:
    """The orientation penalty: the trunk's tilt from the vertical, or, on a terrain whose ``RoughSpec.tilt_span``
    is not 0, from the plane of the ground under it."""
    upvector = spec.robot.upvector_sensor
    if ground is None or ground.rough.tilt_span == 0.0:
        return rewards.upvector_xy_l2, {"upvector": upvector}, True
    params = {
        "upvector": upvector,
        "body": spec.robot.base_body,
        "ground": ground.heights,
        "span": ground.rough.tilt_span,
    }
    return rewards.upvector_from_ground_l2, params, True


def _terminations(spec: WalkSpec, ground: Ground | None) -> dict[str, TerminationTerm]:
    """The tilt (unless a terrain lets the robot tilt), the base's and any low bodies' height above the ground, the
    time-out and, on a terrain, its edge (a truncation: the robot did nothing wrong) and, while the curriculum
    moves the rows, the crossing of the robot's tile (a truncation too: the curriculum's promotion, without waiting
    out the episode)."""
    heights = {} if ground is None else {"ground": ground.heights}
    out = {}
    if ground is None or ground.rough.tilt_ends_episode:
        limit = math.radians(spec.tilt_limit_deg)
        out["tilt"] = TerminationTerm(
            terminations.tilt_exceeds, {"upvector": spec.robot.upvector_sensor, "limit": limit}
        )
    if spec.min_root_height is not None:
        out["fall"] = TerminationTerm(terminations.root_height_below, {"min_height": spec.min_root_height, **heights})
    if ground is not None and ground.rough.touchdown_bodies and ground.rough.touchdown_ends_episode:
        touchdown = {"bodies": ground.rough.touchdown_bodies, "min_height": ground.rough.touchdown_height, **heights}
        out["touchdown"] = TerminationTerm(terminations.bodies_near_ground, touchdown)
    if ground is not None and ground.rough.ground_contact_ends:
        sensors = tuple(ground_contact_sensor(body) for body in ground.rough.ground_contact_ends)
        out["ground_contact"] = TerminationTerm(terminations.ground_contact, {"sensors": sensors})
    out["time_out"] = TerminationTerm(terminations.time_out, time_out=True)
    if ground is not None:
        out["off_terrain"] = TerminationTerm(
            terminations.off_terrain, {"ground": ground.heights, "margin": 1.0}, time_out=True
        )
    if ground is not None and ground.level is None:  # the curriculum's rows, not a row pinned for an eval
        crossed = {"origins": ground.origins, "tile_size": ground.rough.terrain.tile_size}
        out["crossed_tile"] = TerminationTerm(terminations.crossed_tile, crossed, time_out=True)
    return out


PENALTY_CURRICULUM = {
    "window": 500,
    "down_threshold": 150.0,
    "up_threshold": 750.0,
    "rate": 0.001,
    "min_scale": 0.5,
    "max_scale": 1.0,
}
"""Penalties start at half weight and grow while episodes last (and shrink while they end early)."""


EPISODE_S = 20.0


def make_walk(
    spec: WalkSpec,
    noise_scale: float = 1.0,
    randomization: Randomization | None = None,
    rough: RoughSpec | None = None,
    terrain_level: int | str | None = None,
    name: str | None = None,
    physics: SimConfig | None = None,
) -> TaskConfig:
    """The walk of ``spec``'s robot, named ``name`` (default the spec's): on flat ground, or on ``rough``'s terrain;
    under ``randomization``'s per-env draws where given. ``noise_scale`` multiplies the actor's observation noise
    (the height scan's included). On a terrain, ``terrain_level`` pins every env to that row (eval at one
    difficulty), or with ``"all"`` spreads them over every row (eval at each difficulty at once), else the curriculum
    moves them. ``physics`` replaces the spec's physics settings (a task's knobs: buffers, solver caps); on a terrain
    ``rough`` sizes the buffers and picks the pair search."""
    robot = spec.robot
    ground = None if rough is None else Ground.of(rough, terrain_level)
    if ground is None and terrain_level is not None:
        raise ValueError(f"terrain_level needs a terrain; {name or spec.name} walks on flat ground")
    scale = torch.tensor(robot.action_scale) if isinstance(robot.action_scale, tuple) else float(robot.action_scale)
    physics = spec.physics if physics is None else physics
    if rough is not None:
        physics = dataclasses.replace(physics, nconmax=rough.nconmax, njmax=rough.njmax, broadphase=rough.broadphase)
    task = TaskConfig(
        name=name or spec.name,
        scene=spec.scene,
        robot=robot,
        physics=physics,
        episode_length_s=EPISODE_S,
        action=ActionTerm(actions.joint_position_offsets, {"scale": scale}, mirror=joint_mirror(robot)),
        observations=_observations(spec, noise_scale, ground),
        rewards=_rewards(spec, ground),
        terminations=_terminations(spec, ground),
        commands=_commands(spec, ground),
        events=_events(ground),
        curricula=_curricula(ground),
        penalty_scale_key=("task", "penalty_scale"),
        terrain=None if rough is None else rough.terrain,
        ground_contact_bodies=() if rough is None else rough.ground_contact_ends,
        ground_force_parts=robot.foot_force_parts if "penalty_feet_stumble" in spec.weights else (),
    )
    return task if randomization is None else randomize(task, randomization)


def flat_walk_factory(spec: WalkSpec) -> Callable[..., TaskConfig]:
    """The config factory of ``spec``'s walk on flat ground, its knobs the noise, the physics buffers (defaults the
    spec's) and the solver's caps."""

    def make_task(
        noise_scale: NoiseScale = 1.0,
        nconmax: ContactsPerWorld = spec.physics.nconmax,
        njmax: ConstraintRows = spec.physics.njmax,
        solver_iterations: SolverIterations = None,
        ls_iterations: SolverIterations = None,
    ) -> TaskConfig:
        """The task; ``noise_scale`` multiplies the actor's observation noise amplitudes; ``nconmax`` and ``njmax``
        size the physics buffers; ``solver_iterations`` and ``ls_iterations`` cap the Newton solver's iterations
        (None: the MJCF's)."""
        physics = spec.physics.sized(nconmax, njmax, solver_iterations, ls_iterations)
        return make_walk(spec, noise_scale, physics=physics)

    return make_task


def _observations(spec: WalkSpec, noise_scale: float, ground: Ground | None) -> dict[str, dict[str, ObsTerm]]:
    """The actor's terms and the critic's (the actor's without noise, and the trunk's velocity); on a terrain each
    group ends with the height scan (noise 0.1 m for the actor)."""
    robot = spec.robot
    actor = _actor_terms(robot, noise_scale)
    # The critic's copies share the actor's parameters, so the observation manager computes each of them once.
    critic = {name: dataclasses.replace(term, noise=0.0) for name, term in actor.items()}
    critic["linvel"] = ObsTerm(observations.sensor, {"name": robot.linvel_sensor}, scale=2.0, mirror=LINEAR)
    if ground is not None:
        actor["height_scan"] = _scan_term(ground.heights, robot.base_body, 0.1 * noise_scale)
        critic["height_scan"] = dataclasses.replace(actor["height_scan"], noise=0.0)
    return {"policy": actor, "critic": critic}


def _commands(spec: WalkSpec, ground: Ground | None) -> dict[str, CommandTerm]:
    straight = {} if ground is None else {"straight": ground.rough.straight_commands}
    return {
        "velocity": CommandTerm(3, commands.uniform_velocity, {**spec.commands, **straight}),
        "gait_phase": CommandTerm(
            len(spec.gait.offsets),
            commands.gait_phase_offset,
            {"offsets": spec.gait.offsets},
            advance=commands.gait_phase_advance,
            advance_params={"frequency": spec.gait.frequency},
        ),
    }


def _events(ground: Ground | None) -> dict[str, EventTerm]:
    """The standing pose, shifted and turned about the origin; on a terrain carried onto the env's tile; PD gains."""
    pose = {"xy_range": 0.5, "yaw_range": math.pi, "root_vel_range": 0.5}
    out = {"root_pose": EventTerm(events.reset_to_default_pose, pose)}
    if ground is not None:
        out["terrain_spawn"] = EventTerm(
            events.spawn_on_terrain,
            {
                "ground": ground.heights,
                "origins": ground.origins,
                "max_init_level": ground.rough.max_init_level,
                "level": ground.level,
            },
            state={"terrain_level": ((), -1.0)},
        )
    out["pd_gains"] = EventTerm(events.scale_pd_gains, {"scale_range": (0.9, 1.1)})
    return out


def _curricula(ground: Ground | None) -> dict[str, CurriculumTerm]:
    out = {
        "penalty_scale": CurriculumTerm(
            curricula.penalty_scale_by_episode_length,
            state={"penalty_scale": 0.5, "mean_episode_length": 0.0},
            params=dict(PENALTY_CURRICULUM),
        )
    }
    if ground is not None:
        columns = ground.rough.terrain.types
        names = tuple(dict.fromkeys(columns))  # a type named twice has one mean over both its columns
        out["terrain_levels"] = CurriculumTerm(
            curricula.terrain_levels,
            state={
                "terrain_level_mean": 0.0,
                "terrain_level_std": 0.0,
                **{f"terrain_level_{name}": 0.0 for name in names},
            },
            params={
                "origins": ground.origins,
                "tile_size": ground.rough.terrain.tile_size,
                "command": "velocity",
                "episode_length_s": EPISODE_S,
                "type_of_column": torch.tensor([names.index(name) for name in columns]),
                "type_names": names,
            },
        )
    return out


SCAN_SIZE, SCAN_RESOLUTION = (1.6, 1.0), 0.1
# A standing G1's base is about 0.75 m above its feet, a Go1's 0.28 m; the scan keeps a step of up to this far
# either side of either.
SCAN_CLIP = 1.5


def _scan_term(ground: HeightMap, body: str, noise: float) -> ObsTerm:
    index = scan_mirror_index(SCAN_SIZE, SCAN_RESOLUTION)
    params = {"ground": ground, "pattern": scan_pattern(SCAN_SIZE, SCAN_RESOLUTION), "body": body}
    return ObsTerm(height_scan, {**params, "clip": SCAN_CLIP}, noise=noise, mirror=Mirror(index, (1.0,) * len(index)))


@dataclass(frozen=True)
class RoughSpec:
    """How a walk moves onto a terrain: the grid, the rows new envs start in, and the contact and constraint
    buffers the terrain's extra contacts need. ``foot_reach`` (m) is how far around a foot the gait reward looks
    for the ground a swing must clear (about the toe's reach past the foot's site, plus a margin);
    ``straight_commands`` is the share of episodes whose command does not turn, so that robots cross their tiles
    (a turning command held for an episode walks a circle). ``tilt_ends_episode`` keeps the walk's tilt
    termination (a quadruped on a slope or a step tilts far and recovers); ``touchdown_bodies`` end an episode when
    one comes within ``touchdown_height`` of the ground under it (a quadruped's knees), unless
    ``touchdown_ends_episode`` is off (they are then only the touchdown penalty's); any contact of a body of
    ``ground_contact_ends`` with the ground ends one too (a quadruped's trunk, as the peers judge a fall: a knee
    brushing a step is not one). ``tilt_span`` (m), unless 0,
    turns the orientation penalty from the vertical to the plane the ground makes ``tilt_span`` either side of the
    base (a quadruped climbs along a flight; a biped stays upright on it). ``broadphase`` picks MuJoCo
    Warp's pair search (``SimConfig.broadphase``): on a terrain each robot geom is paired with every terrain box."""

    terrain: TerrainConfig
    max_init_level: int
    nconmax: int
    njmax: int
    foot_reach: float
    straight_commands: float
    tilt_ends_episode: bool = True
    touchdown_bodies: tuple[str, ...] = ()
    touchdown_height: float = 0.0
    touchdown_ends_episode: bool = True
    ground_contact_ends: tuple[str, ...] = ()
    tilt_span: float = 0.0
    broadphase: str | None = None

    def with_knobs(
        self,
        terrain: TerrainConfig,
        nconmax: int,
        njmax: int,
        broadphase: str | None,
        geoms: tuple[str | None, str | None],
        layout: str,
        terrain_columns: tuple[str, ...] | None,
        foot_reach: float,
    ) -> RoughSpec:
        """This spec on ``terrain`` with the knobs every walk on terrain takes from the command line: ``nconmax`` and
        ``njmax`` size the physics buffers; ``broadphase`` picks MuJoCo Warp's pair search (``unilab.sim.BROADPHASES``;
        None: its own choice); ``geoms`` names the robot geoms that touch the terrain's height fields and those that
        touch its other pieces (``TerrainConfig.hfield_geoms`` and ``box_geoms``; None: all); ``layout`` how the
        scene builds the terrain (``TerrainConfig.layout``); ``terrain_columns`` its columns' types, left to right
        (``TerrainConfig.types``; None: ``terrain``'s); ``foot_reach`` how far around a foot the swing's ground is
        sought."""
        columns = tuple(terrain_columns or terrain.types)
        hfield_geoms, box_geoms = geoms
        terrain = dataclasses.replace(
            terrain, hfield_geoms=hfield_geoms, box_geoms=box_geoms, layout=layout, types=columns
        )
        return dataclasses.replace(
            self, terrain=terrain, nconmax=nconmax, njmax=njmax, broadphase=broadphase, foot_reach=foot_reach
        )


@dataclass(frozen=True)
class Ground:
    """A ``RoughSpec``'s terrain as the terms read it: the height map, each tile's spawn origin, and the row every
    env is pinned to (``None``: the curriculum's)."""

    rough: RoughSpec
    heights: HeightMap
    origins: torch.Tensor
    level: int | str | None

    @classmethod
    def of(cls, rough: RoughSpec, level: int | str | None) -> Ground:
        terrain = rough.terrain
        is_row = isinstance(level, int) and not isinstance(level, bool) and 0 <= level < terrain.rows
        if level not in (None, "all") and not is_row:
            raise ValueError(
                f"terrain_level must be a row of the terrain, 0 to {terrain.rows - 1}, or 'all', got {level!r}"
            )
        built = generate(terrain)
        return cls(rough, built.height_map(), torch.from_numpy(built.origins), level)
