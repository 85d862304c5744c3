"""What ``unilab list`` and ``--help`` name, declared as data so that printing it imports neither torch nor any task.

Building a task's env to read its sizes imports torch, torchrl, mujoco and every task package: seconds on a small
CPU, for a list that changes only when a task or algorithm does. ``tests/test_startup.py`` checks these tables
against the task registry and ``torchrl_ext.learners.LEARNERS``, so they cannot drift from the real ones.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import NamedTuple

ENTRY_POINT_GROUP = "unilab.tasks"  # as unilab.tasks.registry reads it
BACKENDS = ("mjwarp", "mujoco")  # unilab.sim.BACKENDS


class TaskSizes(NamedTuple):
    """A task's observation widths (actor, critic) and action width."""

    policy: int
    critic: int
    action: int


# The tasks shipped in unilab/tasks/, with the sizes their envs report (obs_dims, action_dim).
TASKS: dict[str, TaskSizes] = {
    "g1_motion_tracking": TaskSizes(160, 289, 29),
    "g1_walk_flat": TaskSizes(100, 103, 29),
    "g1_walk_flat_rand": TaskSizes(100, 103, 29),
    "g1_walk_rough": TaskSizes(287, 290, 29),
    "go1_walk_flat": TaskSizes(53, 56, 12),
    "go1_walk_rough": TaskSizes(240, 243, 12),
}

# The algorithms by ``algo.name``, as LEARNERS orders them, with each learner's one-line ``summary``.
ALGORITHMS: dict[str, str] = {
    "sac": "FastSAC: LayerNorm MLPs, twin C51 critic, mirror augmentation, running obs normalisation",
    "flashsac": "residual BatchNorm trunks with unit-norm weights, min-Q distributional target, reward "
    "normalisation, held exploration noise, cosine LR",
    "ppo": "PPO (rsl_rl's): ELU MLPs, clipped surrogate and value loss, GAE, adaptive-KL learning rate",
}

# ``algo.*`` keys only one algorithm reads (torchrl_ext.config.AlgoConfig marks them): ``train --cfg`` and
# ``train --help`` leave them out for the others.
OWN_ALGO_KEYS: dict[str, tuple[str, ...]] = {
    "sac": ("target_entropy_ratio",),
    "flashsac": (
        "target_sigma",
        "reward_normalization",
        "lr_final",
        "lr_decay_steps",
        "actor_width",
        "actor_blocks",
        "critic_width",
        "critic_blocks",
        "noise_max_span",
        "noise_zipf_mu",
    ),
    "ppo": (
        "num_steps_per_env",
        "num_learning_epochs",
        "num_mini_batches",
        "clip_param",
        "use_clipped_value_loss",
        "entropy_coef",
        "value_loss_coef",
        "lam",
        "desired_kl",
        "lr_schedule",
        "init_noise_std",
    ),
}


# The on-policy algorithms (a learner's ``on_policy``), and the keys only the off-policy loop and its
# distributional critics read: a replay buffer, its updates and the soft target.
ON_POLICY = ("ppo",)
OFF_POLICY_KEYS = (
    "batch_size",
    "replay_buffer_n",
    "updates_per_step",
    "policy_frequency",
    "learning_starts",
    "tau",
    "num_atoms",
    "v_min",
    "v_max",
    "alpha_init",
    "weight_decay",
)


def foreign_algo_keys(algo: str) -> set[str]:
    """The ``algo.*`` keys (without the prefix) that belong to an algorithm other than ``algo``, or, for an
    on-policy ``algo``, to the off-policy loop."""
    others = {key for name, keys in OWN_ALGO_KEYS.items() if name != algo for key in keys}
    if algo in ON_POLICY:
        others |= set(OFF_POLICY_KEYS)
    return others - set(OWN_ALGO_KEYS.get(algo, ()))


def task_names() -> list[str]:
    """Every task ``train`` takes: the shipped ones, and where other distributions declare tasks as entry points,
    the registry's list (which loads them: a point's name need not be its task's)."""
    if not entry_points(group=ENTRY_POINT_GROUP):
        return sorted(TASKS)
    from unilab.tasks.registry import list_tasks

    return list_tasks()


def cuda_available() -> bool:
    """Whether torch sees a GPU: the one fact here that needs torch (about one ``import torch``)."""
    import torch

    return torch.cuda.is_available()


def default_backend() -> str:
    """As ``unilab.sim.default_backend``, without importing mujoco and Warp: mjwarp with CUDA, else mujoco."""
    return "mjwarp" if cuda_available() else "mujoco"


def task_sizes(name: str) -> TaskSizes:
    """A task's sizes: declared for the shipped tasks, built (slow: imports the registry) for any other."""
    if name in TASKS:
        return TASKS[name]
    from unilab.tasks.registry import make_functional_env

    env = make_functional_env(name, sim="mujoco", num_envs=1)
    return TaskSizes(env.obs_dims["policy"], env.obs_dims["critic"], env.action_dim)


def list_everything() -> str:
    """``unilab list``: every task with its sizes, the algorithms and the backends."""
    lines = ["tasks (observations: policy / critic, actions):"]
    for name in task_names():
        sizes = task_sizes(name)
        lines.append(f"  {name:<22} {sizes.policy} / {sizes.critic}, {sizes.action}")
    lines.append("algorithms:")
    lines += [f"  {name:<22} {summary}" for name, summary in ALGORITHMS.items()]
    lines.append(f"physics backends: {', '.join(BACKENDS)} (default here: {default_backend()})")
    return "\n".join(lines)
