"""What a component imports and exports, read from its binary without compiling it.

Only the top-level import and export sections of the component binary format are read
(section ids 10 and 11); every other section is skipped by its length, so a 20 MB component
is inspected in milliseconds. Pure: bytes in, :class:`Interfaces` or :class:`NotAComponent`
out. ``mur doctor`` and the host's version check (:mod:`murmur.components.check`) use it.
Specification: ``spec/components.md`` ("Worlds and versions").
"""

from __future__ import annotations

import attrs

_MAGIC = b"\0asm"
_COMPONENT_VERSION = b"\x0d\x00\x01\x00"
_IMPORT, _EXPORT = 10, 11


class NotAComponent(ValueError):
    """The bytes are not a WebAssembly component (a core module, truncated, or not wasm)."""


@attrs.frozen
class Interfaces:
    """Top-level import and export names, in binary order (``murmur:tool/run@0.1.0``, ...)."""

    imports: tuple[str, ...]
    exports: tuple[str, ...]


class _Reader:
    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data, self.pos = data, pos
        self.end = len(data) if end is None else end

    def byte(self) -> int:
        if self.pos >= self.end:
            raise NotAComponent("truncated component binary")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def u32(self) -> int:
        result = shift = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise NotAComponent("malformed LEB128 integer")

    def name(self) -> str:
        n = self.u32()
        if self.pos + n > self.end:
            raise NotAComponent("truncated name")
        raw = self.data[self.pos:self.pos + n]
        self.pos += n
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise NotAComponent("a name is not UTF-8") from None

    def extern_name(self) -> str:
        kind = self.byte()
        if kind not in (0x00, 0x01):
            raise NotAComponent(f"unknown import/export name form {kind:#x}")
        text = self.name()
        if kind == 0x01:  # a version suffix follows
            suffix = self.name()
            text = f"{text}@{suffix}" if "@" not in text else text
        return text

    def extern_desc(self) -> None:
        kind = self.byte()
        if kind == 0x00:
            self.byte()  # 0x11 core module
            self.u32()
        elif kind in (0x01, 0x04, 0x05):
            self.u32()
        elif kind in (0x02, 0x03):
            if self.byte() == 0x00 or kind == 0x02:
                self.u32()
        else:
            raise NotAComponent(f"unknown extern descriptor {kind:#x}")


def interfaces(data: bytes) -> Interfaces:
    """The component's top-level imports and exports.

    Raises:
        NotAComponent: the bytes are a core module, not wasm, or malformed.
    """
    if data[:4] != _MAGIC:
        raise NotAComponent("not a WebAssembly binary (no \\0asm header)")
    if data[4:8] != _COMPONENT_VERSION:
        raise NotAComponent("a core WebAssembly module, not a component"
                            if data[4:8] == b"\x01\x00\x00\x00" else "an unknown WebAssembly layer")
    r = _Reader(data, 8)
    imports: list[str] = []
    exports: list[str] = []
    while r.pos < r.end:
        section = r.byte()
        size = r.u32()
        start, stop = r.pos, r.pos + size
        if stop > r.end:
            raise NotAComponent("a section runs past the end of the binary")
        if section in (_IMPORT, _EXPORT):
            s = _Reader(data, start, stop)
            for _ in range(s.u32()):
                name = s.extern_name()
                if section == _IMPORT:
                    s.extern_desc()
                    imports.append(name)
                else:
                    if s.byte() == 0x00:  # sortidx: sort (core sorts take two bytes), index
                        s.byte()
                    s.u32()
                    if s.byte() == 0x01:
                        s.extern_desc()
                    exports.append(name)
        r.pos = stop
    return Interfaces(tuple(imports), tuple(exports))
