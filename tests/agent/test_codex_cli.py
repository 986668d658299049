"""The real Codex CLI (``@openai/codex``, installed from npm) started with the Codex
protocol's invocation against the scripted Responses server on loopback.

Each test writes the invocation's files, runs ``argv`` through :func:`murmur.shell.run_shell`
(its own containment unit, killed as a whole when the CLI exits or the test fails), feeds
stdout to the protocol's parser and checks the events and what the model endpoint received.
Skipped only when the npm registry is unreachable (``tests/agent/npm_cli.py``).
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import attrs
import pytest
import trio

from murmur import containment, procstat
from murmur.agent import AgentWorkload
from murmur.agent.harness.codex import KEY_ENV, PROTOCOL
from murmur.agent.harness.protocol import (
    Answer,
    Event,
    HarnessFailure,
    HarnessRequest,
    HarnessSession,
    InferenceTurn,
    ToolUse,
)
from murmur.agent.harness.sessions import HarnessMap
from murmur.agent.thread import Conversations
from murmur.manifest.model import Inference, Manifest, Transport
from murmur.shell import ShellResult, run_shell

from .npm_cli import npm_bin
from .scripted import FakeTrace, files_under, live_in_group, task_context
from .scripted_openai import (
    ModelReply,
    ScriptedResponses,
    exec_call,
    function_outputs,
    input_texts,
    message,
)

KEY = "sk-codex-test-3c1f0e9b"
RUN_BOUND = 120.0  # seconds for one CLI run (a cold start is ~2 s here)


@pytest.fixture(scope="session")
def codex_bin() -> Path:
    """The real ``codex`` (``@openai/codex`` from npm, pinned in .ci/npm-clis.txt)."""
    return npm_bin("@openai/codex", "codex") / "codex"


@pytest.fixture
async def model(nursery: trio.Nursery) -> AsyncIterator[ScriptedResponses]:
    server = ScriptedResponses()
    await nursery.start(server.serve)
    yield server


@attrs.frozen
class Run:
    result: ShellResult
    events: list[Event]  # every event but HarnessSession
    request: HarnessRequest
    sessions: list[str] = attrs.field(factory=list)  # the HarnessSession ids the CLI named


def _request(tmp: Path, model: ScriptedResponses, codex_bin: Path, **over: object) -> HarnessRequest:
    home, work = tmp / "records" / "home", tmp / "work"
    home.mkdir(parents=True, mode=0o700)
    work.mkdir()
    node = shutil.which("node")
    assert node is not None, "node is needed to run the npm-installed codex"
    path = os.pathsep.join([str(codex_bin.parent), str(Path(node).parent), "/usr/bin", "/bin"])
    fields: dict[str, object] = dict(
        command=("codex",),
        task_text="Run the command and tell me what it printed.",
        system_prompt="You are the fixer capsule.",
        context_text=None,
        model="test-model",
        endpoint=model.base_url,
        api_key=KEY,
        max_turns=10,
        shell_allow=("echo", "env"),
        home=home,
        workdir=work,
        shell_env={"PATH": path, "HOME": str(tmp / "session-home"), "LANG": "C.UTF-8",
                   "TMPDIR": str(tmp)},
    )
    fields.update(over)
    return HarnessRequest(**fields)  # type: ignore[arg-type]


async def _run(req: HarnessRequest, *, strict: bool = False) -> Run:
    inv = PROTOCOL.invocation(req)
    argv = list(inv.argv)
    if strict:  # refuse config keys this Codex does not know
        argv.insert(argv.index("exec") + 1, "--strict-config")
    for rel, data in inv.files.items():
        path = req.home / rel
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        path.write_bytes(data)
        path.chmod(0o600)
    env = {**req.shell_env, **inv.env}
    with trio.fail_after(RUN_BOUND):
        result = await run_shell(argv, allow=("codex",), cwd=req.workdir, env=env,
                                 stdin=inv.stdin)
    parser = PROTOCOL.parser()
    events: list[Event] = []
    for line in result.stdout.splitlines():
        events += parser.feed(line.rstrip(b"\r"))
    events += parser.finish()
    sessions = [e.id for e in events if isinstance(e, HarnessSession)]
    return Run(result, [e for e in events if not isinstance(e, HarnessSession)], req, sessions)


async def test_a_shell_command_then_the_answer(
    tmp_path: Path, model: ScriptedResponses, codex_bin: Path
) -> None:
    model.add(
        ModelReply([message("Let me run it."), exec_call("echo murmur-$((6*7)) && env")],
                   input_tokens=120, output_tokens=7, cached_tokens=20),
        ModelReply([message("It printed murmur-42.")], input_tokens=150, output_tokens=9),
    )
    req = _request(tmp_path, model, codex_bin, context_text="Links: reviewer.")
    run = await _run(req)
    assert run.result.exit_code == 0, run.result.stderr_text[-2000:]

    turn, use, answer = run.events
    assert isinstance(use, ToolUse)
    assert (use.name, use.ok, use.shell) == ("command_execution", True, True)
    assert use.input == {"command": "/bin/bash -c 'echo murmur-$((6*7)) && env'"}
    assert use.output.startswith("murmur-42\n")
    # The command's environment: the session's plus the CLI's home, never the key.
    assert f"HOME={req.home}\n" in use.output
    # Not a login shell: the session's PATH is kept (behind Codex's own helper directory).
    (path,) = [line for line in use.output.splitlines() if line.startswith("PATH=")]
    assert path.endswith(":" + req.shell_env["PATH"]), path
    assert KEY not in use.output and KEY_ENV not in use.output
    assert turn == InferenceTurn(270, 16, "", ("command_execution",), "It printed murmur-42.")
    assert answer == Answer("It printed murmur-42.")

    first, second = model.model_calls
    assert len(model.requests) == 2
    assert first.path == "/v1/responses" and first.headers["authorization"] == f"Bearer {KEY}"
    assert "You are the fixer capsule.\n\nLinks: reviewer." in input_texts(first.body, "developer")
    assert input_texts(first.body, "user")[-1] == "Run the command and tell me what it printed."
    (output,) = function_outputs(second.body).values()
    assert "Process exited with code 0" in output and "murmur-42" in output
    # Nothing was written into the project: no AGENTS.md, no .codex.
    assert list(req.workdir.iterdir()) == []
    # Codex's own state (sqlite logs, caches) under its home holds no key either.
    written = files_under(tmp_path)
    assert any(p.name.endswith(".sqlite") for p in written)  # the scan does see Codex's state
    for path in written:
        assert KEY.encode() not in path.read_bytes(), path


async def test_no_shell_grant_offers_no_shell_tool(
    tmp_path: Path, model: ScriptedResponses, codex_bin: Path
) -> None:
    model.add(
        ModelReply([exec_call("echo should-not-run")]),
        ModelReply([message("I cannot run commands here.")], input_tokens=50, output_tokens=5),
    )
    run = await _run(_request(tmp_path, model, codex_bin, shell_allow=()))
    assert run.result.exit_code == 0, run.result.stderr_text[-2000:]
    assert run.events == [
        InferenceTurn(150, 15, "", (), "I cannot run commands here."),
        Answer("I cannot run commands here."),
    ]
    first, second = model.model_calls
    assert isinstance(first.body, dict)
    assert "exec_command" not in [t.get("name") for t in first.body["tools"]]
    assert function_outputs(second.body) == {"call_1": "unsupported call: exec_command"}


async def test_a_refused_key_is_a_credential_failure(
    tmp_path: Path, model: ScriptedResponses, codex_bin: Path
) -> None:
    refused = ModelReply(status=401, error={"message": "Incorrect API key provided",
                                            "type": "invalid_request_error"})
    model.add(*[refused] * 3)
    run = await _run(_request(tmp_path, model, codex_bin))
    assert run.result.exit_code == 1
    (failure,) = run.events
    assert isinstance(failure, HarnessFailure)
    assert failure.cause == "credential_rejected"
    assert failure.message.startswith("codex: unexpected status 401 Unauthorized: "
                                      "Incorrect API key provided")
    assert KEY not in failure.message
    assert len(model.model_calls) == 2  # Codex 0.171 tries a 401 twice, whatever the retry budget


async def test_every_config_key_is_known_to_this_codex(
    tmp_path: Path, model: ScriptedResponses, codex_bin: Path
) -> None:
    """``--strict-config`` fails on a key the pinned Codex does not recognise; the only
    warning item left is the scripted model's missing metadata."""
    model.add(ModelReply([message("ok")], input_tokens=11, output_tokens=2))
    run = await _run(_request(tmp_path, model, codex_bin, context_text="Links."), strict=True)
    assert run.result.exit_code == 0, run.result.stderr_text[-2000:]
    assert run.events == [InferenceTurn(11, 2, "", (), "ok"), Answer("ok")]
    warnings = [line for line in run.result.stdout_text.splitlines() if '"type":"error"' in line]
    assert len(warnings) == 1 and "Model metadata for `test-model` not found" in warnings[0]


