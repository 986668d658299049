"""The Codex protocol without the CLI: invocation (pure) and the ``--json`` event parser.

The streams below are lines the real ``codex exec --json`` (``@openai/codex`` 0.171.0)
printed against ``tests/agent/scripted_openai.py``; the ``file_change`` / ``mcp_tool_call``
/ ``web_search`` lines follow the shapes of Codex's exec event schema (not recorded: the
scripted model cannot make Codex produce them offline).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from murmur.agent.harness.codex import (
    CONFIG_PATH,
    DEFAULT_BASE_URL,
    KEY_ENV,
    PROTOCOL,
    CodexParser,
    provider_base_url,
    toml_string,
)
from murmur.agent.harness.codex import events_of as all_events_of
from murmur.agent.harness.protocol import (
    Answer,
    Event,
    HarnessFailure,
    HarnessRequest,
    HarnessSession,
    InferenceTurn,
    ToolUse,
)

KEY = "sk-test-9f8e7d6c5b4a"


THREAD = "01a231d9-2731-7443-b3d6-44057e2481cb"  # OK_STREAM's thread.started


def events_of(lines: list[bytes]) -> list[Event]:
    """The stream's events without the HarnessSession its thread.started line gives."""
    return [e for e in all_events_of(lines) if not isinstance(e, HarnessSession)]


def test_thread_started_names_the_session() -> None:
    """`thread.started` is the Codex session a threaded context maps to."""
    assert all_events_of([b'{"type":"thread.started","thread_id":"t-1"}']) == [HarnessSession("t-1")]



def request(tmp: Path = Path("/records/ses/home"), **over: object) -> HarnessRequest:
    fields: dict[str, object] = dict(
        command=("codex",),
        task_text="Run echo and say what it printed.",
        system_prompt="You are the fixer.",
        context_text=None,
        model="test-model",
        endpoint="http://127.0.0.1:8080/v1",
        api_key=KEY,
        max_turns=10,
        shell_allow=("echo",),
        home=tmp,
        workdir=Path("/work/capsule"),
        shell_env={"PATH": "/usr/bin:/bin", "HOME": "/records/ses/home"},
    )
    fields.update(over)
    return HarnessRequest(**fields)  # type: ignore[arg-type]


def config(req: HarnessRequest) -> dict[str, object]:
    inv = PROTOCOL.invocation(req)
    assert set(inv.files) == {CONFIG_PATH}
    return tomllib.loads(inv.files[CONFIG_PATH].decode("utf-8"))


# --- invocation ---------------------------------------------------------------------------


def test_argv_is_exec_json_with_the_task_on_stdin() -> None:
    inv = PROTOCOL.invocation(request())
    assert inv.argv == ("codex", "exec", "--json", "--color", "never", "--skip-git-repo-check",
                        "--ephemeral", "--sandbox", "workspace-write", "-")
    assert inv.stdin == b"Run echo and say what it printed."
    assert inv.key_fifo is None


def test_command_words_come_first_and_exec_is_not_repeated() -> None:
    assert PROTOCOL.invocation(request(command=("codex", "exec"))).argv[:3] == (
        "codex", "exec", "--json")
    assert PROTOCOL.invocation(request(command=("codex", "--enable", "x"))).argv[:4] == (
        "codex", "--enable", "x", "exec")


def test_environment_holds_home_codex_home_and_the_key_only() -> None:
    inv = PROTOCOL.invocation(request(Path("/r/home")))
    assert dict(inv.env) == {"HOME": "/r/home", "CODEX_HOME": "/r/home/.codex", KEY_ENV: KEY}


def test_the_key_is_in_neither_argv_nor_stdin_nor_the_config_file() -> None:
    inv = PROTOCOL.invocation(request())
    assert not any(KEY in word for word in inv.argv)
    assert KEY.encode() not in inv.stdin
    assert all(KEY.encode() not in data for data in inv.files.values())
    assert KEY not in repr(inv) and KEY not in repr(request())


