"""What an exported policy carries for the deployment runtime: one JSON document, versioned, under one key of the
ONNX file's metadata (``METADATA_KEY``).

The exporter runs where torch and the task are (``unilab.run.deploy_export``); the runtime where neither is. What
training did to turn a robot's sensors into the actor's input, and its output into joint targets, must therefore be
written down as data: the joint order, default pose, gains and action scale; every observation term in order with
its kind, width, scale and the noise it was trained under; the velocity command, the gait clock and the height
scan's points where the task has them; the control period. The ``check`` section holds what only the sim-to-sim
check needs (the scene, how episodes start and end, the task's thresholds). A task whose observation the runtime
cannot rebuild is exported with ``unsupported`` saying why, so that the refusal names the reason, not a missing key.

One version number covers the whole document: a reader refuses any other version in one line rather than guess at
what a changed field means.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from unilab.deploy.typed import SchemaError, parse

METADATA_KEY = "deploy"
VERSION = 1

OBS_KINDS = (
    "gyro",  # the IMU's angular velocity, in its own frame
    "projected_gravity",  # gravity's direction in the IMU body's frame, from its orientation
    "joint_pos",  # joint positions minus the default pose
    "joint_vel",
    "last_action",  # the policy's previous action, clipped to [-1, 1]
    "velocity_command",  # (vx, vy, wz) in the base frame
    "gait_clock",  # [sin phase_1..k, cos phase_1..k] of the runtime's own gait clock
    "height_scan",  # the base's height above the ground at each scan point, clipped
)
TERMINATION_KINDS = ("tilt", "root_height", "bodies_near_ground", "ground_contact", "off_terrain")
CHECK_METRICS = ("fall_rate", "survival_rate", "lin_vel_error", "yaw_rate_error", "mean_episode_length_s")


class DeployError(ValueError):
    """Input the deployment runtime refuses (a policy file, its metadata, a reading): one line naming the problem."""


class MetadataError(DeployError):
    """A policy file whose deployment metadata is missing, of another version, or does not fit together."""


@dataclass(frozen=True)
class Joints:
    """Per actuated joint, in the policy's order: the pose actions offset, what an action of 1 moves a joint by
    (rad), the position loop's gains and torque limit the policy was trained with, and the joint's range."""

    names: tuple[str, ...]
    default_pos: tuple[float, ...]
    action_scale: tuple[float, ...]
    kp: tuple[float, ...]
    kv: tuple[float, ...]
    effort_limit: tuple[float, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]


@dataclass(frozen=True)
class Imu:
    """Which model sensor the gyro reading is, and which body's orientation the gravity term is computed from."""

    gyro_sensor: str
    orientation_body: str


@dataclass(frozen=True)
class ObsTerm:
    """One block of the actor's observation: ``(reading + U(-noise, noise)) * scale`` in training; the runtime adds
    no noise, and the check adds it to its simulated readings."""

    name: str
    kind: str
    width: int
    scale: float
    noise: float


@dataclass(frozen=True)
class VelocityCommand:
    """The ranges training drew commands from (held for an episode): planar speeds at or below ``deadzone`` were 0,
    and a share ``straight`` of episodes did not turn."""

    lin_vel_x: tuple[float, float]
    lin_vel_y: tuple[float, float]
    ang_vel_z: tuple[float, float]
    deadzone: float
    straight: float


@dataclass(frozen=True)
class Gait:
    """The gait clock: every foot's phase advances ``frequency`` Hz per control step, foot ``i`` ``offsets[i]``
    radians behind the first."""

    frequency: float
    offsets: tuple[float, ...]


@dataclass(frozen=True)
class Scan:
    """The height scan's points (x, y) in metres, turned with ``body``'s yaw and centred under it; readings beyond
    ``clip`` metres either side are clipped."""

    body: str
    points: tuple[tuple[float, float], ...]
    clip: float


@dataclass(frozen=True)
class Start:
    """How training started an episode: the keyframe ``qpos`` shifted by U(+-xy) in x and y, turned by U(+-yaw),
    root velocities U(+-root_vel); kp and kv each times U(gain_scale); on a terrain, carried onto a tile of
    ``origins`` (rows, columns, xyz: the rows episodes start on) ``lift`` m above the ground."""

    qpos: tuple[float, ...]
    xy: float
    yaw: float
    root_vel: float
    gain_scale: tuple[float, float] | None
    origins: tuple[tuple[tuple[float, float, float], ...], ...] | None
    lift: float


