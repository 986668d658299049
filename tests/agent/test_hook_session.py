"""Session-level hooks and compaction: on-stage, on-session-start/-end, run-inference,
`--resume-mode compact` over a reloaded record (spec/components.md "Hooks",
spec/conversations.md "Resume").

The provider is a scripted OpenAI-compatible server (it records what each call sent); hooks are
WAT components assembled at test time (tests/components/wat.py).
"""

from __future__ import annotations

import json
import os
import types
from pathlib import Path

import pytest

from components.wat import SUMMARY, hook
from murmur.agent import AgentWorkload
from murmur.agent.thread import Conversations
from murmur.cli.mur import main
from murmur.conversation.record import RecordStore
from murmur.manifest.load import parse_manifest

from .scripted import FakeTrace, Reply, ScriptedServer, oa_text, task_context

KEY = "sk-test-SECRET-hooks-0123456789"

CAPSULE = """name: talker
version: 0.1.0
artifacts:
  - {{name: {hook}, version: 0.1.0, runtime: hook}}
capabilities:
  shell:
    allow: [echo]
inference:
  transport: http
  endpoint: {endpoint}
  model: m
  api_key: ${{API_KEY}}
  driver: {{artifact: murmur-driver-openai}}
"""


def _install_hook(root: Path, name: str, contract: str, data: bytes) -> None:
    d = root / "src" / name
    d.mkdir(parents=True)
    (d / "murmur.yaml").write_text(f"name: {name}\nversion: 0.1.0\nruntime: hook\n{contract}requires_files: [hook.wasm]\n")
    (d / "hook.wasm").write_bytes(data)
    assert main(["install", str(d)]) == 0


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MURMUR_HOME", str(tmp_path / "home"))
    return tmp_path


def _workload(project: Path, provider: ScriptedServer, name: str, store: RecordStore, **conv: object) -> AgentWorkload:
    text = CAPSULE.format(hook=name, endpoint=provider.url + "/v1")
    (project / "murmur.yaml").write_text(text)
    w = AgentWorkload(parse_manifest(text, path="murmur.yaml"), project,
                      environ={"API_KEY": KEY, "PATH": "/usr/bin:/bin"})
    w.use_conversations(Conversations(store=store, **conv))  # type: ignore[arg-type]
    return w


def _texts(body: object) -> str:
    assert isinstance(body, dict)
    return json.dumps(body["messages"])


async def _first_run(project: Path, provider: ScriptedServer, name: str, store: RecordStore) -> None:
    provider.add(Reply(oa_text("verbatim assistant text")))
    w = _workload(project, provider, name, store)
    ctx = task_context(w.manifest, project, FakeTrace(), text="first task")
    ctx.context_id = "ctx_compact"
    assert (await w.run_task(ctx)).status == "ok"


async def test_resume_compact_summarises_the_record_and_writes_the_summary_beside_it(
    provider: ScriptedServer, project: Path
) -> None:
    """The first task of the resumed context starts from the hook's replace-context; the record
    keeps the lines it stands for byte for byte and gains the summary; a later threaded reload
    starts from the summary too."""
    _install_hook(project, "compactor", "binding: on-compaction\ncommit_policy: replace-context\n",
                  hook(on_compaction="replace"))
    store = RecordStore(project / "home" / "conversations", "talker", "talker", print)
    await _first_run(project, provider, "compactor", store)
    path = project / "home" / "conversations" / "talker" / "ctx_compact" / "conversation.jsonl"
    before = path.read_text().splitlines()

    provider.add(Reply(oa_text("second")), Reply(oa_text("third")))
    w = _workload(project, provider, "compactor", store, load_context="ctx_compact", compact=True)
    trace = FakeTrace()
    ctx = task_context(w.manifest, project, trace, text="second task")
    ctx.context_id = "ctx_compact"
    assert (await w.run_task(ctx)).status == "ok"
    sent = _texts(provider.requests[1].body)
    assert SUMMARY in sent and "second task" in sent
    assert "verbatim assistant text" not in sent and "first task" not in sent
    [event] = trace.of("compaction")
    assert event["hook"] == "compactor" and event["tokens_before"] > event["tokens_after"] > 0

    after = path.read_text().splitlines()
    assert after[: len(before)] == before  # the replaced lines survive byte for byte
    marked = [json.loads(x) for x in after[len(before):] if '"compaction"' in x]
    assert [(x["role"], x["content"]) for x in marked] == [("user", SUMMARY)]

    # a threaded reload of the context (another task, another session) starts from the summary
    w3 = _workload(project, provider, "compactor", store, threaded=True)
    ctx3 = task_context(w3.manifest, project, FakeTrace(), text="third task")
    ctx3.context_id = "ctx_compact"
    assert (await w3.run_task(ctx3)).status == "ok"
    third = _texts(provider.requests[2].body)
    assert SUMMARY in third and "second task" in third and "verbatim assistant text" not in third


