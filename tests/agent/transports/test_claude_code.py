"""transport: process with the Claude Code protocol: the real `claude` CLI against a scripted
Anthropic-compatible server on loopback (streaming as Claude Code requests it)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import attrs
import pytest
import trio

from murmur.agent import AgentWorkload
from murmur.agent.harness.claude import PROTOCOL, ClaudeStreamParser, anthropic_base_url, bash_rules
from murmur.agent.harness.protocol import (
    Answer,
    HarnessFailure,
    HarnessRequest,
    InferenceTurn,
    ToolUse,
)
from murmur.agent.harness.sessions import HarnessMap
from murmur.agent.thread import Conversations
from murmur.errors import DiagnosticError
from murmur.grants import denied_binary
from murmur.manifest.model import (
    Capabilities,
    Containment,
    Inference,
    Manifest,
    ShellCaps,
    Transport,
)
from murmur.sandbox import compiled
from murmur.sandbox.classes import CLASS_ENV
from murmur.sandbox.host import probe
from murmur.sandbox.installed import install, uninstall
from murmur.sandbox.policy import from_manifest
from murmur.workload import TaskContext, TaskOutcome, TaskServices

from ..scripted import (
    FakeTrace,
    Received,
    Reply,
    ScriptedServer,
    an_text,
    an_tools,
    files_under,
    task_context,
)

KEY = "sk-ant-test-SECRET-4c1d9e7f2a6b"
SYSTEM = "Answer in one sentence."


def side(r: Received) -> Reply | None:
    """Claude Code's side traffic (a HEAD probe, calls without tools) is answered off-script."""
    if r.path.startswith("/v1/messages") and isinstance(r.body, dict) and r.body.get("tools"):
        return None
    if r.path.startswith("/v1/messages"):
        return Reply(an_text("side", inp=0, out=0, msg_id="msg_side"))
    return Reply({})


def manifest(*, shell: tuple[str, ...] = ("echo", "env"), max_turns: int = 4,
             budget: int | None = None, api_key: str | None = "${TEST_KEY}",
             endpoint: str | None = None, command: str = "claude") -> Manifest:
    return Manifest(
        name="cc-agent",
        version="0.1.0",
        capabilities=Capabilities(shell=ShellCaps(allow=shell) if shell else None),
        inference=Inference(transport=Transport.PROCESS, command=command, model="test-model",
                            endpoint=endpoint, api_key=api_key, max_turns=max_turns,
                            budget_tokens=budget, system_prompt=SYSTEM),
    )


def request(tmp_path: Path, **kw: object) -> HarnessRequest:
    fields: dict[str, object] = dict(
        command=("claude",), task_text="do it", system_prompt="sys", context_text=None,
        model="m", endpoint="http://127.0.0.1:9/v1", api_key=KEY, max_turns=3,
        shell_allow=("ls", "reviewer", "mur"), home=tmp_path / "home", workdir=tmp_path,
        shell_env={"PATH": "/usr/bin"},
    )
    fields.update(kw)
    return HarnessRequest(**fields)  # type: ignore[arg-type]


# --- pure: the invocation and the parser -------------------------------------------------


