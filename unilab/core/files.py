"""Files written so that a crash or a signal never leaves a half-written one under its final name."""

from __future__ import annotations

import errno
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

# What a write that ran out of room raises: no space, over the file-size limit, over the quota.
_FULL = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
# Free bytes under which a failed write is put down to a full disk even when the writer (torch's serializer, say)
# replaced the OSError with its own message.
_NEARLY_FULL = 1 << 20


class DiskFullError(OSError):
    """A write that found no room: the message says which file and how much was free, in one line."""


def _full_disk(exc: BaseException, path: Path) -> DiskFullError | None:
    """The failed write of ``path`` as a ``DiskFullError`` if it ran out of room (an OSError's reason anywhere in
    its chain, or a disk left nearly full), None for any other failure."""
    reason = None
    seen: BaseException | None = exc
    while seen is not None and reason is None:
        if isinstance(seen, OSError) and seen.errno in _FULL:
            reason = seen.strerror or os.strerror(seen.errno)
        seen = seen.__cause__ or seen.__context__
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        return None
    if reason is None and free < _NEARLY_FULL:
        reason = "no space left on device"
    return (
        None if reason is None else DiskFullError(f"cannot write {path}: {reason} ({free / 2**20:.1f} MiB free there)")
    )


def fsync_path(path: Path) -> None:
    """Flush a file, or a directory's entries, to disk: without it a rename may survive a power cut while the data
    it points at does not."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@contextmanager
def replacing(path: Path, *, suffix_last: bool = False) -> Iterator[Path]:
    """A uniquely named sibling of ``path`` to write, renamed over ``path`` when the block completes, so readers
    (dashboards, a later resume) only ever see a complete old or new version.

    The sibling is flushed to disk before the rename, and a rename within one directory is atomic. On any error, a
    signal's KeyboardInterrupt included, the sibling is removed and the old file is left alone; a process killed
    outright leaves at most a hidden ``.tmp`` sibling, never a truncated file. ``suffix_last`` keeps ``path``'s
    suffix at the end of the sibling's name, for writers that pick the format from it (video encoders).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    unique = f"{os.getpid()}.{uuid.uuid4().hex[:8]}"
    tmp = path.with_name(f".{path.stem}.{unique}.tmp{path.suffix}" if suffix_last else f".{path.name}.{unique}.tmp")
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, path)
    except Exception as exc:
        full = _full_disk(exc, path)
        if full is None:
            raise
        raise full from None
    finally:
        tmp.unlink(missing_ok=True)  # after the rename there is nothing left to remove
    fsync_path(path.parent)


def write_atomic(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """``write`` fills ``path`` through an open binary file, with ``replacing``'s guarantees."""
    with replacing(path) as tmp:
        # os.open with 0o666 lets the umask decide permissions, as a plain open() would for the final file.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
