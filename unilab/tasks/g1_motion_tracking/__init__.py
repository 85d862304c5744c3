"""``g1_motion_tracking``: G1 whole-body imitation of a reference motion clip. Env config, own terms, eval metrics and
per-algorithm tuning (``tuning/<algo>.yaml``), exposed as ``TASK``."""

from pathlib import Path

from unilab.tasks.g1_motion_tracking.config import make_task
from unilab.tasks.g1_motion_tracking.metrics import METRICS
from unilab.tasks.task import Task

TASK = Task(
    "g1_motion_tracking",
    make_task,
    tuning={path.stem: path for path in sorted((Path(__file__).parent / "tuning").glob("*.yaml"))},
    metrics=METRICS,
)
