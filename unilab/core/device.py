"""Waiting for a device, where a timing or a phase boundary needs the work queued so far to have finished."""

from __future__ import annotations

import torch


def settle(device: torch.device) -> None:
    """Block until ``device`` has run everything queued on it; the CPU runs eagerly, so there it returns at once."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
