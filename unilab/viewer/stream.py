"""A live view of training (``training.viewer=true``): a few envs of the running training, redrawn at log points.

The hot path pays one small device-to-host copy per log point and nothing else: at the log point ``capture``
queues a copy of the first envs' joint positions into pinned host memory, behind the env step that produced them
and ahead of the next one (on the stream the env steps on, outside any captured graph), and records an event.
``publish``, called where the loop reads its log points back, hands the copy to the viewer's own thread once the
event has passed and never waits for it; a copy still in flight at the next log point makes that one skip its
copy rather than overwrite memory the device is writing. Forward kinematics and the messages to the browser run
on the viewer's thread.
"""

from __future__ import annotations

import contextlib
import queue
import threading

import numpy as np
import torch

from unilab.envs.functional import FunctionalEnv
from unilab.viewer.scene import RobotScene
from unilab.viewer.server import serve, url

STREAM_ENVS = 4  # the envs a training run shows


class TrainingStream:
    """The viewer of a training run on ``host:port``, showing the first ``num_envs`` envs of ``env``."""

    def __init__(self, env: FunctionalEnv, host: str, port: int, num_envs: int = STREAM_ENVS) -> None:
        shown = min(num_envs, env.num_envs)
        self.on_cuda = env.device.type == "cuda"
        # Allocated once: the copies at log points reuse it, so the loop's memory does not change between them.
        self.host = torch.empty((shown, env.sim.model.nq), dtype=torch.float32, pin_memory=self.on_cuda)
        self.copied = torch.cuda.Event() if self.on_cuda else None  # re-recorded at every copy
        self.in_flight = False
        self.iteration = 0
        self.server = serve(host, port)
        self.scene = RobotScene(self.server, env.sim.model, shown)
        self.status = self.server.gui.add_markdown("training: waiting for the first log point")
        self.url = url(self.server)
        self._frames: queue.Queue[tuple[int, np.ndarray] | None] = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._draw, name="training-viewer", daemon=True)
        self._thread.start()

    def capture(self, qpos: torch.Tensor, iteration: int, stream: torch.cuda.Stream | None = None) -> bool:
        """Queue a copy of ``qpos[:num_envs]`` on ``stream`` (the env's; None: the current one); nothing waits.
        Returns False where the previous copy is still in flight, so this log point is skipped."""
        if self.in_flight and not self._copy_done():
            return False
        rows = qpos[: len(self.host)]
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            self.host.copy_(rows, non_blocking=self.on_cuda)
            if self.copied is not None:
                self.copied.record()
        self.in_flight, self.iteration = True, iteration
        return True

    def _copy_done(self) -> bool:
        return self.copied is None or self.copied.query()

    def publish(self) -> bool:
        """Hand the latest copy to the viewer's thread if the device has made it; True if it did."""
        if not self.in_flight or not self._copy_done():
            return False
        frame = (self.iteration, self.host.numpy().astype(np.float64))  # a copy: the next capture reuses the buffer
        self.in_flight = False
        with contextlib.suppress(queue.Empty):
            self._frames.get_nowait()  # the viewer is behind: the newer frame replaces the one it has not drawn
        self._frames.put_nowait(frame)
        return True

    def _draw(self) -> None:
        while (frame := self._frames.get()) is not None:
            iteration, qpos = frame
            self.scene.show(qpos)
            self.status.content = f"training: iteration {iteration}"

    def close(self) -> None:
        """Stop the viewer's thread and server; the page stops updating."""
        with contextlib.suppress(queue.Empty):
            self._frames.get_nowait()
        self._frames.put(None)
        self._thread.join(timeout=5.0)
        self.server.stop()
