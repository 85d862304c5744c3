"""Counter-based random numbers: pure functions of (seed, counter, streams, element index).

An env step takes ``rng`` (int64 tensor ``[seed, counter, key]``) and the caller advances the
counter, so a run is reproducible from its seed, draws are identical on CPU and CUDA, and
sampling is plain tensor arithmetic that ``torch.compile`` traces and a CUDA graph replays
(no generator state to register). Each term draws from its own ``stream`` so adding a
term does not shift the numbers another term sees.

The mixer is a 32-bit integer hash (two xor-shift-multiply rounds, "lowbias32") evaluated
in int64; every product stays below 2**63. The key is the hash of seed and counter, made
once a step by ``advance``; a fold or a draw adds its stream's own hash (a constant of the
traced graph) to it. So a draw costs one addition before the hash of its elements: hashing
seed, counter and stream in every draw would put a dozen scalar operations per draw into the
compiled step, which tracing and compiling pay for one by one.
"""

from __future__ import annotations

import math
import zlib

import torch
from torch import Tensor

_MASK32 = 0xFFFFFFFF
_M1, _M2 = 0x21F0AAAD, 0x735A2D97  # odd multipliers below 2**31: a 32-bit value times one fits in int64
_SEED_MUL, _COUNTER_MUL, _INDEX_MUL = 0x2545F491, 0x3C6EF372 // 4, 0x9E3779B1 // 2
_FOLD_SALT, _DRAW_SALT = 0x1B873593, 0x5BD1E995  # a fold and a draw of one stream number get different hashes


def _mix(x: Tensor | int) -> Tensor | int:
    """lowbias32 of the low 32 bits; the same arithmetic on a tensor (int64) and on a Python int."""
    x = x & _MASK32
    x = ((x ^ (x >> 16)) * _M1) & _MASK32
    x = ((x ^ (x >> 15)) * _M2) & _MASK32
    return x ^ (x >> 15)


def _key(seed: Tensor | int, counter: Tensor | int) -> Tensor | int:
    # Seed and counter are masked to 31 and 30 bits so their products stay below 2**62.
    return _mix((seed & 0x7FFFFFFF) * _SEED_MUL + (counter & 0x3FFFFFFF) * _COUNTER_MUL)


def _stream_hash(stream: int, salt: int) -> int:
    """A stream's offset to a key: a Python int, so that it enters a traced graph as a constant, of 31 bits, so
    that the compiled kernels hold it as a 32-bit literal whatever they make of larger ones."""
    return _mix(stream * _INDEX_MUL + salt) & 0x7FFFFFFF


def make_rng(seed: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """A fresh ``[seed, counter=0, key]`` state."""
    if not 0 <= seed < 2**31:
        raise ValueError(f"seed must be in [0, 2**31), got {seed}")
    return torch.tensor([seed, 0, _key(seed, 0)], dtype=torch.int64, device=device)


def advance(rng: torch.Tensor, steps: int = 1) -> torch.Tensor:
    """The state ``steps`` steps on: the counter's key replaced by the new counter's, and any folds kept, so
    ``advance(fold(rng, s))`` equals ``fold(advance(rng), s)``."""
    counter = rng[1] + steps
    return torch.stack((rng[0], counter, rng[2] - _key(rng[0], rng[1]) + _key(rng[0], counter)))


def fold(rng: torch.Tensor, stream: int) -> torch.Tensor:
    """A state for a sub-component (a term, a phase of the step) that shares the counter.

    Built from device arithmetic only: a ``torch.tensor`` of Python values would be a
    host-to-device copy, which a CUDA graph capture does not allow. The key grows by the
    stream's hash (by under 2**31 a fold, unmasked: a draw masks it), so folds commute.
    """
    return torch.cat((rng[:2], rng[2:] + _stream_hash(stream, _FOLD_SALT)))


def stream_id(name: str) -> int:
    """A stable 31-bit stream number for a term name."""
    return zlib.crc32(name.encode()) & 0x7FFFFFFF


def derive_seed(seed: int, consumer: str) -> int:
    """The 31-bit seed of ``consumer`` (network initialisation, exploration, replay sampling) in a run seeded
    ``seed``: the stream number of ``{seed}/{consumer}``, so one hash names every stream of a run, a term's inside
    the env and a consumer's outside it, the same on every machine."""
    return stream_id(f"{seed}/{consumer}")


def _bits(rng: torch.Tensor, stream: int, shape: tuple[int, ...]) -> torch.Tensor:
    key = rng[2] + _stream_hash(stream, _DRAW_SALT)
    # The index is offset by the key before it is spread: Inductor folds a product of ``arange`` and a constant into
    # a kernel's index arithmetic, which Triton may do in 32 bits, where the spread index overflows.
    index = torch.arange(math.prod(shape), dtype=torch.int64, device=rng.device)
    return _mix(((index + key) & _MASK32) * _INDEX_MUL).reshape(shape)


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
