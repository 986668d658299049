"""Artifacts in the agent loop: a WASM driver, WASM/native tools and skills (spec/components.md)."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from agent.scripted import FakeTrace, task_context
from components.wat import component
from murmur.agent.agent_workload import AgentWorkload
from murmur.agent.components import call_component_tool, load_component_tools
from murmur.agent.transports import InferenceError
from murmur.agent.transports.wasm import parse_reply
from murmur.cli.mur import main
from murmur.errors import DiagnosticError
from murmur.manifest.load import parse_manifest


def _install(tmp_path: Path, name: str, manifest: str, files: dict[str, bytes], *, mode: int = 0o644) -> None:
    d = tmp_path / "src" / name
    d.mkdir(parents=True)
    (d / "murmur.yaml").write_text(manifest)
    for rel, data in files.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(data)
        (d / rel).chmod(mode)
    assert main(["install", str(d)]) == 0


CAPSULE = """name: agent
version: 0.1.0
artifacts:
  - {{name: scripted-driver, version: 0.1.0, runtime: driver}}
{tools}
inference:
  transport: http
  endpoint: http://127.0.0.1:9
  model: scripted
  driver: {{artifact: scripted-driver}}
{extra}
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    _install(tmp_path, "scripted-driver", "name: scripted-driver\nversion: 0.1.0\nruntime: driver\n"
             "requires_files: [driver.wasm]\n", {"driver.wasm": component("driver")})
    return tmp_path


def _capsule(project: Path, tools: str, extra: str = "") -> tuple[object, Path]:
    text = CAPSULE.format(tools=tools, extra=extra)
    (project / "murmur.yaml").write_text(text)
    return parse_manifest(text, path="murmur.yaml"), project


async def test_two_turn_task_with_wasm_driver_and_wasm_tool(project: Path) -> None:
    """The quickstart shape: a WASM driver calls a WASM tool, then answers; each call is a
    tool_call record; usage comes from the driver's reply."""
    _install(project, "echo", "name: echo\nversion: 0.1.0\nruntime: tool\ndescription: says it back\n"
             "input_schema: {type: object, properties: {text: {type: string}}}\nrequires_files: [echo.wasm]\n",
             {"echo.wasm": component("echo")})
    manifest, root = _capsule(project, "  - {name: echo, version: 0.1.0}")
    workload = AgentWorkload(manifest, root)  # type: ignore[arg-type]
    trace = FakeTrace()
    ctx = task_context(manifest, project, trace)  # type: ignore[arg-type]
    outcome = await workload.run_task(ctx)
    assert (outcome.status, outcome.answer) == ("ok", "the tool answered")
    [call] = trace.of("tool_call")
    assert (call["tool_name"], call["status"], call["input"]) == ("echo", "ok", {"text": "hi"})
    assert [r["stop_reason"] for r in trace.of("inference")] == ["tool_call", "end_turn"]
    assert (ctx.usage.input_tokens, ctx.usage.output_tokens) == (30, 11)
    assert workload.tools_declared(ctx.services) == ("echo",)


def test_tool_not_installed_is_refused_at_launch(project: Path) -> None:
    """An artifact tool that is not installed refuses the launch (E-REG-001), before any task."""
    manifest, root = _capsule(project, "  - {name: absent, version: 0.1.0}")
    with pytest.raises(DiagnosticError) as info:
        AgentWorkload(manifest, root)  # type: ignore[arg-type]
    assert info.value.diagnostics[0].code == "E-REG-001"


def test_tool_built_for_another_version_is_refused_at_launch(project: Path) -> None:
    """A tool component built against murmur:tool/run@0.2.0 refuses the launch naming both versions."""
    _install(project, "newer", "name: newer\nversion: 0.1.0\nruntime: tool\nrequires_files: [n.wasm]\n",
             {"n.wasm": component("echo", tool="0.2.0")})
    manifest, root = _capsule(project, "  - {name: newer, version: 0.1.0}")
    with pytest.raises(DiagnosticError) as info:
        AgentWorkload(manifest, root)  # type: ignore[arg-type]
    d = info.value.diagnostics[0]
    assert d.code == "E-CMP-001" and "0.2.0" in d.message and "0.1.0" in d.message