async def test_a_compaction_hook_summarises_through_run_inference(provider: ScriptedServer, project: Path) -> None:
    """The hook's run-inference is one call through the session's driver (no tools, the
    record's messages), traced `inference` with origin hook:<name>; its answer becomes the context."""
    _install_hook(project, "summariser", "binding: on-compaction\n", hook(on_compaction="summarise"))
    store = RecordStore(project / "home" / "conversations", "talker", "talker", print)
    await _first_run(project, provider, "summariser", store)
    provider.add(Reply(oa_text("SHORT-VERSION")), Reply(oa_text("done")))
    w = _workload(project, provider, "summariser", store, load_context="ctx_compact", compact=True)
    trace = FakeTrace()
    ctx = task_context(w.manifest, project, trace, text="go on")
    ctx.context_id = "ctx_compact"
    assert (await w.run_task(ctx)).answer == "done"
    asked = provider.requests[1].body
    assert "first task" in _texts(asked) and "verbatim assistant text" in _texts(asked)
    assert not asked.get("tools")  # type: ignore[union-attr]
    task_turn = _texts(provider.requests[2].body)
    assert "SHORT-VERSION" in task_turn and "verbatim assistant text" not in task_turn
    [hooked] = [r for r in trace.of("inference") if r.get("origin") == "hook:summariser"]
    assert hooked["output_tokens"] == 5


async def test_a_failing_compaction_hook_fails_the_task_and_the_session(provider: ScriptedServer, project: Path) -> None:
    _install_hook(project, "breaker", "", hook(on_compaction="err"))
    store = RecordStore(project / "home" / "conversations", "talker", "talker", print)
    await _first_run(project, provider, "breaker", store)
    w = _workload(project, provider, "breaker", store, load_context="ctx_compact", compact=True)
    trace = FakeTrace()
    ctx = task_context(w.manifest, project, trace, text="go on")
    ctx.context_id = "ctx_compact"
    outcome = await w.run_task(ctx)
    assert outcome.status == "failed" and "compaction hook failed: breaker: the hook failed." in outcome.answer
    assert [r["cause"] for r in trace.of("task_failed")] == ["compaction_hook"]
    assert w.session_hooks is not None and w.session_hooks.failed.is_set()
    assert len(provider.requests) == 1  # no turn ran on the uncompacted context
    assert "on-compaction: the hook failed." in (ctx.records_dir / "logs" / "hook-breaker.log").read_text()


async def test_no_replacement_is_declined_and_the_task_goes_on(provider: ScriptedServer, project: Path) -> None:
    """A hook that answers none: compaction_declined (no_hook_replacement), the full record is sent."""
    _install_hook(project, "quiet", "", hook())
    store = RecordStore(project / "home" / "conversations", "talker", "talker", print)
    await _first_run(project, provider, "quiet", store)
    provider.add(Reply(oa_text("ok")))
    w = _workload(project, provider, "quiet", store, load_context="ctx_compact", compact=True)
    trace = FakeTrace()
    ctx = task_context(w.manifest, project, trace, text="go on")
    ctx.context_id = "ctx_compact"
    assert (await w.run_task(ctx)).status == "ok"
    assert [r["reason"] for r in trace.of("compaction_declined")] == ["no_hook_replacement"]
    assert "verbatim assistant text" in _texts(provider.requests[1].body)
    assert "no hook returned replace-context" in (ctx.records_dir / "logs" / "bootstrap.log").read_text()


