"""A run's update compiled in a side process from the command's first moment, on a cold machine.

``UpdatePrewarm`` (``unilab.train.prewarm``) compiles the update in a side process once the run knows its env's
layout: after the run has imported its stack and passed its checks (4-5 s on a used machine, about 10 s on a fresh
one), and that process then imports the stack itself before it compiles. On a cold start that side process is the
longest thing the run waits for (tens of seconds of compile), so each second it starts earlier is a second off the
start-up. This one starts with the command instead, beside Warp's step modules' side process
(``unilab.core.warp_ahead``), and works out what the run will: it composes the config from the same command line,
builds the task's layout, and compiles the same update on zeros into the same caches. The run then waits for it in
place of starting its own.

It starts where ``warp_ahead``'s does (a GPU, cores to spare, Warp's kernel cache cold: a fresh machine or cache
root, where the update's caches are cold too), for one process (not under torchrun) and an algorithm whose update
compiles. A warm machine starts neither. The side process ends at once where a run's earlier side process
recorded compiling the same update. If the command ends without taking it (a failed check, a signal), it is ended.

``python -m unilab.apps.early_update ARGUMENTS`` is the side process, ``ARGUMENTS`` being ``train``'s. This module
imports nothing heavy in the command's process: it is imported before torch.
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys

from unilab.apps.catalog import DEFAULT_ALGO
from unilab.apps.early import last_values, split_train_args
from unilab.core import side_process, startup_gc
from unilab.train.registry import ALGORITHMS

_side = side_process.Pending("update_prewarm")


def wanted(arguments: list[str]) -> bool:
    """Whether ``train``'s command line asks for a run alone on its device whose update compiles (a known algorithm,
    ``algo.compile`` left on). Read without composing the config; the side process composes it and checks again."""
    if os.environ.get("WORLD_SIZE", "1") != "1":
        return False
    values = last_values(split_train_args(arguments).overrides)
    return values.get("algo", DEFAULT_ALGO) in ALGORITHMS and values.get("algo.compile", "true") != "false"


def start(arguments: list[str]) -> bool:
    """Start the side process for ``train``'s ``arguments`` where ``wanted`` says so, once a process; returns whether
    it started. Call it only where the caches are cold (``warp_ahead.start`` started its own), after
    ``cache_dirs.configure``, whose variables it inherits."""
    if _side.started or not wanted(arguments):
        return False
    _side.launch([sys.executable, "-m", __name__, *arguments])
    atexit.register(_end_untaken)
    return True


def take() -> subprocess.Popen | None:
    """The side process, for the run to wait for (``UpdatePrewarm``) instead of starting its own; None where none
    was started or it was taken already."""
    process, _side.process = _side.process, None
    return process


def _end_untaken() -> None:
    """The command ends without a run that took the side process: it would compile for nothing, on the GPU."""
    process = take()
    if process is not None:
        process.kill()
        process.wait()


def main(arguments: list[str]) -> None:
    """Compose the run's config and env layout from its command line, and compile its update where the run will
    want it. Heavy imports happen here, in the side process only."""
    startup_gc.hold()  # a compile's objects, collected less often (unilab.core.startup_gc)
    import torch

    from torchrl_ext.distributed import ALONE
    from unilab.apps.compose import compose_config, resumed_groups
    from unilab.envs.layout import task_layout
    from unilab.run.config import task_overrides
    from unilab.run.preflight import resolve_device
    from unilab.tasks.registry import make_task
    from unilab.train.prewarm import prewarm

    cfg = compose_config(resumed_groups(split_train_args(arguments).overrides))
    device = torch.device(resolve_device(cfg, ALONE))
    layout = task_layout(make_task(cfg.task.name, **task_overrides(cfg)))
    prewarm(cfg.algo, layout.spec(cfg.algo.num_envs, device))


if __name__ == "__main__":
    main(sys.argv[1:])
