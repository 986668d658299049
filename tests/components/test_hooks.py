"""Hook components: lifecycle 0.5.0 handlers, committed arms, errors to logs/hook-<name>.log."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from components.wat import SUMMARY, hook
from murmur.components.hooks import HookHost
from murmur.components.host import Component, ComponentFault, Grant
from murmur.manifest.artifact import HookContract

TASK_START = {"task-id": "tsk_1", "context-id": "ctx_1", "source": "user", "input-bytes": 5}
INFERENCE = {"turn": 1, "input-tokens": 10, "output-tokens": 5, "decision": "tool_call", "tool-name": "echo",
             "prompt": None, "output": None, "tools": None}
TOOL = {"turn": 1, "tool-name": "echo", "input-bytes": 2, "output-bytes": 3, "duration-ms": 1, "status": "ok"}
TASK_END = {"task-id": "tsk_1", "exit-status": "ok"}


def _host(tmp_path: Path, contract: HookContract, **answers: str) -> HookHost:
    data = hook(**answers)
    return HookHost(Component("recorder", "hook", data, hashlib.sha256(data).hexdigest()), contract, Grant(),
                    tmp_path / "logs")


async def test_arms_commit_as_the_event_and_contract_allow(tmp_path: Path) -> None:
    """on-inference's artifact and on-task-end's reopen-task are committed for a blocking hook;
    an err goes to logs/hook-<name>.log and nothing stops."""
    host = _host(tmp_path, HookContract(execution_mode="blocking", commit_policy="reopen-task"),
                 on_inference="artifact", on_tool_call="err", on_task_end="reopen")
    start = await host.fire("on-task-start", TASK_START)
    assert start is not None and (start.arm, start.committed) == ("none", False)
    inf = await host.fire("on-inference", INFERENCE)
    assert inf is not None and (inf.arm, inf.value, inf.committed) == ("artifact", "seen", True)
    tool = await host.fire("on-tool-call", TOOL)
    assert tool is not None and tool.error == "the hook failed."
    assert (tmp_path / "logs" / "hook-recorder.log").read_text() == "on-tool-call: the hook failed.\n"
    end = await host.fire("on-task-end", TASK_END)
    assert end is not None and (end.arm, end.value, end.committed) == ("reopen-task", "again!", True)


async def test_an_arm_the_event_does_not_honour_is_a_dispatch_error(tmp_path: Path) -> None:
    """reopen-task from on-tool-call is not committed: a dispatch error, logged. The arm an event
    honours is committed for a blocking hook whatever its commit_policy says (upstream's runtime
    reads only the event table; commit_policy is checked against the binding at load)."""
    host = _host(tmp_path, HookContract(), on_tool_call="reopen", on_task_end="reopen")
    tool = await host.fire("on-tool-call", TOOL)
    assert tool is not None and not tool.committed and tool.dispatch_error
    assert "returned hook-output arm `reopen-task`" in (tmp_path / "logs" / "hook-recorder.log").read_text()
    end = await host.fire("on-task-end", TASK_END)
    assert end is not None and end.committed and not end.dispatch_error


async def test_an_async_hook_commits_nothing_and_is_no_fault(tmp_path: Path) -> None:
    """An async hook's honoured arm is discarded (nothing waited for it), not a dispatch error."""
    host = _host(tmp_path, HookContract(execution_mode="async"), on_task_end="reopen")
    end = await host.fire("on-task-end", TASK_END)
    assert end is not None and (end.arm, end.committed, end.dispatch_error) == ("reopen-task", False, False)


async def test_replace_context_and_write_manifests_come_back_as_plain_records(tmp_path: Path) -> None:
    """replace-context's messages and write-manifests' manifests are lifted into dicts."""
    host = _host(tmp_path, HookContract(), on_compaction="replace", on_stage="manifests")
    event = {"messages": [{"role": "user", "content": "hello"}], "session-tokens": 7, "threshold": 0.5,
             "model": None, "system-prompt": None}
    comp = await host.fire("on-compaction", event)
    assert comp is not None and comp.committed
    assert comp.value == [{"role": "user", "content": SUMMARY}]
    stage = await host.fire("on-stage", {"shell-allow": ["rg"]})
    assert stage is not None and stage.committed
    assert stage.value == [{"binary-name": "rg", "content": "name: rg\n"}]


async def test_on_stage_goes_only_to_blocking_hooks(tmp_path: Path) -> None:
    host = _host(tmp_path, HookContract(execution_mode="async"), on_stage="manifests")
    assert await host.fire("on-stage", {"shell-allow": []}) is None


