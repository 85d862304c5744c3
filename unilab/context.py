"""What terms and managers share: the robot config, the env's static facts, and how a state is updated.

Term functions (``unilab.mdp``) and the managers that compose them (``unilab.managers``) both read an
``EnvContext`` and return ``Updates``; neither needs the other, so both sit on this module rather than one on the
other. The context is built once from the compiled model and the task's robot config, so terms look up bodies and
sensors by name at build time and index tensors at run time.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    import mujoco
    from tensordict import TensorDict

StateKey = tuple[str, ...]
Updates = dict[StateKey, torch.Tensor]
Entries = dict[StateKey, torch.Tensor]
"""The state's tensors by ``(group, name)``: what the env step works on. Dynamo traces a plain dict's lookup in a few
bytecodes and a TensorDict's in a few hundred, so the step reads and writes a dict of the state's own tensors and
builds TensorDicts only at its edges."""
State = Mapping[StateKey, torch.Tensor]
"""What a term reads: the state's entries by ``(group, name)``, as ``state["sim", "qpos"]``. The env step hands terms
its ``Entries``; a state TensorDict reads the same way, so a test or a tool may hand them one."""

ACTION_DELAY = "action_delay"
"""Actuation latency, in physics substeps: where the state holds ``("env", ACTION_DELAY)`` (an event declares
it), the first that-many substeps of each control step still apply the previous action's targets."""


def apply_updates(state: TensorDict, updates: Updates, mask: torch.Tensor | None = None) -> TensorDict:
    """A shallow copy of ``state`` with ``updates`` in place of its entries (only in ``mask`` rows), so the input
    state is never changed. Several updates in a row go into one copy with ``write_updates``."""
    out = state.clone(False)
    write_updates(out, updates, mask)
    return out


def write_updates(
    own: MutableMapping[StateKey, torch.Tensor], updates: Updates, mask: torch.Tensor | None = None
) -> None:
    """``updates`` set into ``own`` (only in ``mask`` rows): the env step's ``Entries``, or a shallow copy of a state
    TensorDict, that its caller made and holds alone, so a step copies its state once, not at each of its two dozen
    updates."""
    for key, value in updates.items():
        if mask is not None:
            old = own[key]
            value = torch.where(mask.view(-1, *([1] * (old.dim() - 1))), value, old)
        own[key] = value


@dataclass(frozen=True)
class RobotConfig:
    """What an env and its terms need to know of a robot that its MJCF does not say, or says in a way terms should
    not have to parse: a robot package (``unilab.robots.<robot>``) declares one, and generic terms read the robot
    from it (through ``EnvContext``) rather than from constants of their own.

    ``joint_names`` orders the actuated joints as actions and joint observations are ordered (one actuator per
    joint, in the same order); ``default_joint_pos`` is the pose actions are offsets from and ``action_scale`` (one
    number, or one per joint) what an action of 1 moves a joint by, in radians; ``joint_kp``, ``joint_kv`` and
    ``joint_effort`` are the position actuators' gains and torque limits in joint order (the MJCF's, restated so a
    test can hold the two together). ``keyframe`` names the MJCF keyframe the robot stands in; ``base_body`` is the
    free-joint body (what a camera follows, what a height scan hangs from); ``torso_body`` the body whose tilt and
    gravity direction the walking terms read; ``payload_body`` the body a payload is strapped to, for mass and
    centre-of-mass randomisation. ``foot_sites`` name the feet and ``foot_pos_sensors`` their world positions, in
    the same order; ``foot_quat_sensors`` their orientations where the feet are flat enough to have one, and
    ``foot_linvel_sensors`` their world-frame linear velocities (``framelinvel``) where a walk weighs how fast a foot
    moves at what height; ``foot_geoms`` their collision geoms where a foot is one, or ``foot_bodies`` their bodies
    where a foot is several geoms (a sole of capsules and spheres), for a walk that weighs how the ground pushes a
    foot (``foot_force_parts``).
    ``gyro_sensor``, ``upvector_sensor`` and ``linvel_sensor`` name the trunk's angular velocity, z axis in world and
    body-frame linear velocity. ``mirror_joint_index``/``mirror_joint_sign`` mirror a joint vector left-right
    (``mirrored[i] = x[index[i]] * sign[i]``) and ``mirror_foot_index`` the feet.
    """

    name: str
    joint_names: tuple[str, ...]
    default_joint_pos: tuple[float, ...]
    keyframe: str
    base_body: str
    torso_body: str
    foot_sites: tuple[str, ...]
    foot_pos_sensors: tuple[str, ...]
    gyro_sensor: str
    upvector_sensor: str
    linvel_sensor: str
    mirror_joint_index: tuple[int, ...]
    mirror_joint_sign: tuple[float, ...]
    mirror_foot_index: tuple[int, ...]
    joint_kp: tuple[float, ...]
    joint_kv: tuple[float, ...]
    joint_effort: tuple[float, ...]
    action_scale: float | tuple[float, ...] = 1.0
    foot_quat_sensors: tuple[str, ...] = ()
    foot_linvel_sensors: tuple[str, ...] = ()
    foot_geoms: tuple[str, ...] = ()
    foot_bodies: tuple[str, ...] = ()
    payload_body: str | None = None

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        per_joint = {
            "default_joint_pos": self.default_joint_pos,
            "mirror_joint_index": self.mirror_joint_index,
            "mirror_joint_sign": self.mirror_joint_sign,
            "joint_kp": self.joint_kp,
            "joint_kv": self.joint_kv,
            "joint_effort": self.joint_effort,
        }
        if not isinstance(self.action_scale, float | int):
            per_joint["action_scale"] = self.action_scale
        for field_name, values in per_joint.items():
            if len(values) != n:
                raise ValueError(f"robot {self.name}: {n} joint names but {len(values)} values of {field_name}")
        per_foot = {"foot_pos_sensors": self.foot_pos_sensors, "mirror_foot_index": self.mirror_foot_index}
        if self.foot_quat_sensors:
            per_foot["foot_quat_sensors"] = self.foot_quat_sensors
        if self.foot_linvel_sensors:
            per_foot["foot_linvel_sensors"] = self.foot_linvel_sensors
        if self.foot_geoms and self.foot_bodies:
            raise ValueError(f"robot {self.name}: a foot is a geom (foot_geoms) or a body (foot_bodies), not both")
        if self.foot_geoms:
            per_foot["foot_geoms"] = self.foot_geoms
        if self.foot_bodies:
            per_foot["foot_bodies"] = self.foot_bodies
        for field_name, values in per_foot.items():
            if len(values) != len(self.foot_sites):
                raise ValueError(f"robot {self.name}: {len(self.foot_sites)} feet but {field_name} has another count")
        if sorted(self.mirror_joint_index) != list(range(n)) or sorted(self.mirror_foot_index) != list(
            range(len(self.foot_sites))
        ):
            raise ValueError(f"robot {self.name}: a mirror index is not a permutation")

    @property
    def foot_force_parts(self) -> tuple[str, ...]:
        """What each foot's ground force sensor reads the contacts of: its geom, or its body's geoms together."""
        return self.foot_geoms or self.foot_bodies


