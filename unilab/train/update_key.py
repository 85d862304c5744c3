"""Names for an off-policy update's compiled losses: equal for runs whose update graphs are the same.

Two readers: the update's side process (``unilab.train.prewarm``) records that it compiled an update under this
name, and a learner with ``algo.precompile`` keeps each compiled loss in a file named after it
(``unilab.core.precompiled``), which a later run loads instead of tracing the loss again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

import torchrl_ext
from unilab.core import precompiled
from unilab.core.precompiled import KeptCompile
from unilab.core.spec import EnvSpec
from unilab.train.settings import RunSettings

# Settings no graph of the update depends on: runs that differ only in these compile the same update.
RUN_ONLY = ("max_iterations", "save_interval", "seed", "resume", "learning_starts", "replay_buffer_n", "precompile")


def update_key(cfg: RunSettings, spec: EnvSpec) -> str:
    """A name for the update ``cfg``'s learner compiles on envs of ``spec``: equal for runs whose update graphs are
    the same (the settings of ``RUN_ONLY`` aside), different when the torch version or the learners' code differ."""
    settings = dataclasses.asdict(cfg)
    for name in RUN_ONLY:
        settings.pop(name, None)
    here = Path(__file__).resolve().parent
    code = precompiled.sources_digest(here, Path(torchrl_ext.__file__).resolve().parent)
    parts = (torch.__version__, code, type(cfg).__qualname__, repr(sorted(settings.items())), repr(spec))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]


def kept_loss(cfg: RunSettings, spec: EnvSpec, name: str) -> Path | None:
    """Where a learner keeps its compiled loss ``name`` with ``algo.precompile``; None where it keeps none (off, or
    no cache folder). The file also names the device and the system (``precompiled.system``): a compiled graph is
    the GPU's."""
    place = precompiled.folder()
    if not cfg.precompile or place is None:
        return None
    system = json.dumps(precompiled.system(spec.device), sort_keys=True)
    digest = hashlib.sha256(f"{update_key(cfg, spec)}\n{system}".encode()).hexdigest()[:32]
    return place / f"{name}-{digest}.bin"


def compile_loss(
    fn: Callable[..., Any], cfg: RunSettings, spec: EnvSpec, name: str, fullgraph: bool = False
) -> Callable[..., Any]:
    """``fn`` compiled as a learner's update runs it: kept on disk as ``name`` with ``algo.precompile``
    (``kept_loss``), else traced by ``torch.compile`` in each process; ``fullgraph`` either way, and Inductor's
    ``force_shape_pad`` where ``algo.force_shape_pad`` asks."""
    options = {"force_shape_pad": True} if cfg.force_shape_pad else {}
    kept = kept_loss(cfg, spec, name)
    if kept is None:
        return torch.compile(fn, fullgraph=fullgraph, options=options or None)
    return KeptCompile(fn, kept, fullgraph=fullgraph, options=options)