async def test_skill_is_a_zero_argument_tool_or_the_system_prompt(project: Path) -> None:
    """A skill is offered with an empty schema and returns skill.md (skill_call record); named by
    inference.system_prompt_artifact it is the system prompt instead, and not a tool."""
    _install(project, "style", "name: style\nversion: 0.1.0\nruntime: skill\n", {"skill.md": b"\n# Write plainly\nShort words.\n"})
    manifest, root = _capsule(project, "  - {name: style, version: 0.1.0, runtime: skill}")
    [tool] = load_component_tools(manifest, root)  # type: ignore[arg-type]
    assert (tool.kind, tool.description, tool.parameters) == ("skill", "Write plainly", {"type": "object", "properties": {}})
    trace = FakeTrace()
    text, is_error = await call_component_tool(tool, task_context(manifest, project, trace), {}, "{}")  # type: ignore[arg-type]
    assert "Short words." in text and not is_error
    assert trace.of("skill_call")[0]["skill"] == "style"
    bound, root = _capsule(project, "  - {name: style, version: 0.1.0, runtime: skill}",
                           "  system_prompt_artifact: style")
    text_yaml = (project / "murmur.yaml").read_text().replace("\n  system_prompt_artifact", "\n  system_prompt_artifact")
    assert "system_prompt_artifact" in text_yaml
    workload = AgentWorkload(bound, root)  # type: ignore[arg-type]
    assert workload.components == {} and "Short words." in (workload.config.system_prompt or "")


async def test_a_tool_component_asks_the_tasks_user(project: Path) -> None:
    """A tool's request-input import reaches TaskContext.request_input (the door's
    input-required seam, spec/conversations.md); with nobody to answer it fails as upstream."""
    import attrs

    _install(project, "asking", "name: asking\nversion: 0.1.0\nruntime: tool\nrequires_files: [tool.wasm]\n",
             {"tool.wasm": component("asking")})
    manifest, root = _capsule(project, "  - {name: asking, version: 0.1.0, runtime: tool}")
    [tool] = load_component_tools(manifest, root)  # type: ignore[arg-type]
    asked: list[str] = []

    async def ask(prompt: str) -> str:
        asked.append(prompt)
        return "Ada"

    ctx = attrs.evolve(task_context(manifest, project, FakeTrace()), ask=ask)  # type: ignore[arg-type]
    text, is_error = await call_component_tool(tool, ctx, {}, "your name?")
    assert asked == ["your name?"] and "Ada" in text and not is_error
    # negative control: a --task run (no A2A task) cannot be asked
    text, is_error = await call_component_tool(tool, task_context(manifest, project, FakeTrace()), {}, "x")  # type: ignore[arg-type]
    assert is_error and "Ada" not in text


NATIVE = b"""#!/bin/sh
input=$(cat)
printf '{"status":"passed","summary":"ok","data":{"home":"%s","murmur":"%s","input":%s}}' \\
  "$HOME" "$(env | grep -c '^MURMUR_')" "$input"
"""


async def test_native_tool_protocol(project: Path) -> None:
    """A native tool gets {"data", "log_path"} on stdin, HOME=<workdir>/.capsule-home and no
    MURMUR_* variables; JSON `data` that is not text is re-serialised."""
    _install(project, "nat", "name: nat\nversion: 0.1.0\nruntime: tool\nimplementation: native\n"
             "requires_files: [bin/nat]\n", {"bin/nat": NATIVE}, mode=0o755)
    manifest, root = _capsule(project, "  - {name: nat, version: 0.1.0}")
    [tool] = load_component_tools(manifest, root)  # type: ignore[arg-type]
    ctx = task_context(manifest, project, FakeTrace(), env={"PATH": "/usr/bin:/bin", "MURMUR_SECRETISH": "x"})  # type: ignore[arg-type]
    text, is_error = await call_component_tool(tool, ctx, {"q": 1}, '{"q":1}')
    assert not is_error
    body = json.loads(text.split("\n", 1)[1].rsplit("\n", 1)[0])  # inside the fence
    assert body == {"home": str(ctx.workdir / ".capsule-home"), "murmur": "0",
                    "input": {"data": '{"q":1}', "log_path": None}}


async def test_native_tool_fallbacks(project: Path) -> None:
    """Empty stdout: status from the exit code and data = stderr; non-JSON stdout: raw data."""
    _install(project, "quiet", "name: quiet\nversion: 0.1.0\nruntime: tool\nimplementation: native\n"
             "requires_files: [bin/quiet]\n", {"bin/quiet": b"#!/bin/sh\necho oops >&2\nexit 3\n"}, mode=0o755)
    _install(project, "plain", "name: plain\nversion: 0.1.0\nruntime: tool\nimplementation: native\n"
             "requires_files: [bin/plain]\n", {"bin/plain": b"#!/bin/sh\necho just text\n"}, mode=0o755)
    manifest, root = _capsule(project, "  - {name: quiet, version: 0.1.0}\n  - {name: plain, version: 0.1.0}")
    quiet, plain = load_component_tools(manifest, root)  # type: ignore[arg-type]
    ctx = task_context(manifest, project, FakeTrace())  # type: ignore[arg-type]
    text, is_error = await call_component_tool(quiet, ctx, {}, "{}")
    assert is_error and "oops" in text
    text, is_error = await call_component_tool(plain, ctx, {}, "{}")
    assert not is_error and "just text" in text


