"""Typed training configuration: the schema Hydra's YAML files are checked against.

Every key a user may override (``algo.num_envs=...``) is a field here, so a misspelt key
or a value of the wrong type fails when the config is composed, before any work starts,
and ``validate`` rejects values that cannot work together.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AlgoConfig:
    name: str = "sac"
    num_envs: int = 4096
    batch_size: int = 8192
    replay_buffer_n: int = 512
    updates_per_step: int = 4
    policy_frequency: int = 4
    learning_starts: int = 1
    max_iterations: int = 500
    save_interval: int = 500
    gamma: float = 0.97
    tau: float = 0.125
    actor_hidden: list[int] = field(default_factory=lambda: [512, 256, 128])
    critic_hidden: list[int] = field(default_factory=lambda: [768, 384, 192])
    num_atoms: int = 101
    v_min: float = -20.0
    v_max: float = 20.0
    alpha_init: float = 0.01
    target_entropy_ratio: float = 0.0
    max_grad_norm: float = 0.0
    use_symmetry: bool = False
    obs_normalization: bool = True
    lr: float = 3e-4
    weight_decay: float = 1e-3
    seed: int = 1
    amp: bool = True
    compile: bool = True  # torch.compile the env step and the losses before graph capture; CUDA only
    overlap_updates: bool = True  # act with the pre-update weights so env step and updates overlap on CUDA
    resume: str | None = None
    # FlashSAC only (TASKS.md 3.4)
    target_sigma: float = 0.15
    reward_normalization: bool = True
    lr_final: float = 1.5e-4
    lr_decay_steps: int = 500_000
    actor_width: int = 128
    actor_blocks: int = 2
    critic_width: int = 256
    critic_blocks: int = 2
    noise_max_span: int = 16
    noise_zipf_mu: float = 2.0


@dataclass
class TaskSelection:
    name: str = "g1_walk_flat"
    obs_noise: bool = True
    motion_file: str | None = None


@dataclass
class SimSelection:
    name: str = "auto"


@dataclass
class TrainingConfig:
    device: str | None = None
    log_dir: str | None = None
    log_root: str = "logs"
    log_interval: int = 10
    no_play: bool = False
    play_seconds: float = 16.0
    play_envs: int = 4
    export_onnx: bool = True
    progress: bool = True


@dataclass
class TrainConfig:
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    task: TaskSelection = field(default_factory=TaskSelection)
    sim: SimSelection = field(default_factory=SimSelection)
    training: TrainingConfig = field(default_factory=TrainingConfig)


def validate(cfg: TrainConfig) -> None:
    """Reject impossible settings with a message naming the key and value."""
    a = cfg.algo
    positive = {
        "num_envs": a.num_envs,
        "batch_size": a.batch_size,
        "replay_buffer_n": a.replay_buffer_n,
        "updates_per_step": a.updates_per_step,
        "policy_frequency": a.policy_frequency,
        "max_iterations": a.max_iterations,
        "save_interval": a.save_interval,
        "num_atoms": a.num_atoms,
    }
    for key, value in positive.items():
        if value < 1:
            raise ValueError(f"algo.{key} must be >= 1, got {value}")
    capacity = a.replay_buffer_n * a.num_envs
    if a.batch_size > capacity:
        raise ValueError(
            f"algo.batch_size={a.batch_size} is larger than the replay buffer "
            f"(algo.replay_buffer_n * algo.num_envs = {capacity})"
        )
    if a.use_symmetry and a.batch_size % 2:
        raise ValueError(f"algo.batch_size={a.batch_size} must be even with algo.use_symmetry (half is mirrored)")
    if not 0.0 < a.gamma <= 1.0:
        raise ValueError(f"algo.gamma must be in (0, 1], got {a.gamma}")
    if not 0.0 < a.tau <= 1.0:
        raise ValueError(f"algo.tau must be in (0, 1], got {a.tau}")
    if a.v_min >= a.v_max:
        raise ValueError(f"algo.v_min={a.v_min} must be below algo.v_max={a.v_max}")
    if a.alpha_init <= 0.0 or a.lr <= 0.0:
        raise ValueError(f"algo.alpha_init and algo.lr must be positive, got {a.alpha_init}, {a.lr}")
    if cfg.training.log_interval < 1:
        raise ValueError(f"training.log_interval must be >= 1, got {cfg.training.log_interval}")
    if cfg.training.play_seconds <= 0 or cfg.training.play_envs < 1:
        raise ValueError(
            f"training.play_seconds must be > 0 and training.play_envs >= 1, "
            f"got {cfg.training.play_seconds}, {cfg.training.play_envs}"
        )
