"""What a granted binary needs in order to start: its ELF interpreter and library closure.

Specification: spec/containment.md, "scoped". :func:`start_closure` reads a binary's headers
(no ``ldd``, nothing executed): a ``#!`` script names an interpreter (followed too, one level
per ``#!``; ``/usr/bin/env NAME`` resolves ``NAME`` on the ``PATH`` given); an ELF file names
``PT_INTERP`` (the dynamic loader) and ``DT_NEEDED`` libraries, found on ``DT_RUNPATH`` /
``DT_RPATH`` (``$ORIGIN`` expanded), the loader's configured directories
(``/etc/ld.so.conf`` and its includes) and the default directories, transitively.

Returns real paths (symlinks resolved): Landlock grants attach to the file itself. Pure apart
from reading the files named.
"""

from __future__ import annotations

import glob
import os
import shutil
import struct
from typing import BinaryIO

import attrs

__all__ = ["Closure", "library_dirs", "start_closure"]

_PT_INTERP = 3
_PT_DYNAMIC = 2
_PT_LOAD = 1
_DT_NEEDED, _DT_STRTAB, _DT_STRSZ, _DT_RPATH, _DT_RUNPATH = 1, 5, 10, 15, 29
_DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib", "/usr/lib")


@attrs.frozen
class Closure:
    """The files one granted binary needs.

    Attributes:
        executables (tuple[str, ...]): real paths that are exec'd: the binary, a ``#!``
            interpreter, the ELF interpreter (the kernel opens it for exec).
        libraries (tuple[str, ...]): real paths mapped by the loader (read only).
    """

    executables: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()


