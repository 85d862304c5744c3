"""Trained policies as functions from observations to actions: a checkpoint's actor or an exported ONNX file.

``eval``, ``play`` and anything else that runs a trained policy take it from here, so each refuses a policy that
cannot run the same way: a missing or unreadable file, or one trained for an env of other sizes.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch

from unilab.apps.args import InputError, unknown_name
from unilab.apps.compose import check_knobs
from unilab.core.files import DiskFullError
from unilab.envs.functional import FunctionalEnv
from unilab.motion import MotionFileError, motion_files
from unilab.run.checkpoint import CheckpointError, load_checkpoint, saved_config
from unilab.run.config import TrainConfig
from unilab.run.resources import InsufficientMemoryError
from unilab.tasks.registry import list_tasks
from unilab.train.learner import ACTOR_AVERAGE, learner_class

Policy = Callable[[torch.Tensor], torch.Tensor]

# What a command that runs a policy reports as one line (``args.fail``) rather than a traceback.
REFUSALS = (InputError, CheckpointError, MotionFileError, InsufficientMemoryError, DiskFullError)


class PolicySource(NamedTuple):
    """Where a policy comes from and what it runs on."""

    path: Path  # the checkpoint or ONNX file
    checkpoint: dict | None  # the loaded checkpoint; None for an ONNX policy
    config: TrainConfig | None  # the checkpoint's training config, read into this version's schema
    task: str
    overrides: dict[str, Any]  # the task's env arguments for the policy

    @property
    def weights(self) -> str | None:
        """Which of a checkpoint's actors runs: ``"average"`` where the run kept one (``algo.actor_average``), else
        ``"actor"``; None for an ONNX policy, whose file holds one. Said in eval's summary, since the two actors of
        one checkpoint can score far apart."""
        if self.checkpoint is None:
            return None
        return "average" if ACTOR_AVERAGE in self.checkpoint else "actor"

    def policy(self, env: FunctionalEnv) -> Policy:
        """The policy, for ``env``: the checkpoint's deterministic actor, or the ONNX file on onnxruntime."""
        if self.checkpoint is not None:
            return checkpoint_policy(self.checkpoint, self.config, env, self.task)
        return onnx_policy(self.path, env, self.task)


def policy_source(
    checkpoint: Path | None, onnx: Path | None, task: str | None, knobs: dict[str, Any] | None = None
) -> PolicySource:
    """The policy file, loaded where it is a checkpoint, with the task to run it on and that task's env overrides
    (noise off, the run's motion file and task knobs, then ``knobs`` over them: a policy judged on a variant of its
    task, or a checkpoint of a run that recorded only its command line's knobs judged on the defaults it trained on).
    The task defaults to the one the policy was trained on: from the checkpoint's config, or from the metadata
    ``train`` writes into ``policy.onnx``."""
    if (checkpoint is None) == (onnx is None):
        raise InputError("give exactly one of a checkpoint or an onnx policy")
    path = Path(checkpoint if checkpoint is not None else onnx)
    ckpt = load_checkpoint(path) if checkpoint is not None else None
    cfg = saved_config(ckpt, path) if ckpt is not None else None
    saved_task: dict[str, Any] = dataclasses.asdict(cfg.task) if cfg is not None else (onnx_task(path) or {})
    task = task or saved_task.get("name")
    if task is None:
        raise InputError(f"no task given and none recorded in {onnx}; pass --task")
    if task not in list_tasks():
        raise InputError(unknown_name("task", task, list_tasks()))
    overrides: dict[str, Any] = {"obs_noise": False}
    if saved_task.get("name") == task:
        # The task as it was trained: its knobs change actions (a reach), physics (buffers, layouts) and what ends an
        # episode (a fall rule), so a policy judged without them is judged on another task.
        saved = saved_task.get("knobs") or {}
        try:
            check_knobs(task, saved)
        except ValueError as exc:
            raise InputError(f"{path}: {exc}") from None
        overrides.update(saved)
        if saved_task.get("motion_file"):
            try:
                motion_files(saved_task["motion_file"])
            except FileNotFoundError as exc:
                raise InputError(f"the motion the policy was trained on is gone: {exc}") from None
            overrides["motion_file"] = saved_task["motion_file"]
    try:
        check_knobs(task, knobs or {})
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return PolicySource(path, ckpt, cfg, task, {**overrides, **(knobs or {})})