async def test_a_server_error_is_retried_six_times_then_fails(
    tmp_path: Path, model: ScriptedResponses, codex_bin: Path
) -> None:
    broken = ModelReply(status=500, error={"message": "upstream broke", "type": "server_error"})
    model.add(*[broken] * 8)
    run = await _run(_request(tmp_path, model, codex_bin))
    assert run.result.exit_code == 1
    (failure,) = run.events
    assert isinstance(failure, HarnessFailure) and failure.cause == "driver_error"
    # Codex 0.171's own words for a 5xx (the provider's message is not passed on).
    assert failure.message == ("codex: We\u2019re currently experiencing high demand, which may "
                               "cause temporary errors.")
    assert len(model.model_calls) == 6  # (1 + request_max_retries) x (1 + stream_max_retries)


def _start_time(pid: int) -> int | None:
    """The start time of a live ``pid`` (a zombie has ended: None)."""
    stat = procstat.read_stat(pid)
    return None if stat is None or stat.state == "Z" else stat.start_time


def _tree(root: int) -> dict[int, int]:
    """``root`` and its live descendants: pid → start time (from /proc)."""
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        pid = todo.pop()
        start = _start_time(pid)
        if start is None:
            continue
        found[pid] = start
        try:
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                todo += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.fixture(params=["host", "groups"])
def containment_class(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The host's containment class, then the process-group class forced."""
    if request.param == "groups":
        monkeypatch.setenv(containment.FORCE_ENV, "groups")
    containment.reset_for_tests()
    try:
        yield containment.here().class_name
    finally:
        containment.reset_for_tests()


async def test_cancel_while_a_command_runs_leaves_nothing(
    tmp_path: Path, model: ScriptedResponses, codex_bin: Path, containment_class: str
) -> None:
    """Cancelling the run while Codex's command sleeps ends every process of the tree:
    the CLI, its sandbox helpers and the command (which Codex puts in a session of its own,
    in a PID namespace: in the groups class it dies through Codex's parent-death signals,
    not the group kill)."""
    model.add(ModelReply([exec_call("echo started > marker && exec sleep 300")]))
    req = _request(tmp_path, model, codex_bin, shell_allow=("sleep",))
    inv = PROTOCOL.invocation(req)
    for rel, data in inv.files.items():
        (req.home / rel).parent.mkdir(parents=True, exist_ok=True)
        (req.home / rel).write_bytes(data)
    recorded: dict[int, int] = {}
    try:
        with trio.fail_after(RUN_BOUND):
            async with trio.open_nursery() as nursery:
                top = await nursery.start(
                    lambda task_status: run_shell(
                        list(inv.argv), allow=("codex",), cwd=req.workdir,
                        env={**req.shell_env, **inv.env}, stdin=inv.stdin,
                        task_status=task_status))
                sleeper = None
                while sleeper is None:  # bounded by fail_after: the command starts in ~1 s
                    await trio.sleep(0.05)
                    if (req.workdir / "marker").exists():
                        recorded = _tree(top)
                        sleeper = next((p for p in recorded
                                        if _cmdline(p).startswith(b"sleep\x00300")), None)
                assert len(model.model_calls) == 1  # the CLI is still waiting on its command
                assert os.getsid(sleeper) != os.getsid(top)  # Codex's own session for it
                nursery.cancel_scope.cancel()
        for _ in range(250):  # SIGKILL and parent-death signals land asynchronously
            if not any(_start_time(p) == s for p, s in recorded.items()):
                break
            await trio.sleep(0.02)
        survivors = [p for p, s in recorded.items() if _start_time(p) == s]
        assert survivors == [], [_cmdline(p) for p in survivors]
        assert live_in_group(top) == []
    finally:
        for pid, start in recorded.items():
            if _start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)


