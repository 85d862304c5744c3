"""Counter-based RNG: reproducible, independent across counters and streams, uniform."""

from __future__ import annotations

import pytest
import torch

from unilab.core import rng


def test_same_state_same_numbers_and_counters_differ() -> None:
    r = rng.make_rng(7)
    a = rng.uniform(r, 3, (1000,))
    assert torch.equal(a, rng.uniform(rng.make_rng(7), 3, (1000,)))
    draws = [
        a,
        rng.uniform(rng.advance(r), 3, (1000,)),
        rng.uniform(r, 4, (1000,)),
        rng.uniform(rng.make_rng(8), 3, (1000,)),
    ]
    corr = torch.corrcoef(torch.stack(draws))
    off_diagonal = corr[~torch.eye(4, dtype=torch.bool)]
    assert off_diagonal.abs().max() < 0.15
    for i in range(4):
        for j in range(i + 1, 4):
            assert not torch.equal(draws[i], draws[j])


def test_uniform_range_and_moments() -> None:
    u = rng.uniform(rng.make_rng(0), 1, (200_000,), -2.0, 3.0)
    assert u.min() >= -2.0 and u.max() < 3.0
    assert u.mean().item() == pytest.approx(0.5, abs=0.02)
    assert u.std().item() == pytest.approx(5.0 / 12**0.5, abs=0.02)
    counts = torch.histc(u, bins=10, min=-2.0, max=3.0)
    assert (counts / u.numel() - 0.1).abs().max() < 0.005


def test_bad_seed_is_named() -> None:
    with pytest.raises(ValueError, match="seed must be in"):
        rng.make_rng(-1)


def test_normal_moments_and_tails() -> None:
    x = rng.normal(rng.make_rng(3), 5, (400_000,))
    assert x.dtype == torch.float32 and torch.isfinite(x).all()
    assert x.mean().item() == pytest.approx(0.0, abs=0.01)
    assert x.std().item() == pytest.approx(1.0, abs=0.01)
    assert (x.abs() > 1.96).float().mean().item() == pytest.approx(0.05, abs=0.003)
    assert (x.abs() > 3.0).float().mean().item() == pytest.approx(0.0027, abs=0.0005)
    assert not torch.equal(x, rng.normal(rng.make_rng(3), 6, (400_000,)))


def test_advance_keeps_a_fold_and_folds_commute() -> None:
    """A fold names a consumer: advancing its state gives the next step's state of that consumer."""
    r = rng.make_rng(11)
    assert torch.equal(rng.advance(rng.fold(r, 9)), rng.fold(rng.advance(r), 9))
    assert torch.equal(rng.fold(rng.fold(r, 2), 5), rng.fold(rng.fold(r, 5), 2))
    assert not torch.equal(rng.fold(rng.fold(r, 2), 2), r)  # folding a stream twice does not undo it


def test_a_fold_and_a_draw_of_one_stream_differ() -> None:
    """Drawing stream s from a state and drawing stream 0 from its fold by s are different numbers."""
    r = rng.make_rng(4)
    a = rng.uniform(r, 6, (1000,))
    b = rng.uniform(rng.fold(r, 6), 0, (1000,))
    assert torch.corrcoef(torch.stack((a, b)))[0, 1].abs() < 0.15 and not torch.equal(a, b)


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**31 - 1])
def test_the_host_and_the_device_hash_a_key_alike(seed: int) -> None:
    """``make_rng`` hashes its key in Python; ``advance`` on the device. Both must give the counter's key."""
    fresh = rng.make_rng(seed)
    assert int(fresh[2]) == int(rng._key(torch.tensor(seed), torch.tensor(0)))
    later = rng.advance(rng.advance(fresh))
    assert int(later[2]) == int(rng._key(torch.tensor(seed), torch.tensor(2))) == rng._key(seed, 2)


def test_advancing_k_steps_at_once_is_advancing_k_times() -> None:
    r = rng.fold(rng.make_rng(3), 17)
    step_by_step = r
    for _ in range(5):
        step_by_step = rng.advance(step_by_step)
    assert torch.equal(rng.advance(r, 5), step_by_step)