class TestInvocation:
    def test_key_only_through_the_fifo(self, tmp_path: Path) -> None:
        """The key is in neither argv, env, stdin nor a file; the helper reads the FIFO."""
        inv = PROTOCOL.invocation(request(tmp_path))
        blob = json.dumps([inv.argv, dict(inv.env), inv.stdin.decode(),
                           {k: v.decode() for k, v in inv.files.items()}])
        assert KEY not in blob
        assert inv.key_fifo == "murmur/key.fifo"
        settings = json.loads(inv.files["murmur/settings.json"])
        assert settings["apiKeyHelper"] == (
            f"IFS= read -r k < {tmp_path / 'home' / 'murmur' / 'key.fifo'}; printf '%s' \"$k\"")  # builtins only
        assert set(settings) == {"apiKeyHelper", "hooks"}

    def test_pretool_hook_in_the_settings(self, tmp_path: Path) -> None:
        """With the Bash tool the settings name the PreToolUse hook on Bash, its config holds
        the grants, and the transport is asked for the deny socket; without it, none."""
        inv = PROTOCOL.invocation(request(tmp_path, capsule="cc-agent"))
        (entry,) = json.loads(inv.files["murmur/settings.json"])["hooks"]["PreToolUse"]
        assert entry["matcher"] == "Bash"
        (hook,) = entry["hooks"]
        assert hook["type"] == "command" and hook["command"].split()[1:] == [
            "-I", "-m", "murmur.agent.harness.pretool", str(tmp_path / "home" / "murmur" / "pretool.json")]
        assert json.loads(inv.files["murmur/pretool.json"]) == {"capsule": "cc-agent",
                                                                "allow": ["ls", "reviewer", "mur"]}
        assert inv.deny_socket == "murmur/deny.sock"
        bare = PROTOCOL.invocation(request(tmp_path, shell_allow=()))
        assert "hooks" not in json.loads(bare.files["murmur/settings.json"]) and bare.deny_socket is None

    def test_flags(self, tmp_path: Path) -> None:
        """Print mode, the event stream, limits, permissions and the endpoint as relied on."""
        inv = PROTOCOL.invocation(request(tmp_path, context_text="CTX"))
        argv = list(inv.argv)
        assert argv[:2] == ["claude", "-p"]
        assert argv[argv.index("--output-format") + 1] == "stream-json"
        assert "--include-partial-messages" in argv and "--verbose" in argv
        assert argv[argv.index("--max-turns") + 1] == "3"
        assert argv[argv.index("--permission-mode") + 1] == "dontAsk"
        assert argv[argv.index("--setting-sources") + 1] == ""
        allowed = argv[argv.index("--allowedTools") + 1: argv.index("--permission-mode")]
        assert allowed == ["Read", "Glob", "Grep", "Edit", "Write",
                           "Bash(ls:*)", "Bash(reviewer:*)", "Bash(mur:*)"]
        assert argv[argv.index("--tools") + 1] == "Read,Glob,Grep,Edit,Write,Bash"
        assert inv.files["murmur/system-prompt.md"] == b"sys\n\nCTX"
        assert inv.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9"
        assert inv.env["HOME"] == str(tmp_path / "home")
        assert inv.stdin == b"do it"

    def test_no_shell_no_bash(self, tmp_path: Path) -> None:
        """Without shell grants or links the Bash tool is not offered."""
        argv = list(PROTOCOL.invocation(request(tmp_path, shell_allow=())).argv)
        assert argv[argv.index("--tools") + 1] == "Read,Glob,Grep,Edit,Write"
        assert not [a for a in argv if a.startswith("Bash(")]

    def test_base_url_forms(self) -> None:
        """Host, …/v1 and …/v1/messages all give the host base Claude Code appends to."""
        for form in ("https://api.example.com", "https://api.example.com/v1/",
                     "https://api.example.com/v1/messages"):
            assert anthropic_base_url(form) == "https://api.example.com"
        assert bash_rules(("ls", "ls", "py*")) == ("Bash(ls:*)", "Bash(py*:*)")


def _lines(*objs: object) -> list[bytes]:
    return [json.dumps(o).encode() for o in objs]