async def test_a_kept_session_is_resumed_with_its_history(
    tmp_path: Path, model: ScriptedResponses, codex_bin: Path
) -> None:
    """Threaded: the first run keeps its session and names it; `exec resume <id>` sends the first
    exchange to the model again, in the same home (spec/conversations.md "Agent CLIs")."""
    model.add(ModelReply([message("Noted: the word is quince.")]), ModelReply([message("It was quince.")]))
    req = _request(tmp_path, model, codex_bin, shell_allow=(), keep_session=True,
                   task_text="Remember the word quince.")
    first = await _run(req, strict=True)
    assert first.result.exit_code == 0, first.result.stderr_text[-2000:]
    (sid,) = first.sessions
    assert "--ephemeral" not in PROTOCOL.invocation(req).argv
    again = attrs.evolve(req, resume_id=sid, task_text="Which word?")
    assert PROTOCOL.invocation(again).argv[-3:] == ("resume", sid, "-")
    second = await _run(again)
    assert second.result.exit_code == 0, second.result.stderr_text[-2000:]
    assert second.sessions == [sid] and second.events[-1] == Answer("It was quince.")
    users = input_texts(model.model_calls[1].body, "user")
    assert "Remember the word quince." in users and users[-1] == "Which word?"
    assert any("Noted: the word is quince." in t for t in input_texts(model.model_calls[1].body, "assistant"))


