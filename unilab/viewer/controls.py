"""What a person at the viewer can change, and the panel that changes it.

``Controls`` holds plain values the simulation loop reads between steps; the panel's callbacks (on viser's thread)
only assign them, so a slow step never blocks the page and a click never lands halfway through a step. Every
handler is a method of its own, callable without a browser.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import viser

SPEEDS = (0.1, 4.0)  # slowest and fastest playback, as multiples of real time
# The walking command's keys in a velocity command term's parameters: (vx, vy, yaw rate) ranges.
COMMAND_AXES = (("lin_vel_x", "forward m/s"), ("lin_vel_y", "sideways m/s"), ("ang_vel_z", "turn rad/s"))


@dataclass
class CommandRange:
    """A walking command a person may set: the command term's name and each axis's (low, high)."""

    name: str
    ranges: tuple[tuple[float, float], ...]


@dataclass
class Controls:
    """The viewer's settings; the loop reads them, the panel writes them."""

    playing: bool = True
    speed: float = 1.0
    reset_requested: bool = False
    steer: bool = False  # the walking command from the sliders rather than the task's own draws
    command: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])
    clip: int = 0  # for a tracking task, the clip shown

    def on_play(self, playing: bool) -> None:
        self.playing = bool(playing)

    def on_reset(self) -> None:
        self.reset_requested = True

    def take_reset(self) -> bool:
        """Whether a reset was asked for since the last call; asking again before it is taken is one reset."""
        asked, self.reset_requested = self.reset_requested, False
        return asked

    def on_speed(self, speed: float) -> None:
        low, high = SPEEDS
        self.speed = min(max(float(speed), low), high)

    def on_steer(self, steer: bool) -> None:
        self.steer = bool(steer)

    def on_command(self, axis: int, value: float) -> None:
        self.command[axis] = float(value)

    def on_clip(self, clip: int) -> None:
        """A new clip starts from its first frame: the loop resets, so the robot starts on the clip's first pose."""
        self.clip = int(clip)
        self.reset_requested = True


def build_panel(
    server: viser.ViserServer,
    controls: Controls,
    command: CommandRange | None = None,
    clips: Sequence[str] = (),
    title: str = "",
) -> None:
    """The panel for ``controls``: play/pause, reset and speed always; the walking command's sliders where the task
    has one (``command``); a clip menu where it tracks clips (``clips``)."""
    gui = server.gui
    if title:
        gui.add_markdown(title)
    play = gui.add_checkbox("play", initial_value=controls.playing)
    play.on_update(lambda event: controls.on_play(event.target.value))
    gui.add_button("reset").on_click(lambda _: controls.on_reset())
    speed = gui.add_slider("speed", min=SPEEDS[0], max=SPEEDS[1], step=0.1, initial_value=controls.speed)
    speed.on_update(lambda event: controls.on_speed(event.target.value))
    if command is not None:
        with gui.add_folder("walking command"):
            steer = gui.add_checkbox("steer", initial_value=controls.steer, hint="off: the task draws the commands")
            steer.on_update(lambda event: controls.on_steer(event.target.value))
            for axis, ((low, high), (_, label)) in enumerate(zip(command.ranges, COMMAND_AXES, strict=True)):
                slider = gui.add_slider(label, min=low, max=high, step=0.05, initial_value=controls.command[axis])
                slider.on_update(lambda event, axis=axis: controls.on_command(axis, event.target.value))
    if clips:
        menu = gui.add_dropdown("clip", options=list(clips), initial_value=clips[controls.clip])
        menu.on_update(lambda event: controls.on_clip(list(clips).index(event.target.value)))
