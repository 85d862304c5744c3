"""Settings as typed data: each key a user may set is a dataclass field whose metadata holds its range, its help and
whether it fixes the shapes of what a checkpoint saves.

``train --cfg``, ``train --help``, config validation, the checkpoint's compatibility check and the docs all read these
declarations, so a new setting is one field in one place. This module imports nothing heavy: ``unilab list`` and
``train --help`` read the settings without loading torch's training stack.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar

from unilab.core.ranges import Range

COUNT = 2**40  # iterations, steps and intervals: far past any run, far below any overflow


def setting(default: Any, help: str, bounds: Range | None = None, shape: bool = False) -> Any:
    """A field with its ``default``, its one-line ``help``, the ``bounds`` a number (or each size of a list) must keep
    and whether it ``shape``s the weights a checkpoint holds (a resume must then match it exactly)."""
    metadata = {"help": help, "bounds": bounds, "shape": shape}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def redefault(owner: type, name: str, default: Any, **changes: Any) -> Any:
    """``owner``'s field ``name`` with another default (and any of ``setting``'s other arguments changed): an
    algorithm that departs from a shared default keeps the shared declaration's help and range."""
    metadata = {**owner.__dataclass_fields__[name].metadata, **changes}
    return setting(default, **metadata)


def shape_keys(settings: type) -> list[str]:
    """The keys of ``settings`` that fix the shapes of what its learner saves."""
    return [f.name for f in dataclasses.fields(settings) if f.metadata.get("shape")]


@dataclass
class RunSettings:
    """What every algorithm's run has: its size, length, seed, checkpoints and resume. They are keys of ``algo``
    (``algo.num_envs``), where the task tuning files and every command line in use set them; each algorithm's
    settings extend them and may give them defaults of their own."""

    summary: ClassVar[str] = ""  # the algorithm in one line, for ``unilab list`` and ``train --help``
    on_policy: ClassVar[bool] = False  # the loop that trains it: the on-policy one, or the off-policy one
    # Its learner as "module:class", imported only when a run asks for it (``unilab.train.learner.learner_class``),
    # so that reading the settings (``unilab list``, ``train --help``) never loads the training stack.
    learner_path: ClassVar[str] = ""

    name: str = setting("", "the algorithm; chosen with algo=NAME or --algo NAME")
    num_envs: int = setting(4096, "envs stepped together on each rank", Range(1, 2**24))
    max_iterations: int = setting(500, "iterations of the run", Range(1, COUNT))
    save_interval: int = setting(500, "iterations between checkpoints", Range(1, COUNT))
    seed: int = setting(1, "fixes every random draw of the run (docs/functional_env.md)", Range(0, 2**31 - 1))
    resume: str | None = setting(None, "a model_<it>.pt to continue from")
    compile: bool = setting(True, "torch.compile the env step and the losses before graph capture; CUDA only")
    # Measured on CUDA for SAC, FlashSAC and PPO (ADR 42): warm starts 3.6-6.5 s shorter, the tails no lower.
    precompile: bool = setting(
        True,
        "keep the compiled env step and losses on disk, so a later run of the same code and "
        "settings loads them instead of tracing them (with algo.compile; CUDA only)",
    )

    # Left to itself, Inductor pads a product to aligned sizes where a timing at compile time finds it faster; on
    # CUDA that timing left SAC's update 4 % slower than padding every product does (ADR 47).
    force_shape_pad: bool = setting(
        True,
        "pad every matrix product of the compiled losses that the compiler can pad to aligned sizes, instead of "
        "letting a timing at compile time decide each (Inductor's force_shape_pad; with algo.compile)",
    )

    def check(self) -> None:
        """Raise ``ValueError``, one line naming the keys, for values that cannot work together; each algorithm adds
        its own rules. Config validation calls it before any work."""


@dataclass
class OffPolicySettings(RunSettings):
    """The off-policy loop's settings, shared by SAC and FlashSAC: the replay buffer, the updates per iteration, the
    soft target and the distributional critic's support."""

    batch_size: int = setting(8192, "transitions per minibatch", Range(1, 2**26))
    replay_buffer_n: int = setting(512, "replay capacity in iterations (rows: this * num_envs)", Range(1, 2**24))
    updates_per_step: int = setting(4, "minibatch updates per iteration", Range(1, 1024))
    policy_frequency: int = setting(4, "critic updates per actor and temperature update", Range(1, 1024))
    learning_starts: int = setting(1, "iterations of data gathered before the first update", Range(0, 2**24))
    gamma: float = setting(0.97, "discount", Range(0.0, 1.0, low_open=True))
    tau: float = setting(0.125, "Polyak factor of the target critic", Range(0.0, 1.0, low_open=True))
    num_atoms: int = setting(
        101, "atoms of the C51 critic", Range(2, 4096, why="a distribution over one atom has no spread to learn"), True
    )
    v_min: float = setting(-20.0, "lowest return of the critic's support", Range(-1e6, 1e6, why="the return support"))
    v_max: float = setting(20.0, "highest return of the critic's support", Range(-1e6, 1e6, why="the return support"))
    alpha_init: float = setting(0.01, "initial temperature", Range(0.0, 100.0, low_open=True))
    lr: float = setting(3e-4, "learning rate", Range(0.0, 1.0, low_open=True))
    max_grad_norm: float = setting(0.0, "gradient clip", Range(0.0, 1e6, why="0 turns clipping off"))
    amp: bool = setting(True, "bfloat16 autocast of the losses on CUDA")
    overlap_updates: bool = setting(True, "act with the pre-update weights so env step and updates overlap on CUDA")
    actor_average: float = setting(
        0.0,
        "Polyak factor of an average of the actor's weights, taken at each actor step, that eval, play and the ONNX "
        "export run instead of the actor (0: none)",
        Range(0.0, 1.0, why="0 keeps no average"),
    )

    def check(self) -> None:
        """The replay buffer can serve the updates (a batch fits in it, the pre-fill can finish) and the critic's
        support is an interval."""
        super().check()
        capacity = self.replay_buffer_n * self.num_envs
        if self.batch_size > capacity:
            raise ValueError(
                f"algo.batch_size={self.batch_size} is larger than the replay buffer "
                f"(algo.replay_buffer_n * algo.num_envs = {capacity})"
            )
        if self.learning_starts > self.replay_buffer_n:  # the pre-fill would wait for more rows than the buffer holds
            raise ValueError(
                f"algo.learning_starts={self.learning_starts} is larger than algo.replay_buffer_n="
                f"{self.replay_buffer_n}: the buffer would never hold enough rows to start learning"
            )
        if self.v_min >= self.v_max:
            raise ValueError(f"algo.v_min={self.v_min} must be below algo.v_max={self.v_max}")
