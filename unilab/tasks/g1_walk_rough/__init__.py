"""``g1_walk_rough``: ``g1_walk_flat_rand`` on a terrain grid of stairs, slopes and rough ground, with a height scan
in the actor and the critic, a terrain curriculum, and a penalty on a foot's speed away from the swing height.

The terrain (``TERRAIN``) is ten rows of rising difficulty by six types: flat, stairs up and down (steps up to
12 cm), pyramid slopes up and down (up to 0.3 rise over run, 16.7 degrees) and a random surface. Each env walks one
column; new envs start in the first four rows, move a row up after walking off half their tile and a row down after
walking less than half of what their commands asked (``unilab.mdp.curricula.terrain_levels``). The height scan is
17 x 11 points over 1.6 x 1.0 m under the pelvis, turned with its yaw, read from the terrain's height map the way
MuJoCo triangulates it. Heights that decide rewards and falls (the gait's swing height and the feet's clearance,
the pelvis height) are measured from the ground under the body, not from z = 0.
"""

from __future__ import annotations

from pathlib import Path

from unilab.tasks import g1_walk_flat
from unilab.tasks.g1_walk_rough.config import make_task
from unilab.tasks.task import Task, tuning_files
from unilab.tasks.walking_metrics import ROUGH_METRICS

_FLAT = tuning_files(Path(g1_walk_flat.__file__).parent)
_OWN = tuning_files(Path(__file__).parent)
# SAC: the flat walk's, then this walk's own file over it; FlashSAC: the flat walk's; PPO: this walk's alone (the
# flat walks' PPO sizes its physics for flat ground).
TUNING = {"sac": _FLAT["sac"] + _OWN["sac"], "flashsac": _FLAT["flashsac"], "ppo": _OWN["ppo"]}
TASK = Task("g1_walk_rough", make_task, tuning=TUNING, metrics=ROUGH_METRICS)
