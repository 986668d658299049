"""The component host: calls, imports, versions, limits and cancellation (spec/components.md)."""

from __future__ import annotations

import hashlib
import time

import pytest
import trio
import trio.lowlevel

from components.wat import component
from murmur.components.host import (
    NO_TASK,
    Component,
    ComponentFault,
    Grant,
    Hooks,
    ToolResult,
    call_tool,
    run_capsule,
)
from murmur.components.limits import Limits


def _comp(name: str, role: str = "tool", **kw: str) -> Component:
    data = component(name, **kw)
    return Component(name, role, data, hashlib.sha256(data).hexdigest())


async def test_echo_round_trip() -> None:
    """A tool's tool-input.data comes back as tool-result.data; none stays none."""
    comp = _comp("echo")
    got = await call_tool(comp, Grant(), "hello")
    assert got == ToolResult(status="passed", data="hello")
    none = await call_tool(comp, Grant(), None)
    assert none.data is None and none.model_text == "tool returned no data"


async def test_failed_status_is_kept() -> None:
    """A `failed` status reaches the caller as is (the agent loop marks it is_error)."""
    got = await call_tool(_comp("fail"), Grant(), "bad input")
    assert (got.status, got.data) == ("failed", "bad input")


async def test_other_interface_version_refused_before_running() -> None:
    """A tool built against murmur:tool/run@0.2.0 is refused with both versions named."""
    with pytest.raises(ComponentFault) as info:
        await call_tool(_comp("echo", tool="0.2.0"), Grant(), "x")
    d = info.value.diagnostic
    assert d.code == "E-CMP-001"
    assert "murmur:tool/run@0.2.0" in d.message and "murmur:tool/run@0.1.0" in d.message


async def test_core_module_is_not_a_component() -> None:
    """Bytes that are a core module are E-CMP-002, not a crash."""
    data = b"\0asm\x01\0\0\0"
    with pytest.raises(ComponentFault) as info:
        await call_tool(Component("core", "tool", data, hashlib.sha256(data).hexdigest()), Grant(), None)
    assert info.value.diagnostic.code == "E-CMP-002"


async def test_spin_stopped_at_deadline() -> None:
    """A component that loops forever is stopped at deadline_seconds with E-RUN-001 naming it."""
    started = time.monotonic()
    with pytest.raises(ComponentFault) as info:
        await call_tool(_comp("spin"), Grant(limits=Limits(deadline_seconds=1)), None)
    d = info.value.diagnostic
    assert d.code == "E-RUN-001" and "deadline_seconds" in d.message
    assert time.monotonic() - started < 10


async def test_balloon_stopped_at_memory_limit() -> None:
    """Growth past memory_bytes is refused and the trap that follows is E-RUN-001 naming
    memory_bytes (the host made the memory and saw the refusal)."""
    with pytest.raises(ComponentFault) as info:
        await call_tool(_comp("balloon"), Grant(limits=Limits(memory_bytes=8 << 20)), None)
    d = info.value.diagnostic
    assert d.code == "E-RUN-001" and "grew past memory_bytes (8388608)" in d.message, d.message
    assert "memory_bytes" in (d.hint or "")


async def test_a_trap_without_a_refused_growth_does_not_name_memory_bytes() -> None:
    """The control: a component that traps for another reason (here: it spins until its
    deadline) is not reported as a memory stop, and a normal call grows memory freely."""
    result = await call_tool(_comp("echo"), Grant(limits=Limits(memory_bytes=8 << 20)), "x" * (2 << 20))
    assert result.data == "x" * (2 << 20)  # 2 MiB through the canonical ABI: growth under the limit
    with pytest.raises(ComponentFault) as info:
        await call_tool(_comp("spin"), Grant(limits=Limits(memory_bytes=8 << 20, deadline_seconds=1)), None)
    assert "memory_bytes" not in info.value.diagnostic.message and "deadline_seconds" in info.value.diagnostic.message


async def test_a_memory_larger_than_memory_bytes_at_instantiation_is_named() -> None:
    """A component whose initial memory is past memory_bytes is refused at instantiation,
    naming the limit."""
    with pytest.raises(ComponentFault) as info:
        await call_tool(_comp("echo"), Grant(limits=Limits(memory_bytes=32 << 10)), None)
    assert info.value.diagnostic.code == "E-RUN-001" and "memory_bytes" in info.value.diagnostic.message


async def test_cancel_interrupts_running_component() -> None:
    """A cancelled task stops a spinning component: the cancel returns at once and the worker
    thread is interrupted by the engine's next ticks (the issue's bound: within 1 s)."""
    import threading

    import murmur.components.host as host

    comp = _comp("spin")
    stopped = threading.Event()
    real = host.call_tool_sync

    def watched(*a: object, **k: object) -> object:
        try:
            return real(*a, **k)  # type: ignore[arg-type]
        finally:
            stopped.set()

    host.call_tool_sync = watched  # type: ignore[assignment]
    try:
        with trio.move_on_after(0.3) as scope:
            await call_tool(comp, Grant(), None)
        cancelled_at = time.monotonic()
        assert scope.cancelled_caught
        assert await trio.to_thread.run_sync(stopped.wait, 10), "the worker never stopped"
    finally:
        host.call_tool_sync = real
    assert time.monotonic() - cancelled_at < 1.0


async def test_chunks_reach_the_caller() -> None:
    """emit-chunk and emit-thinking-chunk arrive in order, flagged."""
    got: list[tuple[str, bool]] = []
    result = await call_tool(_comp("chunky"), Grant(), "part",
                             hooks=Hooks(on_chunk=lambda c, t: got.append((c, t))))
    assert got == [("part", False), ("part", True)] and result.data == "part"


async def test_request_input_outside_a_task_traps_as_upstream() -> None:
    """With no task context, request-input fails with upstream's words."""
    with pytest.raises(ComponentFault) as info:
        await call_tool(_comp("asking"), Grant(), "your name?")
    assert info.value.diagnostic.code == "E-RUN-001" and NO_TASK in info.value.diagnostic.message


async def test_request_input_seam_answers() -> None:
    """The task's async request_input(prompt) answers the component."""
    prompts: list[str] = []

    async def ask(prompt: str) -> str:
        prompts.append(prompt)
        await trio.lowlevel.checkpoint()
        return "Ada"

    got = await call_tool(_comp("asking"), Grant(), "your name?", hooks=Hooks(request_input=ask))
    assert prompts == ["your name?"] and got.data == "Ada"


async def test_script_capsule_invokes_a_tool() -> None:
    """capsule.wasm's tool-registry/invoke reaches the host's registry and gets a result."""
    echo = _comp("echo")
    calls: list[tuple[str, str | None]] = []

    async def invoke(name: str, data: str | None) -> ToolResult:
        calls.append((name, data))
        return await call_tool(echo, Grant(), data)

    await run_capsule(_comp("script", role="capsule"), Grant(), hooks=Hooks(invoke=invoke))
    assert calls == [("echo", "from-capsule")]


async def test_script_capsule_fails_when_invoke_errs() -> None:
    """An `err` from invoke reaches the guest (this one traps on it)."""

    async def invoke(name: str, data: str | None) -> ToolResult:
        raise ComponentFault(__import__("murmur.diagnostics").diagnostics.error("E-CMP-002", "no such tool"))

    with pytest.raises(ComponentFault) as info:
        await run_capsule(_comp("script", role="capsule"), Grant(), hooks=Hooks(invoke=invoke))
    assert info.value.diagnostic.code == "E-RUN-001"
