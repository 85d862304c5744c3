"""The actor's observation rebuilt from a robot's readings, term by term as the training env computed it.

Training computed every term in float32 from a float32 physics state, concatenated them and multiplied the row by
each column's scale (``unilab.managers.ObservationManager``, noise off). Here each term is computed in float32 with
the same operations in the same order, into one preallocated row, which is then scaled in place: given the float32
readings the env's state held, the row is the env's, to the bit where NumPy and torch round alike (the parity tests
say where they do not).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from unilab.deploy.robot import Readings
from unilab.deploy.schema import DeployMetadata

F32 = np.float32
_DOWN = np.array([0.0, 0.0, -1.0], dtype=F32)


def _cross(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``torch.linalg.cross``'s products and differences, in float32."""
    return np.array(
        (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]),
        dtype=F32,
    )


def projected_gravity(quat: np.ndarray) -> np.ndarray:
    """Gravity's direction in the frame of a body with orientation ``quat`` (w, x, y, z): world (0, 0, -1) turned by
    the quaternion's inverse, as ``unilab.core.math.quat_rotate_inverse`` does it."""
    q = np.asarray(quat, dtype=F32)
    w, xyz = q[0], -q[1:]
    t = F32(2.0) * _cross(xyz, _DOWN)
    return _DOWN + w * t + _cross(xyz, t)


class GaitClock:
    """The gait phases training kept per env: advanced before every physics step by ``2 pi f dt`` and wrapped to
    [0, 2 pi), in float32 as the env's command term does. The runtime counts control steps, not seconds: its
    phase stays the one the policy was trained to expect only when ``act`` is called at the control rate."""

    def __init__(self, frequency: float, offsets: tuple[float, ...], control_dt: float) -> None:
        self.offsets = np.asarray(offsets, dtype=F32)
        self._step = F32(2 * np.pi * frequency * control_dt)
        self._period = F32(2 * np.pi)
        self.phase = self.offsets.copy()

    def reset(self, phase: np.ndarray | None = None) -> None:
        """Phases back to the offsets (the first foot at 0), or to ``phase`` (one per foot)."""
        self.phase = self.offsets.copy() if phase is None else np.asarray(phase, dtype=F32).copy()

    def advance(self) -> None:
        self.phase = np.remainder(self.phase + self._step, self._period)

    def sin_cos(self) -> np.ndarray:
        return np.concatenate((np.sin(self.phase), np.cos(self.phase)))


class ObservationBuilder:
    """One observation row (1, width) float32, rebuilt in place from each step's inputs."""

    def __init__(self, metadata: DeployMetadata) -> None:
        self.width = metadata.obs_width
        self.row = np.zeros((1, self.width), dtype=F32)
        self._default = np.asarray(metadata.joints.default_pos, dtype=F32)
        self._clip = F32(metadata.scan.clip) if metadata.scan is not None else None
        scale = np.concatenate([np.full(term.width, term.scale, dtype=F32) for term in metadata.observation])
        self._scale = scale if bool((scale != 1).any()) else None
        self._blocks: list[tuple[slice, Callable[..., np.ndarray]]] = []
        start = 0
        for term in metadata.observation:
            self._blocks.append((slice(start, start + term.width), getattr(self, f"_{term.kind}")))
            start += term.width

    def build(
        self, readings: Readings, command: np.ndarray | None, last_action: np.ndarray, clock: GaitClock | None
    ) -> np.ndarray:
        """The row for ``readings``, the velocity ``command``, the previous (clipped) action and the gait clock."""
        row = self.row[0]
        for block, term in self._blocks:
            row[block] = term(readings, command, last_action, clock)
        if self._scale is not None:
            np.multiply(row, self._scale, out=row)
        return self.row

    # One method per kind of ``OBS_KINDS``, each (readings, command, last action, clock) -> float32 values.

    def _gyro(self, readings: Readings, *_: object) -> np.ndarray:
        return readings.gyro.astype(F32)

    def _projected_gravity(self, readings: Readings, *_: object) -> np.ndarray:
        return projected_gravity(readings.quat)

    def _joint_pos(self, readings: Readings, *_: object) -> np.ndarray:
        return readings.joint_pos.astype(F32) - self._default

    def _joint_vel(self, readings: Readings, *_: object) -> np.ndarray:
        return readings.joint_vel.astype(F32)

    def _last_action(self, readings: Readings, command: object, last_action: np.ndarray, *_: object) -> np.ndarray:
        return last_action

    def _velocity_command(self, readings: Readings, command: np.ndarray, *_: object) -> np.ndarray:
        return command.astype(F32)

    def _gait_clock(self, readings: Readings, command: object, last_action: object, clock: GaitClock) -> np.ndarray:
        return clock.sin_cos()

    def _height_scan(self, readings: Readings, *_: object) -> np.ndarray:
        return np.clip(readings.height_scan.astype(F32), -self._clip, self._clip)
