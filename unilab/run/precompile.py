"""Where a run keeps its env step compiled ahead of time (``algo.precompile``; ``unilab.core.precompiled``).

The saved step checks nothing when it is loaded, so its file's name carries everything the step was compiled from:
this package's files (the env's terms, the runner, the learners' acting), the versions of the stack, the task (its
factory's file too, for a task registered from outside the package) and every knob given to it (a motion library by
its files' bytes), the compiled MuJoCo model (robot and terrain), the physics backend's settings, the algorithm's
settings but those of a run's length and seed, the device and the GPU, and Inductor's switches. Runs that differ in
any of them compile a step of their own; a different seed or run length reuses the file. The saved step's own record
of the files its trace read (``unilab.core.precompiled``) catches an edit to a term kept elsewhere.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import mujoco
import torch

import torchrl_ext
import unilab
from unilab.core import precompiled
from unilab.motion.files import motion_files
from unilab.run.config import TrainConfig, task_overrides
from unilab.sim.base import saved_model
from unilab.tasks.registry import get_task
from unilab.train.update_key import RUN_ONLY


def _motion_digest(spec: Any) -> list[str]:
    """The clips a motion spec names, each by its name and bytes: a clip's length may be a constant of the step."""
    return [f"{path.name}:{precompiled.file_digest(path)}" for path in motion_files(spec)]


def step_key(cfg: TrainConfig, device: str, model: mujoco.MjModel) -> str:
    """A name for the env step a run of ``cfg`` compiles on ``device`` for the physics ``model``: equal only where the
    step is the same."""
    algo = dataclasses.asdict(cfg.algo)
    for name in RUN_ONLY:
        algo.pop(name, None)
    task = task_overrides(cfg)
    if "motion_file" in task:
        task["motion_file"] = _motion_digest(task["motion_file"])
    factory = sys.modules[get_task(cfg.task.name).make_config.__module__].__file__
    described = {
        "task": cfg.task.name,
        "task_factory": precompiled.file_digest(Path(factory)) if factory else None,
        "task_overrides": task,
        "model": hashlib.sha256(saved_model(model)).hexdigest(),
        "sim": dataclasses.asdict(cfg.sim),
        "algo": algo,
        "system": precompiled.system(torch.device(device)),
    }
    code = precompiled.sources_digest(Path(unilab.__file__).parent, Path(torchrl_ext.__file__).parent)
    text = json.dumps(described, sort_keys=True, default=str) + code
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def step_file(cfg: TrainConfig, device: str, model: mujoco.MjModel) -> Path | None:
    """Where a run of ``cfg`` on ``device`` keeps its compiled env step for the physics ``model``; None where it keeps
    none: precompile or compile off, a device other than CUDA (only there does a run compile its step), or no cache
    folder."""
    place = precompiled.folder()
    if not (cfg.algo.precompile and cfg.algo.compile) or torch.device(device).type != "cuda" or place is None:
        return None
    return place / f"env_step-{step_key(cfg, device, model)}.bin"
