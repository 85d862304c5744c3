"""The canonical workloads (docs/benchmarks.md): the runs whose tail rate is the acceptance metric. ``bench train``
runs them and ``bench profile`` takes their iterations apart, so both read them from here."""

from __future__ import annotations

CANONICAL_WORKLOADS = {
    "sac": ["--algo", "sac", "--task", "g1_walk_flat"],
    "flashsac": ["--algo", "flashsac", "--task", "g1_motion_tracking"],
    "sac_rough": ["--algo", "sac", "--task", "g1_walk_rough"],
    # One iteration is a rollout of 24 steps of every env and its 5 x 4 minibatch updates.
    "ppo": ["--algo", "ppo", "--task", "g1_walk_flat"],
    "ppo_rough": ["--algo", "ppo", "--task", "g1_walk_rough"],
}
CANONICAL_OVERRIDES = [
    "algo.max_iterations=160",
    "algo.num_envs=2048",
    "training.no_play=true",
    "training.export_onnx=false",
]


def algo_and_task(workload: str) -> tuple[str, str]:
    """The algorithm and the task a canonical ``workload`` trains, as its ``train`` flags name them."""
    flags = CANONICAL_WORKLOADS[workload]
    return flags[flags.index("--algo") + 1], flags[flags.index("--task") + 1]
