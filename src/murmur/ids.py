"""Identifiers: ``<prefix>_`` + 32 lowercase hex digits of a UUIDv7 (time-ordered).

Prefixes in use: ``ses`` session, ``frm`` formation, ``dlg`` delegation, ``tsk`` task,
``mcl`` member call, ``evt`` trace event, ``ctx`` context, ``msg`` message (``spec/trace.md``
for the trace's ids).
"""

from __future__ import annotations

import os
import re
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_seq = 0

ID_RE = re.compile(r"^(?P<prefix>[a-z]+)_(?P<hex>[0-9a-f]{32})$")


def uuid7_hex(now_ms: int | None = None) -> str:
    """A UUIDv7 as 32 lowercase hex digits; monotonic within this process.

    Args:
        now_ms (int | None): Unix time in milliseconds (default: the wall clock).
    """
    global _last_ms, _seq
    with _lock:
        ms = int(time.time() * 1000) if now_ms is None else now_ms
        if ms <= _last_ms:
            ms = _last_ms
            _seq += 1
        else:
            _seq = int.from_bytes(os.urandom(2), "big") & 0x7FF
        _last_ms = ms
        rand_a = _seq & 0xFFF
        rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= rand_a << 64
    value |= 0b10 << 62
    value |= rand_b
    return f"{value:032x}"


def new_id(prefix: str) -> str:
    """A fresh ``<prefix>_<32 hex>`` identifier."""
    return f"{prefix}_{uuid7_hex()}"


def id_timestamp_ms(ident: str) -> int | None:
    """The Unix-millisecond timestamp inside a UUIDv7-based id, or None if not one."""
    m = ID_RE.match(ident)
    if m is None:
        return None
    return int(m.group("hex")[:12], 16)


def is_id(ident: str, prefix: str) -> bool:
    """Whether ``ident`` is ``<prefix>_`` + 32 lowercase hex digits."""
    m = ID_RE.match(ident)
    return m is not None and m.group("prefix") == prefix
