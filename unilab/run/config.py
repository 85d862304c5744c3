"""Typed training configuration: the schema Hydra's YAML files are checked against.

Every key a user may override (``algo.num_envs=...``) is a field here or in the chosen algorithm's settings
(``unilab.train``), with its range and help as field metadata, so a misspelt key or a value of the wrong type fails
when the config is composed, before any work starts, and ``validate`` rejects values that cannot work together.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import typing
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from unilab.run.loggers import check_logger
from unilab.train.registry import ALGORITHMS
from unilab.train.sac.config import SACConfig
from unilab.train.settings import COUNT, Range, RunSettings, setting

BACKENDS = ("mjwarp", "mujoco")  # unilab.sim.BACKENDS, named here without importing mujoco and Warp
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
MAX_LAYERS = 64  # hidden layers of a list of sizes (algo.actor_hidden)


@dataclass
class TaskSelection:
    name: str = setting("g1_walk_flat", "the task; chosen with task=NAME or --task NAME")
    obs_noise: bool = setting(True, "noise on the policy's observations")
    motion_file: str | None = setting(None, "a clip, a directory of clips or a list (tracking)")
    episode_length_s: float | None = setting(
        None, "episode length (None: the task's own)", Range(0.0, 3600.0, low_open=True)
    )
    failure_look_back: int | None = setting(
        None, "tracking's adaptive sampler, in bins (None: the task's own)", Range(1, 3600, why="one-second bins")
    )
    # The task's other knobs, its config factory's keyword arguments of plain type (``task.noise_scale=0.5`` lands
    # here as ``noise_scale``; unilab.apps.compose.task_knobs lists a task's).
    knobs: dict[str, Any] = field(default_factory=dict)
    # A reward term's weight in place of the task's (``task.reward_weights.penalty_action_rate=-0.1``), as Isaac Lab
    # and mjlab users set ``rewards.<term>.weight``; the names are the task's reward terms.
    reward_weights: dict[str, float] = field(
        default_factory=dict, metadata={"help": "reward terms' weights in place of the task's", "bounds": None}
    )


# What Warp's compiler may emit for a CUDA device (``warp.config.cuda_output``).
WARP_OUTPUTS = ("ptx", "cubin")


@dataclass
class SimSelection:
    name: str = setting("auto", "the physics backend; chosen with sim=NAME or --sim NAME")
    warp_output: str | None = setting(
        None,
        "mjwarp on CUDA: what Warp's compiler emits, ptx (which the driver compiles as each module loads) or cubin "
        "(the GPU's code); null: Warp's choice",
    )


@dataclass
class TrainingConfig:
    device: str | None = setting(None, "the device (None: the backend's)")
    log_dir: str | None = setting(None, "the run directory (None: <log_root>/<algo>/<task>/<timestamp>_<sim>)")
    log_root: str = setting("logs", "where run directories are made")
    log_interval: int = setting(10, "iterations between log points", Range(1, COUNT))
    no_play: bool = setting(False, "skip the video of the final policy")
    play_seconds: float = setting(16.0, "length of that video", Range(0.0, MAX_PLAY_SECONDS, low_open=True))
    play_envs: int = setting(4, "robots in that video", Range(1, MAX_PLAY_ENVS, why="one tile each in a 640x360 video"))
    export_onnx: bool = setting(True, "write policy.onnx at the end")
    progress: bool = setting(True, "a progress bar")
    keep_checkpoints: int = setting(
        5, "the newest model_<it>.pt files kept; 0 keeps all", Range(0, 2**31, why="0 keeps all")
    )
    logger: str = setting("tensorboard", "tensorboard, csv or wandb (unilab.run.loggers)")
    dist_timeout_s: float = setting(
        180.0, "under torchrun: a rank that waits this long on another fails the run", Range(0.0, 86_400.0, True)
    )
    stall_timeout_s: float = setting(
        300.0,
        "no iteration completed for this long ends the run with an error",
        Range(MIN_STALL_TIMEOUT_S, 86_400.0, why="a checkpoint write on a slow disk can take seconds"),
    )
    viewer: bool = setting(False, "stream a few envs to a web viewer on loopback at log points (docs/viewer.md)")
    viewer_port: int = setting(8080, "the viewer's port", Range(1, 65535, why="a TCP port"))


@dataclass
class TrainConfig:
    # The chosen algorithm's settings (unilab.train.registry): ``schema`` puts its class here.
    algo: RunSettings = field(default_factory=SACConfig)
    task: TaskSelection = field(default_factory=TaskSelection)
    sim: SimSelection = field(default_factory=SimSelection)
    training: TrainingConfig = field(default_factory=TrainingConfig)


def schema(algo: str) -> TrainConfig:
    """The schema of a run of ``algo``: its settings' keys, types and defaults under ``algo``, the rest shared."""
    return TrainConfig(algo=ALGORITHMS[algo]())


def settings_fields(node: object, prefix: str = "") -> list[tuple[str, dataclasses.Field, object]]:
    """``(dotted key, field, value)`` of every leaf of a config: the key as a user spells it in an override, the field
    with its metadata (help, bounds, shape)."""
    leaves: list[tuple[str, dataclasses.Field, object]] = []
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if dataclasses.is_dataclass(value):
            leaves += settings_fields(value, f"{prefix}{f.name}.")
        else:
            leaves.append((f"{prefix}{f.name}", f, value))
    return leaves


