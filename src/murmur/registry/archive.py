"""``.mur.zip`` archives: deterministic packing and guarded unpacking.

Packing (:func:`pack`) gives the same bytes for the same sources on any machine: entries
sorted by name, every timestamp 1980-01-01 00:00:00, every mode ``0644``, no directory
entries, no extra fields, stored (not compressed, so no zlib version can change the
bytes). A content hash of the archive therefore names exactly what was judged.

Unpacking (:func:`check_entries`, :func:`extract`) refuses, each with its own code:
unsafe names (``..``, absolute, drive letters, backslash roots, NUL, empty or ``.`` parts:
``E-BLD-003``), duplicate names, including ones differing only in case or a file that is
also a directory (``E-BLD-004``), symlinks and other special entries, and symlinks already
in the destination (``E-BLD-005``), size and ratio bombs (``E-BLD-006``), unreadable or
encrypted archives (``E-BLD-007``), and an archive without ``murmur.yaml`` at its root
(``E-BLD-008``). Specification: ``spec/artifacts.md``.
"""

from __future__ import annotations

import io
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path

from murmur.diagnostics import error
from murmur.errors import DiagnosticError

MANIFEST_ENTRY = "murmur.yaml"
ARCHIVE_SUFFIX = ".mur.zip"
FIXED_DATE = (1980, 1, 1, 0, 0, 0)
FILE_MODE = 0o644

MAX_ENTRIES = 10_000
"""Most entries an archive may hold."""
MAX_TOTAL_BYTES = 256 * 1024 * 1024
"""Most bytes an archive may expand to (sum of its entries' sizes)."""
MAX_ARCHIVE_BYTES = 256 * 1024 * 1024
"""Largest archive file accepted for install."""
MAX_RATIO = 200
"""Largest size/compressed-size ratio accepted for an entry over :data:`RATIO_FLOOR` bytes."""
RATIO_FLOOR = 1024 * 1024

EXCLUDED_DIRS = frozenset({".murmur", "__pycache__", ".git", ".hg", ".svn"})
"""Directory names never packed, at any depth."""
EXCLUDED_ROOT_DIRS = frozenset({"workdir"})
"""Directory names never packed at the capsule root (session workdirs)."""
EXCLUDED_FILES = frozenset({"murmur.lock", ".env", ".DS_Store"})
"""File names never packed (the lock belongs to the project; ``.env`` holds secrets)."""
EXCLUDED_SUFFIXES = (ARCHIVE_SUFFIX, ".pyc")

_DRIVE_RE = re.compile(r"^[A-Za-z]:")


def _refuse(code: str, message: str, where: str, hint: str | None = None) -> DiagnosticError:
    return DiagnosticError(error(code, message, path=where, hint=hint))