@pytest.mark.parametrize("status, data, message", [
    ("failed", "boom", "the driver failed: boom"),
    ("passed", '{"stop_reason":"tool_call","content":[]}', "no tool_call blocks were present"),
    ("passed", '{"stop_reason":"error","content":[],"error":"rate limited"}', "rate limited"),
    ("passed", '{"stop_reason":"pause","content":[]}', "unsupported stop_reason 'pause'"),
    ("passed", "not json", "not JSON"),
])
def test_driver_reply_table(status: str, data: str, message: str) -> None:
    """Upstream's stop_reason table: each failing reply fails the turn with its words."""
    with pytest.raises(InferenceError) as info:
        parse_reply(status, data, None)
    assert message in info.value.message


def test_driver_max_tokens_is_truncated_text() -> None:
    """max_tokens ends the turn with the text, marked truncated; a bad usage member is dropped."""
    got = parse_reply("passed", '{"stop_reason":"max_tokens","content":[{"type":"text","text":"a"},'
                      '{"type":"text","text":"b"}],"usage":{"input_tokens":3,"output_tokens":"x"}}', None)
    assert (got.text, got.truncated, got.input_tokens, got.output_tokens) == ("ab", True, 3, 0)


async def test_script_capsule_session_invokes_installed_tool(project: Path) -> None:
    """A capsule with no workload and a capsule.wasm runs it per task; its tool-registry
    invoke reaches the installed WASM tool (a tool_call record)."""
    from murmur.assembly.workload_choice import load_workload

    _install(project, "echo", "name: echo\nversion: 0.1.0\nruntime: tool\nrequires_files: [echo.wasm]\n",
             {"echo.wasm": component("echo")})
    text = "name: scripted\nversion: 0.1.0\nrequires_files: [capsule.wasm]\nartifacts:\n  - {name: echo, version: 0.1.0}\n"
    (project / "murmur.yaml").write_text(text)
    (project / "capsule.wasm").write_bytes(component("script"))
    manifest = parse_manifest(text, path="murmur.yaml")
    workload = load_workload(manifest, project, {})
    trace = FakeTrace()
    outcome = await workload.run_task(task_context(manifest, project, trace))
    assert outcome.status == "ok", outcome
    assert [(r["tool_name"], r["status"]) for r in trace.of("tool_call")] == [("echo", "ok")]


async def test_script_capsule_found_beside_the_manifest(project: Path) -> None:
    """As upstream's `mur run`: a capsule with no workload whose requires_files lists no
    component runs the capsule.wasm beside its manifest (else the one root *.wasm); none, or
    several with no capsule.wasm, is E-MAN-005."""
    from murmur.agent.script import ScriptWorkload
    from murmur.assembly.workload_choice import load_workload
    from murmur.manifest.support import component_beside, unsupported

    _install(project, "echo", "name: echo\nversion: 0.1.0\nruntime: tool\nrequires_files: [echo.wasm]\n",
             {"echo.wasm": component("echo")})
    text = "name: scripted\nversion: 0.1.0\nartifacts:\n  - {name: echo, version: 0.1.0}\n"
    (project / "murmur.yaml").write_text(text)
    manifest = parse_manifest(text, path="murmur.yaml")
    with pytest.raises(DiagnosticError) as info:  # nothing beside it yet
        load_workload(manifest, project, {})
    assert info.value.code == "E-MAN-005" and [d.code for d in unsupported(manifest, root=project)] == ["E-MAN-005"]
    (project / "a.wasm").write_bytes(component("script"))
    (project / "b.wasm").write_bytes(component("script"))
    assert component_beside(project) is None  # several, none of them capsule.wasm
    (project / "b.wasm").unlink()
    assert component_beside(project) == "a.wasm"
    (project / "capsule.wasm").write_bytes(component("script"))
    assert component_beside(project) == "capsule.wasm" and unsupported(manifest, root=project) == []
    assert [d.code for d in unsupported(manifest)] == ["E-MAN-005"]  # the manifest alone packs none
    workload = load_workload(manifest, project, {})
    assert isinstance(workload, ScriptWorkload)
    trace = FakeTrace()
    outcome = await workload.run_task(task_context(manifest, project, trace))
    assert outcome.status == "ok" and [r["tool_name"] for r in trace.of("tool_call")] == ["echo"]


