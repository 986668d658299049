"""Hook components: ``murmur:hook/lifecycle@0.5.0`` handlers, their arms and their faults.

A :class:`HookHost` runs one hook artifact, instantiated once for the session (its state
survives between events), blocking or async alike, as upstream. An ``async`` hook whose session
called :meth:`HookHost.queue` is off the critical path: each event is put on its own ordered
queue (:data:`QUEUE_DEPTH` deep; a full queue drops the event, counted and logged, upstream's
default ``on_overflow: drop``) and :meth:`HookHost.serve` takes them one at a time; the session
closes the queue at its end and waits for the worker within a bound. Each event runs off the Trio loop with the hook deadline (30 s unless
``deadline_seconds`` is set), no directory and no network unless the entry grants them, and
``murmur:runtime/inference@0.2.0`` linked (answered by the task's seam, else an error).

Dispatch (:meth:`HookHost.fire`): a hook whose contract names a ``binding`` receives only that
event; ``on-stage`` goes only to blocking hooks; an optional handler the hook does not export
(``on-task-start``, ``on-task-end``) is skipped, and a missing ``on-stage`` is only logged (as
upstream). ``imports`` (:class:`~murmur.components.host.Hooks`) is where the hook's
``run-inference`` leads (set by the session; without one the import answers with an error).
The handler's ``result<hook-output, string>`` becomes a :class:`HookAnswer`:

* ``err(text)`` is appended to ``logs/hook-<name>.log`` and the session goes on (except at
  ``on-compaction``, where the caller fails the session);
* the one arm an event honours (``on-inference`` → ``artifact``, ``on-stage`` →
  ``write-manifests``, ``on-compaction`` → ``replace-context``, ``on-task-end`` →
  ``reopen-task``) is *committed* when the hook is blocking; an async hook's answer is
  discarded (nothing waited for it), as upstream. ``commit_policy`` is checked against the
  binding when the manifest is read, not here (upstream's runtime does not read it either);
* any other arm is not committed and is reported (logged, and the caller traces
  ``hook_dispatch_error``).

Specification: ``spec/components.md`` ("Hooks").
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import trio
import wasmtime
from wasmtime import component as wc

from murmur.components import engine as eng
from murmur.components.host import (
    Component,
    ComponentFault,
    Grant,
    Hooks,
    _gate_linker,
    _imports_http,
    _limit_fault,
    _linker,
    _local,
    _wasi,
)
from murmur.components.versions import versioned
from murmur.diagnostics import error
from murmur.manifest.artifact import HookContract

HANDLERS = ("on-stage", "on-session-start", "on-task-start", "on-inference", "on-tool-call", "on-shell",
            "on-compaction", "on-task-end", "on-session-end")
REQUIRED = ("on-session-start", "on-inference", "on-tool-call", "on-shell", "on-compaction", "on-session-end")
QUEUE_DEPTH = 1024
"""Events an async hook's queue holds."""

COMMITS = {"on-stage": "write-manifests", "on-inference": "artifact", "on-compaction": "replace-context",
           "on-task-end": "reopen-task"}
"""The one arm each event honours (events not listed commit nothing)."""


@attrs.frozen
class HookAnswer:
    """One handler's answer.

    Attributes:
        hook (str): the hook's name.
        handler (str): e.g. ``on-task-end``.
        arm (str | None): the hook-output case (``none``, ``artifact``, ...); None on error.
        value (Any): the arm's payload (text, or a list of messages / manifests).
        error (str | None): the handler's ``err`` text, or a fault's message.
        committed (bool): the runtime acts on the arm.
        honoured (bool): the arm is the one this event honours (committed or, for an async
            hook, discarded without a fault).
    """

    hook: str
    handler: str
    arm: str | None = None
    value: Any = None
    error: str | None = None
    committed: bool = False
    honoured: bool = False

    @property
    def dispatch_error(self) -> bool:
        """An arm other than ``none`` that this event does not honour."""
        return self.arm not in (None, "none") and not self.honoured


