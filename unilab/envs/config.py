"""A task is data: the scene, the robot, physics settings and the terms of every manager."""

from __future__ import annotations

import copy
import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import mujoco
import torch

from unilab.context import RobotConfig, StateKey
from unilab.core.ranges import Choice, Range, Words
from unilab.envs.model_check import check_model, check_scene_size
from unilab.managers.terms import (
    ActionTerm,
    CommandTerm,
    CurriculumTerm,
    EventTerm,
    ObsTerm,
    RewardTerm,
    TerminationTerm,
)
from unilab.sim import BROADPHASES, SimConfig, load_model
from unilab.sim.contact_sensors import add_ground_contact_sensors, add_ground_force_sensors
from unilab.terrain import TERRAIN_TYPES, TerrainConfig, generate, terrain_spec
from unilab.terrain.generator import LAYOUTS

# A task factory's knob that multiplies noise (``task.noise_scale=2``): the range in its annotation is checked with the
# config, before any work. 0 turns the noise off; ten times a task's noise already drowns what it observes.
NoiseScale = Annotated[float, Range(0.0, 10.0, why="a multiple of the task's noise; 0 turns it off")]
# The physics buffers a task on terrain sizes (``task.nconmax=64 task.njmax=400``): contacts a world, pooled over the
# worlds, and one world's constraint rows. Too small, and the overflow counters in ``health`` say so; too large, and
# every solver kernel launched over the rows pays for the empty ones.
ContactsPerWorld = Annotated[int, Range(1, 1024, why="contacts a world, pooled over the worlds")]
ConstraintRows = Annotated[int, Range(1, 8192, why="constraint rows one world's solve holds")]
# How far an action of 1 moves a joint target, as a multiple of the robot's own action scale (``task.action_reach=1``
# gives the robot's): a policy whose actions are bounded reaches no further than this.
ActionReach = Annotated[float, Range(0.1, 10.0, why="a multiple of the robot's action scale")]
# The weight of a penalty term a task leaves out by default (``task.touchdown_penalty=-10``, the Go1's knees coming near
# the ground; ``task.feet_clearance=-2``, its feet moving away from the swing height); 0 leaves the term out.
PenaltyWeight = Annotated[float, Range(-1000.0, 0.0, why="a penalty's weight; 0 leaves the term out")]
# How many times as hard as the ground holds a foot up it must push it sideways for the stumble penalty to count it
# (``task.stumble_ratio=2``): a foot on a tread is pushed sideways at most its friction coefficient times as hard, so a
# ratio above the feet's highest friction counts only feet against a standing face.
StumbleRatio = Annotated[float, Range(1.0, 100.0, why="sideways over vertical force; above the feet's friction")]
# How far around a foot (m) a walk on terrain looks for the ground its swing must clear (``task.foot_reach=0.1``): the
# gait's swing height and the clearance penalty count from the highest ground within it.
FootReach = Annotated[float, Range(0.0, 0.5, why="metres around a foot")]
# What ends a quadruped's episode on terrain as a fall (``task.falls=trunk``): ``knees``, a knee within a few
# centimetres of the ground under it; ``trunk``, the trunk touching the ground (the contact sensor's count).
FALL_RULES = ("knees", "trunk")
FallRule = Annotated[str, Choice(FALL_RULES, why="what ends an episode as a fall")]
# How far either side of the base (m) a walk on terrain fits the ground's plane that its orientation penalty measures
# the trunk's tilt from (``task.tilt_span=0.3``); 0 measures it from the vertical.
TiltSpan = Annotated[float, Range(0.0, 2.0, why="metres either side of the base; 0: the vertical")]
# How a task's terrain is built into its scene (``task.layout=solid``): one of the scene's layouts
# (``unilab.terrain.scene``), so that the physics' cost of each can be measured on the same task.
TerrainLayout = Annotated[str, Choice(LAYOUTS, why="how the scene builds the terrain")]
# The terrain's columns, left to right, by kind (``task.terrain_columns=[flat,pyramid_stairs_inv,pyramid_stairs_inv]``;
# ``TerrainConfig.types``), or null for the task's own: a kind named twice has twice the tiles, so twice the envs train
# on it.
TerrainColumns = Annotated[
    tuple[str, ...] | None,
    Words(TERRAIN_TYPES, why="the terrain's columns, left to right; null: the task's", optional=True),
]
# The Newton solver's iteration caps (``task.solver_iterations=10 task.ls_iterations=20``, mjlab's velocity tasks'
# setting), or null for the robot's MJCF's (the G1's 100 and 50, the Go1's 10 and 20). On a GPU every world's solve runs
# until the last has converged or the cap is reached, so the cap bounds a step's worst case; where it binds the solve is
# less exact, and ``health``'s ``solver_limit_steps`` counts those steps.
SolverIterations = Annotated[
    int | None, Range(1, 1000, why="Newton iterations a substep at most; null: the MJCF's", optional=True, whole=True)
]
# MuJoCo Warp's pair search (``task.broadphase=sap_tile``; ``SimConfig.broadphase``), or null for its own choice.
PairSearch = Annotated[
    str | None, Choice(BROADPHASES, why="MuJoCo Warp's pair search; null: its own choice", optional=True)
]


