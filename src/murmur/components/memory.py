"""Linear memories the engine asks the host for, so that growth past ``memory_bytes`` is seen.

wasmtime-py's store limiter (``Store.set_limits(memory_size=...)``) refuses growth silently:
``memory.grow`` returns -1 and the guest traps later for its own reasons, so the trap could not
be told apart from any other crash. Upstream's limiter records the refusal and names the limit.
Here the engine's memory creator (wasmtime's ``host_memory_creator``, :func:`install`) makes
every linear memory: an ``mmap`` of the reservation and guard wasmtime asks for, ``PROT_NONE``,
with the first ``byte_size`` bytes made read-write and grown in place by ``mprotect``. Each
memory is created and grown on the thread running the call, whose
:class:`~murmur.components.engine.Interrupt` (:func:`current`) carries ``memory_bytes``: a
growth (or an initial size) past it is refused and recorded in ``Interrupt.denied``, which the
host reads when the guest traps (``E-RUN-001`` naming ``memory_bytes``). Linux/macOS only
(``mmap``); an engine without it falls back to the store limiter.
Specification: ``spec/components.md`` ("Limits").
"""

from __future__ import annotations

import ctypes
import mmap
import threading
from typing import Any

from wasmtime import _ffi as ffi

__all__ = ["current", "install", "set_current"]

_PROT_NONE, _PROT_RW = 0, mmap.PROT_READ | mmap.PROT_WRITE
_MAP_FLAGS = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
_PAGE = mmap.PAGESIZE
_FAILED = ctypes.c_void_p(-1).value

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
_libc.mprotect.restype = ctypes.c_int
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.munmap.restype = ctypes.c_int
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]

_local = threading.local()
_lock = threading.Lock()
_memories: dict[int, _Memory] = {}
_next = 0
_keep: list[Any] = []  # the callbacks and the creator struct live as long as the process


def set_current(interrupt: Any) -> None:
    """The call now running on this thread (its ``memory_bytes`` and ``denied``)."""
    _local.interrupt = interrupt


def current() -> Any:
    """The call running on this thread, or None."""
    return getattr(_local, "interrupt", None)


def _round(n: int) -> int:
    return (n + _PAGE - 1) // _PAGE * _PAGE


def _error(text: str) -> int:
    err = ffi.wasmtime_error_new(text.encode())
    return ctypes.cast(err, ctypes.c_void_p).value or 0


def _refused(size: int, limit: int) -> int:
    call = current()
    if call is not None and getattr(call, "denied", None) is None:
        call.denied = "memory_bytes"
    return _error(f"murmur: linear memory of {size} bytes refused: past the memory_bytes limit ({limit})")


class _Memory:
    """One mapping: ``base``, ``mapped`` bytes reserved, ``size`` bytes accessible."""

    def __init__(self, base: int, mapped: int, capacity: int, size: int) -> None:
        self.base, self.mapped, self.capacity, self.size = base, mapped, capacity, size


def _limit() -> int | None:
    call = current()
    value = getattr(call, "memory_bytes", None) if call is not None else None
    return int(value) if value is not None else None


def _new_memory(_env: object, _ty: object, minimum: int, maximum: int, reserved: int, guard: int,
                ret: Any) -> int:
    limit = _limit()
    if limit is not None and minimum > limit:
        return _refused(minimum, limit)
    capacity = reserved or _round(max(minimum, limit or maximum or minimum, _PAGE))
    mapped = capacity + guard
    base = _libc.mmap(None, mapped, _PROT_NONE, _MAP_FLAGS, -1, 0)
    if base is None or base == _FAILED:
        return _error(f"murmur: could not reserve {mapped} bytes for a linear memory")
    if minimum and _libc.mprotect(base, _round(minimum), _PROT_RW) != 0:
        _libc.munmap(base, mapped)
        return _error("murmur: could not make a linear memory accessible")
    global _next
    with _lock:
        _next += 1
        key = _next
        _memories[key] = _Memory(base, mapped, capacity, minimum)
    out = ret.contents
    out.env = key
    out.get_memory = _GET
    out.grow_memory = _GROW
    out.finalizer = _FINALIZE
    return 0


def _get_memory(env: int, size: Any, maximum: Any) -> int:
    mem = _memories[env]
    size[0] = mem.size
    maximum[0] = mem.capacity
    return mem.base


def _grow_memory(env: int, new_size: int) -> int:
    mem = _memories[env]
    limit = _limit()
    if limit is not None and new_size > limit:
        return _refused(new_size, limit)
    if new_size > mem.capacity:
        return _error(f"murmur: linear memory of {new_size} bytes is past its reservation")
    if new_size > mem.size and _libc.mprotect(mem.base, _round(new_size), _PROT_RW) != 0:
        return _error("murmur: could not grow a linear memory")
    mem.size = new_size
    return 0


def _finalize(env: int) -> None:
    with _lock:
        mem = _memories.pop(env, None)
    if mem is not None:
        _libc.munmap(mem.base, mem.mapped)


_GET = ffi.wasmtime_memory_get_callback_t(_get_memory)
_GROW = ffi.wasmtime_memory_grow_callback_t(_grow_memory)
_FINALIZE = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(_finalize)
_NEW = ffi.wasmtime_new_memory_callback_t(_new_memory)


def install(config: Any) -> None:
    """Make ``config``'s engine ask :mod:`murmur.components.memory` for its linear memories."""
    creator: Any = ffi.wasmtime_memory_creator_t()
    creator.env = None
    creator.new_memory = _NEW
    creator.finalizer = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(0)
    _keep.append(creator)
    ffi.wasmtime_config_host_memory_creator_set(config.ptr(), ctypes.byref(creator))
