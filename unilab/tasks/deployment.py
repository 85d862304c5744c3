"""A task's deployment metadata (``unilab.deploy.schema``), read off its env when a policy is exported.

The runtime rebuilds the observation from data, so every term the actor reads is described here by what it is (its
function, matched by identity, and the parameters it was built with), never by its name: a task built from the
walk's terms describes itself, and one with a term the runtime cannot rebuild is exported with the reason, which
loading it then gives. The sim-to-sim check's section is made the same way from the reset events, commands and
terminations; a task whose episodes it cannot start or end is exported runnable but not checkable, with the reason.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch

from unilab.deploy import schema
from unilab.envs.functional import FunctionalEnv
from unilab.managers.terms import ObsTerm, TerminationTerm
from unilab.mdp import actions, commands, events, observations, randomization, terminations
from unilab.mdp.terrain import height_scan
from unilab.motion import MotionClips
from unilab.sim.contact_sensors import sensed_body
from unilab.tasks.registry import get_task

# Reset and interval events that change the physics, not how an episode starts: the check leaves them out (it adds
# its own imperfections: noise, latency, jitter).
_PHYSICS_EVENTS = (
    randomization.set_friction,
    randomization.randomize_mass,
    randomization.offset_com,
    randomization.scale_motor_strength,
    randomization.randomize_action_delay,
    events.push_root,
)


_SPAWN_LIFT = inspect.signature(events.spawn_on_terrain).parameters["lift"].default


class Unsupported(Exception):
    """What the runtime or the check cannot rebuild, in words a refusal can quote."""


def _floats(value: Any) -> tuple[float, ...]:
    return tuple(float(v) for v in (value.tolist() if isinstance(value, torch.Tensor) else value))


class _Sections:
    """The sections observation terms bring with them, filled as the terms are read."""

    def __init__(self, env: FunctionalEnv) -> None:
        self.env = env
        self.command: schema.VelocityCommand | None = None
        self.gait: schema.Gait | None = None
        self.scan: schema.Scan | None = None
        self.orientation_body = env.task.robot.torso_body

    def command_of(self, name: str, resample: Any) -> Any:
        term = self.env.task.commands.get(name)
        if term is None or term.resample is not resample:
            raise Unsupported(f"command {name!r} is not the {resample.__name__} command the runtime keeps")
        return term

    def velocity(self, name: str) -> None:
        p = self.command_of(name, commands.uniform_velocity).params
        ranges = (tuple(map(float, p[key])) for key in ("lin_vel_x", "lin_vel_y", "ang_vel_z"))
        self.command = schema.VelocityCommand(*ranges, float(p["deadzone"]), float(p.get("straight", 0.0)))

    def clock(self, name: str) -> None:
        term = self.command_of(name, commands.gait_phase_offset)
        if term.advance is not commands.gait_phase_advance:
            raise Unsupported(f"command {name!r} advances by {getattr(term.advance, '__name__', None)}, not a clock")
        self.gait = schema.Gait(float(term.advance_params["frequency"]), _floats(term.params["offsets"]))

    def height_scan(self, params: dict[str, Any]) -> None:
        points = tuple((float(x), float(y)) for x, y in params["pattern"].tolist())
        self.scan = schema.Scan(params["body"], points, float(params["clip"]))


def _kind(name: str, term: ObsTerm, sections: _Sections) -> str:
    """The runtime's kind of the actor's term ``name``; a section it reads is filled in on the way."""
    func, params = term.func, term.params
    plain = {
        observations.joint_pos_rel: "joint_pos",
        observations.joint_vel: "joint_vel",
        observations.last_action: "last_action",
    }
    if func in plain:
        return plain[func]
    if func is observations.sensor and params["name"] == sections.env.task.robot.gyro_sensor:
        return "gyro"
    if func is observations.projected_gravity:
        sections.orientation_body = params["body"]
        return "projected_gravity"
    if func is observations.command:
        sections.velocity(params["name"])
        return "velocity_command"
    if func is observations.phase_sin_cos:
        sections.clock(params["name"])
        return "gait_clock"
    if func is height_scan:
        sections.height_scan(params)
        return "height_scan"
    if any(isinstance(value, MotionClips) for value in params.values()):
        raise Unsupported(
            f"the actor's observation term {name!r} ({func.__name__}) reads a reference motion clip, which the runtime "
            "does not carry"
        )
    raise Unsupported(
        f"the actor's observation term {name!r} ({func.__name__}) is none the runtime builds: it builds joint "
        "readings, an IMU's gyro and gravity, a velocity command, a gait clock and a height scan"
    )


def _joints(env: FunctionalEnv) -> schema.Joints:
    action, ctx, robot = env.task.action, env.ctx, env.task.robot
    if action.func is not actions.joint_position_offsets:
        raise Unsupported(f"its action term is {action.func.__name__}, not joint position offsets")
    n = len(robot.joint_names)
    scale = action.params["scale"]
    return schema.Joints(
        names=tuple(robot.joint_names),
        default_pos=_floats(ctx.default_joint_pos),
        action_scale=_floats(scale) if isinstance(scale, torch.Tensor) else (float(scale),) * n,
        kp=_floats(ctx.default_kp),
        kv=_floats(ctx.default_kv),
        effort_limit=_floats(robot.joint_effort),
        lower=_floats(ctx.joint_lower),
        upper=_floats(ctx.joint_upper),
    )


def deploy_metadata(env: FunctionalEnv, scene: str, scene_sha256: str) -> str:
    """The JSON document ``policy.onnx`` carries under ``schema.METADATA_KEY`` for the actor of ``env``'s task;
    ``scene`` is the name of its scene file beside the policy, with that file's SHA-256."""
    task = env.task
    try:
        sections = _Sections(env)
        terms = task.observations["policy"]
        widths = env.obs_term_dims["policy"]
        observation = tuple(
            schema.ObsTerm(name, _kind(name, term, sections), widths[name], float(term.scale), float(term.noise))
            for name, term in terms.items()
        )
        joints = _joints(env)
    except Unsupported as exc:
        return schema.unsupported_json(task.name, str(exc))
    try:
        check, check_unsupported = _check(env, scene, scene_sha256), None
    except Unsupported as exc:
        check, check_unsupported = None, str(exc)
    metadata = schema.DeployMetadata(
        version=schema.VERSION,
        task=task.name,
        control_dt=float(env.ctx.dt),
        history=1,
        joints=joints,
        imu=schema.Imu(task.robot.gyro_sensor, sections.orientation_body),
        observation=observation,
        command=sections.command,
        gait=sections.gait,
        scan=sections.scan,
        check=check,
        check_unsupported=check_unsupported,
    )
    schema.validate(metadata)  # a document the runtime would refuse is an exporter bug: raised here, not on a robot
    return schema.to_json(metadata)


