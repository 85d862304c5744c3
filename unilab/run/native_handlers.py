"""The handler the operating system runs for a signal, as opposed to the one Python's ``signal`` module records.

A native library can install its own with ``sigaction`` and Python's table never hears of it: ``signal.getsignal``
still names the Python handler, which will no longer run. Reading the kernel's entry is the only way to see that.
Linux only (glibc's ``struct sigaction``); elsewhere nothing is known and ``None`` is returned.
"""

from __future__ import annotations

import ctypes
import functools
import os
import sys

DEFAULT, IGNORE = 0, 1  # SIG_DFL and SIG_IGN as the kernel stores them


class _SigAction(ctypes.Structure):
    _fields_ = [
        ("handler", ctypes.c_void_p),
        ("mask", ctypes.c_ubyte * 128),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("fname", ctypes.c_char_p),
        ("fbase", ctypes.c_void_p),
        ("sname", ctypes.c_char_p),
        ("saddr", ctypes.c_void_p),
    ]


@functools.cache
def _libc() -> ctypes.CDLL | None:
    return ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None


def native_handler(signum: int) -> int | None:
    """The address the kernel will call for ``signum`` (``DEFAULT``, ``IGNORE`` or a function), or ``None``."""
    libc = _libc()
    if libc is None:
        return None
    action = _SigAction()
    if libc.sigaction(signum, None, ctypes.byref(action)) != 0:
        return None
    return action.handler or DEFAULT


def describe(address: int) -> str:
    """A native handler as a person would look it up: the library it lives in, and its symbol where exported."""
    if address == DEFAULT:
        return "the default action (ending the process)"
    if address == IGNORE:
        return "ignoring the signal"
    libc, info = _libc(), _DlInfo()
    if libc is not None and libc.dladdr(ctypes.c_void_p(address), ctypes.byref(info)) and info.fname:
        where = os.path.basename(info.fname.decode(errors="replace"))
        return f"native code in {where}" + (f" ({info.sname.decode(errors='replace')})" if info.sname else "")
    return f"native code at {address:#x}"
