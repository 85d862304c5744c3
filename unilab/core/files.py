"""Files written so that a crash or a signal never leaves a half-written one under its final name."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO


def fsync_path(path: Path) -> None:
    """Flush a file, or a directory's entries, to disk: without it a rename may survive a power cut while the data
    it points at does not."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Write a file so that readers (dashboards, a later resume) only ever see a complete old or new version.

    ``write`` fills a uniquely named sibling, which is flushed to disk and renamed over the target; a rename within
    one directory is atomic. On any error, a signal's KeyboardInterrupt included, the sibling is removed and the old
    file is left alone; a process killed outright leaves at most a hidden ``.tmp`` sibling, never a truncated file.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        # os.open with 0o666 lets the umask decide permissions, as a plain open() would for the final file.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_path(path.parent)
