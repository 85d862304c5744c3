"""``g1_motion_tracking``: G1 whole-body imitation of a reference motion clip. Env config, own terms, eval metrics and
per-algorithm tuning (``tuning/<algo>.yaml``), exposed as ``TASK``."""

from pathlib import Path

from unilab.tasks.g1_motion_tracking.config import make_task
from unilab.tasks.g1_motion_tracking.metrics import METRICS
from unilab.tasks.task import Task, tuning_files

TASK = Task(
    "g1_motion_tracking",
    make_task,
    tuning=tuning_files(Path(__file__).parent),
    metrics=METRICS,
)
