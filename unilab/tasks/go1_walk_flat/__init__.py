"""``go1_walk_flat``: Go1 velocity tracking on flat ground, with a trot. Env config (the shared walk with the Go1's
data), eval metrics (the walk's) and per-algorithm tuning (``tuning/<algo>.yaml``), exposed as ``TASK``."""

from pathlib import Path

from unilab.tasks.go1_walk_flat.config import make_task
from unilab.tasks.task import Task, tuning_files
from unilab.tasks.walking_metrics import METRICS

TASK = Task("go1_walk_flat", make_task, tuning=tuning_files(Path(__file__).parent), metrics=METRICS)
