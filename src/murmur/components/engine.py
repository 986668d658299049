"""The process's one wasmtime engine, its epoch ticker, and the compiled-code cache.

* One :class:`wasmtime.Engine` per process (:func:`engine`), with epoch interruption. A daemon
  thread increments the epoch every :data:`TICK_S` seconds; each store's epoch deadline is one
  tick, and its deadline callback (:func:`arm`) decides at every tick whether the guest goes
  on: it traps the guest when the call's :class:`Interrupt` was set (a cancelled task) or its
  wall-clock deadline passed. So a cancelled call stops within a tick or two (10-20 ms), and
  the deadline fires only while guest code runs (never inside a host call), as upstream.
* Compiled code is cached in memory and on disk under
  ``$MURMUR_HOME/cache/components/<wasmtime version>/<sha256>.cwasm``, keyed by the
  component's sha256 and the wasmtime version, so a second session skips compilation.
  Files are written atomically, mode 0600, in a directory only this user can write.

Importing this module imports ``wasmtime``: only sessions that host a component do.
Specification: ``spec/components.md`` ("Engine and stores").
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
import time
from importlib import metadata
from pathlib import Path

import wasmtime
from wasmtime import _ffi as ffi
from wasmtime import component as wc

from murmur import paths

TICK_S = 0.01
"""Seconds between epoch ticks (the granularity of cancellation and deadlines)."""

WASMTIME_VERSION = metadata.version("wasmtime")

_lock = threading.Lock()
_engine: wasmtime.Engine | None = None
_compiled: dict[str, wc.Component] = {}


def engine() -> wasmtime.Engine:
    """The process's engine (created, with its ticker thread, on first use)."""
    global _engine
    with _lock:
        if _engine is None:
            cfg = wasmtime.Config()
            cfg.epoch_interruption = True
            from murmur.components import memory

            memory.install(cfg)  # linear memories through the host, so memory_bytes is seen
            cfg.memory_init_cow = False  # wasmtime 50 maps data images only into its own memories
            _engine = wasmtime.Engine(cfg)
            ticker = threading.Thread(target=_tick, args=(_engine,), name="murmur-epoch", daemon=True)
            ticker.start()
        return _engine


def _tick(eng: wasmtime.Engine) -> None:
    while True:
        time.sleep(TICK_S)
        eng.increment_epoch()


class Interrupt:
    """Why a running call should stop: set by the Trio side, read at every epoch tick.

    Attributes:
        reason (str | None): ``"cancelled"`` or ``"deadline"`` once the call must stop.
        deadline (float): ``time.monotonic()`` value past which the call is stopped.
        memory_bytes (int | None): the call's linear-memory limit (None: none).
        denied (str | None): ``"memory_bytes"`` once a memory was refused growth past it
            (:mod:`murmur.components.memory`).
    """

    def __init__(self, deadline_s: float, memory_bytes: int | None = None) -> None:
        self.memory_bytes = memory_bytes
        self.denied: str | None = None
        self.reason: str | None = None
        self.deadline = time.monotonic() + deadline_s
        self.deadline_s = deadline_s

    def cancel(self) -> None:
        if self.reason is None:
            self.reason = "cancelled"

    def restart(self) -> None:
        """Start the deadline again (upstream sets it before instantiation and before ``run``)."""
        self.deadline = time.monotonic() + self.deadline_s


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_size_t, ctypes.POINTER(ffi.wasmtime_context_t), ctypes.c_void_p,
                             ctypes.POINTER(ctypes.c_uint64),
                             ctypes.POINTER(ffi.wasmtime_update_deadline_kind_t))
_FINALIZER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_keep: dict[int, tuple[object, object]] = {}
_next_key = 0


def arm(store: wasmtime.Store, interrupt: Interrupt) -> None:
    """Give ``store`` a one-tick epoch deadline whose callback stops the guest on ``interrupt``,
    and make ``interrupt`` this thread's current call (its memory limit)."""
    from murmur.components import memory

    memory.set_current(interrupt)

    def on_tick(_ctx: object, _data: object, delta: ctypes._Pointer[ctypes.c_uint64],
                kind: ctypes._Pointer[ffi.wasmtime_update_deadline_kind_t]) -> int:
        if interrupt.reason is None and time.monotonic() >= interrupt.deadline:
            interrupt.reason = "deadline"
        if interrupt.reason is not None:
            err = ffi.wasmtime_error_new(f"murmur: component {interrupt.reason}".encode())
            return ctypes.cast(err, ctypes.c_void_p).value or 0
        delta[0] = 1
        kind[0] = 0  # WASMTIME_UPDATE_DEADLINE_CONTINUE
        return 0

    global _next_key
    with _lock:
        _next_key += 1
        key = _next_key  # its own key: re-arming a kept store finalizes the old callback

    def finalize(_data: object) -> None:
        _keep.pop(key, None)

    cb, fin = _CALLBACK(on_tick), _FINALIZER(finalize)
    _keep[key] = (cb, fin)
    ffi.wasmtime_store_epoch_deadline_callback(store.ptr(), cb, None, fin)
    store.set_epoch_deadline(1)


def cache_dir() -> Path:
    """``$MURMUR_HOME/cache/components/<wasmtime version>/``."""
    return paths.murmur_home() / "cache" / "components" / WASMTIME_VERSION


def compiled(data: bytes, *, sha256: str | None = None) -> tuple[wc.Component, str]:
    """The compiled component for ``data``: from memory, the disk cache, or compiled now.

    Returns:
        (Component, str): the component and where it came from: ``"memory"``, ``"disk"`` or
        ``"compiled"``.

    Raises:
        wasmtime.WasmtimeError: the bytes are not a valid component.
    """
    sha = sha256 or hashlib.sha256(data).hexdigest()
    eng = engine()
    hit = _compiled.get(sha)
    if hit is not None:
        return hit, "memory"
    path = cache_dir() / f"{sha}.cwasm"
    comp: wc.Component | None = None
    origin = "disk"
    if path.is_file():
        try:
            comp = wc.Component.deserialize_file(eng, str(path))
        except wasmtime.WasmtimeError:
            comp = None  # a stale or foreign file: compile afresh and overwrite it
    if comp is None:
        origin = "compiled"
        comp = wc.Component(eng, data)
        _write_cache(path, bytes(comp.serialize()))
    _compiled[sha] = comp
    return comp, origin


def _write_cache(path: Path, blob: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, tmp = tempfile.mkstemp(prefix=".cwasm.", dir=path.parent)
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    except OSError:
        pass  # the cache is an optimisation; a read-only home only costs a compile


def forget_memory_cache() -> None:
    """Drop the in-memory compiled components (tests and the benchmark's cold runs)."""
    _compiled.clear()
