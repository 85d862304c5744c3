"""Tiny policies for the deployment tests: a randomly initialised actor of a task, exported through the project's own
exporter (``unilab.run.deploy_export``), so every test reads a file made the way ``train`` makes one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from torchrl_ext.networks import Actor
from unilab.envs.functional import FunctionalEnv
from unilab.run.deploy_export import export_policy
from unilab.tasks.registry import make_functional_env


def export_tiny(task: str, path: Path, weight_std: float = 0.1, num_envs: int = 1, **overrides: Any) -> FunctionalEnv:
    """``path`` (``policy.onnx`` and its scene) for a random actor of ``task``, whose mean head gets weights of
    ``weight_std`` so that its actions follow the observation; returns the noise-free C MuJoCo env it was exported
    from, with ``num_envs`` envs."""
    env = make_functional_env(task, sim="mujoco", num_envs=num_envs, device="cpu", obs_noise=False, **overrides)
    with torch.random.fork_rng(), torch.no_grad():  # seeded, and the suite's global stream left as it was
        torch.manual_seed(0)
        actor = Actor(env.obs_dims["policy"], env.action_dim, hidden=(32, 32))
        # The heads start at zero, which would make every action 0 whatever the observation.
        actor.mean_head.weight.normal_(0.0, weight_std)
    export_policy(actor, env, path, {"task": task, "algo": "sac", "commit": "test", "motion_file": ""})
    return env