async def test_a_session_fires_on_stage_session_start_and_session_end(provider: ScriptedServer, project: Path) -> None:
    """A whole session (the composition root, in process): on-stage writes the manifests it
    commits; on-session-start and on-session-end are dispatched once each (their errs are in the
    hook's log, and the session is unharmed); the end carries the launch totals."""
    from murmur.assembly import RunOptions, prepare
    from murmur.session import Session

    _install_hook(project, "watcher", "", hook(on_stage="manifests", on_session_start="err", on_session_end="err",
                                               on_inference="artifact"))
    (project / "murmur.yaml").write_text(CAPSULE.format(hook="watcher", endpoint=provider.url + "/v1"))
    provider.add(Reply(oa_text("the answer")))
    setup = prepare(RunOptions(manifest=str(project), workdir=str(project / "work"), no_env_file=True, task="hi"),
                    environ={"PATH": os.environ["PATH"], "API_KEY": KEY}, cwd=project)
    setup.guard = None
    summary = await Session(setup).run()
    assert summary.status == "ok", summary
    logs = setup.records.root / "logs" / "hook-watcher.log"
    assert logs.read_text().splitlines() == ["on-session-start: the hook failed.", "on-session-end: the hook failed."]
    assert (setup.records.root / "tools" / "rg" / "murmur.yaml").read_text() == "name: rg\n"
    records = [json.loads(x) for x in setup.records.trace.read_text().splitlines()]
    kinds = [r["event_type"] for r in records]
    errors = [r for r in records if r["event_type"] == "hook_error"]
    assert [e["handler"] for e in errors] == ["on-session-start", "on-session-end"]
    start = next(r for r in records if r["event_type"] == "session_start")
    assert errors[0]["parent_id"] == start["event_id"] and "task_id" not in errors[0]
    assert kinds.index("hook_error") < kinds.index("task_start")  # session start before the task
    assert kinds.index("hook_artifact") > kinds.index("task_start")


async def test_a_slow_session_end_hook_cannot_hold_up_a_wind_down(autojump_clock: object) -> None:
    """on-session-end is bounded during a wind-down (END_BUDGET, on a MockClock), whatever the hook does."""
    import trio

    from murmur.agent.lifecycle import END_BUDGET, SessionHooks

    class Slow:
        class component:
            name = "slow"

        async def fire(self, handler: str, fields: object) -> None:
            await trio.sleep(3600)

    class W:
        def hooks_for(self, ctx: object) -> list[object]:
            return [Slow()]

    hooks = SessionHooks(W())  # type: ignore[arg-type]
    hooks.ctx = types.SimpleNamespace(task_id="", task_event_id="evt_s", trace=FakeTrace())  # type: ignore[assignment]
    started = trio.current_time()
    await hooks.end("canceled", winding_down=True)
    assert trio.current_time() - started == pytest.approx(END_BUDGET)


