"""A run's update compiled first in a side process, while the run builds and warms its env.

On a machine that has not run a workload yet, the first update compiles the losses (AOTAutograd's joint graphs and
Inductor's kernels: tens of seconds on the H200), after the env's warm-up, which itself spends much of its time
waiting for Warp's per-model kernels. Both caches are keyed by a graph and its inputs' metadata (shapes, dtypes,
strides, device), not by their values, so a process that runs the same update on zeros laid out as the run's own
data (an off-policy learner's replay rows, an on-policy learner's rollout) fills them with the very entries the run
looks up: the run's first update then traces its graphs (Dynamo, in its own process) and loads the rest from the
caches, or loads the losses the side process kept (``algo.precompile``). The side process shares nothing with the
run but the cache root; it changes none of the run's state, and if it fails the run compiles as it would have.

Once the caches hold an update's graphs, a side process for the same update only traces them again, and the run
waits for it (seconds of every warm start). So a side process that succeeded leaves a record of what
it compiled (``record_path``: a name derived from the torch version, the learners' and losses' sources and the
settings and env layout the graphs depend on) in Inductor's cache folder, and a run that finds its record starts
none. Clearing that cache clears the record; a record whose graphs were lost otherwise costs the run the compile
it would have done without a side process.

``python -m unilab.train.prewarm PAYLOAD`` is the side process; ``UpdatePrewarm`` starts and waits for it. On a
cold machine the command starts one earlier, from its command line (``unilab.apps.early_update``), and
``UpdatePrewarm`` waits for that one instead.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from tensordict import TensorDict

from torchrl_ext.distributed import ALONE
from unilab.core import side_process, startup_gc
from unilab.core.cache_dirs import inductor_folder
from unilab.core.spec import EnvSpec
from unilab.train.learner import learner_class
from unilab.train.off_policy import TRANSITION_KEYS
from unilab.train.on_policy import float32_matmuls, matmul_precision, rollout_buffer
from unilab.train.settings import RunSettings
from unilab.train.update_key import update_key


def zero_batch(spec: EnvSpec, rows: int) -> TensorDict:
    """``rows`` replay rows of zeros, laid out as ``OffPolicyTrainer`` stores its envs' transitions
    (``TRANSITION_KEYS``): observations and actions as rows of features, reward and episode flags one a row."""
    features = {"policy": spec.obs_dims["policy"], "critic": spec.obs_dims["critic"], "action": spec.action_dim}
    batch = TensorDict({}, batch_size=[rows], device=spec.device)
    for key in TRANSITION_KEYS:
        name = key if isinstance(key, str) else key[-1]
        if name in features:
            batch.set(key, torch.zeros(rows, features[name], device=spec.device))
        else:
            dtype = torch.float32 if name == "reward" else torch.bool
            batch.set(key, torch.zeros(rows, dtype=dtype, device=spec.device))
    return batch


def compile_update(cfg: RunSettings, spec: EnvSpec) -> None:
    """One update block of a learner built as the run builds its own, on zeros laid out as its trainer's data (and,
    on-policy, under its trainer's matmul precision): on CUDA its compiled losses fill the caches."""
    if cfg.on_policy:
        learner = learner_class(cfg)(spec, cfg, ALONE)
        with float32_matmuls(matmul_precision(cfg)):
            learner.update(rollout_buffer(spec, cfg.num_steps_per_env))
    else:
        learner = learner_class(cfg)(spec, cfg, ALONE, acting_copy=cfg.overlap_updates)
        learner.update(zero_batch(spec, learner.minibatch * cfg.updates_per_step))
    if spec.device.type == "cuda":
        torch.cuda.synchronize(spec.device)


# Where the records of finished side processes go, under Inductor's cache folder.
RECORDS = "unilab-prewarm"


def record_path(cfg: RunSettings, spec: EnvSpec) -> Path | None:
    """Where a side process that compiled ``cfg``'s update for ``spec`` records it: in Inductor's cache folder (set
    by ``unilab.core.cache_dirs.configure``), so that clearing the cache clears the record; None where it is unset."""
    folder = inductor_folder(RECORDS)
    return None if folder is None else folder / update_key(cfg, spec)


# Longer than any compile of an update measured (FlashSAC's, cold, about a minute on the H200): a side process past it
# is stuck, and the run is better off compiling its update itself.
LIMIT_S = 600.0


class UpdatePrewarm:
    """The side process compiling a run's update; ``wait`` before the run's own first update."""

    def __init__(self, process: subprocess.Popen, payload: Path | None) -> None:
        self._process = process
        self._payload = payload

    @classmethod
    def start(cls, cfg: RunSettings, spec: EnvSpec, started: subprocess.Popen | None = None) -> UpdatePrewarm | None:
        """The side process for ``cfg``'s learner on envs of ``spec`` where ``needed``, or ``started``, one the command
        started for the same run (``unilab.apps.early_update``, which checked that itself); None elsewhere. It
        inherits the environment, so it shares the run's cache root."""
        if started is not None:
            return cls(started, None)
        if not needed(cfg, spec):
            return None
        handle, name = tempfile.mkstemp(prefix="unilab-prewarm-", suffix=".pkl")
        with os.fdopen(handle, "wb") as file:
            pickle.dump((cfg, spec, record_path(cfg, spec)), file)
        # Quiet: the run's own first update reports what compiled; a failure here costs the run nothing.
        process = side_process.launch("update_prewarm", [sys.executable, "-m", "unilab.train.prewarm", name])
        return cls(process, Path(name))

    def wait(self, limit_s: float = LIMIT_S) -> float:
        """Seconds waited for the side process to end; past ``limit_s`` it is ended, and the run compiles alone."""
        try:
            return side_process.join(self._process, limit_s)
        finally:
            if self._payload is not None:
                self._payload.unlink(missing_ok=True)

    def stop(self) -> None:
        """End the side process early (the run failed before its first update)."""
        self._process.kill()
        self.wait(limit_s=0.0)


def needed(cfg: RunSettings, spec: EnvSpec) -> bool:
    """Whether a side process would help: the learner compiles (on CUDA, with ``algo.compile``) and no earlier side
    process recorded compiling the same update."""
    if not (cfg.compile and spec.device.type == "cuda"):
        return False
    record = record_path(cfg, spec)
    return record is None or not record.exists()


def compile_and_record(cfg: RunSettings, spec: EnvSpec, record: Path | None) -> None:
    """``compile_update``, then the record that it is done, where there is a place for one."""
    compile_update(cfg, spec)
    if record is not None:
        record.parent.mkdir(parents=True, exist_ok=True)
        record.touch()


def prewarm(cfg: RunSettings, spec: EnvSpec) -> None:
    """In a side process that worked out ``cfg`` and ``spec`` itself: compile and record the update where
    ``needed``."""
    if needed(cfg, spec):
        compile_and_record(cfg, spec, record_path(cfg, spec))


def main(argv: list[str]) -> None:
    startup_gc.hold()  # a compile's objects, collected less often (unilab.core.startup_gc)
    payload = Path(argv[0])
    with payload.open("rb") as file:
        cfg, spec, record = pickle.load(file)  # written by UpdatePrewarm.start of this user's run, a moment ago
    compile_and_record(cfg, spec, record)


if __name__ == "__main__":
    main(sys.argv[1:])