@dataclass(frozen=True)
class Termination:
    """A way an episode ends: ``tilt`` (``sensor``, an up-vector, past ``limit`` rad), ``root_height`` (the base
    below ``limit`` m), ``bodies_near_ground`` (a body of ``bodies`` within ``limit`` m), ``ground_contact`` (a body
    of ``bodies`` touching the ground, the world body's geoms; ``limit`` unused) and ``off_terrain`` (the base within
    ``limit`` m of the terrain's edge at +-``extent``; a truncation, not a failure). Heights count from the ground
    under the point where ``on_ground``, else from z = 0."""

    kind: str
    limit: float
    sensor: str | None = None
    bodies: tuple[str, ...] = ()
    on_ground: bool = False
    extent: tuple[float, float] | None = None


@dataclass(frozen=True)
class Check:
    """What the sim-to-sim check needs besides the runtime's part: the scene (an MJB file beside the policy, with
    its SHA-256), its physics step, episode length, starts and terminations, the velocity sensor tracking is scored
    with (the yaw rate is the IMU's gyro), the task's thresholds and the actuation latency training drew (None where
    it drew none), which the check takes by default."""

    scene: str
    scene_sha256: str
    physics_dt: float
    episode_s: float
    start: Start
    terminations: tuple[Termination, ...]
    linvel_sensor: str
    thresholds: dict[str, tuple[str, float]]
    latency_s: tuple[float, float] | None


@dataclass(frozen=True)
class DeployMetadata:
    """The whole document. ``history`` is how many observation frames the actor takes at once: the envs stack none,
    so it is 1, and a file saying otherwise was written by something this runtime does not follow."""

    version: int
    task: str
    control_dt: float
    history: int
    joints: Joints
    imu: Imu
    observation: tuple[ObsTerm, ...]
    command: VelocityCommand | None
    gait: Gait | None
    scan: Scan | None
    check: Check | None
    check_unsupported: str | None = None

    @property
    def obs_width(self) -> int:
        return sum(term.width for term in self.observation)


def to_json(metadata: DeployMetadata) -> str:
    """The document as the exporter writes it; ``validate`` it first, since a reader will."""
    return json.dumps(asdict(metadata), allow_nan=False, separators=(",", ":"))


def unsupported_json(task: str, reason: str) -> str:
    """The document of a policy the runtime cannot run, so that loading it says why."""
    return json.dumps({"version": VERSION, "task": task, "unsupported": reason})


