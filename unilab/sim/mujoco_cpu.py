"""C MuJoCo backend: a batch of ``MjData`` on the CPU, the host-bridge reference for mjwarp.

The caller's torch tensors are the state of record; each control step copies a world's
state into an ``MjData``, steps it, and copies the results back, so an ``MjData`` holds
nothing from one call to the next. Worlds are split into contiguous chunks stepped on a
thread pool (MuJoCo releases the GIL while stepping); each chunk has its own
``MjModel`` copy, because per-world actuator gains and model parameters are written into
the model before the world steps.
"""

from __future__ import annotations

import copy
import itertools
import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import mujoco
import numpy as np
import torch

from unilab.sim.base import DERIVED, Capabilities, SimBackend, SimConfig, SimState, subtree_matrix

_FULL_WARNINGS = (mujoco.mjtWarning.mjWARN_CONTACTFULL, mujoco.mjtWarning.mjWARN_CNSTRFULL)
# MuJoCo resets a world to qpos0 by itself when its state turns non-finite or huge, and warns with these.
_BAD_STATE_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
)


class MujocoBackend(SimBackend):
    name = "mujoco"
    capabilities = Capabilities(graph_capturable=False)

    def __init__(
        self,
        model: mujoco.MjModel,
        num_worlds: int,
        device: torch.device,
        config: SimConfig,
        num_threads: int | None = None,
    ) -> None:
        super().__init__(model, num_worlds, device, config)
        threads = max(1, min(num_threads or os.cpu_count() or 1, num_worlds))
        bounds = np.linspace(0, num_worlds, threads + 1).astype(int)
        self._chunks = [range(a, b) for a, b in itertools.pairwise(bounds)]
        self._models = [copy.copy(model) for _ in self._chunks]
        self._data = [mujoco.MjData(model) for _ in self._chunks]  # one scratch MjData per chunk
        self._pool = ThreadPoolExecutor(threads) if threads > 1 else None
        self._warnings = np.zeros(len(_FULL_WARNINGS), dtype=np.int64)
        # Per chunk and substep, the contacts of its worlds summed (a step's contact total is the chunks' sum at one
        # substep), and the most of them in any step; per chunk, the most rows one of its worlds has had.
        self._contacts = np.zeros((len(self._chunks), config.substeps), dtype=np.int64)
        self._peak_contacts = 0
        self._peak_rows = np.zeros(len(self._chunks), dtype=np.int64)
        self._forcerange0 = model.actuator_forcerange.copy()
        self._subtree = subtree_matrix(model)

    def _run_chunks(self, work: Callable[[int], None]) -> None:
        if self._pool is None:
            work(0)
        else:
            list(self._pool.map(work, range(len(self._chunks))))

    @staticmethod
    def _write_in(arrays: dict[str, np.ndarray], i: int, data: mujoco.MjData) -> None:
        data.qpos[:] = arrays["qpos"][i]
        data.qvel[:] = arrays["qvel"][i]
        data.act[:] = arrays["act"][i]
        data.qacc_warmstart[:] = arrays["qacc_warmstart"][i]
        data.time = arrays["time"][i]

    def _write_gains(self, arrays: dict[str, np.ndarray], i: int, model: mujoco.MjModel) -> None:
        kp, kv = arrays["actuator_kp"][i], arrays["actuator_kv"][i]
        if "actuator_strength" in self.params:  # the whole force scales, and with it the force limit
            strength = arrays["actuator_strength"][i].astype(np.float64)
            kp, kv = kp * strength, kv * strength
            model.actuator_forcerange[:] = self._forcerange0 * strength[:, None]
        # A MuJoCo <position> actuator computes gain*ctrl + bias0 + bias1*q + bias2*qdot.
        model.actuator_gainprm[:, 0] = kp
        model.actuator_biasprm[:, 1] = -kp
        model.actuator_biasprm[:, 2] = -kv

    def _write_params(self, arrays: dict[str, np.ndarray], i: int, model: mujoco.MjModel) -> None:
        """World ``i``'s body and geom parameters into ``model`` (nothing when none vary)."""
        for name in ("geom_friction", "body_mass", "body_ipos", "body_inertia"):
            if name in self.params:
                getattr(model, name)[:] = arrays[name][i]
        if "body_mass" in self.params:
            model.body_subtreemass[:] = model.body_mass @ self._subtree

    @staticmethod
    def _read_out(arrays: dict[str, np.ndarray], i: int, data: mujoco.MjData, names: tuple[str, ...]) -> None:
        for name in names:
            arrays[name][i] = data.time if name == "time" else getattr(data, name).reshape(arrays[name][i].shape)

    def _refresh(self, model: mujoco.MjModel, data: mujoco.MjData) -> None:
        """Same stages as the mjwarp backend: poses and sensors at the current state."""
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_sensorPos(model, data)
        mujoco.mj_comVel(model, data)
        mujoco.mj_sensorVel(model, data)

    def _step(self, state: SimState, ctrl: torch.Tensor) -> None:
        arrays = {name: value.numpy() for name, value in state.items()}
        targets = ctrl.numpy()
        per_substep = targets.ndim == 3
        carried_out = ("qpos", "qvel", "act", "qacc_warmstart", "time", *DERIVED)

        self._contacts[:] = 0

        def work(chunk: int) -> None:
            model, data = self._models[chunk], self._data[chunk]
            contacts = self._contacts[chunk]
            for i in self._chunks[chunk]:
                self._write_in(arrays, i, data)
                self._write_gains(arrays, i, model)
                self._write_params(arrays, i, model)
                if not per_substep:
                    data.ctrl[:] = targets[i]
                for warning in _BAD_STATE_WARNINGS:
                    data.warning[warning].number = 0
                for k in range(self.config.substeps):
                    if per_substep:
                        data.ctrl[:] = targets[k, i]
                    mujoco.mj_step(model, data)
                    contacts[k] += data.ncon
                    self._peak_rows[chunk] = max(self._peak_rows[chunk], data.nefc)
                self._refresh(model, data)
                self._read_out(arrays, i, data, carried_out)
                if any(data.warning[warning].number for warning in _BAD_STATE_WARNINGS):
                    # Not MuJoCo's silent reset: a blown-up world stays visibly blown up, as on mjwarp.
                    arrays["qpos"][i] = np.nan

        self._run_chunks(work)
        self._count_warnings()
        self._peak_contacts = max(self._peak_contacts, int(self._contacts.sum(0).max()))

    def _forward(self, state: SimState, mask: torch.Tensor) -> None:
        # Only the masked worlds: the others keep derived quantities computed from float64 positions.
        arrays = {name: value.numpy() for name, value in state.items()}
        model, data = self._models[0], self._data[0]
        for i in mask.nonzero().flatten().tolist():
            self._write_in(arrays, i, data)
            self._write_params(arrays, i, model)  # centres of mass and masses place xipos and subtree_com
            self._refresh(model, data)
            self._read_out(arrays, i, data, DERIVED)

    def _count_warnings(self) -> None:
        """Fold the chunks' buffer-full warnings into the running counts and clear them."""
        for data in self._data:
            for k, warning in enumerate(_FULL_WARNINGS):
                self._warnings[k] += int(data.warning[warning].number > 0)
                data.warning[warning].number = 0

    def peak_tensor(self) -> torch.Tensor:
        return torch.tensor([self._peak_contacts, int(self._peak_rows.max())], dtype=torch.int64)

    def overflow_tensor(self) -> torch.Tensor:
        # C MuJoCo's height-field collider keeps every contact it finds (up to the contact buffer, counted above).
        return torch.from_numpy(np.append(self._warnings, 0))
