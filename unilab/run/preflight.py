"""What a training run checks before any work, in order of cost: its device, the files it names, and whether it
fits in the memory of the device it will live on. Each refusal is a ``ValueError`` of one line."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

from torchrl_ext.distributed import World
from unilab.envs.layout import TaskLayout
from unilab.motion import MotionFileError, motion_files
from unilab.run.checkpoint import check_compatible, load_checkpoint
from unilab.run.config import TrainConfig
from unilab.run.resources import FLOAT_BYTES, check_fits, replay_row_bytes
from unilab.sim import backend_device
from unilab.train.learner import ACTOR_AVERAGE, learner_class

PER_PARAMETER = 4  # weights, gradients, Adam's first and second moments


def resolve_device(cfg: TrainConfig, world: World) -> str:
    """``training.device``, else cuda for mjwarp when CUDA is available, else cpu; a CUDA device this machine
    lacks, or a device the backend cannot hold its worlds on, is refused here, before any work, rather than by an
    assertion deep inside torch or the env build. Under torchrun each rank takes its own GPU, cuda:LOCAL_RANK."""
    device = cfg.training.device
    parsed = backend_device(cfg.sim.name, device, None if device is None else f"training.device={device}")
    device = str(parsed)
    if parsed.type != "cuda" or world.size == 1:
        return device
    if parsed.index is not None:
        raise ValueError(
            f"training.device={device} names one GPU, but each of the {world.size} ranks uses cuda:LOCAL_RANK; "
            "set training.device=cuda or leave it unset"
        )
    if world.local_rank >= torch.cuda.device_count():
        raise ValueError(
            f"LOCAL_RANK={world.local_rank} but this machine has {torch.cuda.device_count()} CUDA devices; "
            "start at most one rank per GPU (torchrun --nproc_per_node)"
        )
    return f"cuda:{world.local_rank}"


def check_inputs(cfg: TrainConfig) -> None:
    """Files the config names must exist; checked first so a typo costs nothing."""
    if cfg.algo.resume and not Path(cfg.algo.resume).is_file():
        raise ValueError(f"algo.resume={cfg.algo.resume}: no such checkpoint file")
    if cfg.task.motion_file:
        try:
            motion_files(cfg.task.motion_file)
        except (FileNotFoundError, MotionFileError) as exc:
            raise ValueError(f"task.motion_file={cfg.task.motion_file}: {exc}") from None


def check_memory(cfg: TrainConfig, layout: TaskLayout, device: str, world: World) -> None:
    """Replay buffer and update minibatches (a rollout and its batch, on-policy), per-env physics state and the
    networks against the free memory of the device they live on, sized by the task's ``layout`` before anything of
    the run is allocated. On the CPU every rank of this machine allocates its own share from the same memory."""
    a = cfg.algo
    row = replay_row_bytes(layout.obs_dims, layout.action_dim)
    sharing = world.local_size if torch.device(device).type == "cpu" else 1
    if a.on_policy:  # the rollout buffer, and the update's batch built from it, about as large
        parts = {"rollout": 2 * a.num_steps_per_env * a.num_envs * row * sharing}
        remedy = "lower algo.num_envs, algo.num_steps_per_env or the network sizes"
    else:
        parts = {
            "replay": a.replay_buffer_n * a.num_envs * row * sharing,
            "update minibatches": a.batch_size * a.updates_per_step * row * sharing,
        }
        remedy = "lower algo.num_envs, algo.replay_buffer_n, algo.batch_size or the network sizes"
    parts["envs"] = a.num_envs * layout.world_bytes * sharing
    parts["networks"] = network_bytes(cfg, layout) * sharing
    if sharing > 1:
        remedy += f" (each of the {sharing} ranks on this machine needs its own)"
    check_fits(parts, torch.device(device), remedy)


def network_bytes(cfg: TrainConfig, layout: TaskLayout) -> int:
    """The learner's networks with what training keeps per parameter (the weights, their gradients and Adam's two
    moments), counted on networks built on the meta device, which allocates nothing."""
    spec = layout.spec(cfg.algo.num_envs, torch.device("meta"))
    with torch.device("meta"):
        networks = learner_class(cfg.algo).networks(spec, cfg.algo)
    parameters = sum(p.numel() for net in networks for p in net.parameters())
    return PER_PARAMETER * FLOAT_BYTES * parameters


def load_resume(cfg: TrainConfig) -> dict | None:
    """The checkpoint ``algo.resume`` names, loaded and checked against the config (None without one); one at or
    past ``algo.max_iterations`` has nothing left to train."""
    if not cfg.algo.resume:
        return None
    ckpt = load_checkpoint(Path(cfg.algo.resume))
    check_compatible(ckpt["config"], cfg, Path(cfg.algo.resume))
    if ckpt["iteration"] >= cfg.algo.max_iterations:
        raise ValueError(
            f"algo.resume={cfg.algo.resume} is at iteration {ckpt['iteration']}, not below "
            f"algo.max_iterations={cfg.algo.max_iterations}; raise algo.max_iterations to train on"
        )
    if ACTOR_AVERAGE in ckpt and not getattr(cfg.algo, "actor_average", 0.0):
        print(
            f"train: {cfg.algo.resume} kept an average of its actor, and this run keeps none: its checkpoints and "
            "policy.onnx run the actor itself (algo.actor_average keeps one)",
            file=sys.stderr,
        )
    return ckpt