def checkpoint_policy(ckpt: dict, cfg: TrainConfig, env: FunctionalEnv, task: str) -> Policy:
    """The deterministic actor of a checkpoint, rebuilt from its training config ``cfg``, for ``env`` (task
    ``task``): with the average of its weights where the run kept one (``algo.actor_average``), as the run's own
    ONNX export has it.

    Only the actor's weights are loaded: the rest of a learner (FlashSAC's per-env noise and reward normaliser)
    is shaped by the training ``num_envs`` and would not fit an eval with another env count.
    """
    # Another task than the one trained on is allowed (a transfer eval), as long as the actor fits it.
    trained_on = cfg.task.name
    other_task = f"the checkpoint was trained on {trained_on} and does not fit {task}" if trained_on != task else None
    try:
        learner = learner_class(cfg.algo)(env.spec(), cfg.algo)
    except ValueError as exc:
        if other_task is None:
            raise
        raise InputError(f"{other_task}: {exc}") from None
    actor = learner.loss.actor
    prefix = "actor."
    weights = {k[len(prefix) :]: v for k, v in ckpt["loss"].items() if k.startswith(prefix)}
    weights.update(ckpt.get(ACTOR_AVERAGE, {}))  # checked by load_checkpoint: the actor's own names and shapes
    try:
        actor.load_state_dict(weights)
    except RuntimeError as exc:  # weights edited by hand or from another version: name the problem, not torch's
        reason = other_task or "the checkpoint's actor weights do not fit its own config"
        first_two = " ".join(line.strip() for line in str(exc).splitlines()[:2])  # torch's heading, then the first key
        raise InputError(f"{reason}: {first_two}") from None
    actor.eval()
    return actor


def onnx_policy(path: Path, env: FunctionalEnv, task: str) -> Policy:
    """An onnxruntime CPU session wrapped to take and return torch tensors on the env's device. Its interface is
    checked before any rollout: one float32 input ``obs`` and one float32 output ``action``, each (batch, width)
    with a free batch axis and the task's widths; then one call on a batch of the env's size, so a graph that
    cannot run at that size fails here, in one line, rather than mid-rollout."""
    import onnxruntime as ort

    from torchrl_ext.export import INPUT_NAME, OUTPUT_NAME

    if not path.is_file():
        raise InputError(f"onnx policy not found: {path}")
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise InputError(f"cannot load onnx policy {path}: {type(exc).__name__}: {exc}") from exc
    spec = env.spec()
    _check_onnx_port(path, session.get_inputs(), INPUT_NAME, "input", spec.obs_dims["policy"], task)
    _check_onnx_port(path, session.get_outputs(), OUTPUT_NAME, "output", spec.action_dim, task)
    device = env.device

    def policy(obs: torch.Tensor) -> torch.Tensor:
        out = session.run([OUTPUT_NAME], {INPUT_NAME: obs.detach().float().cpu().numpy()})[0]
        return torch.as_tensor(out, device=device)

    try:
        trial = policy(torch.zeros(env.num_envs, spec.obs_dims["policy"]))
    except Exception as exc:  # onnxruntime's own failure (out of memory, an op it cannot run at this size)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"onnx policy {path} fails on a batch of {env.num_envs}: {first}") from None
    if tuple(trial.shape) != (env.num_envs, spec.action_dim):
        raise InputError(f"onnx policy {path} answers a batch of {env.num_envs} with shape {tuple(trial.shape)}")
    return policy


def _check_onnx_port(path: Path, ports: list, name: str, kind: str, width: int, task: str) -> None:
    """One input or output of an exported policy as ``train`` writes it: ``name``, float32, (free batch, width)."""
    names = [port.name for port in ports]
    if names != [name]:
        raise InputError(f"onnx policy {path} has {kind}s {names}; a policy has one {kind}, {name!r}")
    port = ports[0]
    if port.type != "tensor(float)":
        raise InputError(f"onnx policy {path}: its {kind} {name!r} is {port.type}, not tensor(float)")
    shape = port.shape
    if not isinstance(shape, list) or len(shape) != 2:
        raise InputError(f"onnx policy {path}: its {kind} {name!r} has shape {shape}, not (batch, {width})")
    if isinstance(shape[0], int):
        raise InputError(
            f"onnx policy {path}: its {kind} {name!r} has a fixed batch of {shape[0]}; export it with a free one"
        )
    if shape[1] != width:
        trained_on = (onnx_task(path) or {}).get("name", "another task")
        what = "observations" if kind == "input" else "actions"
        raise InputError(
            f"{path} {'takes' if kind == 'input' else 'gives'} {shape[1]} {what}, but {task} has {width}: the policy "
            f"was trained on {trained_on}"
        )


def onnx_task(path: Path) -> dict | None:
    """The task an exported policy was trained on (its name and motion file), from the metadata ``train`` writes
    into ``policy.onnx``; None for a file without it."""
    from torchrl_ext.export import read_metadata

    if not path.is_file():
        raise InputError(f"onnx policy not found: {path}")
    try:
        metadata = read_metadata(path)
    except Exception as exc:
        raise InputError(f"cannot read onnx policy {path}: {type(exc).__name__}: {exc}") from exc
    if "task" not in metadata:
        return None
    try:
        knobs = json.loads(metadata.get("task_knobs") or "{}")
    except ValueError:
        knobs = None
    if not isinstance(knobs, dict):
        raise InputError(f"onnx policy {path}: its task_knobs metadata is not a JSON object")
    return {"name": metadata["task"], "motion_file": metadata.get("motion_file") or None, "knobs": knobs}