def pack(entries: Iterable[tuple[str, bytes]]) -> bytes:
    """Deterministic zip bytes for ``(name, content)`` pairs (sorted here by name)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for name, data in sorted(entries, key=lambda t: t[0].encode("utf-8")):
            info = zipfile.ZipInfo(name, date_time=FIXED_DATE)
            info.compress_type = zipfile.ZIP_STORED
            info.create_system = 3  # unix, so the mode bits below are honoured
            info.external_attr = (stat.S_IFREG | FILE_MODE) << 16
            zf.writestr(info, data)
    return buf.getvalue()


def name_problem(name: str) -> str | None:
    """Why an archive entry name is unsafe, or None (directory entries end in ``/``)."""
    if "\x00" in name:
        return "holds a NUL character"
    if not name:
        return "is empty"
    if name.startswith(("/", "\\")):
        return "is an absolute path"
    if _DRIVE_RE.match(name):
        return "starts with a drive letter"
    body = name[:-1] if name.endswith("/") else name
    for part in re.split(r"[/\\]", body):
        if part == "..":
            return "climbs out with `..`"
        if part in ("", "."):
            return "has an empty or `.` path part"
    if "\\" in name:
        return "holds a backslash"
    return None


def _is_dir(info: zipfile.ZipInfo) -> bool:
    return info.filename.endswith("/")


def check_entries(zf: zipfile.ZipFile, *, where: str) -> list[zipfile.ZipInfo]:
    """Validate every entry of an open archive; return the file entries to extract.

    Args:
        zf (zipfile.ZipFile): the archive.
        where (str): the archive's name for diagnostics.

    Raises:
        DiagnosticError: E-BLD-003/004/005/006/007/008 as described in the module doc.
    """
    infos = zf.infolist()
    if len(infos) > MAX_ENTRIES:
        raise _refuse("E-BLD-006", f"the archive holds {len(infos)} entries (most: {MAX_ENTRIES})",
                      where)
    seen: dict[str, str] = {}
    files: list[zipfile.ZipInfo] = []
    dirs: set[str] = set()
    total = 0
    for info in infos:
        name = info.filename
        problem = name_problem(info.orig_filename)  # `filename` is cut at a NUL; the original is not
        if problem is not None:
            raise _refuse("E-BLD-003", f"archive entry {info.orig_filename!r} {problem}", where,
                          "rebuild the archive with `mur build`")
        mode = info.external_attr >> 16
        kind = stat.S_IFMT(mode)
        if kind == stat.S_IFLNK:
            raise _refuse("E-BLD-005", f"archive entry `{name}` is a symlink", where,
                          "pack the file itself, not a link to it")
        if info.create_system == 3 and kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            raise _refuse("E-BLD-005", f"archive entry `{name}` is not a regular file", where)
        if info.flag_bits & 0x1:
            raise _refuse("E-BLD-007", f"archive entry `{name}` is encrypted", where)
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise _refuse("E-BLD-007", f"archive entry `{name}` uses an unsupported compression",
                          where, "rebuild the archive with `mur build`")
        key = name.rstrip("/")
        folded = key.casefold()
        if folded in seen:
            raise _refuse("E-BLD-004", f"archive entry `{name}` is duplicated (as `{seen[folded]}`)",
                          where, "an archive holds each name once")
        seen[folded] = name
        if _is_dir(info):
            dirs.add(folded)
            continue
        total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise _refuse("E-BLD-006", f"the archive expands past {MAX_TOTAL_BYTES} bytes", where)
        if info.file_size > RATIO_FLOOR and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise _refuse("E-BLD-006",
                          f"archive entry `{name}` compresses {info.file_size // max(info.compress_size, 1)}:1",
                          where, "a capsule archive does not compress this well; it may be a zip bomb")
        files.append(info)
    file_names = {i.filename.casefold() for i in files}
    for info in files:
        parts = info.filename.casefold().split("/")
        for n in range(1, len(parts)):
            parent = "/".join(parts[:n])
            if parent in file_names:
                raise _refuse("E-BLD-004", f"archive entry `{info.filename}` lies under a file of the same name",
                              where)
    if MANIFEST_ENTRY not in {i.filename for i in files}:
        raise _refuse("E-BLD-008", "the archive holds no murmur.yaml at its root", where,
                      "build the archive from a capsule directory with `mur build`")
    return files


def open_archive(data: bytes, *, where: str) -> zipfile.ZipFile:
    """Open archive bytes, refusing what is not a readable zip (``E-BLD-007``)."""
    try:
        return zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError) as exc:
        raise _refuse("E-BLD-007", f"not a readable .mur.zip archive ({exc})", where,
                      "pass a file made by `mur build`") from None


def read_member(zf: zipfile.ZipFile, name: str, *, where: str, limit: int) -> bytes:
    """One member's bytes, at most ``limit`` (``E-BLD-006`` past it, ``E-BLD-007`` if corrupt)."""
    try:
        with zf.open(name) as fh:
            data = fh.read(limit + 1)
    except (zipfile.BadZipFile, ValueError, EOFError, OSError, NotImplementedError, zlib.error) as exc:
        raise _refuse("E-BLD-007", f"archive entry `{name}` cannot be read ({exc})", where) from None
    if len(data) > limit:
        raise _refuse("E-BLD-006", f"archive entry `{name}` is larger than {limit} bytes", where)
    return data


def refuse_symlinks(base: Path, target: Path, *, where: str) -> None:
    """Refuse (``E-BLD-005``) when an existing part of ``target`` below ``base`` is a symlink.

    ``base`` itself is not checked (a user's home or project may live behind a link).
    """
    probe = base
    for part in target.relative_to(base).parts:
        probe = probe / part
        if probe.is_symlink():
            raise _refuse("E-BLD-005", f"the destination holds a symlink: {probe}", where,
                          "remove the link; murmur writes only real directories in a store")
        if not probe.exists():
            return


def extract(zf: zipfile.ZipFile, files: list[zipfile.ZipInfo], dest: Path, *, where: str) -> None:
    """Write checked entries under ``dest`` (a fresh empty directory murmur created).

    Every file is created exclusively (``O_EXCL | O_NOFOLLOW``) with mode 0644, and its
    resolved path must stay under ``dest``; bytes beyond an entry's declared size are a bomb.
    """
    root = dest.resolve()
    for info in files:
        target = (dest / info.filename).resolve()
        if root not in target.parents:
            raise _refuse("E-BLD-003", f"archive entry `{info.filename}` would land outside the store",
                          where)
        refuse_symlinks(dest, dest / info.filename, where=where)
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(target, flags, FILE_MODE)
        written = 0
        try:
            with os.fdopen(fd, "wb") as out, zf.open(info) as src:
                while chunk := src.read(1 << 16):
                    written += len(chunk)
                    if written > info.file_size:
                        raise _refuse("E-BLD-006", f"archive entry `{info.filename}` is larger than it declares",
                                      where)
                    out.write(chunk)
        except (zipfile.BadZipFile, EOFError, NotImplementedError, zlib.error) as exc:
            raise _refuse("E-BLD-007", f"archive entry `{info.filename}` is corrupt ({exc})",
                          where) from None
