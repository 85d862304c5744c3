"""The eval suites: what each adds to a policy's training conditions (a perturbation, or one terrain type alone),
and which apply to a task. ``eval`` judges a policy under them, ``scripts/fall_census.py`` replays them."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch

from unilab.apps.args import InputError
from unilab.apps.terrain_suites import TERRAIN_SUITES, terrain_of_suite
from unilab.envs.config import task_model
from unilab.tasks.randomization import Randomization, randomize
from unilab.tasks.registry import make_task

# Perturbations an eval can add to the training conditions, each a change to the task config.
SUITES = ("nominal", "push", "friction", "payload", "latency", "finer_physics")
SUITE_HELP = (
    "push: shoves of 0.5-1 m/s every 2-4 s; friction: floor friction 0.3-1.2; payload: 0-3 kg on the torso; "
    "latency: actuation delay of 0 to one control step; finer_physics: half the physics step (sim-to-sim)"
)
TERRAIN_SUITE_HELP = (
    "stairs_up, stairs_down, slope (up and down), rough: that terrain alone, the envs spread over its rows, judged "
    "at the hardest row (tasks on terrain)"
)
PUSHES = Randomization(push_speed=(0.5, 1.0), push_every_s=(2.0, 4.0))
FRICTION = Randomization(friction=(0.3, 1.2))
PAYLOAD = Randomization(payload_kg=(0.0, 3.0))


def suite_overrides(task: str, suite: str, overrides: dict[str, Any], hardest_row: bool = False) -> dict[str, Any]:
    """``overrides`` plus the task-config changes of ``suite`` (``SUITE_HELP``), drawn per env at every reset:

    - ``push``: shoves of 0.5 to 1 m/s in a random horizontal direction every 2 to 4 s, as an interval event;
    - ``friction``: every contact's friction U(0.3, 1.2) (the G1's feet have 0.6);
    - ``payload``: U(0, 3) kg added to the robot's payload body (the G1's torso, 7.8 kg of 33 kg);
    - ``latency``: actions reach the motors U(0, one control step) late, in whole physics substeps;
    - ``finer_physics``: half the physics step and twice the substeps (the same control period), a
      sim-to-sim check that the policy does not lean on the training step size.

    A suite's event replaces the task's own of the same kind (a randomised task's friction, say), so each
    suite measures its condition alone.
    """
    if suite == "nominal":
        return overrides
    base = make_task(task, **overrides)
    if suite in TERRAIN_SUITES:
        level = base.terrain.rows - 1 if hardest_row else "all"
        return {**overrides, **terrain_of_suite(task, base, suite), "terrain_level": level}
    timestep = base.physics.timestep or task_model(base).opt.timestep
    if suite == "finer_physics":
        finer = dataclasses.replace(base.physics, timestep=timestep / 2, substeps=base.physics.substeps * 2)
        return {**overrides, "physics": finer}
    ranges = {
        "push": PUSHES,
        "friction": FRICTION,
        "payload": PAYLOAD,
        "latency": Randomization(latency_s=(0.0, timestep * base.physics.substeps)),
    }
    if suite not in ranges:
        raise InputError(f"unknown suite {suite!r}; known suites: {', '.join(SUITES)}")
    perturbed = randomize(base, ranges[suite])
    if perturbed.physics == base.physics and _same_events(perturbed.events, base.events):
        raise InputError(
            f"suite {suite} changes nothing on {task}: its training conditions already draw that perturbation over "
            "the suite's range, so nominal measures it"
        )
    return {**overrides, "events": perturbed.events, "physics": perturbed.physics}


def _same_events(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two tasks' events are the same terms with equal parameters (tensors compared by value)."""

    def same(x: Any, y: Any) -> bool:
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            return isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and torch.equal(x, y)
        return x == y

    return list(a) == list(b) and all(
        a[n].func is b[n].func
        and a[n].interval_s == b[n].interval_s
        and a[n].state == b[n].state
        and list(a[n].params) == list(b[n].params)
        and all(same(a[n].params[k], b[n].params[k]) for k in a[n].params)
        for n in a
    )


def check_terrain_suite_envs(task: str, suite: str, num_envs: int) -> None:
    """A terrain suite judges its hardest row, where the spread puts its first envs: refuse, before any rollout, too
    few envs for each of the suite's terrain types to have one there."""
    if suite not in TERRAIN_SUITES:
        return
    types = len(TERRAIN_SUITES[suite])
    if num_envs < types:
        raise InputError(
            f"suite {suite} judges {types} terrain types at the hardest row, one env each at least; give --num-envs "
            f"{types} or more, got {num_envs}"
        )


def suites_of(task: str) -> list[str]:
    """Every suite that applies to ``task``: the perturbations its training conditions do not already draw over the
    same range, and the terrain suites on terrain."""
    applies = []
    for suite in SUITES:
        try:
            suite_overrides(task, suite, {})
        except InputError:
            continue
        applies.append(suite)
    return [*applies, *(TERRAIN_SUITES if make_task(task).terrain is not None else ())]
