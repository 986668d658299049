"""Thin ctypes calls into the kernel the sandbox needs (spec/containment.md).

Everything here is one system call (or a fixed short sequence) with its errno turned into an
``OSError``. Numbers are the ones Linux gives every architecture the same (Landlock) or the
x86_64/aarch64 ones (``seccomp``, ``pivot_root``). Safe to call in a child after ``fork``: no
allocation beyond ctypes argument boxing, no locks.
"""

from __future__ import annotations

import ctypes
import os
import platform

__all__ = [
    "ARCH",
    "capset_zero",
    "drop_bounding_set",
    "libc",
    "mount",
    "no_new_privs",
    "pivot_root",
    "setns",
    "syscall",
    "umount",
    "unshare",
]

ARCH = platform.machine()
"""``x86_64`` or ``aarch64`` (others: no seccomp table, the scoped class is not backed)."""

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41}
_CAPSET = {"x86_64": 126, "aarch64": 91}
_LAST_CAP = 63

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def _check(rc: int, what: str) -> int:
    if rc < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")
    return rc


def syscall(nr: int, *args: int | bytes | ctypes.Array[ctypes.c_char] | None, what: str = "syscall") -> int:
    """``syscall(nr, args...)``; raises ``OSError`` on a negative return."""
    boxed = [ctypes.c_long(a) if isinstance(a, int) else a for a in args]
    return _check(int(libc.syscall(ctypes.c_long(nr), *boxed)), what)


def no_new_privs() -> None:
    """``prctl(PR_SET_NO_NEW_PRIVS, 1)``: no exec can gain privileges (setuid, file caps)."""
    _check(int(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)), "prctl(NO_NEW_PRIVS)")


def drop_bounding_set() -> None:
    """Drop every capability from the bounding set (needs ``CAP_SETPCAP`` here; silent without)."""
    for cap in range(_LAST_CAP + 1):
        if int(libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)) < 0 and ctypes.get_errno() == 22:
            return  # EINVAL: past the last capability this kernel knows


def capset_zero() -> None:
    """Clear the effective, permitted and inheritable capability sets of this thread."""
    header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = (ctypes.c_uint32 * 6)()
    nr = _CAPSET.get(ARCH)
    if nr is None:
        return
    _check(int(libc.syscall(ctypes.c_long(nr), header, data)), "capset")


def setns(fd: int, nstype: int) -> None:
    """Join the namespace ``fd`` names (``CLONE_NEW*`` in ``nstype``)."""
    _check(int(libc.setns(fd, nstype)), "setns")


def unshare(flags: int) -> None:
    """``unshare(flags)``."""
    _check(int(libc.unshare(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """``mount(2)``."""
    rc = libc.mount(
        source.encode() if source is not None else None,
        target.encode(),
        fstype.encode() if fstype is not None else None,
        ctypes.c_ulong(flags),
        data.encode() if data is not None else None,
    )
    _check(int(rc), f"mount {source} on {target}")


def umount(target: str, flags: int = MNT_DETACH) -> None:
    """``umount2(target, flags)``."""
    _check(int(libc.umount2(target.encode(), flags)), f"umount {target}")


def pivot_root(new_root: str, put_old: str) -> None:
    """``pivot_root(new_root, put_old)``."""
    nr = _PIVOT_ROOT.get(ARCH)
    if nr is None:
        raise OSError(38, "pivot_root: unknown architecture")
    _check(int(libc.syscall(ctypes.c_long(nr), new_root.encode(), put_old.encode())), "pivot_root")
