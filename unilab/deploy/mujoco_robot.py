"""A robot in C MuJoCo (the ``mujoco`` package, CPU), driven through the same ``Robot`` interface as a real one.

It is the robot side of the sim-to-sim check, so it has a real robot's imperfections where asked: readings with the
uniform noise training drew for each term, targets that reach the motors ``latency`` seconds after they are written,
and reads at any instant, not only on a physics step. Time is the simulation's own: ``advance(until)`` steps the
physics to a moment, splitting a physics step where a target falls due inside it, so no step is longer than the
trained one and every event happens when it is due. Without noise, latency or off-grid reads it steps exactly as the
training env's C MuJoCo backend: the trained number of physics steps per control step, the targets and gains held
over them, poses and sensors refreshed by the same stages after them.

The height scan is what the robot would measure: the base's height above the first ground geom a ray cast straight
down meets at each scan point (``mujoco.mj_ray``), the robot's own geoms left out by their geom group.
"""

from __future__ import annotations

import copy
import math

import mujoco
import numpy as np

from unilab.deploy.robot import JointTargets, Readings
from unilab.deploy.schema import DeployError, DeployMetadata

EPS_S = 1e-9  # two instants closer than this are one
DIVERGED_SPEED = 1.0e3  # m/s or rad/s: no robot gets there by itself (the training env's bound)
_BAD_STATE = (mujoco.mjtWarning.mjWARN_BADQPOS, mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADQACC)
# The readings training drew noise for, each named as the observation kind it feeds.
NOISY_READINGS = ("joint_pos", "joint_vel", "gyro", "height_scan")


def _id(model: mujoco.MjModel, kind: mujoco.mjtObj, name: str) -> int:
    index = mujoco.mj_name2id(model, kind, name)
    if index < 0:
        raise DeployError(f"the scene has no {kind.name.removeprefix('mjOBJ_').lower()} {name!r} the policy names")
    return index


def yaw_of(quat: np.ndarray) -> float:
    """Heading of a (w, x, y, z) orientation about world z, as the training env's height scan turns its points."""
    w, x, y, z = quat
    return math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))