def test_config_names_the_provider_model_and_instructions() -> None:
    cfg = config(request(context_text="Links: reviewer, mur."))
    assert cfg["model"] == "test-model"
    assert cfg["model_provider"] == "murmur"
    assert cfg["approval_policy"] == "never"
    assert cfg["developer_instructions"] == "You are the fixer.\n\nLinks: reviewer, mur."
    assert cfg["model_providers"] == {"murmur": {
        "name": "murmur", "base_url": "http://127.0.0.1:8080/v1", "wire_api": "responses",
        "request_max_retries": 2, "stream_max_retries": 1, "env_key": KEY_ENV}}
    assert cfg["shell_environment_policy"] == {
        "inherit": "all", "ignore_default_excludes": True, "exclude": [KEY_ENV]}
    assert cfg["sandbox_workspace_write"] == {"network_access": True}
    assert cfg["features"] == {"shell_tool": True, "goals": False}
    assert cfg["agents"] == {"enabled": False}
    assert cfg["web_search"] == "disabled"
    assert cfg["allow_login_shell"] is False
    assert cfg["history"] == {"persistence": "none"}


def test_the_key_is_withheld_from_commands_under_every_name_holding_it() -> None:
    env = {"PATH": "/usr/bin", "OPENAI_API_KEY": KEY, "ZZ_COPY": KEY, "OTHER": "x"}
    cfg = config(request(shell_env=env))
    policy = cfg["shell_environment_policy"]
    assert isinstance(policy, dict)
    assert policy["exclude"] == [KEY_ENV, "OPENAI_API_KEY", "ZZ_COPY"]
    keyless = config(request(shell_env={"EMPTY": ""}, api_key=None))["shell_environment_policy"]
    assert isinstance(keyless, dict) and keyless["exclude"] == [KEY_ENV]


def test_no_shell_grant_removes_the_shell_tool_and_reads_only() -> None:
    req = request(shell_allow=())
    assert config(req)["features"] == {"shell_tool": False, "goals": False}
    assert PROTOCOL.invocation(req).argv[-2] == "read-only"


def test_without_links_the_sandbox_has_no_network() -> None:
    assert config(request())["sandbox_workspace_write"] == {"network_access": False}


def test_keyless_provider_has_no_env_key_and_no_key_variable() -> None:
    req = request(api_key=None)
    providers = config(req)["model_providers"]
    assert isinstance(providers, dict)
    assert "env_key" not in providers["murmur"]
    assert KEY_ENV not in PROTOCOL.invocation(req).env


def test_no_prompt_no_model_no_endpoint() -> None:
    cfg = config(request(system_prompt=None, model=None, endpoint=None))
    assert "developer_instructions" not in cfg and "model" not in cfg
    providers = cfg["model_providers"]
    assert isinstance(providers, dict)
    assert providers["murmur"]["base_url"] == DEFAULT_BASE_URL


@pytest.mark.parametrize(("endpoint", "base"), [
    ("http://127.0.0.1:9/v1", "http://127.0.0.1:9/v1"),
    ("http://127.0.0.1:9/v1/", "http://127.0.0.1:9/v1"),
    ("https://gw.example/v1/responses", "https://gw.example/v1"),
    ("https://gw.example", "https://gw.example"),
    (None, DEFAULT_BASE_URL),
])
def test_provider_base_url(endpoint: str | None, base: str) -> None:
    assert provider_base_url(endpoint) == base


@given(st.text())
def test_any_prompt_survives_the_toml_round_trip(text: str) -> None:
    assert tomllib.loads(f"x = {toml_string(text)}")["x"] == text


def test_prompts_toml_would_misread_stay_strings() -> None:
    for text in ("123", "true", '"quoted"', "a\\b", "line\nnext", "\x7f\x00", "[x]"):
        assert config(request(system_prompt=text))["developer_instructions"] == text


# --- the event stream ---------------------------------------------------------------------

OK_STREAM = b"""\
{"type":"thread.started","thread_id":"01a231d9-2731-7443-b3d6-44057e2481cb"}
{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `test-model` not found. Defaulting to fallback metadata; this can degrade performance and cause issues."}}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Let me check."}}
{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'echo hello-from-shell'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'echo hello-from-shell'","aggregated_output":"hello-from-shell\\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"The shell said hello-from-shell."}}
{"type":"turn.completed","usage":{"input_tokens":270,"cached_input_tokens":20,"cache_write_input_tokens":0,"output_tokens":16,"reasoning_output_tokens":0}}
""".splitlines()

FAILED_COMMAND_STREAM = b"""\
{"type":"thread.started","thread_id":"01a231d9-9de0-7d72-8850-2177e0f56d9c"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"Let me check."}}
{"type":"item.started","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'ls no-such-file'","aggregated_output":"","exit_code":null,"status":"in_progress"}}
{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"/bin/bash -lc 'ls no-such-file'","aggregated_output":"ls: cannot access 'no-such-file': No such file or directory\\n","exit_code":2,"status":"failed"}}
{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"There is no such file."}}
{"type":"turn.completed","usage":{"input_tokens":270,"cached_input_tokens":20,"cache_write_input_tokens":0,"output_tokens":16,"reasoning_output_tokens":0}}
""".splitlines()

