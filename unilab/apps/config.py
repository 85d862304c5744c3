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
from typing import Any

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
# Robots a video shows, one tile each: past this a tile of the 640x360 frame is too small to show one.
MAX_PLAY_ENVS = 64


@dataclass
class TaskSelection:
    name: str = "g1_walk_flat"
    obs_noise: bool = True
    motion_file: str | None = None
    episode_length_s: float | None = None  # None: the task's own
    failure_look_back: int | None = None  # tracking's adaptive sampler, in bins (None: the task's own)
    # The task's other knobs, its config factory's keyword arguments of plain type (``task.noise_scale=0.5`` lands
    # here as ``noise_scale``; unilab.apps.compose.task_knobs lists a task's).
    knobs: dict[str, Any] = field(default_factory=dict)


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
    viewer: bool = False  # stream a few envs to a web viewer on loopback at log points (unilab.apps.viewer)
    viewer_port: int = 8080


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


@dataclass(frozen=True)
class Range:
    """The values a key may take: ``low`` to ``high``, each end included unless open. Every key has an upper end too,
    so nothing a user can type overflows what it is multiplied into (steps of an episode, a timedelta, a network's
    size, the C51 support) or reaches the allocator unchecked."""

    low: float
    high: float
    low_open: bool = False
    why: str = ""

    def check(self, key: str, value: float) -> None:
        above = value > self.low if self.low_open else value >= self.low
        if not (above and value <= self.high):
            bracket = "(" if self.low_open else "["
            rule = f"in {bracket}{_number(self.low)}, {_number(self.high)}]" + (f" ({self.why})" if self.why else "")
            raise ValueError(f"{key} must be {rule}, got {value!r}")