class TestParser:
    def test_turns_tools_answer(self) -> None:
        """Usage per call from the raw stream; tool results paired with their inputs."""
        p = ClaudeStreamParser()
        events = []
        for line in _lines(
            {"type": "system", "subtype": "init"},
            {"type": "stream_event", "event": {"type": "message_start", "message": {
                "id": "m1", "usage": {"input_tokens": 90, "cache_read_input_tokens": 10, "output_tokens": 1}}}},
            {"type": "stream_event", "event": {"type": "content_block_start", "index": 0,
                                               "content_block": {"type": "tool_use", "name": "Bash"}}},
            {"type": "assistant", "message": {"content": [
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]}},
            {"type": "stream_event", "event": {"type": "message_delta", "delta": {"stop_reason": "tool_use"},
                                               "usage": {"output_tokens": 20}}},
            {"type": "stream_event", "event": {"type": "message_stop"}},
            {"type": "user", "message": {"content": [
                {"type": "tool_result", "tool_use_id": "t1", "content": [{"type": "text", "text": "a\n"}],
                 "is_error": False}]}},
            {"type": "result", "subtype": "success", "is_error": False, "result": "done"},
        ):
            events += p.feed(line)
        events += p.finish()
        assert events == [
            InferenceTurn(100, 20, "tool_use", ("Bash",), ""),
            ToolUse("t1", "Bash", {"command": "ls"}, "a\n", True, shell=True),
            Answer("done"),
        ]

    def test_cut_off_call_still_counts(self) -> None:
        """A call the CLI never finished (killed) is reported at finish; junk lines are ignored."""
        p = ClaudeStreamParser()
        assert p.feed(b"not json") == [] and p.feed(b"[1]") == []
        p.feed(_lines({"type": "stream_event", "event": {"type": "message_start",
                                                         "message": {"usage": {"input_tokens": 7}}}})[0])
        assert p.finish() == [InferenceTurn(7, 0, "", (), "")]

    def test_failures(self) -> None:
        """error_max_turns → max_turns_reached; a 401 → credential_rejected."""
        (ev,) = ClaudeStreamParser().feed(_lines({"type": "result", "subtype": "error_max_turns",
                                                  "is_error": True, "num_turns": 2})[0])
        assert isinstance(ev, HarnessFailure) and ev.status == "max_turns_reached"
        (ev,) = ClaudeStreamParser().feed(_lines({"type": "result", "subtype": "success", "is_error": True,
                                                  "api_error_status": 401, "result": "bad key"})[0])
        assert isinstance(ev, HarnessFailure) and ev.cause == "credential_rejected"


# --- the real CLI -----------------------------------------------------------------------


class Harness:
    """A scripted server plus the environment a session would give the CLI.

    ``klass`` (default ``MURMUR_SANDBOX_CLASS``, as the suites choose the class under test)
    scoped or sealed: each run happens inside a sandbox compiled from the run's manifest at that
    class, its egress proxy served for the run, as a session does (spec/containment.md)."""

    def __init__(self, tmp_path: Path, claude_bin: Path) -> None:
        self.tmp = tmp_path
        self.server = ScriptedServer(side)
        self.shell_env = {"PATH": f"{claude_bin}:/usr/bin:/bin", "HOME": str(tmp_path / "records" / "home"),
                          "TMPDIR": str(tmp_path / "records" / "tmp")}  # as a session's commands get
        self.environ = {"PATH": f"{claude_bin}:/usr/bin:/bin", "TEST_KEY": KEY}
        self.links_context: Path | None = None  # the session's links/context.md, when it has links
        self.klass = Containment(os.environ.get(CLASS_ENV) or "advisory")

    def manifest(self, **kw: object) -> Manifest:
        return manifest(endpoint=self.server.url, **kw)  # type: ignore[arg-type]

    async def run(
        self, m: Manifest, text: str = "Say hello using the shell.", services: TaskServices | None = None,
    ) -> tuple[TaskOutcome, FakeTrace, TaskContext]:
        trace = FakeTrace(self.tmp / "trace.jsonl")
        ctx = attrs.evolve(task_context(m, self.tmp, trace, text=text, env=self.shell_env, services=services),
                           links_context=self.links_context)
        work = AgentWorkload(m, self.tmp, environ=self.environ)
        if self.klass is Containment.ADVISORY:
            with trio.fail_after(60):
                return await work.run_task(ctx), trace, ctx
        lacks = probe().lacks(self.klass)
        if lacks:
            pytest.skip(f"this host cannot back {self.klass.value}: it lacks {'; '.join(lacks)}")
        for key in ("HOME", "TMPDIR"):
            os.makedirs(self.shell_env[key], exist_ok=True)
        box = compiled.compile(from_manifest(m, self.klass, workdir=ctx.workdir, env=self.shell_env,
                                             records=ctx.records_dir))
        install(box)
        try:
            with trio.fail_after(60):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(box.serve)
                    outcome = await work.run_task(ctx)
                    nursery.cancel_scope.cancel()
        finally:
            uninstall()
        return outcome, trace, ctx


@pytest.fixture
async def harness(tmp_path: Path, claude_bin: Path, nursery: trio.Nursery) -> Harness:
    h = Harness(tmp_path, claude_bin)
    await nursery.start(h.server.serve)
    return h