UNAUTHORIZED_STREAM = b"""\
{"type":"thread.started","thread_id":"01a231d7-c383-7371-88ed-967972ddb944"}
{"type":"turn.started"}
{"type":"error","message":"Reconnecting... 1/1 (unexpected status 401 Unauthorized: Incorrect API key provided, url: http://127.0.0.1:45069/v1/responses)"}
{"type":"error","message":"unexpected status 401 Unauthorized: Incorrect API key provided, url: http://127.0.0.1:45069/v1/responses"}
{"type":"turn.failed","error":{"message":"unexpected status 401 Unauthorized: Incorrect API key provided, url: http://127.0.0.1:45069/v1/responses"}}
""".splitlines()

BAD_REQUEST_STREAM = b"""\
{"type":"thread.started","thread_id":"01a231d7-c869-7de0-8602-adc959e1bc4e"}
{"type":"turn.started"}
{"type":"error","message":"{\\"error\\": {\\"message\\": \\"script ended\\", \\"type\\": \\"invalid_request_error\\"}}"}
{"type":"turn.failed","error":{"message":"{\\"error\\": {\\"message\\": \\"script ended\\", \\"type\\": \\"invalid_request_error\\"}}"}}
""".splitlines()

ECHO = "/bin/bash -lc 'echo hello-from-shell'"


@pytest.mark.parametrize(("lines", "expected"), [
    pytest.param(OK_STREAM, [
        InferenceTurn(270, 16, "", ("command_execution",), "The shell said hello-from-shell."),
        ToolUse("item_2", "command_execution", {"command": ECHO}, "hello-from-shell\n",
                ok=True, shell=True),
        Answer("The shell said hello-from-shell."),
    ], id="shell-then-answer"),
    pytest.param(FAILED_COMMAND_STREAM, [
        InferenceTurn(270, 16, "", ("command_execution",), "There is no such file."),
        ToolUse("item_2", "command_execution", {"command": "/bin/bash -lc 'ls no-such-file'"},
                "ls: cannot access 'no-such-file': No such file or directory\n",
                ok=False, shell=True),
        Answer("There is no such file."),
    ], id="non-zero-exit"),
    pytest.param(UNAUTHORIZED_STREAM, [  # at the first retry notice: a refused key stays refused
        HarnessFailure("codex: unexpected status 401 Unauthorized: Incorrect API key provided, "
                       "url: http://127.0.0.1:45069/v1/responses", cause="credential_rejected"),
    ], id="401"),
    pytest.param(BAD_REQUEST_STREAM, [
        HarnessFailure('codex: {"error": {"message": "script ended", "type": '
                       '"invalid_request_error"}}'),
    ], id="400"),
])
def test_recorded_streams(lines: list[bytes], expected: list[object]) -> None:
    assert events_of(lines) == expected


def test_tool_input_is_reported() -> None:
    (_, use, _) = events_of(OK_STREAM)
    assert isinstance(use, ToolUse) and use.input == {"command": ECHO}


def test_tool_uses_wait_for_the_turn_and_nothing_follows_its_end() -> None:
    parser = CodexParser()
    assert [e for line in OK_STREAM[:-1] for e in parser.feed(line)] == [HarnessSession(THREAD)]
    assert len(parser.feed(OK_STREAM[-1])) == 3
    assert parser.feed(OK_STREAM[-1]) == [] and parser.finish() == []


def test_a_failed_turn_reports_its_completed_tools_first() -> None:
    lines = [*OK_STREAM[:6],
             b'{"type":"turn.failed","error":{"message":"stream disconnected before completion"}}',
             b'{"type":"turn.failed","error":{"message":"again"}}']
    events = events_of(lines)
    assert [type(e) for e in events] == [ToolUse, HarnessFailure]
    assert events[1] == HarnessFailure("codex: stream disconnected before completion")


def test_a_command_cut_off_by_the_end_of_stdout_is_reported_failed_at_finish() -> None:
    parser = CodexParser()
    cut = OK_STREAM[:5]  # up to item.started of the command
    assert [e for line in cut for e in parser.feed(line)] == [HarnessSession(THREAD)]
    assert parser.finish() == [
        ToolUse("item_2", "command_execution", {"command": ECHO}, "", ok=False, shell=True)]


