"""The default-deny seccomp program, assembled once as bytes (spec/containment.md).

:func:`program` returns a classic-BPF filter: a wrong architecture (or the x32 ABI) kills the
process; a syscall outside :mod:`murmur.sandbox.syscalls`' allowlist returns ``EPERM``;
``clone`` with any namespace flag returns ``EPERM``; ``clone3`` returns ``ENOSYS`` (the C
library then falls back to ``clone``, whose flags a filter can read); ``socket`` is refused
(``EACCES``) for ``AF_NETLINK``, ``AF_PACKET``, any ``SOCK_RAW``, and ``AF_UNIX`` unless
``unix_sockets``; ``ioctl(TIOCSTI)`` (typing into the terminal) returns ``EPERM``.
:func:`install` loads it (after ``PR_SET_NO_NEW_PRIVS``). Pure apart from :func:`install`.
"""

from __future__ import annotations

import ctypes
import struct

from murmur.sandbox import kernel, syscalls

__all__ = ["TABLES", "install", "program"]

TABLES = {"x86_64": (0xC000003E, syscalls.X86_64), "aarch64": (0xC00000B7, syscalls.AARCH64)}
"""Architecture -> (``AUDIT_ARCH_*``, allowed syscall numbers)."""

_LD_W_ABS = 0x20
_JEQ = 0x15
_JGE = 0x35
_JSET = 0x45
_AND = 0x54
_RET = 0x06
_JA = 0x05
_ALLOW = 0x7FFF0000
_KILL = 0x80000000
_ERRNO = 0x00050000
_EPERM, _EACCES, _ENOSYS = 1, 13, 38
_NS_FLAGS = 0x7E020000  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET
_TIOCSTI = 0x5412
_AF_UNIX, _AF_NETLINK, _AF_PACKET = 1, 16, 17
_SOCK_RAW = 3


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF)


def _arg(i: int) -> int:
    return 16 + 8 * i  # low 32 bits of args[i] (little-endian)


def program(arch: str = kernel.ARCH, *, unix_sockets: bool = False) -> bytes:
    """The filter for ``arch`` as ``struct sock_filter`` bytes.

    Raises:
        KeyError: no table for ``arch`` (the host cannot back scoped).
    """
    audit, table = TABLES[arch]
    nr_of = dict(table)
    special: dict[str, int] = {n: nr_of.pop(n) for n in ("clone", "clone3", "socket", "ioctl") if n in nr_of}
    deny = _ins(_RET, 0, 0, _ERRNO | _EPERM)
    allow = _ins(_RET, 0, 0, _ALLOW)

    # Tail blocks, each entered with the syscall number in A and returning.
    blocks: dict[str, list[bytes]] = {}
    if "clone" in special:
        blocks["clone"] = [_ins(_LD_W_ABS, 0, 0, _arg(0)), _ins(_JSET, 0, 1, _NS_FLAGS), deny, allow]
    if "clone3" in special:
        blocks["clone3"] = [_ins(_RET, 0, 0, _ERRNO | _ENOSYS)]
    if "ioctl" in special:
        blocks["ioctl"] = [_ins(_LD_W_ABS, 0, 0, _arg(1)), _ins(_JEQ, 0, 1, _TIOCSTI), deny, allow]
    if "socket" in special:
        refuse = _ins(_RET, 0, 0, _ERRNO | _EACCES)
        sock = [_ins(_LD_W_ABS, 0, 0, _arg(0))]
        denied = [_AF_NETLINK, _AF_PACKET] + ([] if unix_sockets else [_AF_UNIX])
        # for each denied family: jeq -> refuse (refuse sits after the type check below)
        tail = [_ins(_LD_W_ABS, 0, 0, _arg(1)), _ins(_AND, 0, 0, 0xF), _ins(_JEQ, 1, 0, _SOCK_RAW), allow, refuse]
        for i, fam in enumerate(denied):
            to_refuse = (len(denied) - i - 1) + len(tail) - 1
            sock.append(_ins(_JEQ, to_refuse, 0, fam))
        blocks["socket"] = sock + tail

    head = [
        _ins(_LD_W_ABS, 0, 0, 4),  # arch
        _ins(_JEQ, 1, 0, audit),
        _ins(_RET, 0, 0, _KILL),
        _ins(_LD_W_ABS, 0, 0, 0),  # nr
    ]
    if arch == "x86_64":
        head += [_ins(_JGE, 0, 1, 0x40000000), deny]  # x32 numbers
    allowed = sorted(set(nr_of.values()))
    # Layout: head | (jeq nr; ret allow)* | (jeq nr; ja block)* | deny | blocks...
    # (a conditional jump reaches 255 instructions at most, so every test is local).
    out = list(head)
    for nr in allowed:
        out += [_ins(_JEQ, 0, 1, nr), allow]
    order = list(blocks)
    to_block = 1  # past the deny
    for j, name in enumerate(order):
        remaining = 2 * (len(order) - j - 1)
        out += [_ins(_JEQ, 0, 1, special[name]), _ins(_JA, 0, 0, remaining + to_block)]
        to_block += len(blocks[name])
    out.append(deny)
    for name in order:
        out += blocks[name]
    if len(out) > 4096:
        raise ValueError("seccomp program too long")
    return b"".join(out)


def install(prog: bytes) -> None:
    """Load ``prog`` as this thread's filter (``PR_SET_NO_NEW_PRIVS`` must already be set)."""
    count = len(prog) // 8
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = struct.pack("=HxxxxxxQ", count, ctypes.addressof(buf))
    box = ctypes.create_string_buffer(fprog, len(fprog))
    rc = kernel.libc.prctl(22, ctypes.c_ulong(2), ctypes.c_ulong(ctypes.addressof(box)), 0, 0)  # PR_SET_SECCOMP
    if int(rc) < 0:
        err = ctypes.get_errno()
        raise OSError(err, "seccomp filter refused")