@pytest.mark.e2e
class TestRealClaudeCode:
    async def test_shell_command_then_answer(self, harness: Harness) -> None:
        """Bash runs a command; the answer, the trace records and the token counts are exact;
        the system prompt and the links' `mur context` reach the model; the key reaches no
        command, file or record."""
        links = harness.tmp / "records" / "links"
        (links / "bin").mkdir(parents=True)
        (links / "context.md").write_text("MUR-CONTEXT: you may delegate to nobody.\n")
        (links / "bin" / "mur").write_text("#!/bin/sh\n")
        harness.links_context = links / "context.md"
        harness.server.add(
            Reply(an_tools(("toolu_1", "Bash", {"command": "echo hello-from-bash && env"}),
                           inp=100, out=20, msg_id="msg_a")),
            Reply(an_text("The shell said hello-from-bash.", inp=150, out=7, msg_id="msg_b")),
        )
        outcome, trace, ctx = await harness.run(harness.manifest())
        assert (outcome.status, outcome.answer) == ("ok", "The shell said hello-from-bash.")
        turns = trace.of("inference")
        assert [(r["turn"], r["input_tokens"], r["output_tokens"], r["decision"], r["stop_reason"],
                 r.get("tool_name")) for r in turns] == [
            (1, 100, 20, "tool_call", "tool_use", "Bash"),
            (2, 150, 7, "end_turn", "end_turn", None),
        ]
        assert turns[1]["response_sha256"] == hashlib.sha256(b"The shell said hello-from-bash.").hexdigest()
        (call,) = trace.of("tool_call")
        assert (call["tool_name"], call["tool_call_id"], call["status"], call["parent_id"], call["turn"]) == (
            "Bash", "toolu_1", "ok", turns[0]["event_id"], 1)
        assert call["input"] == {"command": "echo hello-from-bash && env"}
        usage = ctx.usage
        assert (usage.turns, usage.input_tokens, usage.output_tokens, usage.tool_calls, usage.shell_calls) == (
            2, 250, 27, 1, 1)
        # what the model received: the tool's output (the command's environment), the prompt
        first, second = harness.server.requests
        assert isinstance(first.body, dict) and isinstance(second.body, dict)
        system = json.dumps(first.body["system"])
        assert SYSTEM in system and "MUR-CONTEXT: you may delegate to nobody." in system
        result = second.body["messages"][-1]["content"][0]
        assert result["tool_use_id"] == "toolu_1" and "hello-from-bash" in result["content"]
        assert "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1" in result["content"]
        assert f"MURMUR_CONTEXT_FILE={harness.links_context}" in result["content"]
        assert KEY not in result["content"]  # not in the command's environment
        assert first.headers["x-api-key"] == KEY  # the CLI itself did get it
        for path in files_under(harness.tmp):
            assert KEY.encode() not in path.read_bytes(), path
        assert not (harness.tmp / "records" / "harness" / ctx.task_id / "home" / "murmur" / "key.fifo").exists()

    @pytest.mark.parametrize("klass", [Containment.SCOPED, Containment.SEALED], ids=lambda k: k.value)
    async def test_the_cli_runs_inside_the_sandbox(self, harness: Harness, klass: Containment) -> None:
        """Under scoped (sealed) the real CLI starts (it aborted with SIGABRT: its runtime reads
        /proc/self/maps), reaches its provider through the egress proxy (a request per
        connection), runs its Bash tool's shell, its key helper and murmur's PreToolUse hook, and
        its commands carry the proxy; under advisory (the control) they do not."""
        for run_class in (Containment.ADVISORY, klass):
            harness.klass = run_class
            harness.server.requests.clear()
            harness.server.add(
                Reply(an_tools(("toolu_1", "Bash", {"command": "echo inside-42 && env"}), msg_id="msg_a")),
                Reply(an_tools(("toolu_2", "Bash", {"command": "touch made-by-model"}), msg_id="msg_b")),
                Reply(an_text("done inside", msg_id="msg_c")),
            )
            outcome, _, ctx = await harness.run(harness.manifest())
            assert (outcome.status, outcome.answer) == ("ok", "done inside"), (run_class, outcome)
            first, second, third = harness.server.requests
            assert first.headers["x-api-key"] == KEY  # the key helper ran (shell builtins only)
            ran = _text(_tool_result(second)["content"])
            assert "inside-42" in ran and KEY not in ran and "Permission denied" not in ran, ran
            assert ("HTTPS_PROXY=http://127.0.0.1:" in ran) is (run_class is not Containment.ADVISORY), ran
            refused = _text(_tool_result(third)["content"])  # the hook's refusal: murmur's interpreter ran
            assert denied_binary("touch", "cc-agent", ("echo", "env")) in refused, refused
            assert not (ctx.workdir / "made-by-model").exists()

    async def test_upstream_manifest_takes_endpoint_and_key_from_the_environment(self, harness: Harness) -> None:
        """An upstream quickstart capsule (no endpoint, no api_key) runs against the endpoint
        and key the capsule's environment names, as the CLI itself would read them; the key
        still reaches the CLI only through the FIFO, even when env.allow lists its variable."""
        harness.server.add(
            Reply(an_tools(("toolu_1", "Bash", {"command": "env"}), msg_id="msg_a")),
            Reply(an_text("ok from upstream", msg_id="msg_b")),
        )
        harness.environ.update({"ANTHROPIC_BASE_URL": harness.server.url, "ANTHROPIC_API_KEY": KEY})
        harness.shell_env["ANTHROPIC_API_KEY"] = KEY  # as if capabilities.env.allow listed it
        outcome, _, _ = await harness.run(manifest(api_key=None, endpoint=None))
        assert (outcome.status, outcome.answer) == ("ok", "ok from upstream")
        first, second = harness.server.requests
        assert first.headers["x-api-key"] == KEY
        assert isinstance(second.body, dict)
        assert KEY not in json.dumps(second.body["messages"])

    async def test_command_outside_grants_is_denied(self, harness: Harness) -> None:
        """A program outside shell.allow is refused by Claude Code's permissions: an error result."""
        harness.server.add(
            Reply(an_tools(("toolu_1", "Bash", {"command": "touch made-by-model"}), msg_id="msg_a")),
            Reply(an_text("Could not.", msg_id="msg_b")),
        )
        outcome, trace, ctx = await harness.run(harness.manifest(shell=("echo",)))
        assert outcome.status == "ok"
        (call,) = trace.of("tool_call")
        assert call["status"] == "error"
        assert not (ctx.workdir / "made-by-model").exists()

    async def test_ungranted_command_is_told_the_ready_route(self, harness: Harness) -> None:
        """Issue 30 item 10: the PreToolUse hook the settings file names refuses a program
        outside the grants with the message the built-in loop gives — the session's
        ``denied_binary``, naming the ready route — and the command does not run."""
        route = ('DELEGATE it instead of asking the user: call-member(member="builder", task=<this exact '
                 'command, with absolute paths>). Best first: "builder".')
        asked: list[str] = []

        def deny(binary: str) -> str:
            asked.append(binary)
            return denied_binary(binary, "cc-agent", ("echo",), route)

        harness.server.add(
            Reply(an_tools(("toolu_1", "Bash", {"command": "cd . && touch made-by-model"}), msg_id="msg_a")),
            Reply(an_text("I will call the builder.", msg_id="msg_b")),
        )
        outcome, trace, ctx = await harness.run(harness.manifest(shell=("echo",)),
                                                services=TaskServices(denied_binary=deny))
        assert (outcome.status, outcome.answer) == ("ok", "I will call the builder.")
        assert asked == ["touch"]
        (call,) = trace.of("tool_call")
        assert call["status"] == "error"
        assert not (ctx.workdir / "made-by-model").exists()
        result = _tool_result(harness.server.requests[1])
        assert result["is_error"] is True
        assert deny("touch") in _text(result["content"]), result
        settings = json.loads((harness.tmp / "records" / "harness" / ctx.task_id / "home" / "murmur"
                               / "settings.json").read_text())
        assert settings["hooks"]["PreToolUse"][0]["matcher"] == "Bash"

    async def test_ungranted_command_without_routes_gets_the_plain_refusal(self, harness: Harness) -> None:
        """No ``denied_binary`` in the services (a capsule outside a formation): the hook gives
        the built-in loop's plain refusal, with the grant line; a granted command still runs."""
        harness.server.add(
            Reply(an_tools(("toolu_1", "Bash", {"command": "echo fine && touch made-by-model"}), msg_id="msg_a")),
            Reply(an_tools(("toolu_2", "Bash", {"command": "echo granted-ran"}), msg_id="msg_b")),
            Reply(an_text("done", msg_id="msg_c")),
        )
        outcome, _, ctx = await harness.run(harness.manifest(shell=("echo",)))
        assert outcome.status == "ok"
        refused = _text(_tool_result(harness.server.requests[1])["content"])
        assert denied_binary("touch", "cc-agent", ("echo",)) in refused, refused
        assert not (ctx.workdir / "made-by-model").exists()
        ran = _tool_result(harness.server.requests[2])
        assert "granted-ran" in _text(ran["content"]) and not ran.get("is_error")  # the negative control

    async def test_max_turns(self, harness: Harness) -> None:
        """--max-turns stops the CLI: the task ends max_turns_reached."""
        harness.server.add(
            Reply(an_tools(("toolu_1", "Bash", {"command": "echo a"}), msg_id="msg_a")),
            Reply(an_text("never asked", msg_id="msg_b")),
        )
        outcome, _, ctx = await harness.run(harness.manifest(max_turns=1))
        assert outcome.status == "max_turns_reached"
        assert len(harness.server.requests) == 1 and ctx.usage.turns == 1

    async def test_budget_tokens_ends_the_cli(self, harness: Harness) -> None:
        """A turn that takes the task past budget_tokens ends the CLI before its tool runs on."""
        harness.server.add(
            Reply(an_tools(("toolu_1", "Bash", {"command": "echo a"}), inp=100, out=20, msg_id="msg_a")),
            Reply(an_text("never asked", msg_id="msg_b")),
        )
        outcome, trace, _ = await harness.run(harness.manifest(budget=50))
        assert outcome.status == "spend_ceiling_reached"
        assert [r["input_tokens"] for r in trace.of("inference")] == [100]
        assert not trace.of("tool_call")
        assert outcome.answer == (
            "the task used 120 tokens (input + output) against its ceiling of 50 (inference.budget_tokens)")
        assert len(harness.server.requests) == 1

    async def test_cancel_kills_the_cli(self, harness: Harness) -> None:
        """Cancelling the task while the model call is in flight ends the CLI's whole unit."""
        harness.server.add(Reply(hold=True))
        m = harness.manifest()
        trace = FakeTrace()
        ctx = task_context(m, harness.tmp, trace, text="wait", env=harness.shell_env)
        work = AgentWorkload(m, harness.tmp, environ=harness.environ)
        with trio.fail_after(60):
            async with trio.open_nursery() as n:
                n.start_soon(work.run_task, ctx)
                await harness.server.holding.wait()
                pids = _claude_pids(ctx.records_dir)
                assert pids
                n.cancel_scope.cancel()
            await harness.server.abandoned.wait()
        assert all(not _alive(pid) for pid in pids)

    async def test_wrong_key_is_credential_rejected(self, harness: Harness) -> None:
        """A 401 from the provider fails the task as credential_rejected, never naming the key."""
        for _ in range(12):
            harness.server.add(Reply({"type": "error", "error": {"type": "authentication_error",
                                                                 "message": f"bad key {KEY}"}}, status=401))
        outcome, trace, _ = await harness.run(harness.manifest())
        assert outcome.status == "failed"
        assert outcome.answer.startswith("E-RUN-027: the inference provider rejected the credential (HTTP 401)")
        (failed,) = trace.of("task_failed")
        assert failed["cause"] == "credential_rejected"
        assert len(harness.server.requests) <= 2  # ended at the first retry, not after ten
        assert KEY not in outcome.answer
        assert KEY not in (harness.tmp / "trace.jsonl").read_text()