@dataclass(frozen=True)
class EnvContext:
    num_envs: int
    device: torch.device
    dt: float  # the control step
    physics_dt: float  # one physics substep
    max_episode_steps: int
    default_qpos: torch.Tensor  # (nq,) stand keyframe
    default_joint_pos: torch.Tensor  # (nu,) q0
    default_kp: torch.Tensor  # (nu,)
    default_kv: torch.Tensor  # (nu,)
    joint_lower: torch.Tensor  # (nu,) hard limits
    joint_upper: torch.Tensor
    # Where the robot's joints sit in qpos and qvel (after the free joint's 7 and 6 entries): read from the model,
    # so no term assumes a joint count or a base.
    joint_qpos: slice
    joint_dof: slice
    # The model's own friction (ngeom, 3), masses (nbody,), centres of mass and inertias (nbody, 3): what
    # randomisation events scale or offset.
    default_geom_friction: torch.Tensor
    default_body_mass: torch.Tensor
    default_body_ipos: torch.Tensor
    default_body_inertia: torch.Tensor
    body_ids: dict[str, int]
    sensor_slices: dict[str, slice]

    def sensor(self, sensordata: torch.Tensor, name: str) -> torch.Tensor:
        return sensordata[:, self.sensor_slices[name]]

    @staticmethod
    def from_model(
        model: mujoco.MjModel,
        robot: RobotConfig,
        num_envs: int,
        device: torch.device,
        dt: float,
        max_episode_steps: int,
    ) -> EnvContext:
        def t(x) -> torch.Tensor:
            return torch.as_tensor(x, dtype=torch.float32, device=device).clone()

        base = model.body(robot.base_body)
        # Reset, push and spawn events write the root pose at qpos[0:7] and its velocity at qvel[0:6].
        if base.jntnum[0] != 1 or model.jnt_type[base.jntadr[0]] != _FREE_JOINT or model.jnt_qposadr[base.jntadr[0]]:
            raise ValueError(f"robot {robot.name}: base body {robot.base_body} must hold the model's first joint, free")
        joint_ids = [model.joint(name).id for name in robot.joint_names]
        joint_qpos = _contiguous(model.jnt_qposadr[joint_ids], f"robot {robot.name}: joints in qpos")
        joint_dof = _contiguous(model.jnt_dofadr[joint_ids], f"robot {robot.name}: joints in qvel")
        key = model.key(robot.keyframe)
        return EnvContext(
            num_envs=num_envs,
            device=device,
            dt=dt,
            physics_dt=model.opt.timestep,
            max_episode_steps=max_episode_steps,
            default_qpos=t(key.qpos),
            default_joint_pos=t(robot.default_joint_pos),
            default_kp=t(model.actuator_gainprm[:, 0]),
            default_kv=t(-model.actuator_biasprm[:, 2]),
            joint_lower=t(model.jnt_range[joint_ids, 0]),
            joint_upper=t(model.jnt_range[joint_ids, 1]),
            joint_qpos=joint_qpos,
            joint_dof=joint_dof,
            default_geom_friction=t(model.geom_friction),
            default_body_mass=t(model.body_mass),
            default_body_ipos=t(model.body_ipos),
            default_body_inertia=t(model.body_inertia),
            body_ids={model.body(i).name: i for i in range(model.nbody)},
            sensor_slices={
                model.sensor(i).name: slice(int(model.sensor_adr[i]), int(model.sensor_adr[i] + model.sensor_dim[i]))
                for i in range(model.nsensor)
            },
        )


_FREE_JOINT = 0  # mujoco.mjtJoint.mjJNT_FREE; this module imports mujoco only for type checking


def _contiguous(addresses: Sequence[int], what: str) -> slice:
    """The slice the addresses span: a slice indexes a view (no gather), which the hinge joints of a robot in
    action order allow; any other layout is refused rather than silently reordered."""
    start = int(addresses[0])
    if [int(a) for a in addresses] != list(range(start, start + len(addresses))):
        raise ValueError(f"{what} are not consecutive in joint order: {[int(a) for a in addresses]}")
    return slice(start, start + len(addresses))
