"""``g1_walk_flat``: G1 velocity tracking on flat ground. Env config, own terms, eval metrics and
per-algorithm tuning (``tuning/<algo>.yaml``), exposed as ``TASK``."""

from pathlib import Path

from unilab.tasks.g1_walk_flat.config import make_task
from unilab.tasks.task import Task, tuning_files
from unilab.tasks.walking_metrics import METRICS

TASK = Task(
    "g1_walk_flat",
    make_task,
    tuning=tuning_files(Path(__file__).parent),
    metrics=METRICS,
)