def _tool_result(req: Received) -> dict[str, object]:
    """The tool_result block the model received in ``req`` (the last user message's first)."""
    assert isinstance(req.body, dict)
    block = req.body["messages"][-1]["content"][0]
    assert block["type"] == "tool_result", block
    return dict(block)


def _text(content: object) -> str:
    if isinstance(content, list):
        return "".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return str(content)


def _claude_pids(records: Path) -> list[int]:
    """Pids whose environment HOME is under this test's records (the CLI and its children)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"HOME={records}/harness/".encode() in env:
            found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class TestConfig:
    def test_missing_cli_is_e_run_006_with_install_hint(self, tmp_path: Path) -> None:
        """`command: claude` not on PATH refuses the launch with the npm install hint."""
        with pytest.raises(DiagnosticError) as info:
            AgentWorkload(manifest(), tmp_path, environ={"PATH": str(tmp_path), "TEST_KEY": "k"})
        text = str(info.value.diagnostic.render()) if hasattr(info.value, "diagnostic") else str(info.value)
        assert "E-RUN-006" in text and "npm install -g @anthropic-ai/claude-code" in text

    def test_protocol_chosen_from_command(self, tmp_path: Path) -> None:
        """Any command but codex speaks Claude Code; inference.protocol: stdio keeps the plain one."""
        tool = tmp_path / "my-agent"
        tool.write_text("#!/bin/sh\n")
        tool.chmod(0o755)
        env = {"PATH": str(tmp_path), "TEST_KEY": "k"}
        assert AgentWorkload(manifest(command="my-agent"), tmp_path, environ=env).config.protocol == "claude-code"
        m = manifest(command="my-agent")
        assert m.inference is not None
        plain = attrs.evolve(m, inference=attrs.evolve(m.inference, protocol="stdio"))
        assert AgentWorkload(plain, tmp_path, environ=env).config.protocol == "stdio"


@pytest.mark.e2e
class TestThreadedClaudeCode:
    async def test_two_tasks_share_a_session_and_forget_starts_fresh(self, harness: Harness) -> None:
        """threaded: task 2 of a context resumes task 1's Claude Code session (the model gets the
        first exchange back); forgetting the mapping makes task 3 a new conversation."""
        root = harness.tmp / "conversations"
        notes: list[str] = []
        hmap = HarnessMap(root, "cc-agent", "claude-code", notes.append)
        m = harness.manifest(shell=())
        w = AgentWorkload(m, harness.tmp, environ=harness.environ)
        w.use_conversations(Conversations(threaded=True, harness=hmap))
        harness.server.add(Reply(an_text("Noted: plum.", msg_id="msg_a")), Reply(an_text("It was plum.", msg_id="msg_b")),
                           Reply(an_text("Which word?", msg_id="msg_c")))

        async def task(text: str) -> TaskOutcome:
            ctx = task_context(m, harness.tmp, FakeTrace(), text=text, env=harness.shell_env)
            ctx.context_id = "ctx_cc"
            with trio.fail_after(60):
                return await w.run_task(ctx)

        assert (await task("Remember the word plum.")).answer == "Noted: plum."
        entry = hmap.entry("ctx_cc")
        assert entry is not None and hmap.holds("ctx_cc")
        assert (await task("Which word was it?")).answer == "It was plum."
        assert hmap.entry("ctx_cc") == {**entry, "updated_ms": hmap.entry("ctx_cc")["updated_ms"]}  # type: ignore[index]
        tool_calls = [r for r in harness.server.requests if isinstance(r.body, dict) and r.body.get("tools")]
        second = json.dumps(tool_calls[1].body["messages"])  # type: ignore[index]
        assert "Remember the word plum." in second and "Noted: plum." in second and "Which word was it?" in second
        assert w.forget_session("ctx_cc") == entry["session_id"] and hmap.entry("ctx_cc") is None
        assert (await task("Start again.")).answer == "Which word?"
        third = json.dumps([r for r in harness.server.requests
                            if isinstance(r.body, dict) and r.body.get("tools")][2].body["messages"])  # type: ignore[index]
        assert "plum" not in third and "Start again." in third
        assert hmap.entry("ctx_cc")["session_id"] != entry["session_id"]  # type: ignore[index]
        assert notes == []
