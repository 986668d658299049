"""Landlock rulesets: build once in the parent, restrict each command with one call.

Specification: spec/containment.md, "scoped". A :class:`Rule` is a path and the rights granted
beneath it. :func:`build` opens each path ``O_PATH``, creates the ruleset for this kernel's ABI
(every filesystem right that ABI knows is *handled*, so anything not granted is refused; at
ABI 6+ abstract unix sockets and signals are scoped to the domain too) and returns its fd. A
child calls :func:`restrict` with that fd after ``PR_SET_NO_NEW_PRIVS``.

Facts this relies on: ``execve`` checks ``EXECUTE`` on the file (and on the ELF interpreter the
kernel opens for it); a library the loader maps needs ``READ_FILE`` only; rules attach to
inodes, so a bind mount of a granted tree stays granted. Rules on a non-directory may carry
file rights only (:data:`FILE_RIGHTS`).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable

import attrs

from murmur.sandbox import kernel

__all__ = [
    "EXECUTE",
    "FILE_RIGHTS",
    "READ",
    "READ_FILE",
    "RW",
    "WRITE_FILE",
    "Rule",
    "abi",
    "build",
    "handled",
    "restrict",
]

_CREATE, _ADD, _RESTRICT = 444, 445, 446
_VERSION_FLAG = 1
_RULE_PATH_BENEATH = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5

SCOPE_ABSTRACT_UNIX = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

READ = READ_FILE | READ_DIR
RW = (READ | WRITE_FILE | REMOVE_DIR | REMOVE_FILE | MAKE_DIR | MAKE_REG | MAKE_SYM | MAKE_FIFO
      | REFER | TRUNCATE)
"""What a writable grant carries: never device or socket creation (``MAKE_CHAR``/``BLOCK``/``SOCK``)."""

FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


@attrs.frozen
class Rule:
    """Rights granted on a path and (for a directory) everything beneath it.

    Attributes:
        path (str): an absolute host path.
        rights (int): a mask of this module's right bits.
    """

    path: str
    rights: int


def abi() -> int:
    """This kernel's Landlock ABI version; 0 when Landlock is absent or disabled."""
    rc = int(kernel.libc.syscall(ctypes.c_long(_CREATE), None, ctypes.c_long(0), ctypes.c_long(_VERSION_FLAG)))
    return rc if rc > 0 else 0


def handled(version: int) -> int:
    """Every filesystem right ABI ``version`` knows (all of them are handled, so denied by default)."""
    mask = (1 << 13) - 1
    if version >= 2:
        mask |= REFER
    if version >= 3:
        mask |= TRUNCATE
    if version >= 5:
        mask |= IOCTL_DEV
    return mask


def build(rules: Iterable[Rule], version: int) -> int:
    """Create a ruleset fd holding ``rules`` (rights the ABI lacks are dropped; missing paths skipped).

    Args:
        rules: the grants; a path that does not exist is skipped (nothing to grant).
        version (int): :func:`abi` (>= 1).

    Returns:
        int: the ruleset fd (close-on-exec); the caller owns it.

    Raises:
        OSError: the kernel refused the ruleset or a rule.
    """
    fs = handled(version)
    scoped = (SCOPE_ABSTRACT_UNIX | SCOPE_SIGNAL) if version >= 6 else 0
    attr = (ctypes.c_uint64 * 3)(fs, 0, scoped)
    size = 24 if version >= 6 else (16 if version >= 4 else 8)
    fd = kernel.syscall(_CREATE, ctypes.addressof(attr), size, 0, what="landlock_create_ruleset")
    try:
        merged: dict[str, int] = {}
        for rule in rules:
            merged[rule.path] = merged.get(rule.path, 0) | rule.rights
        for path, rights in merged.items():
            try:
                pfd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            except OSError:
                continue
            try:
                allowed = rights & fs
                if not os.path.isdir(path):
                    allowed &= FILE_RIGHTS
                if not allowed:
                    continue
                beneath = (ctypes.c_uint8 * 12)()
                ctypes.c_uint64.from_buffer(beneath, 0).value = allowed
                ctypes.c_int32.from_buffer(beneath, 8).value = pfd
                kernel.syscall(_ADD, fd, _RULE_PATH_BENEATH, ctypes.addressof(beneath), 0,
                               what=f"landlock_add_rule {path}")
            finally:
                os.close(pfd)
        os.set_inheritable(fd, False)
        return fd
    except BaseException:
        os.close(fd)
        raise


def restrict(fd: int) -> None:
    """Enforce ruleset ``fd`` on this thread and everything it will start (needs no_new_privs)."""
    kernel.syscall(_RESTRICT, fd, 0, what="landlock_restrict_self")
