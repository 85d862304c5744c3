"""Whether an eval's figures meet its task's thresholds, and whether the envs it ran were enough to say so.

For each rate a threshold judges (a share of the judged envs, each one first episode) eval states its 95 % interval
(``unilab.core.proportions``) and calls the verdict unsettled where the bound lies inside it: more envs would settle
it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from unilab.apps.rollout import metrics_of
from unilab.core import proportions
from unilab.tasks.task import Threshold


def rate_intervals(task: str, result: Mapping[str, Any]) -> dict[str, list[float]]:
    """The interval of each rate a threshold of ``task`` judges, over ``result``'s judged envs."""
    metrics = metrics_of(task)
    judged = [name for name in metrics.rates if name in metrics.thresholds]
    return proportions.rate_intervals(result, judged, int(result["judged_envs"]))


def unsettled(task: str, result: Mapping[str, Any]) -> list[str]:
    """The judged rates whose threshold lies inside their interval (``result["intervals"]``)."""
    return proportions.unsettled(result.get("intervals", {}), metrics_of(task).thresholds)


def _meets(thresholds: Mapping[str, Threshold], figures: Mapping[str, Any]) -> bool:
    passes = {"<=": lambda v, b: v <= b, ">=": lambda v, b: v >= b}
    return all(metric in figures and passes[op](figures[metric], bound) for metric, (op, bound) in thresholds.items())


def judged_groups(task: str, result: Mapping[str, Any]) -> dict[str, dict[str, bool]]:
    """For each of the task's judged groupings in ``result``'s primary start: whether each group meets the
    thresholds (a group without figures does not)."""
    metrics = metrics_of(task)
    section = result.get(result.get("primary_start"), result)  # with named starts, the groups sit in its section
    return {
        name: {group: _meets(metrics.thresholds, figures) for group, figures in section[name].items()}
        for name in metrics.judged_groupings
        if name in section
    }


def meets_thresholds(task: str, result: Mapping[str, Any]) -> bool | None:
    """Whether ``result`` passes the task's thresholds, over all envs and in every group of the primary start's
    judged groupings (None for a task that declares no thresholds). A policy that gave a non-finite action fails,
    thresholds or not."""
    if result.get("nonfinite_actions"):
        return False
    thresholds = metrics_of(task).thresholds
    if not thresholds:
        return None
    groups = judged_groups(task, result)
    return _meets(thresholds, result) and all(all(verdicts.values()) for verdicts in groups.values())


def verdict_line(result: Mapping[str, Any]) -> str:
    """The summary's verdict against the task's thresholds, each threshold with the figure it judged and, for a rate,
    its interval; then which rates leave the verdict unsettled."""
    thresholds = metrics_of(result["task"]).thresholds
    if not thresholds:
        return "  verdict: none (the task declares no thresholds)"
    intervals = result.get("intervals", {})
    judged = []
    for metric, (op, bound) in thresholds.items():
        value = result.get(metric)
        figure = "missing" if value is None else f"{value:.4f}"
        if metric in intervals:
            figure += proportions.interval_text(intervals[metric], result["judged_envs"], "envs")
        judged.append(f"{metric} {figure} (needs {op} {bound:g})")
    passed = meets_thresholds(result["task"], result)
    more = proportions.unsettled_text(result.get("unsettled", []), "judge on more envs")
    return f"  verdict: {'PASS' if passed else 'FAIL'} ({', '.join(judged)}){more}"
