"""Calling a component: a fresh store per call, the imports each world needs, limits, faults.

:func:`call_tool` runs one ``murmur:tool/run@0.1.0#run`` call (a tool or a driver) off the
Trio loop (``trio.to_thread``). Each call gets a fresh store holding:

* a WASI context built from nothing: only :attr:`Grant.env`, one preopen ``"."`` (the
  workdir or its ``filesystem.scope``, or none), no inherited stdio (guest stdout/stderr go
  to the call's log), no sockets and no name lookup;
* ``murmur:text/chunks@0.1.0`` (chunks go to :attr:`Hooks.on_chunk`, else nowhere) and
  ``murmur:task/task@0.1.0`` (``request-input`` asks :attr:`Hooks.request_input`; without
  one it traps as upstream: "request-input is not available outside an A2A task context");
* ``wasi:http`` only through :mod:`murmur.components.outgoing_http`, which refuses every request the
  grant does not cover, before any connection;
* the limits (:mod:`murmur.components.limits`) and an epoch deadline armed before
  instantiation and again before ``run``.

A cancelled Trio task sets the call's :class:`~murmur.components.engine.Interrupt`, which
stops the guest at the next epoch tick; the Trio side never waits for it (the worker thread
is abandoned and ends by itself within a tick). Faults are :class:`ComponentFault` with a
coded diagnostic: ``E-CMP-001`` (interface version), ``E-CMP-002`` (not a component or
missing export), ``E-RUN-001`` (the guest crashed, or a limit stopped it: named).
Specification: ``spec/components.md``.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import trio
import wasmtime
from wasmtime import component as wc

from murmur.components import engine as eng
from murmur.components.check import version_refusals
from murmur.components.limits import Limits
from murmur.components.versions import versioned
from murmur.diagnostics import Diagnostic, error

NO_TASK = "request-input is not available outside an A2A task context"


class ComponentFault(Exception):
    """A component call that did not produce a result; ``diagnostic`` says why (coded)."""

    def __init__(self, diagnostic: Diagnostic) -> None:
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


@attrs.frozen
class Grant:
    """What one component call is handed.

    Attributes:
        env (tuple[tuple[str, str], ...]): the whole WASI environment.
        preopen (Path | None): mounted as ``"."`` (None: no directory at all).
        limits (Limits): memory/table/instance/deadline limits.
        http (object | None): a :class:`murmur.components.outgoing_http.HttpPolicy`, the effective
            ``network.allow`` (None: every outgoing HTTP request is refused).
    """

    env: tuple[tuple[str, str], ...] = ()
    preopen: Path | None = None
    limits: Limits = attrs.field(factory=Limits)
    http: Any = None


@attrs.frozen
class Hooks:
    """Where a call's host imports lead (all optional; called from the worker thread via Trio).

    Attributes:
        on_chunk (Callable[[str, bool], None] | None): a text chunk (``thinking`` flag).
        request_input (Callable[[str], Awaitable[str]] | None): the task's input seam.
        invoke (Callable[[str, str | None], Awaitable[ToolResult]] | None): the
            tool-registry a script capsule calls.
        log (Callable[[str], None] | None): guest stdout/stderr lines and host notes.
        on_http (Callable[[HttpDecision], None] | None): each outgoing HTTP request's
            decision (:mod:`murmur.components.outgoing_http`), before any connection.
    """

    on_chunk: Callable[[str, bool], None] | None = None
    request_input: Callable[[str], Awaitable[str]] | None = None
    invoke: Callable[[str, str | None], Awaitable[ToolResult]] | None = None
    log: Callable[[str], None] | None = None
    on_http: Callable[[Any], None] | None = None
    run_inference: Callable[[Any], Awaitable[Mapping[str, Any]]] | None = None


@attrs.frozen
class ToolResult:
    """``murmur:tool/run`` ``tool-result``; ``status`` is passed, failed or error."""

    status: str
    summary: str | None = None
    data: str | None = None
    data_path: str | None = None
    truncated: bool = False
    metadata: tuple[tuple[str, str], ...] = ()

    @property
    def model_text(self) -> str:
        """What the model is shown: data, else summary, else "tool returned no data"."""
        return self.data if self.data is not None else (self.summary or "tool returned no data")


@attrs.frozen
class Component:
    """A component's bytes, identity and role (tool, driver, capsule, hook)."""

    name: str
    role: str
    data: bytes
    sha256: str


