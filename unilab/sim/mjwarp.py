"""MuJoCo Warp backend: all worlds in one ``mjw.Data``, state shared with torch zero-copy.

Works on a CUDA device (the training path) and on Warp's CPU device (tests). On CUDA,
``step`` launches on torch's current stream and may be recorded inside
``torch.cuda.graph``: the Warp launches are then bracketed with
``wp.capture_begin(external=True)`` so Warp joins torch's capture instead of starting
its own, and the solver's convergence loop becomes a conditional graph node instead of
a host sync per iteration.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp

from unilab.sim.base import Capabilities, SimBackend, SimConfig

_GAIN_FIELDS = ("actuator_gainprm", "actuator_biasprm")


def _warp_device(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    if device.type == "cpu":
        return "cpu"
    raise ValueError(f"mjwarp runs on a CUDA device or on the CPU, not on {device}")


class MjWarpBackend(SimBackend):
    name = "mjwarp"
    capabilities = Capabilities(device_resident=True, graph_capturable=True)

    def __init__(self, model: mujoco.MjModel, num_worlds: int, device: torch.device, config: SimConfig) -> None:
        wp.config.log_level = wp.LOG_WARNING  # INFO prints a line for every kernel module loaded
        wp.init()
        self.model = model
        self.config = config
        self.num_worlds = num_worlds
        self.device = device
        self._wp_device = _warp_device(device)
        with wp.ScopedDevice(self._wp_device):
            # Gains are per world so that tasks can randomise them; every other model
            # field stays shared (leading dimension 1).
            self._m = mjw.put_model(model, batch_sizes={f: num_worlds for f in _GAIN_FIELDS})
            self._d = mjw.make_data(model, nworld=num_worlds, nconmax=config.nconmax, njmax=config.njmax)
        d = self._d
        t = wp.to_torch
        self.qpos, self.qvel, self.ctrl = t(d.qpos), t(d.qvel), t(d.ctrl)
        self.xpos, self.xquat, self.cvel = t(d.xpos), t(d.xquat), t(d.cvel)
        self.subtree_com, self.site_xpos, self.sensordata = t(d.subtree_com), t(d.site_xpos), t(d.sensordata)
        self._qacc_warmstart = t(d.qacc_warmstart)
        self._gainprm, self._biasprm = t(self._m.actuator_gainprm), t(self._m.actuator_biasprm)
        self._nacon, self._nefc = t(d.nacon), t(d.nefc)
        # [contact overflows, constraint overflows], accumulated on device, read at host boundaries.
        self._overflow = torch.zeros(2, dtype=torch.int64, device=device)
        self._njmax = config.njmax
        self._naconmax = d.naconmax

    @contextmanager
    def _on_torch_stream(self) -> Iterator[None]:
        """Run Warp work on torch's current stream, joining a torch graph capture if one is open."""
        if self.device.type != "cuda":
            with wp.ScopedDevice(self._wp_device):
                yield
            return
        stream = wp.stream_from_torch(torch.cuda.current_stream(self.device))
        capturing = torch.cuda.is_current_stream_capturing()
        with wp.ScopedDevice(self._wp_device), wp.ScopedStream(stream, sync_enter=False):
            if capturing:
                wp.capture_begin(stream=stream, external=True)
            try:
                yield
            finally:
                if capturing:
                    wp.capture_end(stream=stream)

    def _refresh(self) -> None:
        """Bring poses, velocities and sensors up to the current qpos/qvel.

        ``mjw.step`` leaves them at the start of its last substep; tasks observe the state
        the policy acts from, so the position and velocity stages are recomputed.
        """
        mjw.kinematics(self._m, self._d)
        mjw.com_pos(self._m, self._d)
        mjw.sensor_pos(self._m, self._d)
        mjw.com_vel(self._m, self._d)
        mjw.sensor_vel(self._m, self._d)

    def step(self) -> None:
        with self._on_torch_stream():
            for _ in range(self.config.substeps):
                mjw.step(self._m, self._d)
                self._overflow[0] += (self._nacon[0] > self._naconmax).long()
                self._overflow[1] += (self._nefc > self._njmax).any().long()
            self._refresh()

    def forward(self) -> None:
        with self._on_torch_stream():
            self._refresh()

    def _after_reset(self, mask: torch.Tensor) -> None:
        # Recomputing every world is cheaper than selecting some, and leaves the others bit-identical.
        self._qacc_warmstart.masked_fill_(mask.unsqueeze(-1), 0.0)
        self.forward()

    def overflow_tensor(self) -> torch.Tensor:
        return self._overflow
