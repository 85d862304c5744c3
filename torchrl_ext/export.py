"""Export a trained policy to ONNX for deployment outside PyTorch.

The exported graph takes raw observations and returns the deterministic action, so any observation normaliser the
policy owns travels inside the file and a deployment cannot pair the weights with the wrong statistics.

The legacy TorchScript exporter (``dynamo=False``) is used on purpose: in torch 2.13 the default dynamo exporter
needs the extra ``onnxscript`` package, while tracing handles these plain MLP policies exactly, dynamic batch
included. Its deprecation warnings are silenced because the choice is deliberate.
"""

from __future__ import annotations

import contextlib
import copy
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

INPUT_NAME = "obs"
OUTPUT_NAME = "action"
CHECK_ATOL = 1e-4
CHECK_BATCH = 8
# Traced with a batch other than 1 so the tracer cannot mistake the batch axis for a broadcastable singleton.
_TRACE_BATCH = 2
_LEGACY_EXPORT_WARNINGS = ("You are using the legacy TorchScript-based ONNX export", "The feature will be removed")


def _cpu_eval_copy(policy: nn.Module) -> nn.Module:
    """Work on a float32 CPU copy in eval mode so the caller's module keeps its device, dtype and training mode.

    A ``torch.compile`` wrapper is unwrapped first: the tracer needs the plain module underneath.
    """
    plain = getattr(policy, "_orig_mod", policy)
    return copy.deepcopy(plain).to(device="cpu", dtype=torch.float32).eval()


def _write_onnx(module: nn.Module, obs_dim: int, path: Path, opset: int) -> None:
    example = torch.zeros(_TRACE_BATCH, obs_dim)
    with warnings.catch_warnings(), torch.no_grad():
        for message in _LEGACY_EXPORT_WARNINGS:
            warnings.filterwarnings("ignore", message=message, category=DeprecationWarning)
        torch.onnx.export(
            module,
            (example,),
            str(path),
            input_names=[INPUT_NAME],
            output_names=[OUTPUT_NAME],
            dynamic_axes={INPUT_NAME: {0: "batch"}, OUTPUT_NAME: {0: "batch"}},
            opset_version=opset,
            dynamo=False,
        )


def run_onnx(path: Path, obs: np.ndarray) -> np.ndarray:
    """Evaluate an exported policy the way a deployment would, on onnxruntime's CPU provider."""
    import onnxruntime as ort  # here, as ``onnx`` below: a training run that never exports pays for neither

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    (action,) = session.run([OUTPUT_NAME], {INPUT_NAME: obs.astype(np.float32, copy=False)})
    return action


def _max_abs_diff(module: nn.Module, obs_dim: int, path: Path) -> float:
    """A private, seeded generator keeps the check from advancing the trainer's global RNG stream."""
    generator = torch.Generator().manual_seed(0)
    obs = torch.randn(CHECK_BATCH, obs_dim, generator=generator)
    with torch.no_grad():
        expected = module(obs).numpy()
    actual = run_onnx(path, obs.numpy())
    if actual.shape != expected.shape:
        raise RuntimeError(f"ONNX action shape {actual.shape} differs from torch's {expected.shape}")
    return float(np.max(np.abs(actual - expected)))


def _add_metadata(path: Path, metadata: Mapping[str, str]) -> None:
    import onnx

    model = onnx.load(str(path))
    for key, value in metadata.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(path))


def read_metadata(path: Path) -> dict[str, str]:
    """The string metadata an exported policy carries (``onnx.ModelProto.metadata_props``)."""
    import onnx

    return {entry.key: entry.value for entry in onnx.load(str(path)).metadata_props}


def export_policy_onnx(
    policy: nn.Module,
    obs_dim: int,
    path: Path,
    opset: int = 17,
    check: bool = True,
    metadata: Mapping[str, str] | None = None,
) -> float:
    """Export ``policy`` (obs ``[B, obs_dim]`` -> action ``[B, act_dim]``) and return the checked max abs error.

    ``metadata`` goes into the file's metadata properties, so a deployment finds what it needs there. The file is
    written beside ``path``, flushed to disk and only renamed into place once it passed the check, so a failed or
    interrupted export never replaces a previously good policy file.
    """
    module = _cpu_eval_copy(policy)
    with _replacing(Path(path)) as tmp:
        _write_onnx(module, obs_dim, tmp, opset)
        if metadata:
            _add_metadata(tmp, metadata)
        max_diff = _max_abs_diff(module, obs_dim, tmp) if check else 0.0
        # Written as "not <=" so a NaN difference fails the check instead of slipping through.
        if not max_diff <= CHECK_ATOL:
            raise RuntimeError(f"ONNX export differs from torch by {max_diff:.3g} (tolerance {CHECK_ATOL:g})")
    return max_diff


@contextlib.contextmanager
def _replacing(path: Path) -> Iterator[Path]:
    """A sibling of ``path`` to write, flushed to disk and renamed over ``path`` when the block completes; removed on
    any error, so ``path`` holds the old file or the complete new one, never a part."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        with open(tmp, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
