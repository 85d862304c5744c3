"""The device replay ring on CPU: where writes land, how many rows count as written, what sampling may return."""

from __future__ import annotations

import torch
from tensordict import TensorDict

from torchrl_ext.replay import DeviceReplay

CPU = torch.device("cpu")


def rows(first: int, count: int = 3) -> TensorDict:
    """``count`` rows numbered from ``first`` (an observation and a nested reward), to tell each write apart."""
    ids = torch.arange(first, first + count, dtype=torch.float32)
    return TensorDict({"obs": ids[:, None].expand(count, 2), "next": {"reward": ids}}, batch_size=[count])


def test_the_storage_takes_the_layout_of_the_first_write() -> None:
    replay = DeviceReplay(capacity=7, rows=3, seed=0, device=CPU)
    assert replay.storage is None
    replay.extend(rows(1))
    assert replay.storage["obs"].shape == (7, 2) and replay.storage["next", "reward"].shape == (7,)


def test_the_cursor_wraps_and_overwrites_the_oldest_rows() -> None:
    replay = DeviceReplay(capacity=7, rows=3, seed=0, device=CPU)
    for k in range(3):  # 9 rows into 7: the third write's last two rows land at the start
        replay.extend(rows(1 + 3 * k))
    assert replay.storage["next", "reward"].tolist() == [8, 9, 3, 4, 5, 6, 7]
    assert int(replay.writer.cursor) == 2


def test_the_size_counts_rows_written_up_to_the_capacity() -> None:
    replay = DeviceReplay(capacity=7, rows=3, seed=0, device=CPU)
    sizes = []
    for k in range(4):
        replay.extend(rows(1 + 3 * k))
        sizes.append(float(replay.writer.size))
    assert sizes == [3, 6, 7, 7]


def test_samples_come_only_from_written_rows() -> None:
    replay = DeviceReplay(capacity=10, rows=3, seed=0, device=CPU)
    for written in (3, 6):
        replay.extend(rows(written - 2))
        index = replay.sample_indices(5_000)
        assert index.min() == 0 and index.max() == written - 1  # every written row, none beyond
        assert set(replay.sample(5_000)["next", "reward"].tolist()) == set(range(1, written + 1))


def test_the_same_seed_draws_the_same_samples() -> None:
    def draws(seed: int) -> torch.Tensor:
        replay = DeviceReplay(capacity=10, rows=3, seed=seed, device=CPU)
        replay.extend(rows(1))
        replay.extend(rows(4))
        return torch.stack([replay.sample_indices(64) for _ in range(3)])

    assert torch.equal(draws(5), draws(5))
    assert not torch.equal(draws(5), draws(6))
