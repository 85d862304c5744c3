"""Motion inputs are sized and typed before they are read: every array's header is checked before any is
decompressed, the frame rate must be a real number, and a motion directory holds clip files only."""

from __future__ import annotations

import io
import os
import zipfile
from pathlib import Path

import mujoco
import numpy as np
import pytest
from test_train import tiny

from unilab.apps.train import main
from unilab.motion import MotionFileError, load_motions, motion_files


def _with_header(raw: dict[str, np.ndarray], path: Path, key: str, claimed: tuple[int, ...]) -> Path:
    """The shipped clip, except that ``key``'s header claims ``claimed`` (its data stays as small as it was)."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, value in raw.items():
            buffer = io.BytesIO()
            if name == key:
                header = {"descr": np.lib.format.dtype_to_descr(value.dtype), "fortran_order": False, "shape": claimed}
                np.lib.format.write_array_header_1_0(buffer, header)
                buffer.write(value.tobytes())
            else:
                np.lib.format.write_array(buffer, value)
            archive.writestr(f"{name}.npy", buffer.getvalue())
    return path


def test_a_header_claiming_gigabytes_is_refused_before_anything_is_read(
    raw: dict[str, np.ndarray], model: mujoco.MjModel, tmp_path: Path
) -> None:
    frames = raw["joint_pos"].shape[0]
    path = _with_header(raw, tmp_path / "liar.npz", "body_lin_vel_w", (frames, 2_000_000, 3))
    with pytest.raises(MotionFileError, match=r"key 'body_lin_vel_w' claims shape .* more than 4096 values per frame"):
        load_motions(path, model)


def test_a_frame_rate_header_claiming_a_long_array_is_refused(raw, model: mujoco.MjModel, tmp_path: Path) -> None:
    path = _with_header(raw, tmp_path / "liar.npz", "fps", (10**9,))
    with pytest.raises(MotionFileError, match=r"key 'fps' must be a number \(shape \(\) or \(1,\)\)"):
        load_motions(path, model)


def test_a_complex_frame_rate_is_refused(raw: dict[str, np.ndarray], model: mujoco.MjModel, tmp_path: Path) -> None:
    path = tmp_path / "complex.npz"
    np.savez(path, **{**raw, "fps": np.array(50 + 1j)})
    with pytest.raises(MotionFileError, match=r"key 'fps' must be a number"):
        load_motions(path, model)


@pytest.mark.parametrize("odd", ["directory", "broken-link", "link-loop", "fifo"])
def test_a_motion_directory_holding_something_other_than_a_file_is_refused(
    raw: dict[str, np.ndarray], tmp_path: Path, capsys: pytest.CaptureFixture, odd: str
) -> None:
    library = tmp_path / "clips"
    library.mkdir()
    np.savez(library / "a_clip.npz", **raw)
    entry = library / "sub.npz"
    if odd == "directory":
        entry.mkdir()
    elif odd == "broken-link":
        entry.symlink_to(tmp_path / "gone.npz")
    elif odd == "link-loop":
        entry.symlink_to(entry)
    else:
        os.mkfifo(entry)
    with pytest.raises(MotionFileError, match=r"sub.npz in motion directory .* is not a file"):
        motion_files(library)
    with pytest.raises(SystemExit) as exit_info:  # and train refuses it before any work, in one line
        main(tiny(tmp_path, "mujoco", "task=g1_motion_tracking", f"task.motion_file={library}"))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and "is not a file" in err
    assert not (tmp_path / "run").exists()
