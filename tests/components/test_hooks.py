"""Hook components: lifecycle 0.5.0 handlers, committed arms, errors to logs/hook-<name>.log."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from components.wat import hook
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
    """on-inference's artifact is committed; on-task-end's reopen-task only under a blocking
    `commit_policy: reopen-task`; an err goes to logs/hook-<name>.log and nothing stops."""
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


async def test_an_arm_the_contract_does_not_name_is_a_dispatch_error(tmp_path: Path) -> None:
    """reopen-task from a hook whose commit_policy is none is not committed (reported)."""
    host = _host(tmp_path, HookContract(), on_task_end="reopen")
    end = await host.fire("on-task-end", TASK_END)
    assert end is not None and not end.committed and end.dispatch_error


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