class HookHost:
    """One hook artifact of a session.

    Args:
        component (Component): the hook (role ``hook``).
        contract (HookContract): from the hook's own manifest.
        grant (Grant): its directory and network grant (none by default), limits.
        log_dir (Path): the session's ``logs/``.
    """

    def __init__(self, component: Component, contract: HookContract, grant: Grant, log_dir: Path) -> None:
        self.component = component
        self.contract = contract
        self.grant = grant
        self.log = log_dir / f"hook-{component.name}.log"
        self.imports = Hooks()
        self._lock = threading.Lock()
        self._kept: tuple[wasmtime.Store, Any, Any] | None = None
        self._http = _imports_http(component.data)
        self._gate: Any = None
        self._send: Any = None
        self._receive: Any = None
        self.dropped = 0
        self.drained = trio.Event()
        self.exported = self._exports()

    def _exports(self) -> frozenset[str]:
        compiled, _ = eng.compiled(self.component.data, sha256=self.component.sha256)
        outer = compiled.get_export_index(versioned("murmur:hook/lifecycle"))
        found = {h for h in HANDLERS if outer is not None and compiled.get_export_index(h, outer) is not None}
        missing = [h for h in REQUIRED if h not in found]
        if missing:
            raise ComponentFault(error(
                "E-CMP-002", f"hook `{self.component.name}` does not export {', '.join(missing)} of "
                f"{versioned('murmur:hook/lifecycle')}", hint="export every required lifecycle handler"))
        return frozenset(found)

    def bound(self, handler: str) -> bool:
        """Whether the hook's binding (and mode) admits ``handler`` (exports aside): no binding
        admits every event; ``on-stage`` is dispatched only to blocking hooks."""
        if self.contract.binding is not None and self.contract.binding != handler:
            return False
        return handler != "on-stage" or self.contract.execution_mode == "blocking"

    def wants(self, handler: str) -> bool:
        """Whether ``handler`` is dispatched to this hook (its binding, its exports)."""
        return self.bound(handler) and handler in self.exported

    def note(self, line: str) -> None:
        """Append one line to ``logs/hook-<name>.log``."""
        try:
            self.log.parent.mkdir(parents=True, exist_ok=True)
            with self.log.open("a", encoding="utf-8") as fh:
                fh.write(f"{line}\n")
        except OSError:
            pass

    def queue(self) -> bool:
        """From now on an async hook's events are queued for :meth:`serve` (True), not awaited."""
        if self.contract.execution_mode != "async":
            return False
        if self._send is None:
            self._send, self._receive = trio.open_memory_channel(QUEUE_DEPTH)
        return True

    async def serve(self) -> None:
        """Take the queued events one at a time, in order, until the queue is closed and empty;
        then set :attr:`drained`."""
        try:
            if self._receive is not None:
                async with self._receive:
                    async for handler, fields in self._receive:
                        await self._call(handler, fields)
        finally:
            self.drained.set()

    def close(self) -> None:
        """No more events: the worker finishes what is queued (the dropped ones are logged)."""
        if self._send is not None:
            self._send.close()
        if self.dropped:
            self.note(f"hook `{self.component.name}` discarded {self.dropped} lifecycle event(s): its queue "
                      f"({QUEUE_DEPTH} deep) was full (on_overflow: drop)")

    async def fire(self, handler: str, fields: Mapping[str, Any]) -> HookAnswer | None:
        """Dispatch one event (``fields`` keyed by the record's kebab-case names); None when
        this hook does not receive it, or when it is queued (an async hook). Errors are logged,
        never raised (except cancellation)."""
        if not self.wants(handler):
            if handler == "on-stage" and self.bound(handler):
                self.note(f"on-stage: hook `{self.component.name}` does not export on-stage")
            return None
        if self._send is not None:
            try:
                self._send.send_nowait((handler, dict(fields)))
            except trio.WouldBlock:
                self.dropped += 1
            except trio.ClosedResourceError:
                pass  # the session has ended
            return None
        return await self._call(handler, fields)

    async def _call(self, handler: str, fields: Mapping[str, Any]) -> HookAnswer:
        interrupt = eng.Interrupt(self.grant.limits.deadline_for("hook"), self.grant.limits.memory_bytes)
        worker = functools.partial(self._fire_sync, handler, dict(fields), interrupt)
        try:
            answer: HookAnswer = await trio.to_thread.run_sync(worker, abandon_on_cancel=True)
        except BaseException:
            interrupt.cancel()
            raise
        if answer.error is not None:
            self.note(f"{handler}: {answer.error}")
        elif answer.dispatch_error:
            self.note(f"{handler}: hook `{self.component.name}` returned hook-output arm `{answer.arm}`, which "
                      "this event (or the hook's commit_policy) does not honour; the value was discarded")
        return answer

    def _fire_sync(self, handler: str, fields: dict[str, Any], interrupt: eng.Interrupt) -> HookAnswer:
        name = self.component.name
        with self._lock:
            try:
                store, instance, compiled = self._instance(interrupt)
                outer = compiled.get_export_index(versioned("murmur:hook/lifecycle"))
                func = instance.get_func(store, compiled.get_export_index(handler, outer))
                rec = _lower(fields)
                interrupt.restart()
                out = func(store, rec)
                func.post_return(store)
            except (wasmtime.WasmtimeError, wasmtime.Trap, RuntimeError, ValueError, TypeError) as exc:
                self._kept = None  # a trapped instance is not reused
                d = _limit_fault(name, str(exc), interrupt, self.grant.limits, "hook")
                return HookAnswer(name, handler, error=f"{d.code}: {d.message}")
            finally:
                _local.hooks = _local.interrupt = None
                if self._http:
                    from murmur.components import outgoing_http

                    outgoing_http.unbind()
        if isinstance(out, str):
            return HookAnswer(name, handler, error=out)
        arm = str(getattr(out, "tag", out))
        value = _lift(getattr(out, "payload", None))
        honoured = arm != "none" and COMMITS.get(handler) == arm
        return HookAnswer(name, handler, arm, value, committed=honoured and self.contract.execution_mode == "blocking",
                          honoured=honoured)

    def _instance(self, interrupt: eng.Interrupt) -> tuple[wasmtime.Store, Any, Any]:
        compiled, _ = eng.compiled(self.component.data, sha256=self.component.sha256)
        _local.hooks, _local.interrupt = self.imports, interrupt
        if self._kept is not None:
            store = self._kept[0]
            eng.arm(store, interrupt)
            if self._http:
                from murmur.components import outgoing_http

                outgoing_http.restore(self._gate)  # this store's gate, for this thread's requests
            return self._kept
        store = wasmtime.Store(eng.engine())
        limits = self.grant.limits
        store.set_limits(table_elements=limits.table_elements,
                         instances=limits.instances)
        store.set_wasi(_wasi(self.grant, None))
        eng.arm(store, interrupt)
        if self._http:  # only the hook's own network.allow (none: every request refused)
            from murmur.components import outgoing_http

            store.set_wasi_http()
            outgoing_http.bind(store, _gate_linker(), self.grant.http, self.component.name, self.imports.on_http)
            self._gate = outgoing_http.current()
        instance = _linker(self._http).instantiate(store, compiled)
        self._kept = (store, instance, compiled)
        return self._kept


def _lower(value: Any) -> Any:
    """A mapping (kebab-case keys) as a WIT record, recursively through lists."""
    if isinstance(value, Mapping):
        rec = wc.Record()
        for key, item in value.items():
            setattr(rec, key, _lower(item))
        return rec
    if isinstance(value, list | tuple):
        return [_lower(v) for v in value]
    return value


def _lift(value: Any) -> Any:
    """A WIT record (or a list of them) as plain dicts keyed by the record's field names."""
    if isinstance(value, wc.Record):
        return {key: _lift(item) for key, item in vars(value).items()}
    if isinstance(value, list):
        return [_lift(v) for v in value]
    return value
