"""Bounded, non-blocking reads of users' files (issue 16): no hang, no unbounded read."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from murmur.userfile import UserFileError, read_user_file, read_user_text


def refused(path: Path, limit: int = 1 << 20) -> UserFileError:
    with pytest.raises(UserFileError) as info:
        read_user_file(path, limit=limit)
    return info.value


def test_regular_file(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    assert read_user_file(f, limit=3) == b"abc"
    assert read_user_text(f, limit=3) == "abc"


def test_symlink_to_dev_zero_is_refused_unread(tmp_path: Path) -> None:
    link = tmp_path / "roster.yaml"
    link.symlink_to("/dev/zero")
    err = refused(link)
    assert (err.kind, err.reason) == ("not_regular", "it is a character device, not a regular file")
    assert str(err) == f"cannot read {link}: it is a character device, not a regular file"


def test_fifo_without_writer_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    err = refused(fifo)
    assert (err.kind, err.reason) == ("not_regular", "it is a FIFO, not a regular file")


def test_socket_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(path))
        assert refused(path).kind == "not_regular"


def test_directory_missing_large_and_not_utf8(tmp_path: Path) -> None:
    assert refused(tmp_path).kind == "directory"
    assert refused(tmp_path / "nope").kind == "missing"
    big = tmp_path / "big"
    big.write_bytes(b"x" * 1025)
    err = refused(big, limit=1024)
    assert (err.kind, err.reason) == ("too_large", "it is larger than 1 KiB")
    assert read_user_file(big, limit=1025) == b"x" * 1025
    bad = tmp_path / "bad"
    bad.write_bytes(b"\xff")
    with pytest.raises(UserFileError, match="not UTF-8"):
        read_user_text(bad, limit=10)