async def test_mur_run_resume_compact_end_to_end_in_process(provider: ScriptedServer, project: Path) -> None:
    """Two launches through the composition root: a first run under --context, then
    `--resume @1 --resume-mode compact`, whose model request carries the hook's summary and not
    the first run's words; session_start says what it resumed."""
    from murmur.assembly import RunOptions, prepare
    from murmur.session import Session

    _install_hook(project, "compactor", "binding: on-compaction\ncommit_policy: replace-context\n",
                  hook(on_compaction="replace"))
    (project / "murmur.yaml").write_text(CAPSULE.format(hook="compactor", endpoint=provider.url + "/v1"))
    env = {"PATH": os.environ["PATH"], "API_KEY": KEY}
    provider.add(Reply(oa_text("verbatim assistant text")), Reply(oa_text("second reply")))

    async def launch(**kw: object) -> object:
        setup = prepare(RunOptions(manifest=str(project), workdir=str(project / "work"), no_env_file=True, **kw),  # type: ignore[arg-type]
                        environ=env, cwd=project)
        setup.guard = None
        summary = await Session(setup).run()
        assert summary.status == "ok", summary
        return setup

    await launch(task="first task", context="ctx_e2e")
    second = await launch(task="second task", resume="@1", resume_mode="compact")
    sent = _texts(provider.requests[1].body)
    assert SUMMARY in sent and "second task" in sent and "verbatim assistant text" not in sent
    records = [json.loads(x) for x in second.records.trace.read_text().splitlines()]  # type: ignore[attr-defined]
    start = next(r for r in records if r["event_type"] == "session_start")
    assert start["context_id"] == "ctx_e2e" and start["resumed_from"]
    assert [r["event_type"] for r in records].count("compaction") == 1


MID_TASK = """context:
  max_tokens: 20
"""


async def test_on_compaction_fires_mid_task_past_the_threshold(provider: ScriptedServer, project: Path) -> None:
    """context.max_tokens: 20 and threshold 0.5: the first reply's 15 tokens cross it, so the
    hook's replace-context becomes the context before the reply is added (no turn taken); the
    next request starts from the summary; dump_summaries writes out/compaction-summaries.jsonl."""
    from .scripted import oa_tools

    _install_hook(project, "compactor", "binding: on-compaction\n", hook(on_compaction="replace"))
    store = RecordStore(project / "home" / "conversations", "talker", "talker", print)
    text = CAPSULE.format(hook="compactor", endpoint=provider.url + "/v1") + \
        "  compaction: {threshold: 0.5, model: small-model, dump_summaries: true}\n" + MID_TASK
    (project / "murmur.yaml").write_text(text)
    w = AgentWorkload(parse_manifest(text, path="murmur.yaml"), project, environ={"API_KEY": KEY, "PATH": "/usr/bin:/bin"})
    w.use_conversations(Conversations(store=store))
    provider.add(Reply(oa_tools(("c1", "echo", {"args": ["x"]}), prompt=10, completion=5)), Reply(oa_text("done", prompt=3, completion=1)))
    trace = FakeTrace()
    ctx = task_context(w.manifest, project, trace, text="the long original task")
    outcome = await w.run_task(ctx)
    assert outcome.answer == "done"
    second = _texts(provider.requests[1].body)
    assert SUMMARY in second and "the long original task" not in second and "c1" in second
    [event] = trace.of("compaction")
    assert event["turn"] == 1 and ctx.usage.turns == 2
    [dumped] = [json.loads(x) for x in (ctx.records_dir / "out" / "compaction-summaries.jsonl").read_text().splitlines()]
    assert dumped["turn"] == 1 and dumped["summary"] == SUMMARY


async def test_below_the_threshold_nothing_fires(provider: ScriptedServer, project: Path) -> None:
    _install_hook(project, "breaker", "", hook(on_compaction="err"))
    text = CAPSULE.format(hook="breaker", endpoint=provider.url + "/v1") + "context:\n  max_tokens: 1000\n"
    (project / "murmur.yaml").write_text(text)
    w = AgentWorkload(parse_manifest(text, path="murmur.yaml"), project, environ={"API_KEY": KEY, "PATH": "/usr/bin:/bin"})
    provider.add(Reply(oa_text("fine")))
    trace = FakeTrace()
    assert (await w.run_task(task_context(w.manifest, project, trace, text="t"))).answer == "fine"
    assert trace.of("compaction") == [] and trace.of("hook_error") == []