@dataclass(frozen=True)
class TaskConfig:
    """Everything that defines a task's env; ``dataclasses.replace`` derives variants.

    ``observations`` maps group name (``policy``, ``critic``) to ordered terms; the group
    widths follow from the terms. ``obs_noise`` switches the terms' noise on or off as a
    whole (off for evaluation). ``record_terminations`` adds every termination term's flags to each transition,
    under ``termination_terms``: eval turns it on to say what ended the failed episodes; training reads none of
    them, so its transitions keep their layout. ``terrain`` replaces the scene's floor by a generated terrain; the
    terms that read the ground (spawn, height scan, feet, falls) carry its height map, so a terrain is chosen
    through the task's factory, which builds both together.
    """

    name: str
    scene: Path
    robot: RobotConfig
    physics: SimConfig  # solver settings and substeps; the backend is chosen when the env is built
    episode_length_s: float
    action: ActionTerm
    observations: dict[str, dict[str, ObsTerm]]
    rewards: dict[str, RewardTerm]
    terminations: dict[str, TerminationTerm]
    commands: dict[str, CommandTerm] = field(default_factory=dict)
    events: dict[str, EventTerm] = field(default_factory=dict)
    curricula: dict[str, CurriculumTerm] = field(default_factory=dict)
    penalty_scale_key: StateKey | None = None
    obs_noise: bool = True
    terrain: TerrainConfig | None = None
    ground_contact_bodies: tuple[str, ...] = ()  # each gets a sensor of its contacts with the ground (terms read it)
    ground_force_parts: tuple[str, ...] = ()  # each geom or body gets a sensor of its net contact force with the ground
    record_terminations: bool = False

    def __post_init__(self) -> None:
        if not self.episode_length_s > 0:
            raise ValueError(f"task {self.name}: episode_length_s must be > 0, got {self.episode_length_s}")


def task_model(task: TaskConfig) -> mujoco.MjModel:
    """The task's compiled scene, its terrain built in, with the task's solver settings applied; refused in one line
    where it is too large (before MuJoCo reads it) or does not fit the robot's config (``unilab.envs.model_check``).

    Compiled once per scene file, solver settings, terrain and robot in a process: a run reads its sizes from the
    model before it builds its envs, and a randomised task reads it as it is made. Each call returns its own copy,
    which a backend may write into (per-world parameters) without reaching another caller's."""
    check_scene_size(task.scene)
    stat = Path(task.scene).resolve().stat()  # an edited scene is compiled again
    physics = dataclasses.replace(task.physics, per_world=())  # which parameters vary per world: not the model's
    sensed = (task.ground_contact_bodies, task.ground_force_parts)
    model = _compiled(Path(task.scene), stat.st_mtime_ns, stat.st_size, physics, task.terrain, task.robot, *sensed)
    return copy.copy(model)


@functools.lru_cache(maxsize=4)  # a model with its terrain holds a few MB; a process builds one or two tasks
def _compiled(
    scene: Path,
    mtime_ns: int,
    size: int,
    physics: SimConfig,
    terrain: TerrainConfig | None,
    robot: RobotConfig,
    ground_contact_bodies: tuple[str, ...],
    ground_force_parts: tuple[str, ...],
) -> mujoco.MjModel:
    """``task_model``'s model, kept per input; callers get copies, so nothing writes into it."""
    if terrain is None and not ground_contact_bodies and not ground_force_parts:
        model = load_model(scene, physics)
    else:
        spec = mujoco.MjSpec.from_file(str(scene)) if terrain is None else terrain_spec(scene, generate(terrain))
        add_ground_contact_sensors(spec, ground_contact_bodies)
        add_ground_force_sensors(spec, ground_force_parts)
        model = spec.compile()
        physics.apply(model)
    check_model(model, robot, scene)
    return model


def on_device(params: Mapping[str, Any], device: torch.device, moved: dict[int, Any] | None = None) -> dict[str, Any]:
    """Term params on ``device``: tensors, and data objects that move themselves (``to(device)``). ``moved`` (by the
    ``id`` of each original) keeps an object that several terms share one object on the device: one copy in memory,
    and terms that are the same still compare the same (``ObservationManager`` computes those once)."""
    moved = {} if moved is None else moved
    out = {}
    for key, value in params.items():
        if hasattr(value, "to") and not isinstance(value, type):
            if id(value) not in moved:
                moved[id(value)] = value.to(device)
            value = moved[id(value)]
        out[key] = value
    return out


def place_on_device(task: TaskConfig, device: torch.device) -> TaskConfig:
    """The task with every term's params (tensors, motion clips) moved to ``device`` once, at build
    time, so no step copies them from the host. A param several terms share stays shared."""
    moved: dict[int, Any] = {}  # the task holds every original, so no id is reused while this runs

    def move(terms: dict) -> dict:
        out = {}
        for name, term in terms.items():
            changes = {"params": on_device(term.params, device, moved)}
            if isinstance(term, CommandTerm):
                changes["advance_params"] = on_device(term.advance_params, device, moved)
            out[name] = dataclasses.replace(term, **changes)
        return out

    return dataclasses.replace(
        task,
        action=dataclasses.replace(task.action, params=on_device(task.action.params, device, moved)),
        observations={group: move(terms) for group, terms in task.observations.items()},
        rewards=move(task.rewards),
        terminations=move(task.terminations),
        commands=move(task.commands),
        events=move(task.events),
        curricula=move(task.curricula),
    )
