"""``policy.onnx`` as a deployment takes it: the actor, the metadata that says how to feed it and drive the robot with
it (``unilab.tasks.deployment``), and beside it the scene it was trained in, for the sim-to-sim check.

``train`` exports through here at the end of a run, and ``unilab deploy export`` from any checkpoint.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import mujoco
from torch import nn

from torchrl_ext.export import export_policy_onnx
from unilab.core.files import replacing
from unilab.deploy.schema import METADATA_KEY
from unilab.envs.functional import FunctionalEnv
from unilab.tasks.deployment import deploy_metadata

SCENE_SUFFIX = ".mjb"


def scene_path(policy: Path) -> Path:
    """The compiled scene beside a policy file: ``policy.onnx`` -> ``policy.mjb``."""
    return Path(policy).with_suffix(SCENE_SUFFIX)


def write_scene(env: FunctionalEnv, path: Path) -> str:
    """The env's compiled model (its terrain and solver settings included) as a MuJoCo binary at ``path``; returns
    its SHA-256. A binary keeps every number of the model exactly, which an MJCF written back would not promise."""
    with replacing(path) as tmp:
        mujoco.mj_saveModel(env.sim.model, str(tmp), None)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def policy_metadata(env: FunctionalEnv, origin: dict[str, str], scene: Path, scene_sha256: str) -> dict[str, str]:
    """What ``policy.onnx`` carries: the env's policy interface (JSON values, read by ``unilab play/eval --onnx``),
    the deployment runtime's document, and where the policy came from (``origin``: task, algorithm, commit...)."""
    interface = {key: json.dumps(value) for key, value in env.policy_io().items()}
    return {**interface, METADATA_KEY: deploy_metadata(env, scene.name, scene_sha256), **origin}


def export_policy(actor: nn.Module, env: FunctionalEnv, path: Path, origin: dict[str, str]) -> None:
    """The actor of ``env``'s task as ``path`` (ONNX, checked against torch) with its metadata, and its scene beside
    it (``scene_path``); each file written whole or not at all."""
    scene = scene_path(path)
    sha256 = write_scene(env, scene)
    metadata = policy_metadata(env, origin, scene, sha256)
    with replacing(path) as tmp:  # a full disk is then named in one line
        export_policy_onnx(actor, env.obs_dims["policy"], tmp, metadata=metadata)
