"""Trained policies as functions from observations to actions: a checkpoint's actor or an exported ONNX file.

``eval``, ``play`` and anything else that runs a trained policy take it from here, so each refuses a policy that
cannot run the same way: a missing or unreadable file, or one trained for an env of other sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import torch

from unilab.apps.args import InputError
from unilab.apps.checkpoint import CheckpointError, load_checkpoint
from unilab.apps.resources import InsufficientMemoryError
from unilab.envs.functional import FunctionalEnv
from unilab.motion import MotionFileError, motion_files
from unilab.tasks.registry import list_tasks

Policy = Callable[[torch.Tensor], torch.Tensor]

# What a command that runs a policy reports as one line (``args.fail``) rather than a traceback.
REFUSALS = (InputError, CheckpointError, MotionFileError, InsufficientMemoryError)


class PolicySource(NamedTuple):
    """Where a policy comes from and what it runs on."""

    checkpoint: dict | None  # the loaded checkpoint; None for an ONNX policy
    onnx: Path | None
    task: str
    overrides: dict[str, Any]  # the task's env arguments for the policy

    def policy(self, env: FunctionalEnv) -> Policy:
        """The policy, for ``env``: the checkpoint's deterministic actor, or the ONNX file on onnxruntime."""
        if self.checkpoint is not None:
            return checkpoint_policy(self.checkpoint, env, self.task)
        return onnx_policy(self.onnx, env, self.task)


def policy_source(checkpoint: Path | None, onnx: Path | None, task: str | None) -> PolicySource:
    """The policy file, loaded where it is a checkpoint, with the task to run it on and that task's env overrides
    (noise off, the run's motion file). The task defaults to the one the policy was trained on: from the
    checkpoint's config, or from the metadata ``train`` writes into ``policy.onnx``."""
    if (checkpoint is None) == (onnx is None):
        raise InputError("give exactly one of a checkpoint or an onnx policy")
    ckpt = load_checkpoint(Path(checkpoint)) if checkpoint is not None else None
    config = ckpt["config"] if ckpt is not None else onnx_origin(Path(onnx))
    saved_task: dict[str, Any] = (config or {}).get("task", {})
    task = task or saved_task.get("name")
    if task is None:
        raise InputError(f"no task given and none recorded in {onnx}; pass --task")
    if task not in list_tasks():
        raise InputError(f"unknown task {task!r}; known tasks: {', '.join(list_tasks())}")
    overrides: dict[str, Any] = {"obs_noise": False}
    if saved_task.get("name") == task and saved_task.get("motion_file"):
        try:
            motion_files(saved_task["motion_file"])
        except FileNotFoundError as exc:
            raise InputError(f"the motion the policy was trained on is gone: {exc}") from None
        overrides["motion_file"] = saved_task["motion_file"]
    return PolicySource(ckpt, None if onnx is None else Path(onnx), task, overrides)


def checkpoint_policy(ckpt: dict, env: FunctionalEnv, task: str):
    """The deterministic actor of a checkpoint, rebuilt from its saved config, for ``env`` (task ``task``).

    Only the actor's weights are loaded: the rest of a learner (FlashSAC's per-env noise and reward normaliser)
    is shaped by the training ``num_envs`` and would not fit an eval with another env count.
    """
    from omegaconf import OmegaConf

    from torchrl_ext.learners import LEARNERS
    from unilab.apps.config import TrainConfig

    cfg: TrainConfig = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(TrainConfig), ckpt["config"]))
    # Another task than the one trained on is allowed (a transfer eval), as long as the actor fits it.
    trained_on = cfg.task.name
    other_task = f"the checkpoint was trained on {trained_on} and does not fit {task}" if trained_on != task else None
    try:
        learner = LEARNERS[cfg.algo.name](env.spec(), cfg.algo)
    except ValueError as exc:
        if other_task is None:
            raise
        raise InputError(f"{other_task}: {exc}") from None
    actor = learner.loss.actor
    prefix = "actor."
    weights = {k[len(prefix) :]: v for k, v in ckpt["loss"].items() if k.startswith(prefix)}
    try:
        actor.load_state_dict(weights)
    except RuntimeError as exc:  # weights edited by hand or from another version: name the problem, not torch's
        reason = other_task or "the checkpoint's actor weights do not fit its own config"
        first_two = " ".join(line.strip() for line in str(exc).splitlines()[:2])  # torch's heading, then the first key
        raise InputError(f"{reason}: {first_two}") from None
    actor.eval()
    return actor


def onnx_policy(path: Path, env: FunctionalEnv, task: str):
    """An onnxruntime CPU session wrapped to take and return torch tensors on the env's device; refused before
    any rollout when its input or output width does not fit ``task``."""
    import onnxruntime as ort

    from torchrl_ext.export import INPUT_NAME, OUTPUT_NAME

    if not path.is_file():
        raise InputError(f"onnx policy not found: {path}")
    try:
        session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    except Exception as exc:
        raise InputError(f"cannot load onnx policy {path}: {type(exc).__name__}: {exc}") from exc
    widths = (session.get_inputs()[0].shape[-1], session.get_outputs()[0].shape[-1])
    spec = env.spec()
    wanted = (spec.obs_dims["policy"], spec.action_dim)
    if widths != wanted:
        origin = onnx_origin(path) or {}
        trained_on = origin.get("task", {}).get("name", "another task")
        raise InputError(
            f"{path} takes {widths[0]} observations and gives {widths[1]} actions, but {task} has {wanted[0]} and "
            f"{wanted[1]}: the policy was trained on {trained_on}"
        )
    device = env.device

    def policy(obs: torch.Tensor) -> torch.Tensor:
        out = session.run([OUTPUT_NAME], {INPUT_NAME: obs.detach().float().cpu().numpy()})[0]
        return torch.as_tensor(out, device=device)

    return policy


def onnx_origin(path: Path) -> dict | None:
    """The task an exported policy was trained on, from the metadata ``train`` writes into ``policy.onnx``."""
    from torchrl_ext.export import read_metadata

    if not path.is_file():
        raise InputError(f"onnx policy not found: {path}")
    try:
        metadata = read_metadata(path)
    except Exception as exc:
        raise InputError(f"cannot read onnx policy {path}: {type(exc).__name__}: {exc}") from exc
    if "task" not in metadata:
        return None
    return {"task": {"name": metadata["task"], "motion_file": metadata.get("motion_file") or None}}
