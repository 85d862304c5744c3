"""The G1 tasks step exactly as they did before the robot became a package.

The digests below were taken from the tasks as they stood before the move (commit d1839e3): a short rollout of
each canonical G1 task on the C MuJoCo backend, from a fixed seed and fixed actions, with episodes short enough that
auto-resets happen inside it. Every tensor of every state and transition enters the digest byte for byte, so any
change to a term, its order, a constant or the model shows here as a different digest.

``g1_walk_rough``'s digest was taken again when its terms changed on purpose: half its commands walk straight, the
gait reward counts a swing's height from the highest ground within the foot's reach, and the terrain curriculum
judges what a command asks by where it leads and logs the levels' spread.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import torch
from tensordict import TensorDict

from unilab.core.rng import advance, make_rng
from unilab.tasks.registry import make_functional_env

STEPS, NUM_ENVS = 8, 3
EXPECTED = {
    "g1_walk_flat": "3fb9e92c36502560559a587643d511941b45ff67350d524b0d93debebe103231",
    "g1_walk_flat_rand": "4db282cce4b08fa664a0a52044cc7a3b870b29f34fd45df7d5122d9ba995b5b7",
    "g1_walk_rough": "4638a824aad5e25f9b09741ecd18fd862a90f2ae9bb3b213c3a72ea4365c6393",
    "g1_motion_tracking": "b8fe3230fec18d869afc3afb7f48ecd779370459234fdcdb8be0a1ada351e44a",
}


def _update(digest: Any, data: TensorDict) -> None:
    for key in sorted(data.keys(include_nested=True, leaves_only=True), key=str):
        value = data.get(key)
        digest.update(f"{key}{value.dtype}{tuple(value.shape)}".encode())
        digest.update(value.detach().cpu().numpy().tobytes())


def rollout_digest(task: str) -> str:
    """sha256 over every state and transition of a short seeded rollout of ``task``."""
    env = make_functional_env(task, sim="mujoco", num_envs=NUM_ENVS, episode_length_s=0.1)
    gen = torch.Generator().manual_seed(0)
    rng = make_rng(7)
    state = env.reset(rng)
    digest = hashlib.sha256()
    _update(digest, state)
    for _ in range(STEPS):
        rng = advance(rng)
        action = torch.rand(NUM_ENVS, env.action_dim, generator=gen) * 2 - 1
        state, transition = env.step(state, action, rng)
        _update(digest, state)
        _update(digest, transition)
    return digest.hexdigest()


@pytest.mark.parametrize("task", sorted(EXPECTED))
def test_g1_task_steps_as_before(task: str) -> None:
    assert rollout_digest(task) == EXPECTED[task]