def _number(value: float) -> str:
    """A bound as a user would type it: whole numbers in full (16777216, not 1.67772e+07)."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


COUNT = 2**40  # iterations, steps and intervals: far past any run, far below any overflow
RANGES = {
    "algo.num_envs": Range(1, 2**24),
    "algo.batch_size": Range(1, 2**26),
    "algo.replay_buffer_n": Range(1, 2**24),
    "algo.updates_per_step": Range(1, 1024),
    "algo.policy_frequency": Range(1, 1024),
    "algo.learning_starts": Range(0, 2**24),
    "algo.max_iterations": Range(1, COUNT),
    "algo.save_interval": Range(1, COUNT),
    "algo.num_atoms": Range(2, 4096, why="a distribution over one atom has no spread to learn"),
    "algo.lr_decay_steps": Range(1, COUNT),
    "algo.actor_width": Range(1, 2**16),
    "algo.actor_blocks": Range(1, 256),
    "algo.critic_width": Range(1, 2**16),
    "algo.critic_blocks": Range(1, 256),
    "algo.noise_max_span": Range(1, 10_000, why="env steps a noise draw is held for"),
    "algo.seed": Range(0, 2**31 - 1),
    "algo.gamma": Range(0.0, 1.0, low_open=True),
    "algo.tau": Range(0.0, 1.0, low_open=True),
    "algo.v_min": Range(-1e6, 1e6, why="the return support of the distributional critic"),
    "algo.v_max": Range(-1e6, 1e6, why="the return support of the distributional critic"),
    "algo.lr": Range(0.0, 1.0, low_open=True),
    "algo.lr_final": Range(0.0, 1.0, low_open=True),
    "algo.alpha_init": Range(0.0, 100.0, low_open=True),
    "algo.noise_zipf_mu": Range(0.0, 100.0, low_open=True),
    "algo.weight_decay": Range(0.0, 1.0),
    "algo.max_grad_norm": Range(0.0, 1e6, why="0 turns clipping off"),
    "algo.target_sigma": Range(0.0, 10.0, low_open=True, why="the pre-tanh std the temperature aims at"),
    "algo.num_steps_per_env": Range(1, 4096, why="env steps per rollout, each its own slot of the rollout buffer"),
    "algo.num_learning_epochs": Range(1, 1024),
    "algo.num_mini_batches": Range(1, 2**20),
    "algo.clip_param": Range(0.0, 10.0, low_open=True),
    "algo.entropy_coef": Range(0.0, 100.0),
    "algo.value_loss_coef": Range(0.0, 1e6),
    "algo.lam": Range(0.0, 1.0),
    "algo.desired_kl": Range(0.0, 10.0, low_open=True),
    "algo.init_noise_std": Range(0.0, 100.0, low_open=True, why="the std of the first policy's action noise"),
    "task.episode_length_s": Range(0.0, 3600.0, low_open=True),
    "task.failure_look_back": Range(1, 3600, why="one-second bins"),
    "training.log_interval": Range(1, COUNT),
    "training.play_seconds": Range(0.0, MAX_PLAY_SECONDS, low_open=True),
    "training.play_envs": Range(1, MAX_PLAY_ENVS, why="one tile each in a 640x360 video"),
    "training.dist_timeout_s": Range(0.0, 86_400.0, low_open=True),
    "training.stall_timeout_s": Range(
        MIN_STALL_TIMEOUT_S, 86_400.0, why="a checkpoint write on a slow disk can take seconds"
    ),
    "training.keep_checkpoints": Range(0, 2**31, why="0 keeps all"),
    "training.viewer_port": Range(1, 65535, why="a TCP port"),
}
MAX_LAYERS, MAX_WIDTH = 64, 2**16


def _check_replay(a: AlgoConfig) -> None:
    """The replay buffer can serve the updates: a batch fits in it and the pre-fill can finish."""
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


def validate(cfg: TrainConfig) -> None:
    """Reject impossible settings with one line naming the key and value."""
    values = dict(_fields(cfg))
    for key, value in values.items():
        if isinstance(value, float):
            _check(math.isfinite(value), key, "finite", value)
        if isinstance(value, str):  # an empty path or name would resolve to something nobody asked for
            _check(bool(value.strip()), key, "a non-empty string", value)
    for key, allowed in RANGES.items():
        if values[key] is not None:  # None: the task's own
            allowed.check(key, values[key])
    a = cfg.algo
    # The group checks (algo=, sim=) see only group choices; a key set directly must name one too.
    _check(a.name in LEARNERS, "algo.name", f"one of {', '.join(LEARNERS)}", a.name)
    _check(cfg.sim.name in BACKENDS, "sim.name", f"one of {', '.join(BACKENDS)}", cfg.sim.name)
    check_logger(cfg.training.logger)
    for key in ("actor_hidden", "critic_hidden"):
        sizes = getattr(a, key)
        fits = bool(sizes) and len(sizes) <= MAX_LAYERS and min(sizes) >= 1 and max(sizes) <= MAX_WIDTH
        _check(fits, f"algo.{key}", f"a list of 1 to {MAX_LAYERS} sizes in [1, {MAX_WIDTH}]", sizes)
    if not LEARNERS[a.name].on_policy:  # an on-policy run has no replay buffer
        _check_replay(a)
    LEARNERS[a.name].check_config(a)  # what the algorithm itself refuses
    if a.v_min >= a.v_max:
        raise ValueError(f"algo.v_min={a.v_min} must be below algo.v_max={a.v_max}")
    low, high = TARGET_ENTROPY_RATIO_RANGE
    _check(
        low < a.target_entropy_ratio <= high,
        "algo.target_entropy_ratio",
        f"in (-log 2, {high:.2f}] = ({low:.3f}, {high:.2f}]: SAC aims at an entropy of -ratio nats per action "
        f"dimension, which must stay below log 2 (uniform actions on [-1, 1]) and not under {-high:.2f} (the "
        "actor's narrowest Gaussian; see torchrl_ext.config)",
        a.target_entropy_ratio,
    )
