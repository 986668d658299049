"""The seccomp program decides as spec/containment.md says: run through a small BPF interpreter."""

from __future__ import annotations

import struct

import pytest

from murmur.sandbox import seccomp, syscalls

X86 = 0xC000003E
ALLOW, KILL = 0x7FFF0000, 0x80000000


def errno(n: int) -> int:
    return 0x00050000 | n


def run(prog: bytes, nr: int, args: tuple[int, ...] = (), arch: int = X86) -> int:
    """Evaluate classic BPF over a seccomp_data (only the instructions the program uses)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * (6 - len(args))))
    ins = [struct.unpack_from("=HBBI", prog, i) for i in range(0, len(prog), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ins[pc]
        if code == 0x20:
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code == 0x54:
            acc &= k
            pc += 1
        elif code == 0x05:
            pc += 1 + k
        elif code in (0x15, 0x35, 0x45):
            hit = acc == k if code == 0x15 else (acc >= k if code == 0x35 else bool(acc & k))
            pc += 1 + (jt if hit else jf)
        elif code == 0x06:
            return k
        else:  # pragma: no cover - an instruction the program should not hold
            raise AssertionError(f"unexpected BPF code {code:#x}")


NR = syscalls.X86_64


@pytest.fixture(scope="module")
def prog() -> bytes:
    return seccomp.program("x86_64")


def test_every_allowlisted_call_is_allowed(prog: bytes) -> None:
    for name, nr in NR.items():
        if name in ("clone3", "socket", "clone", "ioctl"):
            continue
        assert run(prog, nr) == ALLOW, name


@pytest.mark.parametrize("nr,name", [(165, "mount"), (101, "ptrace"), (272, "unshare"), (308, "setns"),
                                     (321, "bpf"), (246, "kexec_load"), (175, "init_module"), (155, "pivot_root"),
                                     (310, "process_vm_readv"), (298, "perf_event_open"), (323, "userfaultfd")])
def test_dangerous_calls_are_refused(prog: bytes, nr: int, name: str) -> None:
    assert name not in NR
    assert run(prog, nr) == errno(1)


def test_wrong_architecture_and_x32_are_refused(prog: bytes) -> None:
    assert run(prog, NR["read"], arch=0x40000003) == KILL  # i386
    assert run(prog, 0x40000000 | NR["read"]) == errno(1)


def test_clone_with_a_namespace_flag_is_refused(prog: bytes) -> None:
    assert run(prog, NR["clone"], (0x01200011,)) == ALLOW  # what fork() passes
    assert run(prog, NR["clone"], (0x10000000 | 17,)) == errno(1)  # CLONE_NEWUSER
    assert run(prog, NR["clone"], (0x40000000 | 17,)) == errno(1)  # CLONE_NEWNET
    assert run(prog, NR["clone3"]) == errno(38)  # ENOSYS: the C library falls back to clone


def test_socket_families(prog: bytes) -> None:
    assert run(prog, NR["socket"], (2, 1)) == ALLOW  # AF_INET stream
    assert run(prog, NR["socket"], (10, 2)) == ALLOW  # AF_INET6 dgram
    assert run(prog, NR["socket"], (2, 3)) == errno(13)  # SOCK_RAW
    assert run(prog, NR["socket"], (2, 3 | 0x80000)) == errno(13)  # SOCK_RAW|SOCK_CLOEXEC
    assert run(prog, NR["socket"], (16, 3)) == errno(13)  # AF_NETLINK
    assert run(prog, NR["socket"], (17, 2)) == errno(13)  # AF_PACKET
    assert run(prog, NR["socket"], (1, 1)) == errno(13)  # AF_UNIX without the grant
    assert run(seccomp.program("x86_64", unix_sockets=True), NR["socket"], (1, 1)) == ALLOW


def test_terminal_injection_is_refused(prog: bytes) -> None:
    assert run(prog, NR["ioctl"], (0, 0x5401)) == ALLOW  # TCGETS
    assert run(prog, NR["ioctl"], (0, 0x5412)) == errno(1)  # TIOCSTI


def test_aarch64_program_assembles() -> None:
    prog = seccomp.program("aarch64")
    assert run(prog, syscalls.AARCH64["openat"], arch=0xC00000B7) == ALLOW
    assert run(prog, 40, arch=0xC00000B7) == errno(1)  # mount on aarch64
