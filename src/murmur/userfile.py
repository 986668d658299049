"""Reading a file a user handed the runtime: never blocking, never unbounded.

Every file murmur reads on a user's behalf -- manifests, plans, rosters, lock files, task
files, running records -- goes through :func:`read_user_file`. It opens the path with
``O_NONBLOCK`` (so a FIFO with no writer cannot hang the open), checks with ``fstat`` on
the open descriptor that it is a regular file (so ``/dev/zero``, a FIFO, a socket or a
directory -- directly or through a symlink -- is refused without reading a byte), and reads
at most ``limit + 1`` bytes (so a file that grows while being read is still bounded).

Callers turn :class:`UserFileError` into their own coded diagnostic; its ``reason`` is a
phrase that completes "cannot read <path>: …" and never contains Python internals.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import attrs

__all__ = ["UserFileError", "describe_mode", "read_user_file", "read_user_text"]


@attrs.frozen
class UserFileError(Exception):
    """A user's file that cannot be read as a bounded regular file.

    Attributes:
        path (Path): the path as given.
        kind (str): ``missing`` | ``denied`` | ``directory`` | ``not_regular`` |
            ``too_large`` | ``not_utf8`` | ``os``.
        reason (str): a phrase for a diagnostic (``"it is a FIFO, not a regular file"``).
    """

    path: Path
    kind: str
    reason: str

    def __str__(self) -> str:
        return f"cannot read {self.path}: {self.reason}"


def describe_mode(mode: int) -> str:
    """What a non-regular ``st_mode`` is, as a noun phrase (``"a character device"``)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _limit_phrase(limit: int) -> str:
    if limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MiB"
    if limit % 1024 == 0:
        return f"{limit // 1024} KiB"
    return f"{limit} bytes"


def read_user_file(path: Path, *, limit: int) -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes.

    Args:
        path (Path): the file (symlinks are followed; what they lead to is checked).
        limit (int): the most bytes accepted.

    Returns:
        bytes: the whole file.

    Raises:
        UserFileError: missing, permission denied, a directory, not a regular file, larger
            than ``limit``, or any other ``OSError`` (its ``strerror``).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise UserFileError(path, "missing", "no such file") from None
    except PermissionError:
        raise UserFileError(path, "denied", "permission denied") from None
    except IsADirectoryError:
        raise UserFileError(path, "directory", "it is a directory") from None
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO opened for writing
            raise UserFileError(path, "not_regular", "it is not a regular file") from None
        raise UserFileError(path, "os", exc.strerror or type(exc).__name__) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "directory" if stat.S_ISDIR(st.st_mode) else "not_regular"
            what = describe_mode(st.st_mode)
            raise UserFileError(path, kind, f"it is {what}, not a regular file" if what[0] == "a" else what)
        if st.st_size > limit:
            raise UserFileError(path, "too_large", f"it is larger than {_limit_phrase(limit)}")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 16, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise UserFileError(path, "too_large", f"it is larger than {_limit_phrase(limit)}")
        return b"".join(chunks)
    except OSError as exc:
        raise UserFileError(path, "os", exc.strerror or type(exc).__name__) from None
    finally:
        os.close(fd)


def read_user_text(path: Path, *, limit: int) -> str:
    """:func:`read_user_file` decoded as UTF-8.

    Raises:
        UserFileError: as :func:`read_user_file`, or ``not_utf8``.
    """
    data = read_user_file(path, limit=limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserFileError(path, "not_utf8", "it is not UTF-8 text") from None
