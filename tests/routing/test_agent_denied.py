"""An agent refused a binary is told the ready route (read from the formation's running
records), and following it with call-member gets the work done by the callee."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from agent.scripted import (
    FakeTrace,
    Reply,
    ScriptedServer,
    agent_manifest,
    oa_text,
    oa_tools,
    task_context,
)
from murmur import procstat
from murmur.agent import AgentWorkload
from murmur.ids import new_id
from murmur.routing.gather import member_refusal
from murmur.session.running_record import RunningRecord, write_running
from murmur.shell import run_shell
from murmur.workload import TaskServices

FRM = "frm_" + "a" * 32


def _record(member: str, name: str, manifest_path: Path, callees: list[str]) -> None:
    write_running(RunningRecord(
        session_id=new_id("ses"), url="http://127.0.0.1:1", pid=os.getpid(),
        start_time=procstat.start_time(os.getpid()) or 0, name=name, version="0.1.0",
        workdir="/tmp", records_dir="/tmp", started_at="2026-01-01T00:00:00Z",
        formation_id=FRM, member=member, callees=callees, manifest_path=str(manifest_path)))


def _write(tmp: Path, name: str, text: str) -> Path:
    d = tmp / name
    d.mkdir()
    (d / "murmur.yaml").write_text(text, encoding="utf-8")
    (d / "plan.yaml").write_text("steps:\n  - id: a\n    shell: [echo, hi]\noutput: x\n", encoding="utf-8")
    return d / "murmur.yaml"


MEMBER = ("name: {name}\nversion: 0.1.0\nplan: plan.yaml\ncapabilities:\n  shell:\n    allow: [{allow}]\n"
          "exports:\n  peer_tasks:\n    accept: true\n")


@pytest.fixture
def formation_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MURMUR_HOME", str(tmp_path / "home"))
    _record("builder", "app-builder", _write(tmp_path, "builder", MEMBER.format(name="app-builder", allow="echo, cargo")), [])
    _record("qa", "app-qa", _write(tmp_path, "qa", MEMBER.format(name="app-qa", allow="echo, cargo, git")), [])
    bindir = tmp_path / "bin"
    bindir.mkdir()
    cargo = bindir / "cargo"
    cargo.write_text("#!/bin/sh\necho \"cargo ran: $*\"\n", encoding="utf-8")
    cargo.chmod(0o755)
    return bindir


async def test_agent_told_ready_route_and_callee_does_the_work(
    provider: ScriptedServer, tmp_path: Path, formation_records: Path
) -> None:
    manifest = agent_manifest(provider.url, shell=("ls",))
    refuse = member_refusal("lead", ("builder",), FRM, manifest)
    done: list[str] = []

    async def call_member(member: str, task: str) -> dict[str, object]:
        # the callee runs the command under its own grant
        res = await run_shell(task.split(), allow=("echo", "cargo"), cwd=tmp_path,
                              env={"PATH": f"{formation_records}:/usr/bin:/bin"})
        done.append(res.stdout_text.strip())
        return {"call_id": "mcl_1", "member": member, "status": "started", "task_id": "tsk_1"}

    async def member_answer(call_id: str) -> dict[str, object]:
        return {"call_id": call_id, "member": "builder", "status": "completed", "output": done[-1]}

    services = TaskServices(call_member=call_member, member_answer=member_answer,
                            callees=("builder",), denied_binary=refuse)
    ctx = task_context(manifest, tmp_path, FakeTrace(), services=services)
    provider.add(
        Reply(oa_tools(("c1", "cargo", {"args": ["build"]}))),
        Reply(oa_tools(("c2", "call-member", {"member": "builder", "task": "cargo build"}))),
        Reply(oa_text("waiting")),
        Reply(oa_text("built")),
    )
    workload = AgentWorkload(manifest, Path("."), environ={"API_KEY": "k", "PATH": "/usr/bin:/bin"})
    with trio.fail_after(30):
        outcome = await workload.run_task(ctx)
    refusal = provider.requests[1].body["messages"][-1]["content"]
    assert "`cargo` is not in capsule 'lead''s capabilities.shell.allow" in refusal
    assert "there is no approval prompt for it" in refusal
    assert 'call-member(member="builder"' in refusal and 'Best first: "builder".' in refusal
    assert "qa" not in refusal  # capable, but lead has no edge to it: never shown to the capsule
    assert "capabilities.shell.allow: [ls, cargo]" in refusal
    assert done == ["cargo ran: build"]
    assert outcome.status == "ok"


async def test_agent_outside_a_formation_gets_the_grant_line_only(provider: ScriptedServer, tmp_path: Path) -> None:
    manifest = agent_manifest(provider.url, shell=("ls",))
    ctx = task_context(manifest, tmp_path, FakeTrace())
    provider.add(Reply(oa_tools(("c1", "cargo", {"args": []}))), Reply(oa_text("ok")))
    workload = AgentWorkload(manifest, Path("."), environ={"API_KEY": "k", "PATH": "/usr/bin:/bin"})
    with trio.fail_after(30):
        await workload.run_task(ctx)
    refusal = provider.requests[1].body["messages"][-1]["content"]
    assert "there is no approval prompt for it" in refusal and "DELEGATE" not in refusal
    assert "capabilities.shell.allow: [ls, cargo]" in refusal


@pytest.mark.parametrize("klass", ["advisory", "scoped"])
async def test_a_kernel_refused_exec_reaches_the_agent_as_the_sandbox_message_with_the_route(
    provider: ScriptedServer, tmp_path: Path, formation_records: Path, klass: str
) -> None:
    """An agent granted only ``sh`` runs ``sh -c 'cargo build'``: under scoped the kernel refuses
    ``cargo`` and the shell tool's result is the ``[sandbox]`` denied-binary message naming the
    ready route; under advisory (the control) cargo runs."""
    from murmur.manifest.model import Containment
    from murmur.sandbox import compiled
    from murmur.sandbox.host import probe
    from murmur.sandbox.installed import install, uninstall
    from murmur.sandbox.policy import from_manifest

    manifest = agent_manifest(provider.url, shell=("sh",))
    services = TaskServices(callees=("builder",), denied_binary=member_refusal("lead", ("builder",), FRM, manifest))
    ctx = task_context(manifest, tmp_path, FakeTrace(), services=services,
                       env={"PATH": f"{formation_records}:/usr/bin:/bin"})
    provider.add(Reply(oa_tools(("c1", "sh", {"args": ["-c", "cargo build"]}))), Reply(oa_text("ok")))
    workload = AgentWorkload(manifest, Path("."), environ={"API_KEY": "k", "PATH": "/usr/bin:/bin"})
    if klass == "scoped":
        lacks = probe().lacks(Containment.SCOPED)
        if lacks:
            pytest.skip(f"this host cannot back scoped: it lacks {'; '.join(lacks)}")
        install(compiled.compile(from_manifest(manifest, Containment.SCOPED, workdir=ctx.workdir,
                                               env=ctx.shell_env)))
    try:
        with trio.fail_after(30):
            await workload.run_task(ctx)
    finally:
        uninstall()
    result = provider.requests[1].body["messages"][-1]["content"]
    if klass == "advisory":
        assert "cargo ran: build" in result and "[sandbox]" not in result, result
        return
    assert "cargo ran" not in result
    assert ("[sandbox] `cargo` is not in capsule 'lead''s capabilities.shell.allow, so the kernel refused to "
            "exec it.\nThis is decided when the capsule starts — there is no approval prompt for it.\n"
            'DELEGATE it instead of asking the user: call-member(member="builder", task=<this exact command, '
            'with absolute paths>). Best first: "builder".') in result, result
    assert "capabilities.shell.allow: [sh, cargo]" in result