def _conf_dirs(path: str, seen: set[str]) -> list[str]:
    if path in seen:
        return []
    seen.add(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    out: list[str] = []
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include"):
            pattern = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
            if not pattern.startswith("/"):
                pattern = os.path.join(os.path.dirname(path), pattern)
            for inc in sorted(glob.glob(pattern)):
                out += _conf_dirs(inc, seen)
        elif line.startswith("/"):
            out.append(line)
    return out


def library_dirs() -> tuple[str, ...]:
    """The loader's search directories: ``/etc/ld.so.conf`` (with includes), then the defaults."""
    dirs = _conf_dirs("/etc/ld.so.conf", set()) + list(_DEFAULT_DIRS)
    return tuple(dict.fromkeys(d for d in dirs if os.path.isdir(d)))


def _read_elf(path: str) -> tuple[str | None, list[str], list[str]] | None:
    """(interpreter, needed, runpath dirs) of an ELF file, or None when it is not one.

    Reads only the headers, the dynamic segment and the string table (by offset)."""
    try:
        with open(path, "rb") as f:
            return _parse(f, path)
    except (OSError, struct.error, ValueError):
        return None


def _parse(f: BinaryIO, path: str) -> tuple[str | None, list[str], list[str]] | None:
    def at(offset: int, size: int) -> bytes:
        f.seek(offset)
        return f.read(size)

    head = at(0, 64)
    if head[:4] != b"\x7fELF" or len(head) < 52:
        return None
    is64, little = head[4] == 2, head[5] == 1
    e = "<" if little else ">"
    if is64:
        phoff, = struct.unpack_from(e + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(e + "HH", head, 54)
    else:
        phoff, = struct.unpack_from(e + "I", head, 28)
        phentsize, phnum = struct.unpack_from(e + "HH", head, 42)
    table = at(phoff, phentsize * phnum)
    interp: str | None = None
    dyn: tuple[int, int] | None = None
    loads: list[tuple[int, int, int]] = []  # vaddr, offset, filesz
    for i in range(phnum):
        off = i * phentsize
        if off + phentsize > len(table):
            break
        if is64:
            p_type, _flags, p_offset, p_vaddr, _pa, p_filesz = struct.unpack_from(e + "IIQQQQ", table, off)
        else:
            p_type, p_offset, p_vaddr, _pa, p_filesz = struct.unpack_from(e + "IIIII", table, off)
        if p_type == _PT_INTERP:
            interp = at(p_offset, min(p_filesz, 4096)).split(b"\0", 1)[0].decode(errors="replace")
        elif p_type == _PT_DYNAMIC:
            dyn = (p_offset, p_filesz)
        elif p_type == _PT_LOAD:
            loads.append((p_vaddr, p_offset, p_filesz))
    if dyn is None:
        return interp, [], []
    raw = at(dyn[0], min(dyn[1], 1 << 16))
    entries: list[tuple[int, int]] = []
    step, fmt = (16, e + "qQ") if is64 else (8, e + "iI")
    for off in range(0, len(raw) - step + 1, step):
        tag, val = struct.unpack_from(fmt, raw, off)
        if tag == 0:
            break
        entries.append((tag, val))
    strtab = next((v for t, v in entries if t == _DT_STRTAB), None)
    strsz = next((v for t, v in entries if t == _DT_STRSZ), 1 << 16)
    if strtab is None:
        return interp, [], []
    base = next((o + (strtab - va) for va, o, sz in loads if va <= strtab < va + sz), None)
    if base is None:
        return interp, [], []
    strings = at(base, min(strsz, 1 << 20))

    def text(where: int) -> str:
        end = strings.find(b"\0", where)
        return strings[where:end].decode(errors="replace") if end >= 0 else ""

    needed = [text(v) for t, v in entries if t == _DT_NEEDED]
    origin = os.path.dirname(path)
    runpath: list[str] = []
    for t, v in entries:
        if t in (_DT_RUNPATH, _DT_RPATH):
            for d in text(v).split(":"):
                if d:
                    runpath.append(d.replace("$ORIGIN", origin).replace("${ORIGIN}", origin))
    return interp, needed, runpath


def _shebang(path: str) -> list[str] | None:
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode(errors="replace").strip()
    return line.split() or None


def start_closure(path: str, search_path: str = "", *, dirs: tuple[str, ...] | None = None) -> Closure:
    """The files ``path`` needs to start (see the module docstring).

    Args:
        path (str): the resolved binary (absolute).
        search_path (str): the ``PATH`` an ``env NAME`` shebang resolves ``NAME`` on.
        dirs (tuple[str, ...] | None): library directories (default :func:`library_dirs`).
    """
    search = library_dirs() if dirs is None else dirs
    execs: list[str] = []
    libs: dict[str, None] = {}
    todo = [path]
    hops = 0
    while todo and hops < 8:
        hops += 1
        current = os.path.realpath(todo.pop())
        execs.append(current)
        words = _shebang(current)
        if words is not None:
            interp = words[0]
            if os.path.basename(interp) == "env" and len(words) > 1:
                found = shutil.which(words[1], path=search_path or None)
                if found:
                    todo.append(found)
            todo.append(interp)
            continue
        elf = _read_elf(current)
        if elf is None:
            continue
        interp_path, needed, runpath = elf
        if interp_path:
            execs.append(os.path.realpath(interp_path))
        _libraries(needed, runpath, search, libs)
    return Closure(tuple(dict.fromkeys(execs)), tuple(lib for lib in libs if lib not in execs))


def _libraries(needed: list[str], runpath: list[str], search: tuple[str, ...], libs: dict[str, None]) -> None:
    queue = [(n, runpath) for n in needed]
    seen: set[str] = set()
    while queue:
        name, rp = queue.pop()
        if name in seen:
            continue
        seen.add(name)
        found = None
        for d in ([os.path.dirname(name)] if "/" in name else [*rp, *search]):
            candidate = name if "/" in name else os.path.join(d, name)
            if os.path.exists(candidate):
                found = os.path.realpath(candidate)
                break
        if found is None or found in libs:
            continue
        libs[found] = None
        elf = _read_elf(found)
        if elf is not None:
            _, more, more_rp = elf
            queue += [(m, more_rp) for m in more]
