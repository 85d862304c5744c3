"""The values a number a user types may take: algorithm settings, run settings and task knobs all declare one, so a
value out of range is refused in one line naming the key before any work; and the words a task knob may take, for the
same reason."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Range:
    """The values a key may take: ``low`` to ``high``, each end included unless open. Every key has an upper end too,
    so nothing a user can type overflows what it is multiplied into (steps of an episode, a timedelta, a network's
    size, the C51 support) or reaches the allocator unchecked."""

    low: float
    high: float
    low_open: bool = False
    why: str = ""
    optional: bool = False  # None (``null``) is taken too: the reader's own value
    whole: bool = False  # whole numbers only, where the default (None) does not say so

    def check(self, key: str, value: float | None) -> None:
        if value is None and self.optional:
            return
        number = isinstance(value, int if self.whole else int | float) and not isinstance(value, bool)
        above = number and (value > self.low if self.low_open else value >= self.low)
        if not (above and value <= self.high):
            bracket = "(" if self.low_open else "["
            rule = f"in {bracket}{_number(self.low)}, {_number(self.high)}]" + (f" ({self.why})" if self.why else "")
            kind = ("null or " if self.optional else "") + ("a whole number " if self.whole else "")
            raise ValueError(f"{key} must be {kind}{rule}, got {value!r}")


def _number(value: float) -> str:
    """A bound as a user would type it: whole numbers in full (16777216, not 1.67772e+07)."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


@dataclass(frozen=True)
class Choice:
    """The words a key may take. The code that reads a word (a terrain's layout) meets it only once the run builds
    its task; checked with the config, a word that names nothing is refused before then, and ``train --cfg`` says
    so too."""

    values: tuple[str, ...]
    why: str = ""
    optional: bool = False  # None (``null``) is taken too: the reader's own choice

    def check(self, key: str, value: str | None) -> None:
        if value is None and self.optional:
            return
        if value not in self.values:
            rule = f"one of {', '.join(self.values)}" + (f" ({self.why})" if self.why else "")
            raise ValueError(f"{key} must be {rule}, got {value!r}")


@dataclass(frozen=True)
class Words:
    """A list of words a key takes (``task.terrain_columns=[flat,pyramid_stairs]``): at least one, each among
    ``values``; a word may come more than once."""

    values: tuple[str, ...]
    why: str = ""
    optional: bool = False  # None (``null``) is taken too: the reader's own choice

    def check(self, key: str, value: object) -> None:
        if value is None and self.optional:
            return
        words = value if isinstance(value, list | tuple) else ()
        if not words or any(word not in self.values for word in words):
            rule = f"a list of one or more of {', '.join(self.values)}" + (f" ({self.why})" if self.why else "")
            raise ValueError(f"{key} must be {rule}, got {value!r}")
