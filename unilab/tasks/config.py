"""A task is data: the scene, physics settings and the terms of every manager."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from unilab.managers.terms import (
    CommandTerm,
    CurriculumTerm,
    EventTerm,
    JointPositionAction,
    Mirror,
    ObsTerm,
    RewardTerm,
    StateKey,
    TerminationTerm,
)
from unilab.sim import SimConfig


@dataclass(frozen=True)
class TaskConfig:
    """Everything that defines a task; ``dataclasses.replace`` derives variants.

    ``observations`` maps group name (``policy``, ``critic``) to ordered terms; the group
    widths follow from the terms. ``obs_noise`` switches the terms' noise on or off as a
    whole (off for evaluation). ``action_mirror`` mirrors an action left-right.
    """

    name: str
    scene: Path
    sim: SimConfig
    episode_length_s: float
    action: JointPositionAction
    observations: dict[str, dict[str, ObsTerm]]
    rewards: dict[str, RewardTerm]
    terminations: dict[str, TerminationTerm]
    commands: dict[str, CommandTerm] = field(default_factory=dict)
    events: dict[str, EventTerm] = field(default_factory=dict)
    curricula: dict[str, CurriculumTerm] = field(default_factory=dict)
    penalty_scale_key: StateKey | None = None
    obs_noise: bool = True
    action_mirror: Mirror | None = None
