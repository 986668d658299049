"""What ``/proc/<pid>/cmdline`` and ``/proc/<pid>/environ`` show of a forked process.

Specification: ``spec/formation.md`` "The warm start path". A forked process keeps its
parent's argument and environment areas: the kernel reads ``/proc/<pid>/cmdline`` and
``/proc/<pid>/environ`` from the address ranges recorded at the last ``execve``. On Linux
with ``CONFIG_CHECKPOINT_RESTORE`` an unprivileged process may point those ranges at other
memory of its own (``prctl(PR_SET_MM, PR_SET_MM_MAP, …)`` with ``exe_fd`` = -1; every other
field is given its current value): :func:`point_areas` does that, so a forked member's
``/proc`` shows exactly its own command line and environment, as after an ``execve``.
Verified on kernel 6.18 as root and as an unprivileged user with no capabilities
(``setpriv --reuid=65534 --regid=65534 --clear-groups``, ``runuser -u nobody``).

No kept library wraps ``PR_SET_MM_MAP`` (``python-prctl`` stops at the single-field options,
which need ``CAP_SYS_RESOURCE``), hence ``ctypes``.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Mapping, Sequence

_PR_SET_MM = 35
_PR_SET_MM_MAP = 14
_SYS_BRK = {"x86_64": 12, "aarch64": 214, "arm64": 214}
_FIELDS = ("start_code", "end_code", "start_data", "end_data", "start_brk", "brk", "start_stack",
           "arg_start", "arg_end", "env_start", "env_end")


class _MmMap(ctypes.Structure):
    """``struct prctl_mm_map`` (``linux/prctl.h``), 104 bytes."""

    _fields_ = [*((name, ctypes.c_uint64) for name in _FIELDS),
                ("auxv", ctypes.c_uint64), ("auxv_size", ctypes.c_uint32), ("exe_fd", ctypes.c_uint32)]


_kept: list[ctypes.Array[ctypes.c_char]] = []
"""The blocks the areas point at: they must live as long as the process."""


def block(items: Sequence[str]) -> bytes:
    """``items`` as the kernel lays out an area: each string encoded (``surrogateescape``, as
    ``os.fsencode``) and NUL-terminated (pure)."""
    return b"".join(os.fsencode(item) + b"\0" for item in items)


def env_items(env: Mapping[str, str]) -> list[str]:
    """``KEY=VALUE`` strings in ``env``'s order (pure)."""
    return [f"{k}={v}" for k, v in env.items()]


def _current() -> dict[str, int] | None:
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rpartition(b")")[2].split()
    except OSError:
        return None
    if len(fields) < 49:  # field 51 (env_end) is index 48 after the name
        return None

    def f(n: int) -> int:  # stat(5) field number n (1-based)
        return int(fields[n - 3])

    nr = _SYS_BRK.get(platform.machine())
    if nr is None:
        return None
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    brk = int(libc.syscall(ctypes.c_long(nr), ctypes.c_long(0)))
    return {"start_code": f(26), "end_code": f(27), "start_stack": f(28), "start_data": f(45),
            "end_data": f(46), "start_brk": f(47), "brk": brk, "env_start": f(50), "env_end": f(51)}


def point_areas(argv: Sequence[str], env: Mapping[str, str] | None) -> bool:
    """Point this process's argument area at ``argv`` and its environment area at ``env``
    (None: the environment area stays where it is).

    Returns:
        bool: True when ``/proc/self/cmdline`` and ``/proc/self/environ`` now show exactly
        them; False when the kernel refused (no ``CONFIG_CHECKPOINT_RESTORE``, a seccomp
        filter, an unknown architecture): nothing was changed.
    """
    now = _current()
    if now is None:
        return False
    args = ctypes.create_string_buffer(block(argv) or b"\0")
    # create_string_buffer adds one NUL past the data: the ranges end before it
    a0 = ctypes.addressof(args)
    if env is None:
        envs = None
        e0, e1 = now.pop("env_start"), now.pop("env_end")
    else:
        envs = ctypes.create_string_buffer(block(env_items(env)))
        e0 = ctypes.addressof(envs)
        e1 = e0 + len(envs) - 1
        del now["env_start"], now["env_end"]
    mm = _MmMap(**now, arg_start=a0, arg_end=a0 + len(args) - 1, env_start=e0, env_end=e1,
                auxv=0, auxv_size=0, exe_fd=0xFFFFFFFF)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        rc = libc.prctl(_PR_SET_MM, _PR_SET_MM_MAP, ctypes.byref(mm), ctypes.sizeof(mm), 0)
    except (OSError, AttributeError):
        return False
    if rc != 0:
        return False
    _kept.append(args)
    if envs is not None:
        _kept.append(envs)
    return True
