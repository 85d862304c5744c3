"""Action terms: ``(action, ctx, **params) -> control targets`` for every world."""

from __future__ import annotations

import torch

from unilab.context import EnvContext


def joint_position_offsets(action: torch.Tensor, ctx: EnvContext, scale: float) -> torch.Tensor:
    """PD targets ``q0 + scale * action`` for every actuated joint."""
    return ctx.default_joint_pos + scale * action
