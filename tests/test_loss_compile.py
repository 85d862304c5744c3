"""How a learner compiles its losses: ``algo.force_shape_pad`` reaches Inductor, kept on disk or traced, and names
the update apart from one compiled without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.test_train import small_algo
from unilab.tasks.registry import make_functional_env
from unilab.train.update_key import compile_loss, update_key


def _double(x: torch.Tensor) -> torch.Tensor:
    return x * 2.0


@pytest.mark.parametrize("precompile", ["false", "true"])
@pytest.mark.parametrize(("overrides", "forced"), [((), True), (("algo.force_shape_pad=false",), False)])
def test_a_loss_compiles_with_forced_shape_padding_unless_the_run_turns_it_off(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, precompile: str, overrides: tuple[str, ...], forced: bool
) -> None:
    """Both ways a loss compiles (kept on disk with ``algo.precompile``, else traced) pass Inductor the option by
    default, and neither does where the run turns it off; the compiled loss still computes the function."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # where kept losses go
    seen: list[dict[str, Any]] = []
    real = torch.compile

    def spy(fn: Any, **kwargs: Any) -> Any:
        seen.append(dict(kwargs.get("options") or {}))
        return real(fn, **kwargs)

    monkeypatch.setattr(torch, "compile", spy)
    cfg = small_algo("sac", f"algo.precompile={precompile}", *overrides)
    spec = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4, device="cpu").spec()
    loss = compile_loss(_double, cfg, spec, "probe")
    assert loss(torch.ones(3)).tolist() == [2.0, 2.0, 2.0]
    assert seen, "the loss was not compiled"
    assert all(options.get("force_shape_pad", False) is forced for options in seen)
    if precompile == "true":
        assert list(tmp_path.rglob("probe-*.bin")), "the loss was not kept"


def test_forced_padding_names_another_update() -> None:
    """A kept loss and the side process's record are found by the update's name: a compile without forced padding
    must not be taken for one with it."""
    spec = make_functional_env("g1_walk_flat", sim="mujoco", num_envs=4, device="cpu").spec()
    assert update_key(small_algo("sac", "algo.force_shape_pad=false"), spec) != update_key(small_algo("sac"), spec)