def schema_keys(algo: str) -> list[str]:
    """Every key a user may set on a run of ``algo``."""
    return [key for key, _, _ in settings_fields(schema(algo))]


def unknown_key_message(key: str) -> str:
    """One line for a key the chosen algorithm's schema lacks: the algorithms whose setting it is (so not the chosen
    one's), or the closest key of any."""
    key = key.lstrip("+")
    owners = [name for name in ALGORITHMS if key in schema_keys(name)]
    if owners:
        return f"{key} is a setting of {' and '.join(owners)} only (--algo {owners[0]} picks it)"
    every = sorted({known for name in ALGORITHMS for known in schema_keys(name)})
    close = difflib.get_close_matches(key, every, n=1, cutoff=0.8)
    return f"unknown key {key}" + (f"; did you mean {close[0]}?" if close else "")


def _check(ok: bool, key: str, rule: str, value: object) -> None:
    if not ok:
        raise ValueError(f"{key} must be {rule}, got {value!r}")


def bool_keys(node: object, prefix: str = "") -> list[str]:
    """Dotted keys of every boolean field of a config (``schema(algo)``), from the fields' types."""
    hints = typing.get_type_hints(type(node))
    keys: list[str] = []
    for f in dataclasses.fields(node):
        value = getattr(node, f.name)
        if dataclasses.is_dataclass(value):
            keys += bool_keys(value, f"{prefix}{f.name}.")
        elif hints[f.name] is bool:
            keys.append(f"{prefix}{f.name}")
    return keys


def check_bools(values: Iterable[tuple[str, object]], node: TrainConfig) -> None:
    """``(dotted key, value)`` pairs as the user gave them: a boolean field of ``node``'s schema takes true or false
    only. OmegaConf converts 2, 1.5 or 'yes' to true and 0 or 'off' to false, so a number meant for another key, or a
    quoted word, would pass as a setting nobody chose; once converted the original is gone, hence a check of the raw
    values."""
    bools = set(bool_keys(node))
    for key, value in values:
        if key in bools:
            _check(isinstance(value, bool), key, "true or false", value)


def _check_bounds(key: str, bounds: Range, value: object) -> None:
    """A number within ``bounds``; a list of sizes (a network's hidden layers) of 1 to MAX_LAYERS, each within them."""
    if not isinstance(value, list):
        bounds.check(key, value)
        return
    fits = bool(value) and len(value) <= MAX_LAYERS and all(bounds.low <= size <= bounds.high for size in value)
    _check(fits, key, f"a list of 1 to {MAX_LAYERS} sizes in [{bounds.low}, {bounds.high}]", value)


def validate(cfg: TrainConfig) -> None:
    """Reject impossible settings with one line naming the key and value: each field's bounds, then the rules its
    algorithm's settings add (``check``)."""
    leaves = settings_fields(cfg)
    for key, _, value in leaves:
        if isinstance(value, float):
            _check(math.isfinite(value), key, "finite", value)
        if isinstance(value, str):  # an empty path or name would resolve to something nobody asked for
            _check(bool(value.strip()), key, "a non-empty string", value)
    for key, f, value in leaves:
        if f.metadata.get("bounds") is not None and value is not None:  # None: the task's own
            _check_bounds(key, f.metadata["bounds"], value)
    a = cfg.algo
    # The group checks (algo=, sim=) see only group choices; a key set directly must name one too.
    _check(a.name in ALGORITHMS, "algo.name", f"one of {', '.join(ALGORITHMS)}", a.name)
    if not isinstance(a, ALGORITHMS[a.name]):
        raise ValueError(f"algo.name={a.name} does not choose the algorithm: give algo={a.name} (or --algo {a.name})")
    _check(cfg.sim.name in BACKENDS, "sim.name", f"one of {', '.join(BACKENDS)}", cfg.sim.name)
    if cfg.sim.warp_output is not None:
        _check(
            cfg.sim.warp_output in WARP_OUTPUTS,
            "sim.warp_output",
            f"one of {', '.join(WARP_OUTPUTS)}",
            cfg.sim.warp_output,
        )
        if cfg.sim.name != "mjwarp":
            raise ValueError(f"sim.warp_output is Warp's: it needs sim=mjwarp, not sim={cfg.sim.name}")
    check_logger(cfg.training.logger)
    a.check()


def task_overrides(cfg: TrainConfig) -> dict[str, Any]:
    """What ``cfg`` asks of its task's factory and config (``unilab.tasks.registry.make_task``'s overrides)."""
    overrides: dict[str, Any] = {"obs_noise": cfg.task.obs_noise}
    if cfg.task.motion_file:
        overrides["motion_file"] = cfg.task.motion_file
    if cfg.task.episode_length_s is not None:
        overrides["episode_length_s"] = cfg.task.episode_length_s
    if cfg.task.failure_look_back is not None:
        overrides["failure_look_back"] = cfg.task.failure_look_back
    if cfg.task.reward_weights:
        overrides["reward_weights"] = dict(cfg.task.reward_weights)
    return {**overrides, **cfg.task.knobs}