async def test_run_inference_answers_through_the_imports(tmp_path: Path) -> None:
    """The hook's run-inference reaches `imports.run_inference` with the messages it forwards;
    without one it answers err (the import still links), which is the handler's err here."""
    from murmur.components.host import Hooks

    host = _host(tmp_path, HookContract(), on_compaction="summarise")
    event = {"messages": [{"role": "user", "content": "the long story"}], "session-tokens": 7,
             "threshold": 0.5, "model": None, "system-prompt": None}
    bare = await host.fire("on-compaction", event)
    assert bare is not None and bare.error is not None and "no inference driver" in bare.error
    seen: list[object] = []

    async def infer(request: object) -> dict[str, object]:
        seen.append(request)
        return {"text": "short story", "model-used": "m", "input-tokens": 3, "output-tokens": 2}

    host.imports = Hooks(run_inference=infer)
    done = await host.fire("on-compaction", event)
    assert done is not None and done.committed and done.value == [{"role": "user", "content": "short story"}]
    (request,) = seen
    assert [(m.role, m.content) for m in request.messages] == [("user", "the long story")]  # type: ignore[attr-defined]


async def test_binding_limits_dispatch(tmp_path: Path) -> None:
    """A hook bound to on-task-end receives nothing else."""
    host = _host(tmp_path, HookContract(binding="on-task-end"))
    assert await host.fire("on-inference", INFERENCE) is None
    assert await host.fire("on-task-end", TASK_END) is not None


def test_a_hook_missing_required_handlers_is_refused(tmp_path: Path) -> None:
    """A component without the lifecycle export (here: a tool) is E-CMP-002 naming the handlers."""
    from components.wat import component

    data = component("echo")
    with pytest.raises(ComponentFault) as info:
        HookHost(Component("t", "hook", data, hashlib.sha256(data).hexdigest()), HookContract(), Grant(), tmp_path)
    assert info.value.diagnostic.code == "E-CMP-002" and "on-session-start" in info.value.diagnostic.message


async def test_a_hook_reaches_only_its_own_network_grant(tmp_path: Path) -> None:
    """A hook importing wasi:http is linked through the checking handler: a host outside its
    own network.allow is refused before any connection (HTTP-request-denied); the control, a
    covered host, is handed on. Each decision reaches `imports.on_http`."""
    from components.wat import hook_http
    from murmur.components.host import Hooks
    from murmur.components.outgoing_http import HttpPolicy

    data = hook_http()
    decisions: list[object] = []
    host = HookHost(Component("netter", "hook", data, hashlib.sha256(data).hexdigest()), HookContract(),
                    Grant(http=HttpPolicy(("127.0.0.1:9",))), tmp_path / "logs")
    host.imports = Hooks(on_http=decisions.append)
    denied = await host.fire("on-stage", {"shell-allow": ["denied.example"]})
    assert denied is not None and denied.error == "denied"
    allowed = await host.fire("on-stage", {"shell-allow": ["127.0.0.1:9"]})  # the kept store, gate rebound
    assert allowed is not None and allowed.error is None and allowed.arm == "none"
    assert [d.allowed for d in decisions] == [False, True]


async def test_an_async_hook_is_queued_in_order_and_drained(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """queue(): fire returns at once and nothing has run; the worker takes the events in order;
    close() lets it finish what is queued; a full queue drops events, counted in the log."""
    import trio

    from murmur.components import hooks as hooks_mod

    host = _host(tmp_path, HookContract(execution_mode="async"), on_tool_call="err", on_task_start="err")
    assert host.queue()
    assert await host.fire("on-task-start", TASK_START) is None
    assert await host.fire("on-tool-call", TOOL) is None
    log = tmp_path / "logs" / "hook-recorder.log"
    assert not log.exists()  # nothing ran yet: off the critical path
    async with trio.open_nursery() as n:
        n.start_soon(host.serve)
        host.close()
        with trio.fail_after(10):
            await host.drained.wait()
    assert log.read_text().splitlines() == ["on-task-start: the hook failed.", "on-tool-call: the hook failed."]

    monkeypatch.setattr(hooks_mod, "QUEUE_DEPTH", 1)
    full = _host(tmp_path / "b", HookContract(execution_mode="async"))
    assert full.queue() and not _host(tmp_path / "c", HookContract()).queue()  # blocking hooks are awaited
    for _ in range(3):
        await full.fire("on-tool-call", TOOL)
    full.close()
    assert full.dropped == 2 and "discarded 2 lifecycle event(s)" in (tmp_path / "b" / "logs" / "hook-recorder.log").read_text()
