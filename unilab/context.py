"""What terms and managers share: the robot config, the env's static facts, and how a state is updated.

Term functions (``unilab.mdp``) and the managers that compose them (``unilab.managers``) both read an
``EnvContext`` and return ``Updates``; neither needs the other, so both sit on this module rather than one on the
other. The context is built once from the compiled model and the task's robot config, so terms look up bodies and
sensors by name at build time and index tensors at run time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch
from tensordict import TensorDict

if TYPE_CHECKING:
    import mujoco

StateKey = tuple[str, ...]
Updates = dict[StateKey, torch.Tensor]

ACTION_DELAY = "action_delay"
"""Actuation latency, in physics substeps: where the state holds ``("env", ACTION_DELAY)`` (an event declares
it), the first that-many substeps of each control step still apply the previous action's targets."""


def apply_updates(state: TensorDict, updates: Updates, mask: torch.Tensor | None = None) -> TensorDict:
    """A shallow copy of ``state`` with ``updates`` in place of its entries (only in ``mask`` rows): the one way a
    term's result enters the state, so the input state is never changed."""
    out = state.clone(False)
    for key, value in updates.items():
        if mask is not None:
            old = state.get(key)
            value = torch.where(mask.view(-1, *([1] * (old.dim() - 1))), value, old)
        out.set(key, value)
    return out


@dataclass(frozen=True)
class RobotConfig:
    """What an env needs to know of a robot that its MJCF does not say.

    ``joint_names`` orders the actuated joints as actions and joint observations are ordered (one actuator per
    joint, in the same order); ``default_joint_pos`` is the pose actions are offsets from; ``keyframe`` names
    the MJCF keyframe the robot stands in; ``payload_body`` the body a payload is strapped to (the trunk), for
    mass and centre-of-mass randomisation.
    """

    name: str
    joint_names: tuple[str, ...]
    default_joint_pos: tuple[float, ...]
    keyframe: str
    payload_body: str | None = None

    def __post_init__(self) -> None:
        if len(self.joint_names) != len(self.default_joint_pos):
            raise ValueError(
                f"robot {self.name}: {len(self.joint_names)} joint names but {len(self.default_joint_pos)} defaults"
            )


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

        joint_ids = [model.joint(name).id for name in robot.joint_names]
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
