"""The G1 tasks step exactly as they did before the robot became a package.

The digests below were taken from the tasks as they stood before the move (commit d1839e3): a short rollout of
each canonical G1 task on the C MuJoCo backend, from a fixed seed and fixed actions, with episodes short enough that
auto-resets happen inside it. Every tensor of every state and transition enters the digest byte for byte, so any
change to a term, its order, a constant or the model shows here as a different digest.

``g1_walk_rough``'s digest was taken again when its terms changed on purpose: half its commands walk straight, the
gait reward counts a swing's height from the highest ground within the foot's reach, and the terrain curriculum
judges what a command asks by where it leads and logs the levels' spread; again when it gained the feet's
clearance penalty; and again when its map was sampled every 5 cm (steeper risers).
The Go1's walks were added as they stood just before that penalty; ``go1_walk_rough``'s digest was taken again when
its stairs became boxes on a 5 cm map, again when its action scale doubled (with ``action_reach=1`` it
still gives the digest before), again when its orientation penalty came to measure the trunk's tilt from the
ground's plane (``tilt_span=0`` gives the digest before), and again when its falls became the trunk's contact with
the ground and its swing gained the clearance penalty and a 10 cm reach (``BEFORE`` holds the knobs that give the
digest before, and a test checks that they still do).

Sensors the robots gained after a digest was taken (``ADDED_SENSORS``: the feet's velocities, which only the rough
G1 walk's clearance penalty reads) are cut out of ``sensordata`` before it is hashed, and so are the task-level
values logged since (``ADDED_TASK_VALUES``: the terrain curriculum's mean level of each terrain type, which no term
reads), so each digest covers exactly what it covered when it was taken: the physics, every observation, reward and
termination, and every sensor the tasks read then, bit for bit.

Every digest, ``BEFORE``'s too, was taken again when the counter RNG came to carry its key (``unilab.core.rng``),
and again when a draw came to offset its element index by the key before spreading it: each changed every draw, and
nothing else; with the RNG before each change the tree gave the digests before it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from tensordict import TensorDict

from unilab.context import apply_updates
from unilab.core.rng import advance, make_rng
from unilab.envs.functional import FunctionalEnv
from unilab.robots import g1, go1
from unilab.tasks.registry import make_functional_env

STEPS, NUM_ENVS = 8, 3
EXPECTED = {
    "g1_walk_flat": "805315e950730352f42e05dc54bd2923fc7fc788498ed7833140003b342c8bc6",
    "g1_walk_flat_rand": "d652986369482f52a1b5c77c7020d75e1044508428b0f97656f709d08b9a776c",
    "g1_walk_rough": "89e98112b8e99a8b6916ce160d70ffcc904724d069934ed125a68d37775b9218",
    "g1_motion_tracking": "d4dccd63fbce5a469d9c395157d2fd71c1aab7ba2c509b2573856c3f06b5d31d",
    "go1_walk_flat": "e93d27fc56a8353586c49bcce54315cf649a194c82bd2a9ac920defdb6c39e56",
    "go1_walk_rough": "f410a9389d2568a939053b4585c58dd640948b0d39dc7bfe3dde4ff4e4c1a180",
}
BEFORE = {
    "go1_walk_rough": (
        {"falls": "knees", "feet_clearance": 0.0, "foot_reach": 0.05},
        "1871553f65dc34a39c07b37b5eb926f67b53119ce11291af9cae1b9aa4be8ff1",
    ),
}
ADDED_SENSORS = (*g1.ROBOT.foot_linvel_sensors, *go1.ROBOT.foot_linvel_sensors)
ADDED_TASK_VALUES = re.compile(r"terrain_level_(?!mean$|std$).+")


def _as_taken(env: FunctionalEnv, state: TensorDict) -> TensorDict:
    """``state`` with the columns of ``ADDED_SENSORS`` cut out of its ``sensordata`` and ``ADDED_TASK_VALUES`` left
    out."""
    keep = torch.ones(state["sim", "sensordata"].shape[-1], dtype=torch.bool)
    for name in ADDED_SENSORS:
        if name in env.ctx.sensor_slices:
            keep[env.ctx.sensor_slices[name]] = False
    state = apply_updates(state, {("sim", "sensordata"): state["sim", "sensordata"][:, keep]})
    # A TensorDict iterates over its batch dimension, not its keys, so the keys are asked for.
    added = [("task", key) for key in state["task"].keys() if ADDED_TASK_VALUES.fullmatch(key)]  # noqa: SIM118
    return state.exclude(*added)


def _update(digest: Any, data: TensorDict) -> None:
    for key in sorted(data.keys(include_nested=True, leaves_only=True), key=str):
        value = data.get(key)
        digest.update(f"{key}{value.dtype}{tuple(value.shape)}".encode())
        digest.update(value.detach().cpu().numpy().tobytes())


def rollout_digest(task: str, **knobs: Any) -> str:
    """sha256 over every state and transition of a short seeded rollout of ``task`` (with ``knobs``)."""
    env = make_functional_env(task, sim="mujoco", num_envs=NUM_ENVS, episode_length_s=0.1, **knobs)
    gen = torch.Generator().manual_seed(0)
    rng = make_rng(7)
    state = env.reset(rng)
    digest = hashlib.sha256()
    _update(digest, _as_taken(env, state))
    for _ in range(STEPS):
        rng = advance(rng)
        action = torch.rand(NUM_ENVS, env.action_dim, generator=gen) * 2 - 1
        state, transition = env.step(state, action, rng)
        _update(digest, _as_taken(env, state))
        _update(digest, transition)
    return digest.hexdigest()


# MKL picks its kernels by processor, and their float32 results differ in the last bits between them: on an Intel
# processor with AVX-512 four of these digests came out different from those taken where MKL ran its compatible
# branch. A digest is taken in a process of its own that pins MKL to that branch (``MKL_CBWR``, read when MKL loads),
# so it is the same on every x86 machine, AVX2 or AVX-512 (both checked).
DIGESTS = """
import json, sys
from tests.test_g1_unchanged import BEFORE, rollout_digest
now = {task: rollout_digest(task) for task in sys.argv[1:]}
before = {f"{task} before": rollout_digest(task, **knobs) for task, (knobs, _) in BEFORE.items()}
print(json.dumps({**now, **before}))
"""


@pytest.fixture(scope="module")
def digests() -> dict[str, str]:
    env = {**os.environ, "MKL_CBWR": "COMPATIBLE"}
    done = subprocess.run(
        [sys.executable, "-c", DIGESTS, *sorted(EXPECTED)],
        env=env,
        cwd=Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("task", sorted(EXPECTED))
def test_the_task_steps_as_before(task: str, digests: dict[str, str]) -> None:
    assert digests[task] == EXPECTED[task]


@pytest.mark.parametrize("task", sorted(BEFORE))
def test_the_knobs_of_a_changed_default_still_step_as_before_it(task: str, digests: dict[str, str]) -> None:
    assert digests[f"{task} before"] == BEFORE[task][1]
