"""``g1_walk_flat_rand``: ``g1_walk_flat`` under domain randomisation, for policies meant to leave the
simulator. Same observations, actions, rewards, metrics and tuning; every env also gets its own floor friction,
torso payload and centre of mass, motor strength, PD gains and actuation latency at each reset, and shoves
during the episode. The ranges are ``RANDOMIZATION`` (docs/tasks.md)."""

from __future__ import annotations

from pathlib import Path

from unilab.envs.config import ConstraintRows, ContactsPerWorld, NoiseScale, SolverIterations, TaskConfig
from unilab.tasks import g1_walk_flat
from unilab.tasks.g1_walk_flat.config import WALK
from unilab.tasks.randomization import Randomization
from unilab.tasks.task import Task, tuning_files
from unilab.tasks.walking import make_walk
from unilab.tasks.walking_metrics import METRICS

RANDOMIZATION = Randomization(
    friction=(0.3, 1.2),
    payload_kg=(0.0, 3.0),
    com_offset_m=0.03,
    motor_strength=(0.9, 1.1),
    pd_gains=(0.9, 1.1),
    latency_s=(0.0, 0.02),
    push_speed=(0.5, 1.0),
    push_every_s=(3.0, 6.0),
)


def make_task(
    noise_scale: NoiseScale = 1.0,
    randomization: Randomization = RANDOMIZATION,
    nconmax: ContactsPerWorld = WALK.physics.nconmax,
    njmax: ConstraintRows = WALK.physics.njmax,
    solver_iterations: SolverIterations = None,
    ls_iterations: SolverIterations = None,
) -> TaskConfig:
    """The walk task with ``randomization`` applied; ``noise_scale`` multiplies the observation noise; ``nconmax``
    and ``njmax`` size the physics buffers; ``solver_iterations`` and ``ls_iterations`` cap the Newton solver's
    iterations (None: the MJCF's)."""
    physics = WALK.physics.sized(nconmax, njmax, solver_iterations, ls_iterations)
    return make_walk(WALK, noise_scale, randomization, name="g1_walk_flat_rand", physics=physics)


TASK = Task(
    "g1_walk_flat_rand",
    make_task,
    tuning=tuning_files(Path(g1_walk_flat.__file__).parent),
    metrics=METRICS,
)
