"""Output files taken before the work that fills them.

A command that writes results under names it chose (eval's summaries) takes each name first: a file already
there is refused before any work, unless the user asked for it to be replaced, and a name is taken by creating
it exclusively, so two commands started at once cannot both write it and lose one result. What was taken is
replaced by the result when it is written (by rename), or removed again if the command fails first.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from unilab.apps.args import InputError, check_room

PLACEHOLDER = b'{"status": "running"}\n'
ROOM_BYTES = 1 << 20  # what a summary needs at the most, with room to spare


class OutputClaims:
    """Takes ``targets`` on entry (``InputError`` if one cannot be had) and, on an error inside the block, gives
    back those it created that no result has replaced yet."""

    def __init__(self, targets: Iterable[Path], replace: bool, hint: str) -> None:
        self.targets = list(dict.fromkeys(Path(target) for target in targets))
        self.replace = replace
        self.hint = hint  # how the user asks for a replacement (``--force``)
        self._created: list[tuple[Path, int]] = []  # (path, inode of the placeholder)

    def __enter__(self) -> OutputClaims:
        try:
            for target in self.targets:
                self._take(target)
        except BaseException:
            self._release()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if kind is not None:
            self._release()

    def _take(self, target: Path) -> None:
        if target.exists() or target.is_symlink():
            if not self.replace:
                raise InputError(f"{target} already exists: {self.hint} replaces it")
            return  # replaced by rename once the result is written
        target.parent.mkdir(parents=True, exist_ok=True)
        check_room(target.parent, ROOM_BYTES)
        try:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        except FileExistsError:
            raise InputError(f"{target} is being written by another command; wait for it to finish") from None
        try:
            os.write(fd, PLACEHOLDER)
            self._created.append((target, os.fstat(fd).st_ino))
        finally:
            os.close(fd)

    def _release(self) -> None:
        for path, inode in self._created:
            try:
                if os.stat(path, follow_symlinks=False).st_ino == inode:  # still the placeholder, not a result
                    path.unlink()
            except FileNotFoundError:
                pass
        self._created = []