_local = threading.local()


def _current() -> tuple[Hooks, eng.Interrupt]:
    return _local.hooks, _local.interrupt


def _from_trio(fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
    """Run an async host import on the Trio loop from the worker thread (a trap if it fails)."""
    try:
        return trio.from_thread.run(fn, *args)
    except (trio.Cancelled, trio.RunFinishedError):
        raise RuntimeError("the task ended while the component waited") from None


def _emit(thinking: bool, _store: object, chunk: str) -> None:
    hooks, _ = _current()
    if hooks.on_chunk is not None:
        try:
            trio.from_thread.run_sync(hooks.on_chunk, chunk, thinking)
        except (trio.Cancelled, trio.RunFinishedError):
            pass


def _request_input(_store: object, prompt: str) -> str:
    hooks, _ = _current()
    if hooks.request_input is None:
        raise RuntimeError(NO_TASK)
    return str(_from_trio(hooks.request_input, prompt))


def _invoke(_store: object, name: str, tool_input: Any) -> Any:
    hooks, _ = _current()
    if hooks.invoke is None:
        return f"no tool registry is available to invoke `{name}`"
    try:
        result: ToolResult = _from_trio(hooks.invoke, name, getattr(tool_input, "data", None))
    except ComponentFault as exc:
        return exc.diagnostic.message  # result<tool-result, string> is untagged: a str is `err`
    return _to_record(result)


def _send_message(_store: object, peer_url: str, message: Any) -> Any:
    from murmur.components.message import send

    hooks, _ = _current()
    return send(_local.grant.http, peer_url, message, hooks.on_http)


def _run_inference(_store: object, request: Any) -> Any:
    """A hook's ``run-inference``: the task's driver once, through ``Hooks.run_inference``;
    without one, upstream's answer: an error (the import still links)."""
    hooks, _ = _current()
    if hooks.run_inference is None:
        return "run-inference: no inference driver is available to this hook"
    try:
        reply: Mapping[str, Any] = _from_trio(hooks.run_inference, request)
    except RuntimeError as exc:
        return f"run-inference: {exc}"
    rec = wc.Record()
    for key in ("text", "model-used", "input-tokens", "output-tokens"):
        setattr(rec, key, reply.get(key, "" if key in ("text", "model-used") else 0))
    return rec


def _to_record(result: ToolResult) -> Any:
    rec = wc.Record()
    for key, value in (("status", result.status), ("summary", result.summary), ("data", result.data),
                       ("data-path", result.data_path), ("truncated", result.truncated),
                       ("metadata", [tuple(kv) for kv in result.metadata])):
        setattr(rec, key, value)
    return rec


_linkers: dict[bool, wc.Linker] = {}
_linker_lock = threading.Lock()


def _linker(with_http: bool) -> wc.Linker:
    """The shared linker (host imports read the calling thread's hooks)."""
    with _linker_lock:
        found = _linkers.get(with_http)
        if found is not None:
            return found
        linker = wc.Linker(eng.engine())
        linker.add_wasip2()
        if with_http:
            from murmur.components.outgoing_http import add_http

            add_http(linker)
        with linker.root() as root:
            with root.add_instance(versioned("murmur:text/chunks")) as chunks:
                chunks.add_func("emit-chunk", functools.partial(_emit, False))
                chunks.add_func("emit-thinking-chunk", functools.partial(_emit, True))
            with root.add_instance(versioned("murmur:task/task")) as task:
                task.add_func("request-input", _request_input)
            with root.add_instance(versioned("murmur:tool-registry/invoke")) as reg:
                reg.add_func("invoke", _invoke)
            with root.add_instance(versioned("murmur:tool/run")):
                pass  # the registry's types: a type-only import still needs an instance
            with root.add_instance(versioned("murmur:message/send")) as message:
                message.add_func("send", _send_message)
            with root.add_instance(versioned("murmur:runtime/inference")) as inference:
                inference.add_func("run-inference", _run_inference)
            with root.add_instance(versioned("murmur:hook/lifecycle")):
                pass  # the types runtime/inference uses (message): a type-only import
        _linkers[with_http] = linker
        return linker


_gate_linkers: list[wc.Linker] = []


def _gate_linker() -> wc.Linker:
    """The linker with wasmtime's own wasi:http, used only to instantiate the HTTP gate."""
    with _linker_lock:
        if not _gate_linkers:
            from murmur.components.outgoing_http import real_linker

            _gate_linkers.append(real_linker(eng.engine()))
        return _gate_linkers[0]


def _wasi(grant: Grant, log: Callable[[str], None] | None) -> wasmtime.WasiConfig:
    cfg = wasmtime.WasiConfig()
    cfg.env = [list(kv) for kv in grant.env]
    if grant.preopen is not None:
        grant.preopen.mkdir(parents=True, exist_ok=True)
        cfg.preopen_dir(str(grant.preopen), ".")

    def out(data: bytes) -> None:
        if log is not None:
            log(data.decode("utf-8", "replace"))

    cfg.stdout_custom = out
    cfg.stderr_custom = out
    return cfg


def _reason(message: str) -> str:
    """The line of a wasmtime error that says what happened (not the backtrace header)."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(("wasm trap", "murmur:")):
            return ln
    return lines[-1] if lines else "unknown failure"


def _limit_fault(name: str, message: str, interrupt: eng.Interrupt, limits: Limits, role: str) -> Diagnostic:
    """The coded diagnostic for a failed instantiation or call."""
    message = _reason(message) if "backtrace" in message else message
    if interrupt.reason == "deadline":
        return error("E-RUN-001", f"component `{name}` ran past deadline_seconds "
                     f"({limits.deadline_for(role)} s) and was stopped",
                     hint="raise `capabilities.limits.deadline_seconds`, or make the call finish sooner")
    if interrupt.denied == "memory_bytes":
        return error("E-RUN-001", f"component `{name}` grew past memory_bytes ({limits.memory_bytes}) and was "
                     f"stopped: {message.splitlines()[0]}", hint="raise `capabilities.limits.memory_bytes`")
    low = message.lower()
    for key, words, value in (("memory_bytes", ("memory",), limits.memory_bytes),
                              ("table_elements", ("table",), limits.table_elements),
                              ("instances", ("instance",), limits.instances)):
        if "limit" in low and any(w in low for w in words):
            return error("E-RUN-001", f"component `{name}` reached {key} ({value}) and was stopped: "
                         f"{message.splitlines()[0]}", hint=f"raise `capabilities.limits.{key}`")
    return error("E-RUN-001", f"component `{name}` crashed: {message.splitlines()[0]}",
                 hint="the component failed; its log holds what it wrote")


class Cancelled(Exception):
    """The call was interrupted because its task was cancelled."""


def call_tool_sync(comp: Component, grant: Grant, data: str | None, *, hooks: Hooks,
                   interrupt: eng.Interrupt) -> ToolResult:
    """One ``tool/run`` call, on the calling (worker) thread. See :func:`call_tool`."""
    rec = wc.Record()
    setattr(rec, "data", data)  # noqa: B010 (a Record takes any field)
    setattr(rec, "log-path", None)
    out = _call(comp, grant, "murmur:tool/run", (rec,), hooks=hooks, interrupt=interrupt)
    return ToolResult(
        status=str(out.status), summary=out.summary, data=out.data,
        data_path=getattr(out, "data-path"), truncated=bool(out.truncated),
        metadata=tuple((str(k), str(v)) for k, v in out.metadata))


def run_capsule_sync(comp: Component, grant: Grant, *, hooks: Hooks, interrupt: eng.Interrupt) -> None:
    """One ``capsule/run`` call (a script capsule), on the calling (worker) thread."""
    _call(comp, grant, "murmur:capsule/run", (), hooks=hooks, interrupt=interrupt)


def _call(comp: Component, grant: Grant, iface: str, args: tuple[Any, ...], *, hooks: Hooks,
          interrupt: eng.Interrupt) -> Any:
    refusals = version_refusals(comp.data, comp.role, name=comp.name)
    if refusals:
        raise ComponentFault(refusals[0])
    try:
        compiled, _ = eng.compiled(comp.data, sha256=comp.sha256)
    except wasmtime.WasmtimeError as exc:
        raise ComponentFault(error("E-CMP-002", f"component `{comp.name}` is not a valid component: "
                                   f"{str(exc).splitlines()[0]}", hint="rebuild the component")) from None
    export = versioned(iface)
    outer = compiled.get_export_index(export)
    fidx = compiled.get_export_index("run", outer) if outer is not None else None
    if fidx is None:
        raise ComponentFault(error("E-CMP-002", f"component `{comp.name}` does not export {export}#run",
                                   hint=f"build it for the `{comp.role}` world of upstream v0.2.0"))
    store = wasmtime.Store(eng.engine())
    limits = grant.limits
    store.set_limits(table_elements=limits.table_elements,
                     instances=limits.instances)
    store.set_wasi(_wasi(grant, hooks.log))
    with_http = grant.http is not None or _imports_http(comp.data)
    if with_http:
        store.set_wasi_http()
    eng.arm(store, interrupt)
    _local.hooks, _local.interrupt, _local.grant = hooks, interrupt, grant
    try:
        if with_http:
            from murmur.components import outgoing_http

            outgoing_http.bind(store, _gate_linker(), grant.http, comp.name, hooks.on_http)
        instance = _linker(with_http).instantiate(store, compiled)
        func = instance.get_func(store, fidx)
        assert func is not None
        interrupt.restart()
        out = func(store, *args)
        func.post_return(store)
        return out
    except (wasmtime.WasmtimeError, wasmtime.Trap, RuntimeError, ValueError, TypeError) as exc:
        # a host import's Python exception comes back as itself; it trapped the guest
        if interrupt.reason == "cancelled":
            raise Cancelled() from None
        raise ComponentFault(_limit_fault(comp.name, str(exc), interrupt, limits, comp.role)) from None
    finally:
        _local.hooks = _local.interrupt = None
        if with_http:
            from murmur.components import outgoing_http

            outgoing_http.unbind()


def _imports_http(data: bytes) -> bool:
    from murmur.components.inspect import NotAComponent, interfaces

    try:
        return any(n.startswith("wasi:http/") for n in interfaces(data).imports)
    except NotAComponent:
        return False


async def _off_loop(fn: Callable[..., Any], comp: Component, grant: Grant, *args: Any,
                    hooks: Hooks | None) -> Any:
    interrupt = eng.Interrupt(grant.limits.deadline_for(comp.role), grant.limits.memory_bytes)
    worker = functools.partial(fn, comp, grant, *args, hooks=hooks or Hooks(), interrupt=interrupt)
    try:
        return await trio.to_thread.run_sync(worker, abandon_on_cancel=True)
    except BaseException:
        interrupt.cancel()
        raise


async def run_capsule(comp: Component, grant: Grant, *, hooks: Hooks | None = None) -> None:
    """Run a script capsule's ``murmur:capsule/run@0.1.0#run`` off the Trio loop (as
    :func:`call_tool`; ``hooks.invoke`` is its tool registry)."""
    await _off_loop(run_capsule_sync, comp, grant, hooks=hooks)


async def call_tool(comp: Component, grant: Grant, data: str | None, *,
                    hooks: Hooks | None = None) -> ToolResult:
    """Run one ``tool/run`` call off the Trio loop.

    Args:
        comp (Component): the tool or driver.
        grant (Grant): env, preopen, limits, HTTP policy.
        data (str | None): ``tool-input.data`` (``log-path`` is always none).
        hooks (Hooks | None): where chunks, request-input and invoke lead.

    Returns:
        ToolResult: the guest's result.

    Raises:
        ComponentFault: a coded refusal or failure (see the module docstring).
        trio.Cancelled: the task was cancelled; the guest is stopped within a tick.
    """
    result: ToolResult = await _off_loop(call_tool_sync, comp, grant, data, hooks=hooks)
    return result
