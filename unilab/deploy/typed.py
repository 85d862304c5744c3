"""JSON into frozen dataclasses, checked against their type hints.

A policy file travels: it is copied to a robot, edited, truncated, or written by another version. Each value of its
metadata is therefore checked against the hint of the field it fills before anything uses it, and the first one that
does not fit ends the load with one line naming its path in the document (``joints.kp[3]``), so a NaN gain or a
missing list never reaches a motor. Floats must be finite; unknown keys are refused, since a key this version does
not read may change what the others mean.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from typing import Any, TypeVar

T = TypeVar("T")


class SchemaError(ValueError):
    """A value that does not fit its field; the message names the field's path and what it should be."""


_DESCRIBED = {float: "a finite number", int: "an integer", str: "a string", bool: "true or false"}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def convert(hint: Any, value: Any, where: str) -> Any:
    """``value`` (parsed JSON) as an instance of ``hint``: a float, int, str or bool, a tuple (of fixed length, or
    ``tuple[X, ...]``), a ``dict[str, X]``, an optional ``X | None`` or a dataclass of those."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [arg for arg in args if arg is not type(None)]
        return convert(inner, value, where)
    if dataclasses.is_dataclass(hint):
        return parse(hint, value, where)
    if origin is tuple:
        return _convert_tuple(args, value, where)
    if origin is dict:
        if not isinstance(value, dict):
            raise SchemaError(f"{where} must be an object, got {_shown(value)}")
        return {key: convert(args[1], item, f"{where}.{key}") for key, item in value.items()}
    return _convert_scalar(hint, value, where)


def _convert_tuple(args: tuple[Any, ...], value: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(value, list):
        raise SchemaError(f"{where} must be a list, got {_shown(value)}")
    if args[-1] is Ellipsis:
        return tuple(convert(args[0], item, f"{where}[{i}]") for i, item in enumerate(value))
    if len(value) != len(args):
        raise SchemaError(f"{where} must be a list of {len(args)}, got {len(value)} values")
    return tuple(convert(arg, item, f"{where}[{i}]") for i, (arg, item) in enumerate(zip(args, value, strict=True)))


def _convert_scalar(hint: Any, value: Any, where: str) -> Any:
    # bool is an int to Python; JSON keeps them apart, and so does a field.
    if hint is bool and isinstance(value, bool):
        return value
    if hint is int and isinstance(value, int) and not isinstance(value, bool):
        return value
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if hint is str and isinstance(value, str):
        return value
    raise SchemaError(f"{where} must be {_DESCRIBED[hint]}, got {_shown(value)}")


def parse(cls: type[T], value: Any, where: str) -> T:
    """An instance of the dataclass ``cls`` from a JSON object; a field with a default may be left out."""
    if not isinstance(value, dict):
        raise SchemaError(f"{where} must be an object, got {_shown(value)}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise SchemaError(f"{where} has unknown key(s) {', '.join(unknown)}")
    given = {}
    for name, f in fields.items():
        if name in value:
            given[name] = convert(hints[name], value[name], f"{where}.{name}")
        elif f.default is dataclasses.MISSING:
            raise SchemaError(f"{where}.{name} is missing")
    return cls(**given)