def _start(env: FunctionalEnv) -> tuple[schema.Start, tuple[float, float] | None]:
    """How episodes start, and the actuation latency training drew, from the task's events."""
    pose = spawn = gains = latency = None
    for name, term in env.task.events.items():
        if term.func is events.reset_to_default_pose:
            pose = term.params
        elif term.func is events.spawn_on_terrain:
            spawn = term.params
        elif term.func is events.scale_pd_gains:
            gains = _floats(term.params["scale_range"])
        elif term.func is randomization.randomize_action_delay:
            latency = _floats(term.params["latency_s"])
        elif term.func not in _PHYSICS_EVENTS:
            raise Unsupported(
                f"its episodes start with event {name!r} ({term.func.__name__}), which the check does not draw"
            )
    if pose is None:
        raise Unsupported("its episodes do not start from the standing pose (no reset_to_default_pose event)")
    origins = None
    if spawn is not None:
        tiles = spawn["origins"]
        rows = _start_rows(tiles.shape[0], spawn.get("level"), spawn["max_init_level"])
        origins = tuple(tuple(tuple(map(float, tile)) for tile in tiles[row].tolist()) for row in rows)
    start = schema.Start(
        qpos=_floats(env.ctx.default_qpos),
        xy=float(pose["xy_range"]),
        yaw=float(pose["yaw_range"]),
        root_vel=float(pose["root_vel_range"]),
        gain_scale=gains,
        origins=origins,
        lift=float(spawn.get("lift", _SPAWN_LIFT)) if spawn is not None else 0.0,
    )
    return start, latency


def _start_rows(rows: int, level: int | str | None, max_init_level: int) -> range | list[int]:
    """The terrain rows episodes start on, as ``events.spawn_on_terrain`` picks them: every row for ``"all"``, the
    pinned one, or those up to the curriculum's first level."""
    if level == "all":
        return range(rows)
    if level is not None:
        return [int(level)]
    return range(min(max_init_level, rows - 1) + 1)


def _termination(name: str, term: TerminationTerm) -> schema.Termination | None:
    """The check's form of a termination term; None for the time limit, which the episode length is, and for the
    crossing of a tile, which is the training curriculum's promotion (an eval's episodes run their whole length)."""
    func, p = term.func, term.params
    on_ground = p.get("ground") is not None
    if func in (terminations.time_out, terminations.crossed_tile):
        return None
    if func is terminations.tilt_exceeds:
        return schema.Termination("tilt", float(p["limit"]), sensor=p["upvector"])
    if func is terminations.root_height_below:
        return schema.Termination("root_height", float(p["min_height"]), on_ground=on_ground)
    if func is terminations.bodies_near_ground:
        return schema.Termination(
            "bodies_near_ground", float(p["min_height"]), bodies=tuple(p["bodies"]), on_ground=on_ground
        )
    if func is terminations.ground_contact:
        return schema.Termination("ground_contact", 0.0, bodies=tuple(sensed_body(s) for s in p["sensors"]))
    if func is terminations.off_terrain:
        return schema.Termination("off_terrain", float(p["margin"]), extent=tuple(map(float, p["ground"].half_extent)))
    raise Unsupported(f"its episodes end by {name!r} ({func.__name__}), which the check does not test")


def _check(env: FunctionalEnv, scene: str, scene_sha256: str) -> schema.Check:
    start, latency = _start(env)
    ends = tuple(t for name, term in env.task.terminations.items() if (t := _termination(name, term)) is not None)
    metrics = get_task(env.task.name).metrics
    thresholds = {k: (op, float(bound)) for k, (op, bound) in (metrics.thresholds if metrics else {}).items()}
    unknown = sorted(set(thresholds) - set(schema.CHECK_METRICS))
    if unknown:
        raise Unsupported(f"its thresholds judge {', '.join(unknown)}, which the check does not measure")
    return schema.Check(
        scene=scene,
        scene_sha256=scene_sha256,
        physics_dt=float(env.ctx.physics_dt),
        episode_s=float(env.task.episode_length_s),
        start=start,
        terminations=ends,
        linvel_sensor=env.task.robot.linvel_sensor,
        thresholds=thresholds,
        latency_s=latency,
    )
