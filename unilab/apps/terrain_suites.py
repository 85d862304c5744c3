"""The terrain suites: one terrain type (or a pair, up and down) alone, so that ``eval`` judges and ``play`` shows
a policy on exactly the ground a suite names."""

from __future__ import annotations

from typing import Any

from unilab.apps.args import InputError
from unilab.envs.config import TaskConfig
from unilab.tasks.registry import override_names

TERRAIN_SUITES = {
    "stairs_up": ("pyramid_stairs",),
    "stairs_down": ("pyramid_stairs_inv",),
    "slope": ("pyramid_slope", "pyramid_slope_inv"),
    "rough": ("random_rough",),
}


def terrain_of_suite(task: str, base: TaskConfig, suite: str) -> dict[str, Any]:
    """The factory argument that builds ``task``'s terrain of ``suite``'s types alone (same rows, same sizes), in
    place of the columns it trained on; a task on a flat floor, or whose factory takes no terrain columns, is refused
    in one line."""
    if suite not in TERRAIN_SUITES:
        raise InputError(f"unknown terrain suite {suite!r}; known: {', '.join(TERRAIN_SUITES)}")
    if base.terrain is None:
        raise InputError(f"task {task} walks on a flat floor; the terrain suites need a task on terrain")
    missing = {"terrain_columns", "terrain_level"} - override_names(task)
    if missing:
        raise InputError(f"task {task} has a terrain but its factory takes no {' or '.join(sorted(missing))}")
    return {"terrain_columns": TERRAIN_SUITES[suite]}
