"""The velocity-walking task, written once for any robot: a robot's walk is its ``RobotConfig`` plus a ``WalkSpec``.

What every walk shares is here: the observations (trunk gyro, gravity in the torso frame, joint positions and
velocities, last action, velocity command, gait clock; the critic adds the trunk's body-frame velocity), the reward
terms, the terminations, the reset events and the penalty curriculum, in that order. What differs between robots is
data in the spec: the command ranges, the reward weights (a reward without a weight is left out), the pose
penalty's per-joint weights, the gait (clock frequency, each foot's phase offset, swing height), the tilt and
height at which an episode ends, and the physics settings. ``make_rough_walk`` moves a walk onto a generated terrain
with a height scan and a terrain curriculum, for any robot, hanging the scan from the robot's base body.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch

from unilab.context import RobotConfig
from unilab.core.spec import Mirror
from unilab.envs.config import TaskConfig
from unilab.managers.terms import (
    ActionTerm,
    CommandTerm,
    CurriculumTerm,
    EventTerm,
    ObsTerm,
    RewardTerm,
    TerminationTerm,
)
from unilab.mdp import actions, commands, curricula, events, observations, rewards, terminations
from unilab.mdp.terrain import HeightMap, footprint, height_scan, scan_mirror_index, scan_pattern
from unilab.sim import SimConfig
from unilab.terrain import TerrainConfig, generate

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
    "feet_phase",
    "alive",
)
"""The walk's reward terms, in the order they are summed; a spec weights any subset of them."""


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
    ``min_root_height`` is set, with the base below it."""

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


def _rewards(spec: WalkSpec) -> dict[str, RewardTerm]:
    """The weighted rewards of ``REWARDS``, in that order; the third entry of each marks a penalty the curriculum
    scales."""
    robot, gait = spec.robot, spec.gait
    gyro, linvel, upvector = robot.gyro_sensor, robot.linvel_sensor, robot.upvector_sensor
    feet = {"phase": "gait_phase", "foot_pos_sensors": robot.foot_pos_sensors, "swing_height": gait.swing_height}
    lin_vel = {"velocity_sensor": linvel, "command": "velocity", "sigma": 0.25}
    terms = {
        "tracking_lin_vel": (rewards.track_lin_vel_xy_exp, lin_vel, False),
        "tracking_ang_vel": (rewards.track_ang_vel_z_exp, {"command": "velocity", "gyro": gyro, "sigma": 0.25}, False),
        "penalty_ang_vel_xy": (rewards.ang_vel_xy_l2, {"gyro": gyro}, True),
        "penalty_orientation": (rewards.upvector_xy_l2, {"upvector": upvector}, True),
        "penalty_action_rate": (rewards.action_rate_l2, {}, True),
        "pose": (rewards.joint_pose_weighted_l2, {"weights": torch.tensor(spec.pose_weights)}, True),
        "penalty_feet_ori": (rewards.quat_xy_l2, {"quat_sensors": robot.foot_quat_sensors}, True),
        "feet_phase": (rewards.feet_phase_height_exp, {**feet, "sigma": gait.sigma}, False),
        "alive": (rewards.alive, {}, False),
    }
    return {
        name: RewardTerm(terms[name][0], spec.weights[name], terms[name][1], curriculum_scaled=terms[name][2])
        for name in REWARDS
        if name in spec.weights
    }


def _terminations(spec: WalkSpec) -> dict[str, TerminationTerm]:
    limit = math.radians(spec.tilt_limit_deg)
    out = {"tilt": TerminationTerm(terminations.tilt_exceeds, {"upvector": spec.robot.upvector_sensor, "limit": limit})}
    if spec.min_root_height is not None:
        out["fall"] = TerminationTerm(terminations.root_height_below, {"min_height": spec.min_root_height})
    out["time_out"] = TerminationTerm(terminations.time_out, time_out=True)
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


def make_walk(spec: WalkSpec, noise_scale: float = 1.0) -> TaskConfig:
    """The walk of ``spec``'s robot on flat ground; ``noise_scale`` multiplies the actor's observation noise."""
    robot = spec.robot
    linvel = ObsTerm(observations.sensor, {"name": robot.linvel_sensor}, scale=2.0, mirror=LINEAR)
    critic = {**_actor_terms(robot, 0.0), "linvel": linvel}
    scale = torch.tensor(robot.action_scale) if isinstance(robot.action_scale, tuple) else float(robot.action_scale)
    phase = {"offsets": spec.gait.offsets}
    return TaskConfig(
        name=spec.name,
        scene=spec.scene,
        robot=robot,
        physics=spec.physics,
        episode_length_s=20.0,
        action=ActionTerm(actions.joint_position_offsets, {"scale": scale}, mirror=joint_mirror(robot)),
        observations={"policy": _actor_terms(robot, noise_scale), "critic": critic},
        rewards=_rewards(spec),
        terminations=_terminations(spec),
        commands={
            "velocity": CommandTerm(3, commands.uniform_velocity, dict(spec.commands)),
            "gait_phase": CommandTerm(
                len(spec.gait.offsets),
                commands.gait_phase_offset,
                phase,
                advance=commands.gait_phase_advance,
                advance_params={"frequency": spec.gait.frequency},
            ),
        },
        events={
            "root_pose": EventTerm(
                events.reset_to_default_pose, {"xy_range": 0.5, "yaw_range": math.pi, "root_vel_range": 0.5}
            ),
            "pd_gains": EventTerm(events.scale_pd_gains, {"scale_range": (0.9, 1.1)}),
        },
        curricula={
            "penalty_scale": CurriculumTerm(
                curricula.penalty_scale_by_episode_length,
                state={"penalty_scale": 0.5, "mean_episode_length": 0.0},
                params=dict(PENALTY_CURRICULUM),
            )
        },
        penalty_scale_key=("task", "penalty_scale"),
    )


SCAN_SIZE, SCAN_RESOLUTION = (1.6, 1.0), 0.1
# A standing G1's base is about 0.75 m above its feet, a Go1's 0.28 m; the scan keeps a step of up to this far
# either side of either.
SCAN_CLIP = 1.5


def _scan_term(ground: HeightMap, body: str, noise: float) -> ObsTerm:
    index = scan_mirror_index(SCAN_SIZE, SCAN_RESOLUTION)
    params = {"ground": ground, "pattern": scan_pattern(SCAN_SIZE, SCAN_RESOLUTION), "body": body}
    return ObsTerm(height_scan, {**params, "clip": SCAN_CLIP}, noise=noise, mirror=Mirror(index, (1.0,) * len(index)))


def _on_ground(terms: dict, names: tuple[str, ...], ground: HeightMap) -> dict:
    """``terms`` with the ground's height map given to those of ``names`` present, so they measure heights from the
    surface under the robot rather than from z = 0."""
    return {
        name: dataclasses.replace(term, params={**term.params, "ground": ground}) if name in names else term
        for name, term in terms.items()
    }


@dataclass(frozen=True)
class RoughSpec:
    """How a walk moves onto a terrain: the grid, the rows new envs start in, and the contact and constraint
    buffers the terrain's extra contacts need. ``foot_reach`` (m) is how far around a foot the gait reward looks
    for the ground a swing must clear (about the toe's reach past the foot's site, plus a margin);
    ``straight_commands`` is the share of episodes whose command does not turn, so that robots cross their tiles
    (a turning command held for an episode walks a circle)."""

    terrain: TerrainConfig
    max_init_level: int
    nconmax: int
    njmax: int
    foot_reach: float
    straight_commands: float


def make_rough_walk(
    walk: TaskConfig, name: str, rough: RoughSpec, noise_scale: float = 1.0, terrain_level: int | str | None = None
) -> TaskConfig:
    """``walk`` on ``rough.terrain``, with the height scan (noise 0.1 m for the actor) in both groups; heights that
    decide rewards and falls are measured from the ground (a swinging foot's from the highest ground within
    ``rough.foot_reach`` of it), and a share ``rough.straight_commands`` of the commands walks straight.
    ``terrain_level`` pins every env to that row (eval at one difficulty), or with ``"all"`` spreads them over every
    row (eval at each difficulty at once), else the curriculum moves them."""
    terrain = rough.terrain
    is_row = (
        isinstance(terrain_level, int) and not isinstance(terrain_level, bool) and 0 <= terrain_level < terrain.rows
    )
    if terrain_level not in (None, "all") and not is_row:
        raise ValueError(
            f"terrain_level must be a row of the terrain, 0 to {terrain.rows - 1}, or 'all', got {terrain_level!r}"
        )
    built = generate(terrain)
    ground = built.height_map()
    origins = torch.from_numpy(built.origins)
    body = walk.robot.base_body
    observations = {
        "policy": {**walk.observations["policy"], "height_scan": _scan_term(ground, body, 0.1 * noise_scale)},
        "critic": {**walk.observations["critic"], "height_scan": _scan_term(ground, body, 0.0)},
    }
    term = {
        **_on_ground(walk.terminations, ("fall",), ground),
        "off_terrain": TerminationTerm(terminations.off_terrain, {"ground": ground, "margin": 1.0}, time_out=True),
    }
    spawn = EventTerm(
        events.spawn_on_terrain,
        {"ground": ground, "origins": origins, "max_init_level": rough.max_init_level, "level": terrain_level},
        state={"terrain_level": ((), -1.0)},
    )
    ordered = iter(walk.events.items())
    first = dict([next(ordered)])  # the pose event draws about the origin; the spawn carries it onto the tile
    if set(first) != {"root_pose"}:
        raise ValueError(f"{name} expects the walk's first event to be root_pose, got {list(first)}")
    levels = CurriculumTerm(
        curricula.terrain_levels,
        state={"terrain_level_mean": 0.0, "terrain_level_std": 0.0},
        params={
            "origins": origins,
            "tile_size": terrain.tile_size,
            "command": "velocity",
            "episode_length_s": walk.episode_length_s,
        },
    )
    rewards = _on_ground(walk.rewards, ("feet_phase",), ground)
    if "feet_phase" in rewards:
        gait = rewards["feet_phase"]
        rewards["feet_phase"] = dataclasses.replace(gait, params={**gait.params, "around": footprint(rough.foot_reach)})
    velocity = walk.commands["velocity"]
    commands = {
        **walk.commands,
        "velocity": dataclasses.replace(velocity, params={**velocity.params, "straight": rough.straight_commands}),
    }
    return dataclasses.replace(
        walk,
        name=name,
        terrain=terrain,
        physics=dataclasses.replace(walk.physics, nconmax=rough.nconmax, njmax=rough.njmax),
        observations=observations,
        rewards=rewards,
        commands=commands,
        terminations=term,
        events={**first, "terrain_spawn": spawn, **dict(ordered)},
        curricula={**walk.curricula, "terrain_levels": levels},
    )
