"""Memory a run needs, estimated from its config before anything is allocated.

A slip such as ``algo.num_envs=1000000000`` would otherwise allocate until the machine swaps or the process is
killed, minutes later and far from the cause. The estimate counts only the allocations that grow with the config
(replay buffer, the minibatch an update block draws, per-env physics state), so it is a lower bound: a refusal is
always a real shortage, and a run that passes may still need a little more.
"""

from __future__ import annotations

import os
from pathlib import Path

import torch

FLOAT_BYTES = 4
_MEMINFO = Path("/proc/meminfo")


class InsufficientMemoryError(ValueError):
    """The config needs more memory than the device has free."""


def replay_row_bytes(obs_dims: dict[str, int], action_dim: int) -> int:
    """One stored transition: observations and next observations of actor and critic, action and reward as
    float32, terminated and truncated as bools (the trainer's TRANSITION_KEYS)."""
    return FLOAT_BYTES * (2 * obs_dims["policy"] + 2 * obs_dims["critic"] + action_dim + 1) + 2


def available_bytes(device: torch.device) -> int:
    """Free memory on ``device``: what the CUDA driver reports, or the host's MemAvailable (which counts reclaimable
    page cache, unlike MemFree)."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        return int(free)
    if _MEMINFO.is_file():
        for line in _MEMINFO.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def format_bytes(count: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if count < 1024 or unit == "PB":
            return f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def check_fits(parts: dict[str, int], device: torch.device, remedy: str) -> None:
    """Refuse when the summed ``parts`` (name -> bytes) exceed the free memory of ``device``."""
    need, have = sum(parts.values()), available_bytes(device)
    if need > have:
        split = ", ".join(f"{name} {format_bytes(size)}" for name, size in parts.items())
        raise InsufficientMemoryError(
            f"this run needs at least {format_bytes(need)} ({split}) but {device} has {format_bytes(have)} free; "
            f"{remedy}"
        )
