"""A policy stepping its envs for the viewer: the loop ``unilab view`` runs, paced to real time times the speed.

The loop reads ``Controls`` between steps and owns the env state; the page only changes settings. Frames go out
at most ``MAX_FPS`` times a second whatever the speed, so a fast replay does not flood the browser.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import torch

from unilab.core.rng import advance, make_rng
from unilab.envs.config import TaskConfig
from unilab.envs.functional import FunctionalEnv
from unilab.motion import MotionClips
from unilab.viewer.controls import COMMAND_AXES, CommandRange, Controls
from unilab.viewer.scene import RobotScene

MAX_FPS = 30.0
# The least the loop idles after a step, even when behind real time: the page's server shares the interpreter and
# would not answer a new browser while the loop held it.
MIN_IDLE_S = 0.002
CLIP_KEY = ("env", "motion_clip")  # the clip each env of a tracking task plays


def walking_command(env: FunctionalEnv) -> CommandRange | None:
    """The env's velocity command, if it has one drawn from (vx, vy, yaw rate) ranges: what the sliders set."""
    for name, term in env.task.commands.items():
        if all(key in term.params for key, _ in COMMAND_AXES):
            ranges = tuple((float(term.params[key][0]), float(term.params[key][1])) for key, _ in COMMAND_AXES)
            return CommandRange(name, ranges)
    return None


def clip_names(task: TaskConfig) -> list[str]:
    """The clips a tracking task plays (the motion library its terms read), none for another task."""
    terms = [*task.rewards.values(), *task.commands.values()]
    for term in terms:
        for value in term.params.values():
            if isinstance(value, MotionClips):
                return list(value.clip_names)
    return []


class LiveSession:
    """``policy`` acting in ``env``, drawn in ``scene``, under ``controls``.

    A tracking env starts every env at the first frame of clip ``env mod clips`` (``unilab.apps.play``'s starts),
    so the clip menu shows the first env playing the chosen clip; a walking env shows its first envs side by side.
    """

    def __init__(
        self,
        env: FunctionalEnv,
        policy: Callable[[torch.Tensor], torch.Tensor],
        scene: RobotScene,
        controls: Controls,
        seed: int = 0,
    ) -> None:
        self.env, self.policy, self.scene, self.controls = env, policy, scene, controls
        self.command = walking_command(env)
        self.clips = clip_names(env.task)
        self.rng = make_rng(seed, env.device)
        self.state = env.reset(self.rng)
        self.steps = 0
        self.error: Exception | None = None  # what ended the loop early, for the thread that waits on it

    def reset(self) -> None:
        """Every env starts a new episode, from a fresh draw."""
        self.rng = advance(self.rng)
        self.state = self.env.reset(self.rng)

    def shown_envs(self) -> list[int]:
        """The envs the scene draws: for a tracking task the first playing the chosen clip."""
        if not self.clips:
            return list(range(min(self.scene.num_robots, self.env.num_envs)))
        playing = (self.state[CLIP_KEY].cpu() == self.controls.clip).nonzero().flatten()
        return [int(playing[0])] if len(playing) else [0]

    @torch.no_grad()
    def step(self) -> None:
        """One control step. A steered command replaces the task's in the state before the step; the policy then
        acts on the observation of the previous step, so it sees a new command one step (20 ms) late."""
        state = self.state
        if self.controls.steer and self.command is not None:
            value = torch.tensor(self.controls.command, dtype=torch.float32, device=self.env.device)
            state[("env", self.command.name)] = value.expand(self.env.num_envs, -1).clone()
        self.rng = advance(self.rng)
        self.state, _ = self.env.step(state, self.policy(state["obs", "policy"]), self.rng)
        self.steps += 1

    def qpos(self) -> np.ndarray:
        return self.state["sim", "qpos"][self.shown_envs()].cpu().numpy()

    def run(self, stop: threading.Event) -> None:
        """Step and draw until ``stop`` is set; a failure ends the loop and is kept in ``error`` (the loop runs on
        its own thread, whose exceptions the command would not otherwise see)."""
        try:
            self._loop(stop)
        except Exception as exc:
            self.error = exc

    def _loop(self, stop: threading.Event) -> None:
        """Each step takes ``dt / speed`` of wall time where the CPU keeps up (longer where it does not), and a
        step that ran late is not made up for by rushing the next ones."""
        dt = float(self.env.ctx.dt)
        next_step = last_frame = time.perf_counter()
        self.scene.show(self.qpos())
        while not stop.is_set():
            if self.controls.take_reset():
                self.reset()
                self.scene.show(self.qpos())
            if not self.controls.playing:
                stop.wait(0.05)
                next_step = time.perf_counter()
                continue
            self.step()
            now = time.perf_counter()
            if now - last_frame >= 1.0 / MAX_FPS:
                self.scene.show(self.qpos())
                last_frame = now
            next_step = max(next_step + dt / self.controls.speed, now)
            stop.wait(max(MIN_IDLE_S, next_step - time.perf_counter()))
