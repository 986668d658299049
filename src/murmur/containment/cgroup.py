"""A cgroup v2 directory used as a containment unit: make, join, kill, wait empty, remove.

Specification: ``spec/session.md`` "Containment". A unit is a directory beneath the cgroup of
its owner. A process joins it *before* ``exec`` (:func:`join_prefix`: a two-line ``/bin/sh``
trampoline writes its own pid to ``cgroup.procs`` and then execs the real command), so
everything it ever forks is inside. ``cgroup.kill`` (Linux 5.14+) kills every process in the
unit and its descendants at once; on older kernels each listed process is sent ``SIGKILL``
until the unit is empty. An empty unit is removed bottom-up.

Errors: creating a unit raises ``OSError`` (the caller falls back or refuses); every other
operation treats a unit that is already gone as empty and never raises for it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import signal
from pathlib import Path

import trio

_SH = "/bin/sh"
_JOIN = 'echo $$ > "$0/cgroup.procs" || { echo "murmur: could not join containment unit $0" >&2; exit 125; }; exec "$@"'
_RECHECK = 1.0
"""Seconds between reads of ``cgroup.events`` while waiting on its notification."""
_POLL = 0.02  # seconds between cgroup.events reads when inotify is unavailable


def make_unit(path: Path) -> Path:
    """Create the unit directory ``path`` (its parent must exist); an existing one is reused.

    Raises:
        OSError: it could not be created (permission, read-only mount, depth limit).
    """
    try:
        os.mkdir(path)
    except FileExistsError:
        pass
    return path


def join_prefix(path: Path, *, keep_pwd: bool = False) -> list[str]:
    """The argv prefix that makes a command join unit ``path`` before it runs.

    ``/bin/sh`` exports ``PWD``; unless ``keep_pwd`` (the command's environment has its own
    ``PWD``) it is unset again, so the command gets exactly the environment it was given.

    ``[*join_prefix(unit), "/usr/bin/sleep", "5"]`` runs ``sleep`` as the same process that
    joined (``exec``), so its pid is the command's pid. If joining fails the command never
    starts: status 125 with one ``murmur:`` line on stderr.
    """
    return [_SH, "-c", _JOIN if keep_pwd else "unset PWD; " + _JOIN, str(path)]


def procs(path: Path) -> list[int]:
    """Every pid in the unit and its sub-units (empty when the unit is gone)."""
    out: list[int] = []
    for root, _dirs, _files in os.walk(path):
        try:
            text = Path(root, "cgroup.procs").read_text(encoding="ascii")
        except OSError:
            continue
        out.extend(int(x) for x in text.split() if x.isdigit())
    return out


def populated(path: Path) -> bool:
    """Whether any live process is in the unit or beneath it (False when it is gone)."""
    try:
        text = (path / "cgroup.events").read_text(encoding="ascii")
    except OSError:
        return False
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "populated":
            return value.strip() == "1"
    return bool(procs(path))


def kill(path: Path) -> None:
    """SIGKILL everything in the unit and beneath it (synchronous; never raises)."""
    try:
        fd = os.open(path / "cgroup.kill", os.O_WRONLY)
    except FileNotFoundError:
        if path.exists():
            _kill_listed(path)
        return
    except OSError:
        _kill_listed(path)
        return
    try:
        os.write(fd, b"1")
    except OSError:
        _kill_listed(path)
    finally:
        os.close(fd)


def _kill_listed(path: Path) -> None:
    for _ in range(50):  # a fork bomb may add processes while we kill: bounded retries
        pids = procs(path)
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def remove(path: Path) -> bool:
    """Remove the unit and its sub-units, deepest first; True when nothing is left of it.

    A unit that still holds processes stays (``EBUSY``); call :func:`kill` and wait first.
    """
    if not path.exists():
        return True
    ok = True
    for root, dirs, _files in os.walk(path, topdown=False):
        for d in dirs:
            ok = _rmdir(Path(root, d)) and ok
    return _rmdir(path) and ok


def _rmdir(path: Path) -> bool:
    try:
        os.rmdir(path)
    except FileNotFoundError:
        return True
    except OSError as exc:
        return exc.errno == errno.ENOENT
    return True


# -- waiting for a unit to empty --------------------------------------------------------------

_IN_MODIFY = 0x00000002
_libc: ctypes.CDLL | None = None


def _inotify_fd(path: Path) -> int | None:
    """A non-blocking inotify fd watching ``path/cgroup.events`` for changes, or None."""
    global _libc
    try:
        if _libc is None:
            _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fd = int(_libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC))
    except (OSError, AttributeError):
        return None
    if fd < 0:
        return None
    wd = int(_libc.inotify_add_watch(fd, str(path / "cgroup.events").encode(), _IN_MODIFY))
    if wd < 0:
        os.close(fd)
        return None
    return fd


async def wait_empty(path: Path) -> None:
    """Return once the unit holds no live process (or is gone). Never times out by itself.

    Waits on an inotify event on ``cgroup.events`` (the kernel notifies every change of
    ``populated``); without inotify it reads the file every 20 ms. Bound it with a cancel scope.
    """
    fd = _inotify_fd(path)
    try:
        while populated(path):
            if fd is None:
                await trio.sleep(_POLL)
                continue
            # The file is read again at least every second: kernfs delivers the change
            # notification from a work queue, and a unit removed and made again under the
            # same name drops the watch.
            with trio.move_on_after(_RECHECK):
                await trio.lowlevel.wait_readable(fd)
            try:
                os.read(fd, 4096)
            except BlockingIOError:
                pass
    finally:
        if fd is not None:
            os.close(fd)
