"""A terraced piece of a height map as stacked boxes, for the scene's ``terraced`` layout.

A height field cannot hold a vertical face, so a step's riser is a ramp one sample spacing wide, and a height field's
contacts are found cell by cell through a convex solver. A piece whose samples stand in a few flat levels (the
stairs) is made exactly of boxes instead: one under the whole piece at its lowest level and, for every level above,
boxes over the samples that reach it, their sides halfway between a sample that reaches it and one that does not.
The risers become vertical and each contact is a box's, found by MuJoCo's closed-form primitive colliders. Boxes
overlap where they stack, which a scene's static geoms may.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

MAX_LEVELS = 16
"""More distinct heights than this and a piece is not terraced (a slope, the random surface)."""
MAX_BOXES = 64
"""More boxes than this and a piece is left a height field (it would cost the broad phase more than it saves)."""


@dataclass(frozen=True)
class Terrace:
    """A box over samples ``rows[0]..rows[1]`` and ``cols[0]..cols[1]`` (inclusive) of a piece, rising to ``top``."""

    rows: tuple[int, int]
    cols: tuple[int, int]
    top: float


def rectangles(mask: np.ndarray) -> Iterator[tuple[tuple[int, int], tuple[int, int]]]:
    """Disjoint rectangles covering the true cells of a 2-D boolean array, each as inclusive (row, col) ranges:
    greedily, the first uncovered cell in row order grown along its row, then down while the rows below match.
    Yielded one at a time, so that a caller with a budget stops where it runs out: a level of the random surface
    breaks into thousands."""
    todo = mask.copy()
    while todo.any():
        i, j = np.unravel_index(np.argmax(todo), todo.shape)
        j1 = j + _run(todo[i, j:]) - 1  # the cells of row i from j on, up to the first uncovered one
        i1 = i + _run(todo[i:, j : j1 + 1].all(axis=1)) - 1  # the rows from i on whose span is all uncovered
        todo[i : i1 + 1, j : j1 + 1] = False
        yield (int(i), int(i1)), (int(j), int(j1))


def _run(flags: np.ndarray) -> int:
    """How many of ``flags`` are true before the first false one (all of them where none is)."""
    first_false = int(np.argmin(flags))
    return first_false if not flags[first_false] else len(flags)


def terraces(heights: np.ndarray) -> list[Terrace] | None:
    """The boxes that make ``heights`` (a piece's samples), the lowest first; None where the piece is not terraced
    (over ``MAX_LEVELS`` heights or ``MAX_BOXES`` boxes)."""
    levels = np.unique(heights)
    if len(levels) > MAX_LEVELS:
        return None
    rows, cols = heights.shape
    boxes = [Terrace((0, rows - 1), (0, cols - 1), float(levels[0]))]
    for level in levels[1:]:
        for span_rows, span_cols in rectangles(heights >= level):
            boxes.append(Terrace(span_rows, span_cols, float(level)))
            if len(boxes) > MAX_BOXES:
                return None
    return boxes
