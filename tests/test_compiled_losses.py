"""The learners torch.compile the SAC and FlashSAC losses before CUDA-graph capture (``algo.compile``). Inductor
must trace them without breaking them: the compiled loss and its gradients equal eager ones (CPU inductor here;
the CUDA path runs in the GPU tests)."""

from __future__ import annotations

import pytest
import torch
import torch._inductor.config as inductor_config
from test_flashsac_loss import make_batch as make_flash_batch
from test_flashsac_loss import make_loss as make_flash_loss
from test_sac_loss import make_batch, make_loss, make_symmetry


def loss_and_grads(loss: torch.nn.Module, fn, batch, key: str, seed: int = 1) -> tuple[torch.Tensor, list]:
    torch.manual_seed(seed)
    value = fn(batch)[key]
    value.backward()
    grads = [p.grad.clone() for p in loss.parameters() if p.grad is not None]
    loss.zero_grad(set_to_none=True)
    return value.detach(), grads


# Each case is an Inductor compile on the CPU (10 to 20 s on 2 cores, cold); the fast ones take each algo and loss once.
@pytest.mark.parametrize(
    ("method", "key", "algo"),
    [
        ("critic_loss", "loss_critic", "sac"),
        pytest.param("actor_loss", "loss_actor", "sac", marks=pytest.mark.slow),
        pytest.param("critic_loss", "loss_critic", "flashsac", marks=pytest.mark.slow),
        ("actor_loss", "loss_actor", "flashsac"),
    ],
)
def test_compiled_loss_matches_eager(algo: str, method: str, key: str) -> None:
    torch.manual_seed(0)
    loss, batch = (
        (make_loss(mirror=make_symmetry()), make_batch()) if algo == "sac" else (make_flash_loss(), make_flash_batch())
    )
    start = {k: v.clone() for k, v in loss.state_dict().items()}  # BatchNorm statistics move on every forward
    eager, eager_grads = loss_and_grads(loss, getattr(loss, method), batch, key)
    loss.load_state_dict(start)
    with inductor_config.patch(fallback_random=True):  # the same random draws as eager
        compiled, compiled_grads = loss_and_grads(loss, torch.compile(getattr(loss, method)), batch, key)
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-6)
    assert len(compiled_grads) == len(eager_grads) > 0
    for got, want in zip(compiled_grads, eager_grads, strict=True):
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-6)