def from_json(text: str, source: str) -> DeployMetadata:
    """The document in ``text`` (from ``source``, named in errors), checked whole: ``MetadataError`` otherwise."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise MetadataError(f"{source}: its {METADATA_KEY} metadata is not JSON: {exc.msg}") from None
    if not isinstance(document, dict):
        raise MetadataError(f"{source}: its {METADATA_KEY} metadata is not a JSON object")
    _check_version(document.get("version"), source)
    if "unsupported" in document:
        raise MetadataError(
            f"{source}: {document.get('task')} policies cannot run on the runtime: {document['unsupported']}"
        )
    try:
        metadata = parse(DeployMetadata, document, METADATA_KEY)
        validate(metadata)
    except SchemaError as exc:
        raise MetadataError(f"{source}: {exc}") from None
    return metadata


def _check_version(version: Any, source: str) -> None:
    if not isinstance(version, int) or isinstance(version, bool):
        raise MetadataError(f"{source}: its {METADATA_KEY} metadata has no version number")
    if version > VERSION:
        raise MetadataError(
            f"{source}: its {METADATA_KEY} metadata is version {version}; this runtime reads version {VERSION}: "
            "update unilab"
        )
    if version != VERSION:
        raise MetadataError(
            f"{source}: its {METADATA_KEY} metadata is version {version}; this runtime reads version {VERSION}: "
            "export the policy again"
        )


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise SchemaError(message)


def _term_widths(metadata: DeployMetadata) -> dict[str, int | None]:
    """The width each kind of term must have, given the rest of the document (None: its section is missing)."""
    n = len(metadata.joints.names)
    gait, scan = metadata.gait, metadata.scan
    return {
        "gyro": 3,
        "projected_gravity": 3,
        "joint_pos": n,
        "joint_vel": n,
        "last_action": n,
        "velocity_command": 3 if metadata.command is not None else None,
        "gait_clock": 2 * len(gait.offsets) if gait is not None else None,
        "height_scan": len(scan.points) if scan is not None else None,
    }


def validate(metadata: DeployMetadata) -> None:
    """The relations between fields that their types cannot state: equal lengths, positive periods and gains,
    widths that fit their kinds, sections present where a term reads them. ``SchemaError`` names the first break."""
    root = METADATA_KEY
    _require(metadata.control_dt > 0, f"{root}.control_dt must be > 0, got {metadata.control_dt}")
    _require(metadata.history == 1, f"{root}.history must be 1 (the runtime stacks no frames), got {metadata.history}")
    _validate_joints(metadata.joints)
    _require(metadata.imu.gyro_sensor != "" and metadata.imu.orientation_body != "", f"{root}.imu names no sensor")
    widths = _term_widths(metadata)
    seen: set[str] = set()
    _require(len(metadata.observation) > 0, f"{root}.observation has no terms")
    for i, term in enumerate(metadata.observation):
        where = f"{root}.observation[{i}]"
        _require(
            term.kind in OBS_KINDS, f"{where}.kind {term.kind!r} is none the runtime builds: {', '.join(OBS_KINDS)}"
        )
        _require(term.kind not in seen, f"{where}: a second {term.kind} term")
        seen.add(term.kind)
        _require(
            widths[term.kind] is not None, f"{where} is a {term.kind} term, but the document has no section for it"
        )
        _require(
            term.width == widths[term.kind],
            f"{where}.width is {term.width}; a {term.kind} term has {widths[term.kind]}",
        )
        _require(term.noise >= 0, f"{where}.noise must be >= 0, got {term.noise}")
    if metadata.gait is not None:
        _require(len(metadata.gait.offsets) > 0, f"{root}.gait.offsets is empty")
    if metadata.scan is not None:
        _require(metadata.scan.clip > 0, f"{root}.scan.clip must be > 0, got {metadata.scan.clip}")
    if metadata.check is not None:
        _validate_check(metadata.check, metadata.control_dt)


def _validate_joints(joints: Joints) -> None:
    where = f"{METADATA_KEY}.joints"
    n = len(joints.names)
    _require(n > 0, f"{where}.names is empty")
    _require(len(set(joints.names)) == n, f"{where}.names has a name twice")
    for name in ("default_pos", "action_scale", "kp", "kv", "effort_limit", "lower", "upper"):
        count = len(getattr(joints, name))
        _require(count == n, f"{where}.{name} has {count} values for {n} joints")
    for name, low in (("kp", 0.0), ("effort_limit", 0.0)):
        _require(all(v > low for v in getattr(joints, name)), f"{where}.{name} must be > 0 for every joint")
    _require(all(v >= 0 for v in joints.kv), f"{where}.kv must be >= 0 for every joint")
    _require(
        all(lo < hi for lo, hi in zip(joints.lower, joints.upper, strict=True)), f"{where}: a lower limit >= upper"
    )


def _validate_check(check: Check, control_dt: float) -> None:
    where = f"{METADATA_KEY}.check"
    _require(check.physics_dt > 0, f"{where}.physics_dt must be > 0, got {check.physics_dt}")
    substeps = control_dt / check.physics_dt
    _require(
        abs(substeps - round(substeps)) < 1e-6 and round(substeps) >= 1,
        f"{where}.physics_dt does not divide control_dt",
    )
    _require(check.episode_s >= control_dt, f"{where}.episode_s is shorter than one control step")
    start = check.start
    _require(len(start.qpos) >= 7, f"{where}.start.qpos has no free joint")
    _require(min(start.xy, start.yaw, start.root_vel, start.lift) >= 0, f"{where}.start: a negative range")
    if start.gain_scale is not None:
        low, high = start.gain_scale
        _require(0 < low <= high, f"{where}.start.gain_scale must be 0 < low <= high, got {start.gain_scale}")
    if start.origins is not None:
        _require(
            len(start.origins) > 0 and all(len(row) > 0 for row in start.origins), f"{where}.start.origins is empty"
        )
    for i, term in enumerate(check.terminations):
        at = f"{where}.terminations[{i}]"
        _require(term.kind in TERMINATION_KINDS, f"{at}.kind {term.kind!r} is none the check knows")
        _require(term.kind != "tilt" or term.sensor is not None, f"{at}: a tilt names no sensor")
        _require(
            term.kind not in ("bodies_near_ground", "ground_contact") or len(term.bodies) > 0, f"{at} names no bodies"
        )
        _require(term.kind != "off_terrain" or term.extent is not None, f"{at} gives no extent")
    for metric, (op, _) in check.thresholds.items():
        _require(metric in CHECK_METRICS, f"{where}.thresholds.{metric} is no figure the check makes")
        _require(op in ("<=", ">="), f"{where}.thresholds.{metric} compares with {op!r}, not <= or >=")
    if check.latency_s is not None:
        low, high = check.latency_s
        _require(0 <= low <= high, f"{where}.latency_s must be 0 <= low <= high, got {check.latency_s}")