def test_formation_peers_in_roster_order_and_absent_for_nobody(tmp_path: Path) -> None:
    """Components get MURMUR_FORMATION_PEERS in roster order; it is absent (not empty) when the
    member may call nobody; native tools never get it (they get no MURMUR_* at all)."""
    from agent.scripted import agent_manifest
    from murmur.agent.components import component_env
    from murmur.workload import TaskServices

    m = agent_manifest("http://127.0.0.1:9")
    with_peers = task_context(m, tmp_path, FakeTrace(), services=TaskServices(callees=("coder", "reviewer")))
    env = dict(component_env(with_peers))
    assert env["MURMUR_FORMATION_PEERS"] == "coder=http://coder.formation.invalid reviewer=http://reviewer.formation.invalid"
    alone = task_context(m, tmp_path, FakeTrace())
    assert "MURMUR_FORMATION_PEERS" not in dict(component_env(alone))


async def test_hooks_see_the_task_and_reopen_it(project: Path) -> None:
    """A blocking hook with `commit_policy: reopen-task` gets on-task-start, on-inference (its
    artifact is a hook_artifact record), on-tool-call (its error goes to logs/hook-<name>.log),
    and on-task-end, whose reopen-task runs the task once more (the default
    max_task_reopens: 1); asking again after that ends it reopen_budget_exhausted."""
    from components.wat import hook

    _install(project, "echo", "name: echo\nversion: 0.1.0\nruntime: tool\nrequires_files: [echo.wasm]\n",
             {"echo.wasm": component("echo")})
    _install(project, "recorder", "name: recorder\nversion: 0.1.0\nruntime: hook\nexecution_mode: blocking\n"
             "commit_policy: reopen-task\nrequires_files: [hook.wasm]\n",
             {"hook.wasm": hook(on_inference="artifact", on_tool_call="err", on_task_end="reopen")})
    manifest, root = _capsule(project, "  - {name: echo, version: 0.1.0}\n  - {name: recorder, version: 0.1.0, runtime: hook}")
    workload = AgentWorkload(manifest, root)  # type: ignore[arg-type]
    trace = FakeTrace()
    ctx = task_context(manifest, project, trace)  # type: ignore[arg-type]
    outcome = await workload.run_task(ctx)
    assert outcome.status == "reopen_budget_exhausted" and "again!" in outcome.answer
    assert [(r["ordinal"], r["feedback"]) for r in trace.of("task_reopened")] == [(1, "again!")]
    assert ctx.usage.turns == 4  # both attempts count against one max_turns
    assert [r["text"] for r in trace.of("hook_artifact")] == ["seen"] * 4  # 2 turns x 2 runs
    log = (ctx.records_dir / "logs" / "hook-recorder.log").read_text()
    assert log.count("on-tool-call: the hook failed.") == 2
    assert workload.tools_declared(ctx.services) == ("echo",)  # hooks are hidden from the model


async def test_max_task_reopens_zero_disables_reopening(project: Path) -> None:
    """`inference.max_task_reopens: 0`: the first reopen request ends the task."""
    from components.wat import hook

    _install(project, "gate", "name: gate\nversion: 0.1.0\nruntime: hook\nbinding: on-task-end\n"
             "commit_policy: reopen-task\nrequires_files: [hook.wasm]\n", {"hook.wasm": hook(on_task_end="reopen")})
    _install(project, "echo", "name: echo\nversion: 0.1.0\nruntime: tool\nrequires_files: [echo.wasm]\n",
             {"echo.wasm": component("echo")})
    manifest, root = _capsule(project, "  - {name: echo, version: 0.1.0}\n  - {name: gate, version: 0.1.0, runtime: hook}",
                              "  max_task_reopens: 0")
    trace = FakeTrace()
    outcome = await AgentWorkload(manifest, root).run_task(task_context(manifest, project, trace))  # type: ignore[arg-type]
    assert outcome.status == "reopen_budget_exhausted" and trace.of("task_reopened") == []


