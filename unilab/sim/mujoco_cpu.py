"""C MuJoCo backend: a batch of ``MjData`` on the CPU, the host-bridge reference for mjwarp.

The torch tensors are the state of record; each control step copies a world's state
into its ``MjData``, steps it, and copies the results back. Worlds are split into
contiguous chunks stepped on a thread pool (MuJoCo releases the GIL while stepping);
each chunk has its own ``MjModel`` copy, because per-world actuator gains are written
into the model before the world steps.
"""

from __future__ import annotations

import copy
import itertools
import os
from concurrent.futures import ThreadPoolExecutor

import mujoco
import numpy as np
import torch

from unilab.sim.base import Capabilities, SimBackend, SimConfig

_FULL_WARNINGS = (mujoco.mjtWarning.mjWARN_CONTACTFULL, mujoco.mjtWarning.mjWARN_CNSTRFULL)


class MujocoBackend(SimBackend):
    name = "mujoco"
    capabilities = Capabilities(device_resident=False, graph_capturable=False)

    def __init__(
        self,
        model: mujoco.MjModel,
        num_worlds: int,
        device: torch.device,
        config: SimConfig,
        num_threads: int | None = None,
    ) -> None:
        if device.type != "cpu":
            raise ValueError(f"the mujoco backend runs on the CPU, not on {device}; use sim='mjwarp' for GPUs")
        self.model = model
        self.config = config
        self.num_worlds = num_worlds
        self.device = device
        threads = max(1, min(num_threads or os.cpu_count() or 1, num_worlds))
        bounds = np.linspace(0, num_worlds, threads + 1).astype(int)
        self._chunks = [range(a, b) for a, b in itertools.pairwise(bounds)]
        self._models = [copy.copy(model) for _ in self._chunks]
        self._data = [mujoco.MjData(model) for _ in range(num_worlds)]
        self._pool = ThreadPoolExecutor(threads) if threads > 1 else None

        n = num_worlds

        def zeros(*shape: int) -> torch.Tensor:
            return torch.zeros((n, *shape), dtype=torch.float32)

        self.qpos, self.qvel, self.ctrl = zeros(model.nq), zeros(model.nv), zeros(model.nu)
        self.xpos, self.xquat, self.cvel = zeros(model.nbody, 3), zeros(model.nbody, 4), zeros(model.nbody, 6)
        self.subtree_com, self.site_xpos = zeros(model.nbody, 3), zeros(model.nsite, 3)
        self.sensordata = zeros(model.nsensordata)
        self._gainprm = torch.from_numpy(np.tile(model.actuator_gainprm, (n, 1, 1)).astype(np.float32))
        self._biasprm = torch.from_numpy(np.tile(model.actuator_biasprm, (n, 1, 1)).astype(np.float32))
        for i, data in enumerate(self._data):
            self.qpos[i] = torch.from_numpy(data.qpos)
        self.forward()

    def _run_chunks(self, work) -> None:
        if self._pool is None:
            work(0)
        else:
            list(self._pool.map(work, range(len(self._chunks))))

    def _write_in(self, i: int, model: mujoco.MjModel) -> mujoco.MjData:
        data = self._data[i]
        data.qpos[:] = self.qpos[i].numpy()
        data.qvel[:] = self.qvel[i].numpy()
        data.ctrl[:] = self.ctrl[i].numpy()
        model.actuator_gainprm[:] = self._gainprm[i].numpy()
        model.actuator_biasprm[:] = self._biasprm[i].numpy()
        return data

    def _refresh(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Same stages as the mjwarp backend: poses and sensors at the current state."""
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_sensorPos(model, data)
        mujoco.mj_comVel(model, data)
        mujoco.mj_sensorVel(model, data)

    def _read_out(self, i: int, data: mujoco.MjData) -> None:
        self.qpos[i] = torch.from_numpy(data.qpos)
        self.qvel[i] = torch.from_numpy(data.qvel)
        self.xpos[i] = torch.from_numpy(data.xpos)
        self.xquat[i] = torch.from_numpy(data.xquat)
        self.cvel[i] = torch.from_numpy(data.cvel)
        self.subtree_com[i] = torch.from_numpy(data.subtree_com)
        self.site_xpos[i] = torch.from_numpy(data.site_xpos)
        self.sensordata[i] = torch.from_numpy(data.sensordata)

    def step(self) -> None:
        def work(chunk: int) -> None:
            model = self._models[chunk]
            for i in self._chunks[chunk]:
                data = self._write_in(i, model)
                for _ in range(self.config.substeps):
                    mujoco.mj_step(model, data)
                self._refresh(model, data)
                self._read_out(i, data)

        self._run_chunks(work)

    def _forward_worlds(self, worlds: list[int]) -> None:
        for i in worlds:
            data = self._write_in(i, self._models[0])
            self._refresh(self._models[0], data)
            self._read_out(i, data)

    def forward(self) -> None:
        self._forward_worlds(list(range(self.num_worlds)))

    def _after_reset(self, mask: torch.Tensor) -> None:
        # Only the masked worlds: a round trip through float32 would nudge the others.
        worlds = mask.nonzero().flatten().tolist()
        for i in worlds:
            self._data[i].qacc_warmstart[:] = 0.0
        self._forward_worlds(worlds)

    def overflow_tensor(self) -> torch.Tensor:
        counts = [sum(int(d.warning[w].number) for d in self._data) for w in _FULL_WARNINGS]
        return torch.tensor(counts, dtype=torch.int64)
