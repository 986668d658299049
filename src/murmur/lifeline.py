"""Lifelines: a pipe whose EOF means "the process that started you is gone".

The creator keeps the only write end and never writes; the started process holds the read
end, named by a decimal fd in an environment variable (``MURMUR_FORMATION_LIFELINE``,
``MURMUR_SPAWNER_LIFELINE``). EOF (a zero-byte read) means the creator closed it or died by any
means, SIGKILL and the OOM killer included. A read error other than EINTR counts as EOF.

:func:`claim_lifeline` validates such a value (blank = absent) and marks the fd
close-on-exec so no grandchild inherits it; a second claim of the same fd is refused
("already read"). :func:`wait_for_eof` waits for the EOF. Specification: ``spec/session.md``,
"Wind-down"; ``spec/formation.md``, "What each member is started with".
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

import trio

from murmur.diagnostics import error
from murmur.errors import DiagnosticError

MAX_FD = 1 << 20  # larger values are refused as "too large"
_claimed: set[int] = set()


def _refuse(code: str, var: str, reason: str, hint: str | None) -> DiagnosticError:
    return DiagnosticError(error(code, f"{var} is not a usable lifeline: {reason}", hint=hint))


def lifeline_problem(value: str) -> str | None:
    """Why ``value`` does not name a lifeline read end this process may claim, or None.

    Args:
        value (str): the environment value (already known to be non-blank).

    Returns:
        str | None: one of the contract's reasons (not decimal; too large; a standard
        stream; not open; a character device / regular file / directory / socket / not a
        pipe; open for writing; already read), or None when it is usable.
    """
    text = value.strip()
    if not text.isdigit() or not text.isascii():
        return "not a decimal file descriptor number"
    if len(text) > 7 or int(text) > MAX_FD:
        return "the number is too large"
    fd = int(text)
    if fd <= 2:
        return "it names a standard stream (0-2)"
    if fd in _claimed:
        return "it was already read"
    try:
        st = os.fstat(fd)
    except OSError:
        return "the file descriptor is not open"
    mode = st.st_mode
    for test, what in (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return f"it is {what}, not a pipe"
    if not stat.S_ISFIFO(mode):
        return "it is not a pipe"
    try:
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError:
        return "the file descriptor is not open"
    if flags & os.O_ACCMODE != os.O_RDONLY:
        return "it is open for writing"
    return None


def claim_lifeline(value: str | None, *, var: str, code: str, hint: str | None = None) -> int | None:
    """Validate and claim a lifeline named by an environment value.

    Args:
        value (str | None): the variable's value; None or blank means "no lifeline".
        var (str): the variable's name (for the message), e.g. ``MURMUR_FORMATION_LIFELINE``.
        code (str): the diagnostic code (``E-RUN-046`` formation, ``E-RUN-020`` spawner).
        hint (str | None): the diagnostic's hint.

    Returns:
        int | None: the claimed fd (now close-on-exec), or None when absent.

    Raises:
        DiagnosticError: ``code`` naming the reason (never the process environment).
    """
    if value is None or not value.strip():
        return None
    problem = lifeline_problem(value)
    if problem is not None:
        raise _refuse(code, var, problem, hint)
    fd = int(value.strip())
    os.set_inheritable(fd, False)
    _claimed.add(fd)
    return fd


async def wait_for_eof(fd: int) -> None:
    """Return once the pipe ``fd`` reads end of file (or fails to read); closes ``fd``.

    Bytes written to a lifeline (a creator must never write) are read and ignored.
    """
    stream = trio.lowlevel.FdStream(fd)
    try:
        while True:
            try:
                data = await stream.receive_some(4096)
            except trio.BrokenResourceError as exc:
                cause = exc.__cause__
                if isinstance(cause, OSError) and cause.errno == errno.EINTR:
                    continue
                return
            except trio.ClosedResourceError:
                return
            if not data:
                return
    finally:
        with trio.CancelScope(shield=True):
            await stream.aclose()

