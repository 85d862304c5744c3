"""Counter-based random numbers: pure functions of (seed, counter, stream, element index).

An env step takes ``rng`` (int64 tensor ``[seed, counter]``) and returns it with the
counter advanced, so a run is reproducible from its seed, draws are identical on CPU and
CUDA, and sampling is plain tensor arithmetic that ``torch.compile`` traces and a CUDA
graph replays (no generator state to register). Each term draws from its own ``stream``
so adding a term does not shift the numbers another term sees.

The mixer is a 32-bit integer hash (xor-shift-multiply rounds) evaluated in int64; all
multiplier constants are below 2**31, so no product overflows int64.
"""

from __future__ import annotations

import zlib

import torch

_MASK32 = 0xFFFFFFFF
_M1, _M2 = 0x2C1B3C6D, 0x297A2D39  # odd multipliers below 2**31 (see module docstring)


def _mix(x: torch.Tensor) -> torch.Tensor:
    x = x & _MASK32
    x = ((x ^ (x >> 16)) * _M1) & _MASK32
    x = ((x ^ (x >> 15)) * _M2) & _MASK32
    x = ((x ^ (x >> 16)) * _M1) & _MASK32
    return x ^ (x >> 15)


def make_rng(seed: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """A fresh ``[seed, counter=0]`` state."""
    if not 0 <= seed < 2**31:
        raise ValueError(f"seed must be in [0, 2**31), got {seed}")
    return torch.tensor([seed, 0], dtype=torch.int64, device=device)


def advance(rng: torch.Tensor) -> torch.Tensor:
    """The state for the next step."""
    return torch.stack((rng[0], rng[1] + 1))


def fold(rng: torch.Tensor, stream: int) -> torch.Tensor:
    """A state for a sub-component (a term, a phase of the step) that shares the counter.

    Built from device arithmetic only: a ``torch.tensor`` of Python values would be a
    host-to-device copy, which a CUDA graph capture does not allow.
    """
    return torch.stack((_mix(rng[0] + stream), rng[1]))


def stream_id(name: str) -> int:
    """A stable 31-bit stream number for a term name."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def _bits(rng: torch.Tensor, stream: int, shape: tuple[int, ...]) -> torch.Tensor:
    n = 1
    for s in shape:
        n *= s
    # Seed, counter and stream enter through separate mixing rounds, so (counter + 1, stream)
    # and (counter, stream + 1) give unrelated keys.
    key = _mix(_mix(_mix(rng[0] + 0x3C6EF372) ^ rng[1]) + _mix(torch.full_like(rng[1], stream)))
    index = torch.arange(n, dtype=torch.int64, device=rng.device)
    return _mix(_mix(index ^ key) + key).reshape(shape)


def uniform(
    rng: torch.Tensor, stream: int, shape: tuple[int, ...], low: float = 0.0, high: float = 1.0
) -> torch.Tensor:
    """U(low, high) float32 samples; 24 random bits each."""
    u = (_bits(rng, stream, shape) >> 8).to(torch.float32) * (1.0 / 2**24)
    return low + (high - low) * u
