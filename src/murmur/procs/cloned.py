"""The warm starter's ``exec``: clone a command straight into its unit, then ``execve``.

Specification: ``spec/architecture.md`` "Where a process starts" and ``spec/delegation.md``
"The warm start path". A write to a fresh unit's ``cgroup.procs`` (what the exec path's
``/bin/sh`` trampoline does) waits for an RCU grace period on a cgroup v2 mount without
``favordynmods`` (14-17 ms measured, ``benchmarks/links.py`` "placement");
``clone3(CLONE_INTO_CGROUP)`` places the new process in its unit as it is made. The session
cannot make that call itself: it runs threads, and a raw ``clone`` skips glibc's fork
handling. The starter runs no thread, so it can (:func:`clone_exec`, called only by
:mod:`murmur.starter.server` for an ``exec`` request, :class:`murmur.starter.protocol.ExecRequest`).

The child (``CLONE_VFORK``: the starter waits until it has exec'd or failed) is a copy of the
starter's one thread; it runs, in this order: the passed descriptors moved to their numbers
and every other one closed; the signal dispositions ``subprocess.Popen`` restores (SIGPIPE,
SIGXFSZ) and the starter's ignored SIGINT, SIGTERM, SIGHUP back to the default, the signal
mask emptied; ``setsid`` or ``setpgid``; ``chdir``; the confinement rebuilt from its wire
object (as the warm path's forked child rebuilds it: its descriptors are the child's own, and
close on exec; its module was imported by the starter before the clone) and its
``child_setup``; ``execve``. A failure writes ``STAGE:ERRNO`` on a close-on-exec pipe and
exits 127; the starter reaps that child and answers the error (:class:`ExecFailed`).

Errors: :class:`ExecFailed` (an ``OSError``) — ``stage`` ``clone`` (the kernel refused the
clone: ``ENOSYS``, ``EPERM``, ``EINVAL``…) or ``place`` (the child could not set its
descriptors, signals or group up): the owner starts the command another way; or
``chdir``/``setup``/``exec`` (the command failed to start: the owner raises it as
``subprocess.Popen`` would).
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
from collections.abc import Callable
from typing import Any, NoReturn, Protocol

from murmur.procs.confinement import Loader, loader_for

__all__ = ["ExecFailed", "Spec", "clone_exec"]

_SYS_CLONE3 = 435  # the generic syscall table: x86_64 and aarch64 alike
CLONE_VFORK = 0x4000
CLONE_PIDFD = 0x1000
CLONE_INTO_CGROUP = 0x200000000
_FD_PARK = 256  # passed descriptors are parked here before they are moved into place
_MAXFD = max(os.sysconf("SC_OPEN_MAX"), 1024)
_RESET = (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class _CloneArgs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "flags", "pidfd", "child_tid", "parent_tid", "exit_signal", "stack", "stack_size", "tls",
        "set_tid", "set_tid_size", "cgroup")]


class Spec(Protocol):
    """What :func:`clone_exec` starts (:class:`murmur.starter.protocol.ExecRequest` is one)."""

    @property
    def argv(self) -> tuple[str, ...]: ...
    @property
    def executable(self) -> str: ...
    @property
    def env(self) -> dict[str, str]: ...
    @property
    def cwd(self) -> str: ...
    @property
    def fds(self) -> tuple[int, ...]: ...
    @property
    def session(self) -> bool: ...
    @property
    def pgid(self) -> int | None: ...
    @property
    def cgroup(self) -> str: ...
    @property
    def confinement(self) -> dict[str, Any] | None: ...


class ExecFailed(OSError):
    """An ``exec`` request failed; ``stage`` says where (see the module text).

    Attributes:
        stage (str): ``clone``, ``place``, ``chdir``, ``setup`` or ``exec``.
    """

    def __init__(self, code: int, stage: str, filename: str | None = None) -> None:
        super().__init__(code, os.strerror(code), filename)
        self.stage = stage


_libc: ctypes.PyDLL | None = None


def _syscall() -> Callable[..., int]:
    global _libc
    if _libc is None:
        # PyDLL: the GIL is kept across the call, so the child returns holding it as its
        # parent does (no thread runs in the starter to take it meanwhile).
        _libc = ctypes.PyDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    return _libc.syscall


def clone_exec(req: Spec, received: list[int]) -> tuple[int, int]:
    """Start ``req`` in its unit; ``(pid, pidfd)`` once it has exec'd.

    Must be called with no other thread running (the caller checks).

    Args:
        req: the request (its ``cgroup`` the unit's directory; ``fds[i]`` each < 256).
        received: the descriptors that came with it (``received[i]`` becomes ``req.fds[i]``).

    Raises:
        ExecFailed: stage ``clone`` (nothing ran) or the child's stage and errno (it has been
            reaped); ``filename`` is ``cwd`` for ``chdir``, the executable for ``exec``.
    """
    if len(received) != len(req.fds):
        raise ExecFailed(errno.EINVAL, "clone")
    try:  # its module imported here, once; the child rebuilds it (its descriptors are the child's)
        loader = loader_for(req.confinement) if req.confinement is not None else None
    except ValueError:
        raise ExecFailed(errno.EINVAL, "clone") from None
    try:
        cgfd = os.open(req.cgroup, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ExecFailed(exc.errno or errno.EINVAL, "clone") from None
    r, w = os.pipe()  # close-on-exec, both ends
    pidfd = ctypes.c_int(-1)
    args = _CloneArgs(flags=CLONE_VFORK | CLONE_PIDFD | CLONE_INTO_CGROUP, pidfd=ctypes.addressof(pidfd),
                      exit_signal=signal.SIGCHLD, cgroup=cgfd)
    try:
        pid = _syscall()(_SYS_CLONE3, ctypes.byref(args), ctypes.sizeof(args))
        if pid == 0:
            _child(req, received, w, loader)
        code = ctypes.get_errno()
    finally:
        os.close(cgfd)
        os.close(w)
    try:
        if pid < 0:
            raise ExecFailed(code or errno.EINVAL, "clone")
        report = _read_all(r)
    finally:
        os.close(r)
    if not report:
        return pid, pidfd.value
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    os.close(pidfd.value)
    stage, _, num = report.decode("ascii", "replace").partition(":")
    code = int(num) if num.isdigit() else errno.EIO
    filename = req.cwd if stage == "chdir" else req.executable if stage == "exec" else None
    raise ExecFailed(code, stage if stage in ("chdir", "setup", "exec") else "place", filename)


def _read_all(fd: int) -> bytes:
    got = b""
    while True:
        try:
            chunk = os.read(fd, 64)
        except InterruptedError:
            continue
        if not chunk:
            return got
        got += chunk


def _child(req: Spec, received: list[int], errw: int, loader: Loader | None) -> NoReturn:
    """The cloned child (the starter's only thread, copied): then ``execve`` (never returns)."""
    stage = "place"  # descriptors, signals, group: a failure here is the starter's, not the command's
    err = errw
    try:
        err = os.dup2(errw, _FD_PARK + len(received), inheritable=False)
        parked = [os.dup2(fd, _FD_PARK + i, inheritable=False) for i, fd in enumerate(received)]
        for src, dst in zip(parked, req.fds, strict=True):
            os.dup2(src, dst, inheritable=True)
        low = 0
        for keep in sorted({*req.fds, err}):
            if keep > low:
                os.closerange(low, keep)
            low = keep + 1
        os.closerange(low, _MAXFD)
        for sig in _RESET:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])
        if req.session:
            os.setsid()
        elif req.pgid is not None:
            os.setpgid(0, req.pgid)
        stage = "chdir"
        os.chdir(req.cwd)
        stage = "setup"
        if loader is not None and req.confinement is not None:
            setup = loader(req.confinement).child_setup()
            if setup is not None:
                setup()
        stage = "exec"
        os.execve(req.executable, list(req.argv), req.env)
    except BaseException as exc:
        code = exc.errno if isinstance(exc, OSError) and exc.errno else errno.EPERM
        try:
            os.write(err, f"{stage}:{code}".encode())
        except BaseException:
            pass
    os._exit(127)
