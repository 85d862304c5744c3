"""Domain randomisation of a task as data: the ranges in one checked dataclass, which ``randomize`` turns into
event terms and the per-world physics parameters those terms set.

The ranges are checked when the dataclass is built and against the task's model when it is applied, so an
impossible range is refused in one line naming the field, before any env exists.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from unilab.context import ACTION_DELAY
from unilab.envs.config import TaskConfig, task_model
from unilab.managers.terms import EventTerm
from unilab.mdp import events, randomization
from unilab.sim import MODEL_PARAMS

Range = tuple[float, float]

# Per field: the smallest value its range may start at, and whether it must lie strictly above it.
_FLOORS: dict[str, tuple[float, bool]] = {
    "friction": (0.0, False),
    "link_mass_scale": (0.0, True),
    "payload_kg": (0.0, False),
    "motor_strength": (0.0, True),
    "pd_gains": (0.0, True),
    "latency_s": (0.0, False),
    "push_speed": (0.0, False),
    "push_every_s": (0.0, True),
}


@dataclass(frozen=True)
class Randomization:
    """What differs from env to env, and by how much; ``None`` keeps the model's own value.

    - ``friction``: every contact's sliding friction, an absolute coefficient drawn U(low, high) per env;
    - ``link_mass_scale``: each body's mass, and its inertia with it, times U(low, high);
    - ``payload_kg``: U(low, high) kg added to the robot's ``payload_body`` (inertia scaled with the mass);
    - ``com_offset_m``: the payload body's centre of mass moved by U(+-value) m along each axis;
    - ``motor_strength``: each motor's force and torque limit times U(low, high);
    - ``pd_gains``: kp and kv each times U(low, high), one factor each per env;
    - ``latency_s``: actuation latency U(low, high) s in whole physics substeps, at most one control step;
    - ``push_speed``: shoves of U(low, high) m/s in a random horizontal direction, every ``push_every_s`` s.

    All but the pushes are drawn at every reset and hold for the episode. Observation noise is the task's
    own (``TaskConfig.obs_noise`` and its terms' amplitudes).
    """

    friction: Range | None = None
    link_mass_scale: Range | None = None
    payload_kg: Range | None = None
    com_offset_m: float | None = None
    motor_strength: Range | None = None
    pd_gains: Range | None = None
    latency_s: Range | None = None
    push_speed: Range | None = None
    push_every_s: Range = (2.0, 4.0)

    def __post_init__(self) -> None:
        for name, (floor, strict) in _FLOORS.items():
            value = getattr(self, name)
            if value is None:
                continue
            rule = f"a (low, high) pair of finite numbers with {floor:g} {'<' if strict else '<='} low <= high"
            pair = isinstance(value, tuple | list) and len(value) == 2
            low, high = value if pair else (math.nan, math.nan)
            fits = pair and all(math.isfinite(v) for v in value) and low <= high
            if not fits or low < floor or (strict and low == floor):
                raise ValueError(f"Randomization.{name} must be {rule}, got {value!r}")
        offset = self.com_offset_m
        if offset is not None and not (math.isfinite(offset) and offset >= 0.0):
            raise ValueError(f"Randomization.com_offset_m must be a finite number >= 0, got {offset!r}")


def randomize(task: TaskConfig, ranges: Randomization) -> TaskConfig:
    """``task`` with the events of ``ranges`` (each replacing the task's own event of the same name, such as
    ``pd_gains``) and its physics carrying per world the model parameters those events set."""
    body = task.robot.payload_body
    needs_body = ranges.payload_kg is not None or ranges.com_offset_m is not None
    if needs_body and body is None:
        raise ValueError(f"Randomization.payload_kg/com_offset_m: robot {task.robot.name} names no payload_body")
    model = task_model(task)
    if needs_body and body not in {model.body(i).name for i in range(model.nbody)}:
        raise ValueError(f"Randomization: payload_body {body!r} of robot {task.robot.name} is not in its model")
    control_dt = model.opt.timestep * task.physics.substeps
    if ranges.latency_s is not None and ranges.latency_s[1] > control_dt * (1 + 1e-9):
        raise ValueError(
            f"Randomization.latency_s must end within one control step ({control_dt * 1e3:g} ms), "
            f"got {ranges.latency_s!r}"
        )
    added: dict[str, EventTerm] = {}
    params: set[str] = set()
    if ranges.friction is not None:
        added["friction"] = EventTerm(randomization.set_friction, {"friction_range": ranges.friction})
        params.add("geom_friction")
    if ranges.link_mass_scale is not None or ranges.payload_kg is not None:
        mass = {
            "scale_range": ranges.link_mass_scale or (1.0, 1.0),
            "payload_range": ranges.payload_kg or (0.0, 0.0),
            "payload_body": body,
        }
        added["mass"] = EventTerm(randomization.randomize_mass, mass)
        params |= {"body_mass", "body_inertia"}
    if ranges.com_offset_m is not None:
        added["com_offset"] = EventTerm(randomization.offset_com, {"body": body, "offset_range": ranges.com_offset_m})
        params.add("body_ipos")
    if ranges.motor_strength is not None:
        added["motor_strength"] = EventTerm(randomization.scale_motor_strength, {"scale_range": ranges.motor_strength})
        params.add("actuator_strength")
    if ranges.pd_gains is not None:
        added["pd_gains"] = EventTerm(events.scale_pd_gains, {"scale_range": ranges.pd_gains})
    if ranges.latency_s is not None:
        added["latency"] = EventTerm(
            randomization.randomize_action_delay, {"latency_s": ranges.latency_s}, state={ACTION_DELAY: ((), 0.0)}
        )
    if ranges.push_speed is not None:
        added["push"] = EventTerm(events.push_root, {"speed_range": ranges.push_speed}, interval_s=ranges.push_every_s)
    per_world = tuple(name for name in MODEL_PARAMS if name in params or name in task.physics.per_world)
    physics = dataclasses.replace(task.physics, per_world=per_world)
    return dataclasses.replace(task, physics=physics, events={**task.events, **added})
