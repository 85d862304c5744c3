"""Typed training configuration: the schema Hydra's YAML files are checked against.

Every key a user may override (``algo.num_envs=...``) is a field here, so a misspelt key
or a value of the wrong type fails when the config is composed, before any work starts,
and ``validate`` rejects values that cannot work together.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field

from torchrl_ext.config import TARGET_ENTROPY_RATIO_RANGE, AlgoConfig
from torchrl_ext.learners import LEARNERS
from unilab.apps.loggers import check_logger
from unilab.sim import BACKENDS

# The longest video play renders (play --seconds, training.play_seconds): it draws every control step, 50 frames per
# second of video, each tile rendered in turn, about 0.1 s a frame of four tiles on a CPU's software rasteriser.
# Frames stream to the encoder, so the cost is time, not memory: ten minutes of video are 30,000 frames, about an
# hour on a CPU (a walking episode lasts 20 s).
MAX_PLAY_SECONDS = 600.0
# The shortest stall timeout: the loop beats once per iteration, and between two beats lie a log point's host work
# and a checkpoint's write, which a slow disk alone can stretch to seconds.
MIN_STALL_TIMEOUT_S = 5.0


@dataclass
class TaskSelection:
    name: str = "g1_walk_flat"
    obs_noise: bool = True
    motion_file: str | None = None
    episode_length_s: float | None = None  # None: the task's own
    failure_look_back: int | None = None  # tracking's adaptive sampler, in bins (None: the task's own)


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
    keep_checkpoints: int = 5  # the newest model_<it>.pt files kept; 0 keeps all
    logger: str = "tensorboard"  # or csv, wandb (unilab.apps.loggers)
    dist_timeout_s: float = 180.0  # under torchrun: a rank that waits this long on another fails the run
    stall_timeout_s: float = 300.0  # no iteration completed for this long ends the run with an error


@dataclass
class TrainConfig:
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    task: TaskSelection = field(default_factory=TaskSelection)
    sim: SimSelection = field(default_factory=SimSelection)
    training: TrainingConfig = field(default_factory=TrainingConfig)


def _fields(node: object, prefix: str = "") -> list[tuple[str, object]]:
    """``(dotted key, value)`` of every leaf of the config, as a user would spell the key in an override."""
    leaves: list[tuple[str, object]] = []
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if dataclasses.is_dataclass(value):
            leaves += _fields(value, f"{prefix}{f.name}.")
        else:
            leaves.append((f"{prefix}{f.name}", value))
    return leaves


def _check(ok: bool, key: str, rule: str, value: object) -> None:
    if not ok:
        raise ValueError(f"{key} must be {rule}, got {value!r}")


def bool_keys(node: type = TrainConfig, prefix: str = "") -> list[str]:
    """Dotted keys of every boolean field of the schema, from the fields' types."""
    hints = typing.get_type_hints(node)
    keys: list[str] = []
    for f in dataclasses.fields(node):
        kind = hints[f.name]
        if dataclasses.is_dataclass(kind):
            keys += bool_keys(kind, f"{prefix}{f.name}.")
        elif kind is bool:
            keys.append(f"{prefix}{f.name}")
    return keys


def check_bools(values: Iterable[tuple[str, object]]) -> None:
    """``(dotted key, value)`` pairs as the user gave them: a boolean field takes true or false only. OmegaConf
    converts 2, 1.5 or 'yes' to true and 0 or 'off' to false, so a number meant for another key, or a quoted word,
    would pass as a setting nobody chose; once converted the original is gone, hence a check of the raw values."""
    bools = set(bool_keys())
    for key, value in values:
        if key in bools:
            _check(isinstance(value, bool), key, "true or false", value)


