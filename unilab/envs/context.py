"""Static facts an env's terms read: sizes, indices and robot constants as device tensors.

Built once from the compiled model, so terms look up bodies, sites and sensors by name
at build time and index tensors at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import torch

from unilab.robots import g1


@dataclass(frozen=True)
class EnvContext:
    num_envs: int
    device: torch.device
    dt: float
    max_episode_steps: int
    default_qpos: torch.Tensor  # (nq,) stand keyframe
    default_joint_pos: torch.Tensor  # (nu,) q0
    default_kp: torch.Tensor  # (nu,)
    default_kv: torch.Tensor  # (nu,)
    joint_lower: torch.Tensor  # (nu,) hard limits
    joint_upper: torch.Tensor
    body_ids: dict[str, int]
    site_ids: dict[str, int]
    sensor_slices: dict[str, slice]

    def sensor(self, sensordata: torch.Tensor, name: str) -> torch.Tensor:
        return sensordata[:, self.sensor_slices[name]]

    @staticmethod
    def from_model(
        model: mujoco.MjModel, num_envs: int, device: torch.device, dt: float, max_episode_steps: int
    ) -> EnvContext:
        def t(x) -> torch.Tensor:
            return torch.as_tensor(x, dtype=torch.float32, device=device).clone()

        joint_ids = [model.joint(name).id for name in g1.JOINT_NAMES]
        key = model.key("stand")
        return EnvContext(
            num_envs=num_envs,
            device=device,
            dt=dt,
            max_episode_steps=max_episode_steps,
            default_qpos=t(key.qpos),
            default_joint_pos=t(g1.DEFAULT_JOINT_POS),
            default_kp=t(model.actuator_gainprm[:, 0]),
            default_kv=t(-model.actuator_biasprm[:, 2]),
            joint_lower=t(model.jnt_range[joint_ids, 0]),
            joint_upper=t(model.jnt_range[joint_ids, 1]),
            body_ids={model.body(i).name: i for i in range(model.nbody)},
            site_ids={model.site(i).name: i for i in range(model.nsite)},
            sensor_slices={
                model.sensor(i).name: slice(int(model.sensor_adr[i]), int(model.sensor_adr[i] + model.sensor_dim[i]))
                for i in range(model.nsensor)
            },
        )
