"""An exported policy as a robot runs it: readings and a command in, joint position targets out, on onnxruntime's CPU
provider, with no torch.

``Policy`` holds what training kept per env between steps (the previous action, the gait clock) and rebuilds the
observation from the file's metadata (``unilab.deploy.schema``); ``act`` is one control step. Everything about the
file is checked when it is opened, so a policy that cannot run is refused before a robot moves, in one line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from unilab.deploy.observation import F32, GaitClock, ObservationBuilder
from unilab.deploy.robot import JointTargets, Readings
from unilab.deploy.schema import METADATA_KEY, DeployError, DeployMetadata, MetadataError, from_json

INPUT_NAME, OUTPUT_NAME = "obs", "action"
WARM_UP_RUNS = 10


class ReadingsError(DeployError):
    """A reading or command of the wrong shape, or not finite: the policy does not act on it."""


def open_session(path: Path, threads: int = 1) -> ort.InferenceSession:
    """An onnxruntime session on ``threads`` CPU threads (one by default: a control loop shares its core with the
    robot's other work, and one thread answers a batch of one fastest)."""
    if not path.is_file():
        raise DeployError(f"policy not found: {path}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3  # errors only: the session's own notes are not the user's business
    try:
        return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own classes for a file it cannot read
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DeployError(f"cannot load policy {path}: {first}") from None


def read_metadata(session: ort.InferenceSession, path: Path) -> DeployMetadata:
    """The deployment metadata the exporter wrote into the file, checked whole."""
    text = session.get_modelmeta().custom_metadata_map.get(METADATA_KEY)
    if text is None:
        raise MetadataError(
            f"{path} carries no {METADATA_KEY} metadata (exported before the runtime existed): export it again with "
            "'unilab deploy export --checkpoint CHECKPOINT'"
        )
    return from_json(text, str(path))


def _check_ports(session: ort.InferenceSession, path: Path, obs_width: int, action_width: int) -> None:
    for kind, ports, name, width in (
        ("input", session.get_inputs(), INPUT_NAME, obs_width),
        ("output", session.get_outputs(), OUTPUT_NAME, action_width),
    ):
        if [port.name for port in ports] != [name]:
            raise MetadataError(f"{path} has {kind}s {[port.name for port in ports]}; a policy has one, {name!r}")
        port = ports[0]
        if port.type != "tensor(float)" or len(port.shape) != 2 or port.shape[1] != width:
            raise MetadataError(
                f"{path}: its {kind} {name!r} is {port.type} of shape {port.shape}; its metadata says (batch, {width}) "
                "float"
            )


def _checked(name: str, value: object, size: int) -> np.ndarray:
    array = np.asarray(value)
    if array.shape != (size,) or not np.isfinite(array).all():
        raise ReadingsError(f"{name} must be {size} finite values, got shape {array.shape}" + _nonfinite(array))
    return array


def _nonfinite(array: np.ndarray) -> str:
    return " with non-finite values" if array.dtype.kind == "f" and not np.isfinite(array).all() else ""


class Policy:
    """An exported policy, ready to act: ``reset()`` at the start of an episode, then ``act(readings, command)``
    once per control period (``control_dt``)."""

    def __init__(self, path: str | Path, threads: int = 1) -> None:
        self.path = Path(path)
        self._session = open_session(self.path, threads)
        self.metadata = read_metadata(self._session, self.path)
        joints = self.metadata.joints
        self.joint_names = joints.names
        self.control_dt = self.metadata.control_dt
        _check_ports(self._session, self.path, self.metadata.obs_width, len(joints.names))
        self._observation = ObservationBuilder(self.metadata)
        gait = self.metadata.gait
        self.clock = GaitClock(gait.frequency, gait.offsets, self.control_dt) if gait is not None else None
        self._default = np.asarray(joints.default_pos, dtype=F32)
        self._scale = np.asarray(joints.action_scale, dtype=F32)
        self.kp = np.asarray(joints.kp, dtype=F32)
        self.kv = np.asarray(joints.kv, dtype=F32)
        self.action = np.zeros(len(joints.names), dtype=F32)
        self.nonfinite_actions = 0  # actions the network gave as NaN or infinite, replaced by zeros (the pose)
        for _ in range(WARM_UP_RUNS):  # a session's first runs allocate; a robot's first step should not wait on it
            self._session.run([OUTPUT_NAME], {INPUT_NAME: self._observation.row})

    def reset(self, phase: np.ndarray | None = None) -> None:
        """A new episode: no previous action, and the gait clock at its offsets or at ``phase`` (one per foot)."""
        self.action = np.zeros_like(self.action)
        if self.clock is not None:
            if phase is not None:
                _checked("phase", phase, len(self.clock.offsets))
            self.clock.reset(phase)

    def observe(self, readings: Readings, command: np.ndarray | None = None) -> np.ndarray:
        """The observation (1, width) float32 the policy would act on now; its buffer is rewritten by the next call."""
        n = len(self.joint_names)
        _checked("joint_pos", readings.joint_pos, n)
        _checked("joint_vel", readings.joint_vel, n)
        _checked("gyro", readings.gyro, 3)
        _checked("quat", readings.quat, 4)
        if self.metadata.scan is not None:
            _checked("height_scan", readings.height_scan, len(self.metadata.scan.points))
        if self.metadata.command is not None:
            command = _checked("command", command, 3)
        return self._observation.build(readings, command, self.action, self.clock)

    def act(self, readings: Readings, command: np.ndarray | None = None) -> JointTargets:
        """One control step: the observation from ``readings`` and ``command`` (vx, vy, wz, for a walking policy),
        the network's action clipped to [-1, 1] as in training (a non-finite one replaced by zeros, and counted),
        and the joint targets ``default_pos + action_scale * action``; the gait clock then moves on one step."""
        obs = self.observe(readings, command)
        (raw,) = self._session.run([OUTPUT_NAME], {INPUT_NAME: obs})
        action = raw[0]
        if not np.isfinite(action).all():
            self.nonfinite_actions += 1
            action = np.zeros_like(action)
        self.action = np.clip(action, F32(-1.0), F32(1.0))
        if self.clock is not None:
            self.clock.advance()
        return JointTargets(self._default + self._scale * self.action, self.kp, self.kv)