def validate(cfg: TrainConfig) -> None:
    """Reject impossible settings with one line naming the key and value."""
    for key, value in _fields(cfg):
        if isinstance(value, float):
            _check(math.isfinite(value), key, "finite", value)
        if isinstance(value, str):  # an empty path or name would resolve to something nobody asked for
            _check(bool(value.strip()), key, "a non-empty string", value)
    a, t = cfg.algo, cfg.training
    # The group checks (algo=, sim=) see only group choices; a key set directly must name one too.
    _check(a.name in LEARNERS, "algo.name", f"one of {', '.join(LEARNERS)}", a.name)
    _check(cfg.sim.name in BACKENDS, "sim.name", f"one of {', '.join(BACKENDS)}", cfg.sim.name)
    check_logger(t.logger)
    at_least = {
        "num_envs": 1,
        "batch_size": 1,
        "replay_buffer_n": 1,
        "updates_per_step": 1,
        "policy_frequency": 1,
        "learning_starts": 0,
        "max_iterations": 1,
        "save_interval": 1,
        "num_atoms": 2,  # a distribution over one atom has no spread to learn
        "lr_decay_steps": 1,
        "actor_width": 1,
        "actor_blocks": 1,
        "critic_width": 1,
        "critic_blocks": 1,
        "noise_max_span": 1,
        "seed": 0,
    }
    for key, bound in at_least.items():
        _check(getattr(a, key) >= bound, f"algo.{key}", f">= {bound}", getattr(a, key))
    for key in ("actor_hidden", "critic_hidden"):
        sizes = getattr(a, key)
        _check(bool(sizes) and min(sizes) >= 1, f"algo.{key}", "a non-empty list of sizes >= 1", sizes)
    capacity = a.replay_buffer_n * a.num_envs
    if a.batch_size > capacity:
        raise ValueError(
            f"algo.batch_size={a.batch_size} is larger than the replay buffer "
            f"(algo.replay_buffer_n * algo.num_envs = {capacity})"
        )
    if a.learning_starts > a.replay_buffer_n:  # the pre-fill would wait for more rows than the buffer holds
        raise ValueError(
            f"algo.learning_starts={a.learning_starts} is larger than algo.replay_buffer_n={a.replay_buffer_n}: "
            "the buffer would never hold enough rows to start learning"
        )
    if a.use_symmetry and a.batch_size % 2:
        raise ValueError(f"algo.batch_size={a.batch_size} must be even with algo.use_symmetry (half is mirrored)")
    LEARNERS[a.name].check_config(a)  # what the algorithm itself refuses
    _check(0.0 < a.gamma <= 1.0, "algo.gamma", "in (0, 1]", a.gamma)
    _check(0.0 < a.tau <= 1.0, "algo.tau", "in (0, 1]", a.tau)
    if a.v_min >= a.v_max:
        raise ValueError(f"algo.v_min={a.v_min} must be below algo.v_max={a.v_max}")
    for key in ("lr", "lr_final", "alpha_init", "noise_zipf_mu"):
        _check(getattr(a, key) > 0.0, f"algo.{key}", "> 0", getattr(a, key))
    for key in ("weight_decay", "max_grad_norm", "target_sigma"):
        _check(getattr(a, key) >= 0.0, f"algo.{key}", ">= 0", getattr(a, key))
    low, high = TARGET_ENTROPY_RATIO_RANGE
    _check(
        low < a.target_entropy_ratio <= high,
        "algo.target_entropy_ratio",
        f"in (-log 2, {high:.2f}] = ({low:.3f}, {high:.2f}]: SAC aims at an entropy of -ratio nats per action "
        f"dimension, which must stay below log 2 (uniform actions on [-1, 1]) and not under {-high:.2f} (the "
        "actor's narrowest Gaussian; see torchrl_ext.config)",
        a.target_entropy_ratio,
    )
    length = cfg.task.episode_length_s
    _check(length is None or length > 0.0, "task.episode_length_s", "> 0", length)
    look_back = cfg.task.failure_look_back
    _check(look_back is None or look_back >= 1, "task.failure_look_back", ">= 1", look_back)
    _check(t.log_interval >= 1, "training.log_interval", ">= 1", t.log_interval)
    _check(
        0.0 < t.play_seconds <= MAX_PLAY_SECONDS,
        "training.play_seconds",
        f"in (0, {MAX_PLAY_SECONDS:g}]",
        t.play_seconds,
    )
    _check(t.play_envs >= 1, "training.play_envs", ">= 1", t.play_envs)
    _check(t.dist_timeout_s > 0.0, "training.dist_timeout_s", "> 0", t.dist_timeout_s)
    _check(
        t.stall_timeout_s >= MIN_STALL_TIMEOUT_S,
        "training.stall_timeout_s",
        f">= {MIN_STALL_TIMEOUT_S:g} (a checkpoint write on a slow disk can take seconds)",
        t.stall_timeout_s,
    )
    _check(t.keep_checkpoints >= 0, "training.keep_checkpoints", ">= 0 (0 keeps all)", t.keep_checkpoints)