async def test_a_failing_hook_mid_task_fails_the_task_before_another_turn(provider: ScriptedServer, project: Path) -> None:
    _install_hook(project, "breaker", "", hook(on_compaction="err"))
    text = CAPSULE.format(hook="breaker", endpoint=provider.url + "/v1") + MID_TASK
    (project / "murmur.yaml").write_text(text)
    w = AgentWorkload(parse_manifest(text, path="murmur.yaml"), project, environ={"API_KEY": KEY, "PATH": "/usr/bin:/bin"})
    provider.add(Reply(oa_text("too long", prompt=30, completion=5)))
    trace = FakeTrace()
    outcome = await w.run_task(task_context(w.manifest, project, trace, text="t"))
    assert outcome.status == "failed" and "compaction hook failed" in outcome.answer
    assert [r["cause"] for r in trace.of("task_failed")] == ["compaction_hook"]
    assert w.session_hooks is not None and w.session_hooks.failed.is_set() and len(provider.requests) == 1


async def test_a_failed_compaction_winds_a_queue_session_down_failed(provider: ScriptedServer, project: Path) -> None:
    """A queue session (it would sleep after its task) ends `failed` once a compaction hook failed."""
    import trio

    from murmur.assembly import RunOptions, prepare
    from murmur.session import Session

    _install_hook(project, "breaker", "", hook(on_compaction="err"))
    (project / "murmur.yaml").write_text(CAPSULE.format(hook="breaker", endpoint=provider.url + "/v1") + MID_TASK
                                         + "lifecycle:\n  task_acceptance: queue\n  after_task: sleep\n")
    provider.add(Reply(oa_text("too long", prompt=30, completion=5)))
    setup = prepare(RunOptions(manifest=str(project), workdir=str(project / "work"), no_env_file=True, task="t"),
                    environ={"PATH": os.environ["PATH"], "API_KEY": KEY}, cwd=project)
    setup.guard = None
    with trio.fail_after(30):
        summary = await Session(setup).run()
    assert summary.status == "failed"
    records = [json.loads(x) for x in setup.records.trace.read_text().splitlines()]
    assert [r["exit_status"] for r in records if r["event_type"] == "session_end"] == ["failed"]


async def test_an_async_hooks_session_end_is_drained_before_the_session_ends(provider: ScriptedServer, project: Path) -> None:
    """An async hook's events are queued for its worker; its on-session-end still runs before the
    session ends (the queue is drained), and its err is in its log."""
    from murmur.assembly import RunOptions, prepare
    from murmur.session import Session

    _install_hook(project, "observer", "execution_mode: async\n", hook(on_session_end="err", on_inference="err"))
    (project / "murmur.yaml").write_text(CAPSULE.format(hook="observer", endpoint=provider.url + "/v1"))
    provider.add(Reply(oa_text("the answer")))
    setup = prepare(RunOptions(manifest=str(project), workdir=str(project / "work"), no_env_file=True, task="hi"),
                    environ={"PATH": os.environ["PATH"], "API_KEY": KEY}, cwd=project)
    setup.guard = None
    assert (await Session(setup).run()).status == "ok"
    lines = (setup.records.root / "logs" / "hook-observer.log").read_text().splitlines()
    assert lines == ["on-inference: the hook failed.", "on-session-end: the hook failed."]


async def test_a_hook_missing_its_handlers_refuses_the_launch(provider: ScriptedServer, project: Path) -> None:
    """A hook component without the lifecycle export refuses the launch (E-CMP-002), before
    anything runs or any request is sent."""
    from components.wat import component
    from murmur.assembly import RunOptions, prepare
    from murmur.errors import DiagnosticError

    _install_hook(project, "notahook", "", component("echo"))
    (project / "murmur.yaml").write_text(CAPSULE.format(hook="notahook", endpoint=provider.url + "/v1"))
    with pytest.raises(DiagnosticError) as info:
        prepare(RunOptions(manifest=str(project), workdir=str(project / "work"), no_env_file=True, task="hi"),
                environ={"PATH": os.environ["PATH"], "API_KEY": KEY}, cwd=project)
    assert info.value.diagnostics[0].code == "E-CMP-002" and provider.requests == []
