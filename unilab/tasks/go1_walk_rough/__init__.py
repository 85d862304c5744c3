"""``go1_walk_rough``: the Go1's trot, randomised (``RANDOMIZATION``), on a terrain grid of stairs, slopes and rough
ground (``TERRAIN``: ten rows of rising difficulty, steps up to 10 cm, slopes up to 0.3 rise over run), with a height
scan under the trunk in the actor and the critic and a terrain curriculum, as ``g1_walk_rough`` has them. Tuning is
``go1_walk_flat``'s; SAC's trains longer, with six updates an iteration and the stumble penalty (this walk's
``tuning/sac.yaml``)."""

from __future__ import annotations

from pathlib import Path

from unilab.tasks import go1_walk_flat
from unilab.tasks.go1_walk_rough.config import make_task
from unilab.tasks.task import Task, tuning_files
from unilab.tasks.walking_metrics import ROUGH_METRICS

_FLAT = tuning_files(Path(go1_walk_flat.__file__).parent)
_OWN = tuning_files(Path(__file__).parent)
TASK = Task("go1_walk_rough", make_task, tuning={**_FLAT, "sac": _FLAT["sac"] + _OWN["sac"]}, metrics=ROUGH_METRICS)