async def test_tool_chunks_reach_the_a2a_stream(project: Path) -> None:
    """A streaming subscriber of a door task sees a WASM tool's emit-chunk and
    emit-thinking-chunk pieces as artifactUpdate frames (`text`, `thinking`, lastChunk false),
    before the task's response and its completion."""
    import httpx

    from murmur.manifest import AfterTask, Lifecycle, TaskAcceptance
    from session.helpers import make_setup, rpc, running, send_params, sse_events

    _install(project, "echo", "name: echo\nversion: 0.1.0\nruntime: tool\nrequires_files: [echo.wasm]\n",
             {"echo.wasm": component("chunky")})
    manifest, root = _capsule(project, "  - {name: echo, version: 0.1.0}")
    manifest = attrs.evolve(manifest, lifecycle=Lifecycle(task_acceptance=TaskAcceptance.QUEUE,  # type: ignore[misc]
                                                          after_task=AfterTask.SLEEP))
    setup = make_setup(project, manifest, AgentWorkload(manifest, root))  # type: ignore[arg-type]
    async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
        r = await rpc(c, "SendStreamingMessage", send_params("go"), rid=3)
        events = [e["result"] for e in sse_events(r.text)]
    updates = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    chunks = [(u["artifact"]["artifactId"], u["artifact"]["parts"][0]["text"], u.get("append", False), u["lastChunk"])
              for u in updates if u["artifact"]["artifactId"] in ("text", "thinking")]
    assert chunks == [("text", '{"text":"hi"}', False, False), ("thinking", '{"text":"hi"}', False, False)]
    assert updates[0]["artifact"]["metadata"] == {"murmur": {"source": "echo"}}
    kinds = [next(iter(e)) for e in events]
    assert kinds[-1] == "statusUpdate" and events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert updates[-1]["artifact"]["artifactId"] == "response"


def test_a_hook_gets_upstreams_hook_environment(tmp_path: Path) -> None:
    """Hooks get MURMUR_OTEL_ENDPOINT / MURMUR_FORMATION_ID (and the peers), never the identity
    variables tools and drivers get."""
    import attrs as _attrs

    from agent.scripted import agent_manifest
    from murmur.agent.components import hook_env
    from murmur.manifest.model import Observability
    from murmur.workload import TaskServices

    m = _attrs.evolve(agent_manifest("http://127.0.0.1:9"), observability=Observability(otel_endpoint="http://127.0.0.1:4318"))
    ctx = task_context(m, tmp_path, FakeTrace(), services=TaskServices(callees=("coder",)))
    ctx.formation_id = "frm_1"
    assert dict(hook_env(ctx)) == {"MURMUR_OTEL_ENDPOINT": "http://127.0.0.1:4318", "MURMUR_FORMATION_ID": "frm_1",
                                   "MURMUR_FORMATION_PEERS": "coder=http://coder.formation.invalid"}
    assert hook_env(task_context(agent_manifest("http://127.0.0.1:9"), tmp_path, FakeTrace())) == ()


async def test_cancel_task_during_a_long_component_call_ends_the_task(project: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """CancelTask while a WASM tool spins: the task ends CANCELED (its trace says so) without
    waiting for the tool's 600 s deadline (the guest's thread is stopped at the next epoch
    ticks: tests/components/test_host.py, benchmarks/components.py "cancel -> stop")."""
    import httpx
    import trio

    from murmur.components import host as host_mod
    from murmur.manifest import AfterTask, Lifecycle, TaskAcceptance
    from murmur.session.states import TaskState
    from session.helpers import make_setup, result, running, send_params

    _install(project, "echo", "name: echo\nversion: 0.1.0\nruntime: tool\nrequires_files: [echo.wasm]\n",
             {"echo.wasm": component("spin")})
    calling = trio.Event()
    real = host_mod.call_tool

    async def watched(comp: object, *args: object, **kw: object) -> object:
        if getattr(comp, "role", "") == "tool":
            calling.set()
        return await real(comp, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(host_mod, "call_tool", watched)
    manifest, root = _capsule(project, "  - {name: echo, version: 0.1.0}")
    manifest = attrs.evolve(manifest, lifecycle=Lifecycle(task_acceptance=TaskAcceptance.QUEUE,  # type: ignore[misc]
                                                          after_task=AfterTask.SLEEP))
    setup = make_setup(project, manifest, AgentWorkload(manifest, root))  # type: ignore[arg-type]
    async with running(setup) as h, httpx.AsyncClient(base_url=h.url) as c:
        tid = (await result(c, "SendMessage", send_params("go", returnImmediately=True)))["task"]["id"]
        with trio.fail_after(20):  # the driver's first turn asks for the (spinning) tool
            await calling.wait()
        await result(c, "CancelTask", {"id": tid})
        task = h.session.get_task(tid)
        assert task is not None
        with trio.fail_after(10):
            while task.state is not TaskState.CANCELED:
                await task.changed().wait()
        assert (await result(c, "GetTask", {"id": tid}))["status"]["state"] == "TASK_STATE_CANCELED"
    kinds = [json.loads(x)["event_type"] for x in setup.records.trace.read_text().splitlines()]
    assert "task_canceled" in kinds and "tool_call" not in kinds  # the call never finished
