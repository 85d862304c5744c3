"""How the sim-to-sim check's episodes start and end: the conditions it adds, the starts it draws as training drew
them, and the task's terminations tested on a simulated robot's true state."""

from __future__ import annotations

import math
from dataclasses import dataclass

import mujoco
import numpy as np

from unilab.deploy.mujoco_robot import MujocoRobot
from unilab.deploy.schema import Check, DeployError, DeployMetadata, Termination


@dataclass(frozen=True)
class Conditions:
    """What the check adds to training's conditions: ``noise_scale`` times the noise training drew for each reading,
    an actuation latency drawn per episode from ``latency_s``, and reads that come up to ``jitter_s`` early or late
    against the control period's grid, drawn per step; ``seconds`` per episode (default the task's). The default
    latency is for a policy trained without any: a few milliseconds is what a robot's bus and motor drivers add, and
    a policy should keep its feet over twice that."""

    episodes: int = 16
    seconds: float | None = None
    noise_scale: float = 1.0
    latency_s: tuple[float, float] = (0.0, 0.01)
    jitter_s: float = 0.001
    seed: int = 0

    def validate(self, control_dt: float) -> None:
        """``DeployError`` naming the first condition the check cannot run under (NaN fits none)."""
        low, high = self.latency_s
        half_step = control_dt / 2
        problems = {
            "episodes must be >= 1": self.episodes >= 1,
            f"seconds must be at least one control step ({control_dt:g} s)": self.seconds is None
            or self.seconds >= control_dt,
            "noise scale must be a finite number >= 0": math.isfinite(self.noise_scale) and self.noise_scale >= 0,
            "latency must be 0 <= low <= high <= 1 s": 0 <= low <= high <= 1.0,
            f"jitter must be 0 to half a control step ({half_step * 1e3:g} ms)": 0 <= self.jitter_s <= half_step,
            "seed must be >= 0": self.seed >= 0,
        }
        for problem, holds in problems.items():
            if not holds:
                raise DeployError(problem)


@dataclass(frozen=True)
class EpisodeStart:
    """One episode's draw: the physics state, command, gait phases, gain scales (kp, kv) and latency."""

    qpos: np.ndarray
    qvel: np.ndarray
    command: np.ndarray | None
    phase: np.ndarray | None
    gain_scale: tuple[float, float] = (1.0, 1.0)
    latency_s: float = 0.0


def _quat_mul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    aw, ax, ay, az = a
    bw, bx, by, bz = b
    return np.array(
        (
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        )
    )


def _command(metadata: DeployMetadata, rng: np.random.Generator) -> np.ndarray | None:
    ranges = metadata.command
    if ranges is None:
        return None
    low, high = zip(ranges.lin_vel_x, ranges.lin_vel_y, ranges.ang_vel_z, strict=True)
    command = rng.uniform(low, high)
    if np.linalg.norm(command[:2]) <= ranges.deadzone:
        command[:2] = 0.0
    if rng.uniform() < ranges.straight:
        command[2] = 0.0
    return command


def draw_starts(metadata: DeployMetadata, robot: MujocoRobot, conditions: Conditions) -> list[EpisodeStart]:
    """``conditions.episodes`` starts drawn as training drew them (``schema.Start``), from ``conditions.seed``."""
    start, rng = metadata.check.start, np.random.default_rng(conditions.seed)
    starts = []
    for i in range(conditions.episodes):
        u = rng.uniform(-1.0, 1.0, 9)
        qpos = np.array(start.qpos)
        qpos[:2] += start.xy * u[:2]
        half = 0.5 * start.yaw * u[2]
        qpos[3:7] = _quat_mul(qpos[3:7], np.array((math.cos(half), 0.0, 0.0, math.sin(half))))
        qvel = np.zeros(robot.model.nv)
        qvel[:6] = start.root_vel * u[3:]
        if start.origins is not None:
            tiles = start.origins[rng.integers(len(start.origins))]
            qpos[:2] += tiles[i % len(tiles)][:2]
            qpos[2] += robot.ground_height(qpos[:1], qpos[1:2])[0] + start.lift
        gait = metadata.gait
        phase = rng.uniform(0.0, 2 * math.pi) + np.asarray(gait.offsets) if gait is not None else None
        gains = tuple(rng.uniform(*start.gain_scale, 2)) if start.gain_scale is not None else (1.0, 1.0)
        latency = float(rng.uniform(*conditions.latency_s))
        starts.append(EpisodeStart(qpos, qvel, _command(metadata, rng), phase, gains, latency))
    return starts


class Ends:
    """The task's terminations on a robot's true state: ``(failed, truncated)`` after each control step."""

    def __init__(self, check: Check, robot: MujocoRobot) -> None:
        self.robot = robot
        self.terms = check.terminations
        model = robot.model
        self._sensor = {
            t.sensor: int(model.sensor_adr[robot_id(model, "SENSOR", t.sensor)]) for t in self.terms if t.sensor
        }
        self._bodies = {b: robot_id(model, "BODY", b) for t in self.terms for b in t.bodies}
        self._geom_body = model.geom_bodyid

    def _height(self, point: np.ndarray, term: Termination) -> float:
        ground = self.robot.ground_height(point[:1], point[1:2])[0] if term.on_ground else 0.0
        return float(point[2] - ground)

    def _hit(self, term: Termination) -> bool:
        d = self.robot.data
        if term.kind == "tilt":
            return math.acos(min(1.0, max(-1.0, float(d.sensordata[self._sensor[term.sensor] + 2])))) > term.limit
        if term.kind == "root_height":
            return self._height(d.qpos[:3], term) < term.limit
        if term.kind == "bodies_near_ground":
            return any(self._height(d.xpos[self._bodies[b]], term) < term.limit for b in term.bodies)
        if term.kind == "ground_contact":
            return self._touching(term.bodies)
        half_x, half_y = term.extent
        return abs(d.qpos[0]) > half_x - term.limit or abs(d.qpos[1]) > half_y - term.limit

    def _touching(self, bodies: tuple[str, ...]) -> bool:
        """Whether the last collision stage found a contact between a geom of ``bodies`` and one of the world body's
        (the ground's: the robot's geoms do not collide with one another), as the training env's contact sensors
        count them."""
        pairs = self._geom_body[self.robot.data.contact.geom]  # (contacts, 2) body ids
        ids = [self._bodies[b] for b in bodies]
        ours, ground = np.isin(pairs, ids), pairs == 0
        return bool((ours[:, 0] & ground[:, 1] | ours[:, 1] & ground[:, 0]).any())

    def __call__(self) -> tuple[bool, bool]:
        failed = self.robot.diverged() or any(self._hit(t) for t in self.terms if t.kind != "off_terrain")
        truncated = any(self._hit(t) for t in self.terms if t.kind == "off_terrain")
        return failed, truncated


def robot_id(model: mujoco.MjModel, kind: str, name: str) -> int:
    index = mujoco.mj_name2id(model, getattr(mujoco.mjtObj, f"mjOBJ_{kind}"), name)
    if index < 0:
        raise DeployError(f"the scene has no {kind.lower()} {name!r} the policy's check names")
    return index