async def test_a_threaded_capsule_reuses_its_codex_session_and_forget_starts_fresh(
    tmp_path: Path, model: ScriptedResponses, codex_bin: Path
) -> None:
    """The workload: two tasks of one context run in one Codex session (the model gets the first
    exchange back); after forget_session the next task starts a new one."""
    node = shutil.which("node")
    assert node is not None
    path = os.pathsep.join([str(codex_bin.parent), str(Path(node).parent), "/usr/bin", "/bin"])
    m = Manifest(name="cx", version="0.1.0", inference=Inference(
        transport=Transport.PROCESS, command="codex", model="test-model", endpoint=model.base_url,
        api_key="${TEST_KEY}", max_turns=4))
    hmap = HarnessMap(tmp_path / "conversations", "cx", "codex", print)
    w = AgentWorkload(m, tmp_path, environ={"PATH": path, "TEST_KEY": KEY})
    w.use_conversations(Conversations(threaded=True, harness=hmap))
    model.add(ModelReply([message("Noted: fig.")]), ModelReply([message("It was fig.")]),
              ModelReply([message("Which word?")]))

    async def task(text: str) -> str:
        ctx = task_context(m, tmp_path, FakeTrace(), text=text,
                           env={"PATH": path, "HOME": str(tmp_path / "session-home"), "LANG": "C.UTF-8",
                                "TMPDIR": str(tmp_path)})
        ctx.context_id = "ctx_cx"
        with trio.fail_after(RUN_BOUND):
            outcome = await w.run_task(ctx)
        assert outcome.status == "ok", outcome.answer
        return outcome.answer

    assert await task("Remember the word fig.") == "Noted: fig."
    entry = hmap.entry("ctx_cx")
    assert entry is not None and hmap.holds("ctx_cx")
    assert await task("Which word was it?") == "It was fig."
    users = input_texts(model.model_calls[1].body, "user")
    assert "Remember the word fig." in users and users[-1] == "Which word was it?"
    assert w.forget_session("ctx_cx") == entry["session_id"]
    assert await task("Start again.") == "Which word?"
    assert "Remember the word fig." not in input_texts(model.model_calls[2].body, "user")
    new = hmap.entry("ctx_cx")
    assert new is not None and new["session_id"] != entry["session_id"]
