"""Which files a motion spec names: one clip, a directory of clips (a motion library), or a list of either.

Kept apart from the loader so that commands can check a run's clips still exist before they build anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np


class MotionFileError(ValueError):
    """A motion file that cannot be turned into a clip for this robot; the message says which file and why."""


MotionSpec = str | Path | Sequence[str | Path]
"""A ``.npz`` file, a directory (every ``*.npz`` in it, sorted by name), or a sequence of those, in order."""


def motion_files(spec: MotionSpec) -> list[Path]:
    """The clip files ``spec`` names, in library order (clip ids follow it).

    Raises ``FileNotFoundError`` for a path that does not exist or a directory without clips, and
    ``MotionFileError`` for an empty spec or two clips of one name: clips are reported by name, so a name must
    say which clip.
    """
    entries = [spec] if isinstance(spec, (str, Path)) else list(spec)
    if not entries:
        raise MotionFileError("no motion file given: name a .npz file, a directory of them, or a list of those")
    files: list[Path] = []
    for entry in entries:
        if str(entry) == "":  # Path("") is the working directory: never a clip library by accident
            raise MotionFileError("an empty motion file path")
        path = Path(entry)
        if path.is_dir():
            found = sorted(path.glob("*.npz"))
            if not found:
                raise FileNotFoundError(f"motion directory holds no .npz clip: {path}")
            # A directory, a broken or looping link or a pipe can carry the name too; none is a clip to read.
            odd = [entry for entry in found if not entry.is_file()]
            if odd:
                raise MotionFileError(
                    f"{odd[0]} in motion directory {path} is not a file (a directory, a broken link or a special file)"
                )
            files += found
        elif path.is_file():
            files.append(path)
        elif path.exists() or path.is_symlink():
            raise MotionFileError(f"motion file {path} is not a regular file (a broken link or a special file)")
        else:
            raise FileNotFoundError(f"motion file not found: {path}")
    repeated = sorted({f.stem for f in files if [g.stem for g in files].count(f.stem) > 1})
    if repeated:
        raise MotionFileError(f"clip name(s) {repeated} appear more than once among {len(files)} motion files")
    return files


def save_clip(path: str | Path, clip: dict[str, np.ndarray]) -> Path:
    """Write float arrays as float32 (ample for 1e-5 FK agreement, half the size), compressed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    stored = {k: v.astype(np.float32) if v.dtype.kind == "f" else v for k, v in clip.items()}
    np.savez_compressed(path, **stored)
    return path
