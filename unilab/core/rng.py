"""Counter-based random numbers: pure functions of (seed, counter, stream, element index).

An env step takes ``rng`` (int64 tensor ``[seed, counter]``) and the caller advances the
counter, so a run is reproducible from its seed, draws are identical on CPU and CUDA, and
sampling is plain tensor arithmetic that ``torch.compile`` traces and a CUDA graph replays
(no generator state to register). Each term draws from its own ``stream`` so adding a
term does not shift the numbers another term sees.

The mixer is a 32-bit integer hash (two xor-shift-multiply rounds, "lowbias32") evaluated
in int64; every product stays below 2**63. Draws are kept few and wide (one per term),
since each costs a fixed chain of small kernels whatever its size.
"""

from __future__ import annotations

import math
import zlib

import torch
from torch import Tensor

_MASK32 = 0xFFFFFFFF
_M1, _M2 = 0x21F0AAAD, 0x735A2D97  # odd multipliers below 2**31: a 32-bit value times one fits in int64
_SEED_MUL, _COUNTER_MUL, _INDEX_MUL = 0x2545F491, 0x3C6EF372 // 4, 0x9E3779B1 // 2


def _mix(x: torch.Tensor) -> torch.Tensor:
    x = x & _MASK32
    x = ((x ^ (x >> 16)) * _M1) & _MASK32
    x = ((x ^ (x >> 15)) * _M2) & _MASK32
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
    host-to-device copy, which a CUDA graph capture does not allow. The seed is offset, not
    hashed: every draw hashes it with the counter and stream anyway, and an unhashed fold
    costs two kernels instead of fourteen.
    """
    return torch.stack((rng[0] + stream, rng[1]))


def stream_id(name: str) -> int:
    """A stable 31-bit stream number for a term name."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def derive_seed(seed: int, consumer: str) -> int:
    """The 31-bit seed of ``consumer`` (network initialisation, exploration, replay sampling) in a run seeded
    ``seed``: the stream number of ``{seed}/{consumer}``, so one hash names every stream of a run, a term's inside
    the env and a consumer's outside it, the same on every machine."""
    return stream_id(f"{seed}/{consumer}")


def _bits(rng: torch.Tensor, stream: int, shape: tuple[int, ...]) -> torch.Tensor:
    n = 1
    for s in shape:
        n *= s
    # Seed and counter are masked to 31 and 30 bits so their products stay below 2**62.
    key = _mix((rng[0] & 0x7FFFFFFF) * _SEED_MUL + (rng[1] & 0x3FFFFFFF) * _COUNTER_MUL + stream)
    index = torch.arange(n, dtype=torch.int64, device=rng.device)
    return _mix(index * _INDEX_MUL + key).reshape(shape)


Bound = float | torch.Tensor


def uniform(rng: torch.Tensor, stream: int, shape: tuple[int, ...], low: Bound = 0.0, high: Bound = 1.0) -> Tensor:
    """U(low, high) float32 samples with 24 random bits each; ``low``/``high`` broadcast (per-column ranges)."""
    u = (_bits(rng, stream, shape) >> 8).to(torch.float32) * (1.0 / 2**24)
    return low + (high - low) * u


def normal(rng: torch.Tensor, stream: int, shape: tuple[int, ...]) -> Tensor:
    """Standard-normal float32 samples (Box-Muller on two 24-bit uniforms; |x| <= 5.8)."""
    bits = _bits(rng, stream, (2, *shape)) >> 8
    radius_u = (bits[0] + 1).to(torch.float32) * (1.0 / 2**24)  # in (0, 1]: the log stays finite
    angle_u = bits[1].to(torch.float32) * (1.0 / 2**24)
    return torch.sqrt(-2.0 * torch.log(radius_u)) * torch.cos((2 * math.pi) * angle_u)