class MujocoRobot:
    """``Robot`` on a copy of ``model`` (the policy's scene); ``noise_scale`` times the trained noise amplitudes is
    added to every reading, drawn from ``rng``."""

    def __init__(
        self,
        model: mujoco.MjModel,
        metadata: DeployMetadata,
        noise_scale: float = 0.0,
        rng: np.random.Generator | None = None,
    ) -> None:
        self.model = copy.copy(model)  # its timestep and actuator gains are written below
        self.data = mujoco.MjData(self.model)
        self.metadata = metadata
        self.physics_dt = float(model.opt.timestep)
        joint_ids = [_id(model, mujoco.mjtObj.mjOBJ_JOINT, name) for name in metadata.joints.names]
        self._qpos = model.jnt_qposadr[joint_ids]
        self._dof = model.jnt_dofadr[joint_ids]
        self._actuator = np.array(
            [self._actuator_of(j, name) for j, name in zip(joint_ids, metadata.joints.names, strict=True)]
        )
        gyro = _id(model, mujoco.mjtObj.mjOBJ_SENSOR, metadata.imu.gyro_sensor)
        self._gyro = slice(int(model.sensor_adr[gyro]), int(model.sensor_adr[gyro]) + 3)
        self._imu_body = _id(model, mujoco.mjtObj.mjOBJ_BODY, metadata.imu.orientation_body)
        scan = metadata.scan
        self._scan_body = _id(model, mujoco.mjtObj.mjOBJ_BODY, scan.body) if scan is not None else None
        self._points = np.asarray(scan.points if scan is not None else np.zeros((0, 2)), dtype=np.float64)
        self._ground = self._ground_groups()
        mujoco.mj_kinematics(self.model, self.data)  # the ground's geoms in place, for the rays' starting height
        world = self.model.geom_bodyid == 0
        self._top = float(np.max(self.data.geom_xpos[world, 2] + self.model.geom_rbound[world])) + 1.0
        self._rng = rng or np.random.default_rng(0)
        self._noise = {
            term.kind: term.noise * noise_scale for term in metadata.observation if term.kind in NOISY_READINGS
        }
        self._lower = np.asarray(metadata.joints.lower)
        self._upper = np.asarray(metadata.joints.upper)
        self._effort = np.asarray(metadata.joints.effort_limit)
        self._pending: list[tuple[float, JointTargets]] = []
        self.latency_s = 0.0
        self._gain_scale = (1.0, 1.0)
        # Since the last reset, per joint: the closest a joint came to a limit (rad; negative past it), and the
        # largest torque as a share of its limit.
        self.worst_joint_margin = np.full(len(metadata.joints.names), np.inf)
        self.worst_torque_ratio = np.zeros(len(metadata.joints.names))

    def _actuator_of(self, joint: int, name: str) -> int:
        model = self.model
        for i in range(model.nu):
            if model.actuator_trntype[i] == mujoco.mjtTrn.mjTRN_JOINT and model.actuator_trnid[i, 0] == joint:
                return i
        raise DeployError(f"the scene has no actuator on joint {name!r}")

    def _ground_groups(self) -> np.ndarray:
        """The geom groups a scan's ray may hit: those of the world body's geoms, provided no robot geom is in one."""
        model = self.model
        world = model.geom_bodyid == 0
        groups = np.zeros(mujoco.mjNGROUP, dtype=np.uint8)  # a ray meets no geom of a group past these
        groups[[g for g in np.unique(model.geom_group[world]) if 0 <= g < mujoco.mjNGROUP]] = 1
        shared = sorted(set(model.geom_group[~world].tolist()) & set(np.flatnonzero(groups).tolist()))
        if shared and self._scan_body is not None:
            raise DeployError(
                f"the scene's ground and robot share geom group {shared[0]}: a scan's rays would hit the robot"
            )
        return groups

    # -- state ----------------------------------------------------------------------------------------------

    def reset(
        self, qpos: np.ndarray, qvel: np.ndarray, gain_scale: tuple[float, float] = (1.0, 1.0), latency_s: float = 0.0
    ) -> None:
        """A new episode from ``qpos``/``qvel``, the motors holding the default pose with the trained gains times
        ``gain_scale`` (kp, kv) until the first targets arrive ``latency_s`` after they are written."""
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:] = qpos
        self.data.qvel[:] = qvel
        self._gain_scale, self.latency_s = gain_scale, latency_s
        self._pending = []
        joints = self.metadata.joints
        self._apply(JointTargets(np.asarray(joints.default_pos), np.asarray(joints.kp), np.asarray(joints.kv)))
        self.worst_joint_margin[:] = np.inf
        self.worst_torque_ratio[:] = 0.0
        self._refresh()

    def _refresh(self) -> None:
        """Poses and sensors at the current positions and velocities: the stages the training backend runs."""
        m, d = self.model, self.data
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_sensorPos(m, d)
        mujoco.mj_comVel(m, d)
        mujoco.mj_sensorVel(m, d)

    def _apply(self, targets: JointTargets) -> None:
        """Targets and gains into the position actuators (``gain * ctrl + bias1 * q + bias2 * qdot``)."""
        kp = np.asarray(targets.kp, dtype=np.float64) * self._gain_scale[0]
        kv = np.asarray(targets.kv, dtype=np.float64) * self._gain_scale[1]
        index = self._actuator
        self.data.ctrl[index] = targets.position
        self.model.actuator_gainprm[index, 0] = kp
        self.model.actuator_biasprm[index, 1] = -kp
        self.model.actuator_biasprm[index, 2] = -kv

    # -- Robot ----------------------------------------------------------------------------------------------

    def read(self) -> Readings:
        """The readings at the current simulation time, each with the noise asked for (the quaternion has none: no
        walk trained with noise on gravity)."""
        d = self.data
        readings = {
            "joint_pos": d.qpos[self._qpos].copy(),
            "joint_vel": d.qvel[self._dof].copy(),
            "gyro": d.sensordata[self._gyro].copy(),
            "height_scan": self.height_scan() if self._scan_body is not None else None,
        }
        for name, amplitude in self._noise.items():
            if amplitude > 0 and readings[name] is not None:
                readings[name] = readings[name] + self._rng.uniform(-amplitude, amplitude, readings[name].shape)
        return Readings(quat=d.xquat[self._imu_body].copy(), **readings)

    def write(self, targets: JointTargets) -> None:
        """The targets reach the motors ``latency_s`` from now (``advance`` applies them when due)."""
        self._pending.append((self.data.time + self.latency_s, targets))

    # -- time -----------------------------------------------------------------------------------------------

    def advance(self, until: float) -> None:
        """Step the physics to simulation time ``until``: physics steps of the trained length, split where a written
        target falls due inside one; the worst joint-limit and torque margins are taken after every step."""
        d = self.data
        while d.time < until - EPS_S:
            while self._pending and self._pending[0][0] <= d.time + EPS_S:
                self._apply(self._pending.pop(0)[1])
            step = min(self.physics_dt, until - d.time)
            if self._pending:
                step = min(step, self._pending[0][0] - d.time)
            if abs(step - self.physics_dt) > EPS_S:
                self.model.opt.timestep = step
                mujoco.mj_step(self.model, d)
                self.model.opt.timestep = self.physics_dt
            else:
                mujoco.mj_step(self.model, d)
            self._take_margins()
        self._refresh()

    def _take_margins(self) -> None:
        q = self.data.qpos[self._qpos]
        np.minimum(self.worst_joint_margin, np.minimum(q - self._lower, self._upper - q), out=self.worst_joint_margin)
        torque = np.abs(self.data.actuator_force[self._actuator]) / self._effort
        np.maximum(self.worst_torque_ratio, torque, out=self.worst_torque_ratio)

    def diverged(self) -> bool:
        """The physics blew up: a non-finite or impossibly fast state, or MuJoCo's own warning that it reset one."""
        d = self.data
        bad = not (np.isfinite(d.qpos).all() and np.isfinite(d.qvel).all()) or np.abs(d.qvel).max() > DIVERGED_SPEED
        return bad or any(d.warning[w].number > 0 for w in _BAD_STATE)

    # -- ground ---------------------------------------------------------------------------------------------

    def ground_height(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """The ground's height under world points (x, y), by rays cast straight down; NaN where a ray meets none."""
        m, d = self.model, self.data
        heights = np.full(np.shape(x), np.nan)
        geom = np.zeros(1, dtype=np.int32)
        down = np.array([0.0, 0.0, -1.0])
        for i, (px, py) in enumerate(zip(np.ravel(x), np.ravel(y), strict=True)):
            distance = mujoco.mj_ray(m, d, np.array([px, py, self._top]), down, self._ground, 1, -1, geom)
            if distance >= 0:
                heights.flat[i] = self._top - distance
        return heights

    def height_scan(self) -> np.ndarray:
        """The base's height above the ground at each scan point, the points turned with the base's yaw; a point with
        no ground under it reads the scan's clip, the most a scan reports."""
        body = self._scan_body
        pos, yaw = self.data.xpos[body], yaw_of(self.data.xquat[body])
        cos, sin = math.cos(yaw), math.sin(yaw)
        px, py = self._points[:, 0], self._points[:, 1]
        ground = self.ground_height(pos[0] + cos * px - sin * py, pos[1] + sin * px + cos * py)
        return np.where(np.isnan(ground), self.metadata.scan.clip, pos[2] - ground)