def test_a_stream_that_stops_after_errors_fails_with_the_last_one() -> None:
    lines = [*OK_STREAM[:6],
             b'{"type":"error","message":"Reconnecting... 1/1 (stream disconnected)"}',
             b'{"type":"error","message":"stream disconnected"}']  # then the CLI was ended
    events = events_of(lines)
    assert [type(e) for e in events] == [ToolUse, HarnessFailure]
    assert events[1] == HarnessFailure("codex: stream disconnected")


def test_no_message_means_no_answer() -> None:
    lines = [b'{"type":"turn.started"}',
             b'{"type":"turn.completed","usage":{"input_tokens":5,"output_tokens":1}}']
    assert events_of(lines) == [InferenceTurn(5, 1, "", (), "")]


@pytest.mark.parametrize("line", [
    b"", b"not json", b"[1,2]", b'"text"', b"{}", b'{"type":"thread.started"}',
    b'{"type":"item.updated","item":{"id":"i","type":"todo_list","items":[]}}',
    b'{"type":"item.completed","item":{"id":"i","type":"reasoning","text":"thinking"}}',
    b'{"type":"item.completed","item":"oops"}', b'{"type":"something.new","x":1}',
    b'{"type":"turn.completed","usage":{"input_tokens":"many","output_tokens":-3}}',
    b"\xff\xfe",
])
def test_lines_not_understood_yield_nothing_or_zero_usage(line: bytes) -> None:
    parser = CodexParser()
    events = parser.feed(line)
    assert events in ([], [InferenceTurn(0, 0, "", (), "")])


def test_other_tool_items() -> None:
    lines = [
        b'{"type":"item.completed","item":{"id":"item_1","type":"file_change","changes":'
        b'[{"path":"a.txt","kind":"add"}],"status":"completed"}}',
        b'{"type":"item.completed","item":{"id":"item_2","type":"mcp_tool_call","server":"s",'
        b'"tool":"t","arguments":{"q":1},"result":null,"error":{"message":"boom"},'
        b'"status":"failed"}}',
        b'{"type":"item.completed","item":{"id":"item_3","type":"web_search","query":"trio"}}',
    ]
    assert events_of(lines) == [
        ToolUse("item_1", "file_change", {}, "", ok=True),
        ToolUse("item_2", "mcp_tool_call", {}, "boom", ok=False),
        ToolUse("item_3", "web_search", {}, "", ok=True),
    ]
    uses = events_of(lines)
    assert [u.input for u in uses if isinstance(u, ToolUse)] == [
        {"changes": [{"path": "a.txt", "kind": "add"}]},
        {"server": "s", "tool": "t", "arguments": {"q": 1}},
        {"query": "trio"},
    ]


def test_long_failure_messages_are_cut() -> None:
    line = b'{"type":"turn.failed","error":{"message":"' + b"x" * 2000 + b'"}}'
    (failure,) = CodexParser().feed(line)
    assert isinstance(failure, HarnessFailure)
    assert len(failure.message) == len("codex: ") + 500


_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=6)
_json = _leaf | st.lists(_leaf, max_size=2) | st.dictionaries(st.text(max_size=4), _leaf, max_size=2)
_ITEMS = st.fixed_dictionaries(
    {"type": st.sampled_from(["command_execution", "file_change", "mcp_tool_call", "web_search",
                              "agent_message", "error", "reasoning"])},
    optional={k: _json for k in ("id", "command", "aggregated_output", "exit_code", "status",
                                 "changes", "result", "error", "arguments", "text", "query")},
)
_USAGE = st.fixed_dictionaries({}, optional={"input_tokens": _json, "output_tokens": _json})
_TYPES = st.sampled_from(["item.started", "item.completed", "turn.completed", "turn.failed",
                          "error", "thread.started", "turn.started"])


@given(st.lists(st.one_of(
    st.binary(max_size=40),
    st.builds(lambda t, item, usage: json.dumps({"type": t, "item": item, "usage": usage,
                                                 "error": item, "message": usage}).encode(),
              _TYPES, _json | _ITEMS, _json | _USAGE),
), max_size=6))
@settings(max_examples=60, deadline=None)
def test_the_parser_never_raises(lines: list[bytes]) -> None:
    for event in events_of(lines):
        assert isinstance(event, (ToolUse, InferenceTurn, Answer, HarnessFailure))
