"""The Claude Code protocol for ``transport: process`` (spec/agent.md, "Claude Code protocol").

Relied on (Claude Code 2.1.197, ``@anthropic-ai/claude-code`` on npm; spec/agent.md
"Claude Code protocol" lists the same facts):

* print mode reading the task on stdin: ``claude -p --output-format stream-json --verbose
  --include-partial-messages`` — one JSON object per stdout line: ``system`` (``init``),
  ``stream_event`` (the raw Messages API stream: ``message_start`` carries the call's input
  tokens, ``message_delta`` its output tokens and stop reason, ``message_stop`` ends it),
  ``assistant`` (content blocks, ``tool_use`` with the full input), ``user`` (``tool_result``
  with ``tool_use_id``, ``content``, ``is_error``), ``result`` (``subtype`` ``success`` /
  ``error_max_turns`` / ``error_during_execution``, ``is_error``, ``result`` text,
  ``usage`` totals), ``system``/``api_retry`` (``error_status``) before each retry;
* ``--append-system-prompt-file`` for the capsule's system prompt and the ``mur context``
  text (added to Claude Code's own prompt, never written into the project);
* ``--max-turns N`` (model calls), ``--model``;
* ``--tools`` (the built-in tools offered), ``--allowedTools Bash(<prog>:*)`` and
  ``--permission-mode dontAsk`` (anything not pre-approved is denied, not asked);
* ``--setting-sources ""`` (no user / project / local settings: a ``.claude/settings.json``
  in the workdir cannot widen permissions), ``--settings <file>`` for ``apiKeyHelper`` and,
  with the Bash tool, a ``PreToolUse`` command hook that refuses an ungranted program with the
  route message (:mod:`murmur.agent.harness.pretool`),
  ``--strict-mcp-config``, ``--no-session-persistence``;
* env ``ANTHROPIC_BASE_URL``, ``CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC``,
  ``DISABLE_AUTOUPDATER``, ``DISABLE_TELEMETRY``, ``DISABLE_ERROR_REPORTING``,
  ``CLAUDE_CODE_API_KEY_HELPER_TTL_MS``.

The key: Claude Code passes its whole environment to the commands its Bash tool runs, so
``ANTHROPIC_API_KEY`` would reach every command. Instead its ``apiKeyHelper`` reads the key
from a FIFO the transport writes once (:attr:`Invocation.key_fifo`); the key is then in the
CLI's memory only.

Design: spec/agent.md, "Process transport".
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Mapping
from typing import Any

import attrs

from murmur.agent.harness import pretool
from murmur.agent.harness.protocol import (
    Answer,
    Event,
    HarnessFailure,
    HarnessRequest,
    HarnessSession,
    InferenceTurn,
    Invocation,
    ToolUse,
)

__all__ = ["PROTOCOL", "ClaudeCode", "ClaudeStreamParser", "anthropic_base_url", "bash_rules"]

FILE_TOOLS = ("Read", "Glob", "Grep", "Edit", "Write")
"""Built-in tools always offered: Claude Code confines them to the workdir itself."""

SHELL_TOOL = "Bash"
KEY_FIFO = "murmur/key.fifo"
SETTINGS_FILE = "murmur/settings.json"
PROMPT_FILE = "murmur/system-prompt.md"
_HELPER_TTL_MS = "86400000"  # one day: the key is read once per task and never refreshed
_KEYLESS = "murmur-keyless"  # the helper's answer for a keyless endpoint (sent, never checked)

OFFLINE_ENV: Mapping[str, str] = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "CLAUDE_CODE_API_KEY_HELPER_TTL_MS": _HELPER_TTL_MS,
}


def anthropic_base_url(endpoint: str) -> str:
    """The base URL Claude Code appends ``/v1/messages`` to (pure).

    Accepts the forms the http Anthropic driver accepts: the host, ``…/v1`` or the full
    ``…/v1/messages`` URL.
    """
    base = endpoint.rstrip("/")
    for tail in ("/v1/messages", "/v1"):
        if base.endswith(tail):
            return base[: -len(tail)]
    return base


def bash_rules(programs: tuple[str, ...]) -> tuple[str, ...]:
    """Claude Code permission rules allowing exactly these programs in its Bash tool (pure).

    ``ls`` → ``Bash(ls:*)`` (``ls`` with any arguments). A glob entry (``python3*``) keeps
    its ``*`` inside the rule (``Bash(python3*:*)``); Claude Code's matcher decides.
    """
    seen: list[str] = []
    for prog in programs:
        rule = f"{SHELL_TOOL}({prog}:*)"
        if prog and rule not in seen:
            seen.append(rule)
    return tuple(seen)


@attrs.frozen
class ClaudeCode:
    """The Claude Code protocol (``inference.command`` whose base name is not ``codex``)."""

    name: str = "claude-code"
    install_hint: str = "npm install -g @anthropic-ai/claude-code"

    def invocation(self, request: HarnessRequest) -> Invocation:
        """``claude -p`` for one task (pure); see the module docstring for every flag."""
        tools = FILE_TOOLS + ((SHELL_TOOL,) if request.shell_allow else ())
        argv = [
            *request.command,
            "-p",
            "--output-format", "stream-json",
            "--verbose",
            "--include-partial-messages",
            "--max-turns", str(request.max_turns),
            "--tools", ",".join(tools),
            "--allowedTools", *FILE_TOOLS, *bash_rules(request.shell_allow),
            "--permission-mode", "dontAsk",
            "--setting-sources", "",
            "--settings", str(request.home / SETTINGS_FILE),
            "--strict-mcp-config",
        ]
        if not request.keep_session:
            argv.append("--no-session-persistence")
        if request.resume_id:
            argv += ["--resume", request.resume_id]
        if request.model:
            argv += ["--model", request.model]
        files: dict[str, bytes] = {}
        instructions = request.instructions()
        if instructions:
            files[PROMPT_FILE] = instructions.encode("utf-8")
            argv += ["--append-system-prompt-file", str(request.home / PROMPT_FILE)]
        if request.api_key:
            # shell builtins only: inside a sandbox the helper's shell may exec nothing else
            helper = f"IFS= read -r k < {shlex.quote(str(request.home / KEY_FIFO))}; printf '%s' \"$k\""
            fifo: str | None = KEY_FIFO
        else:
            helper, fifo = f"echo {_KEYLESS}", None
        settings: dict[str, Any] = {"apiKeyHelper": helper}
        deny = None
        if request.shell_allow:  # an ungranted command is told its route (murmur.agent.harness.pretool)
            config = str(request.home / pretool.CONFIG_FILE)
            settings["hooks"] = pretool.hook_settings(sys.executable, config)
            files[pretool.CONFIG_FILE] = pretool.config_bytes(request.capsule, request.shell_allow)
            deny = pretool.SOCKET_FILE
        files[SETTINGS_FILE] = json.dumps(settings).encode("utf-8")
        env = {"HOME": str(request.home), **OFFLINE_ENV}
        if request.endpoint:
            env["ANTHROPIC_BASE_URL"] = anthropic_base_url(request.endpoint)
        return Invocation(
            argv=tuple(argv),
            env=env,
            stdin=request.task_text.encode("utf-8"),
            files=files,
            key_fifo=fifo,
            deny_socket=deny,
        )

    def parser(self) -> ClaudeStreamParser:
        """A parser for one task's ``stream-json`` output."""
        return ClaudeStreamParser()


PROTOCOL = ClaudeCode()


@attrs.define
class _Call:
    """One model call being streamed."""

    input_tokens: int = 0
    output_tokens: int = 0
    stop_reason: str = ""
    tools: list[str] = attrs.field(factory=list)
    text: list[str] = attrs.field(factory=list)


class ClaudeStreamParser:
    """Turns ``claude -p --output-format stream-json`` lines into harness events."""

    def __init__(self) -> None:
        self._call: _Call | None = None
        self._pending: dict[str, tuple[str, Mapping[str, object]]] = {}  # tool_use id → name, input

    def feed(self, line: bytes) -> list[Event]:
        """Events for one stdout line (``[]`` for anything not understood)."""
        try:
            obj = json.loads(line)
        except ValueError:
            return []
        if not isinstance(obj, dict):
            return []
        kind = obj.get("type")
        if kind == "stream_event":
            return self._stream(obj.get("event"))
        if kind == "assistant":
            self._assistant(obj.get("message"))
            return []
        if kind == "user":
            return self._results(obj.get("message"))
        if kind == "result":
            return [*self._flush(), _outcome(obj)]
        if kind == "system" and obj.get("subtype") == "init" and isinstance(obj.get("session_id"), str):
            return [HarnessSession(obj["session_id"])]
        if kind == "system" and obj.get("subtype") == "api_retry" and obj.get("error_status") in (401, 403):
            return [*self._flush(), _rejected(obj.get("error_status"))]
        return []

    def finish(self) -> list[Event]:
        """A call cut off mid-stream (the CLI was killed) still counts its tokens."""
        return self._flush()

    # --- the raw Messages API stream --------------------------------------------------

    def _stream(self, event: object) -> list[Event]:
        if not isinstance(event, dict):
            return []
        kind = event.get("type")
        if kind == "message_start":
            done = self._flush()
            message = event.get("message") if isinstance(event.get("message"), dict) else {}
            usage = _mapping(_get(message, "usage"))
            self._call = _Call(input_tokens=_input_tokens(usage), output_tokens=_int(usage.get("output_tokens")))
            return done
        call = self._call
        if call is None:
            return []
        if kind == "content_block_start":
            block = _mapping(event.get("content_block"))
            if block.get("type") == "tool_use":
                call.tools.append(str(block.get("name", "")))
        elif kind == "content_block_delta":
            delta = _mapping(event.get("delta"))
            if delta.get("type") == "text_delta":
                call.text.append(str(delta.get("text", "")))
        elif kind == "message_delta":
            usage = _mapping(event.get("usage"))
            if "output_tokens" in usage:
                call.output_tokens = _int(usage.get("output_tokens"))
            if _input_tokens(usage):
                call.input_tokens = _input_tokens(usage)
            stop = _mapping(event.get("delta")).get("stop_reason")
            if isinstance(stop, str):
                call.stop_reason = stop
        elif kind == "message_stop":
            return self._flush()
        return []

    def _flush(self) -> list[Event]:
        call, self._call = self._call, None
        if call is None:
            return []
        return [InferenceTurn(
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            stop_reason=call.stop_reason,
            tool_names=tuple(call.tools),
            text="".join(call.text),
        )]

    # --- whole messages ---------------------------------------------------------------

    def _assistant(self, message: object) -> None:
        for block in _blocks(message):
            if block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                tool_input = block.get("input")
                self._pending[block["id"]] = (
                    str(block.get("name", "")),
                    tool_input if isinstance(tool_input, dict) else {},
                )

    def _results(self, message: object) -> list[Event]:
        events: list[Event] = []
        for block in _blocks(message):
            if block.get("type") != "tool_result":
                continue
            call_id = str(block.get("tool_use_id", ""))
            name, tool_input = self._pending.pop(call_id, ("", {}))
            events.append(ToolUse(
                call_id=call_id,
                name=name,
                input=tool_input,
                output=_result_text(block.get("content")),
                ok=block.get("is_error") is not True,
                shell=name == SHELL_TOOL,
            ))
        return events


def _outcome(result: Mapping[str, Any]) -> Event:
    """The ``result`` line: the answer, or why there is none."""
    subtype = str(result.get("subtype", ""))
    text = result.get("result")
    if subtype == "success" and result.get("is_error") is not True and isinstance(text, str):
        return Answer(text)
    if subtype == "error_max_turns":
        turns = result.get("num_turns")
        return HarnessFailure(
            f"Claude Code stopped at its turn limit (--max-turns, inference.max_turns) after {turns} turns",
            status="max_turns_reached",
        )
    status = result.get("api_error_status")
    if status in (401, 403):
        return _rejected(status)
    detail = text if isinstance(text, str) and text else "; ".join(
        str(e) for e in result.get("errors") or [] if isinstance(e, str)
    )
    message = f"Claude Code ended with {subtype or 'an error'}"
    if status is not None:
        message += f" (HTTP {status})"
    if detail:
        message += f": {detail[:500]}"
    return HarnessFailure(message)


def _rejected(status: object) -> HarnessFailure:
    """A 401 / 403: Claude Code would retry it; murmur never does (as the http drivers)."""
    return HarnessFailure(
        f"E-RUN-027: the inference provider rejected the credential (HTTP {status}); "
        "check inference.api_key; not retried",
        cause="credential_rejected",
    )


def _result_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"
        )
    return ""


def _blocks(message: object) -> list[dict[str, Any]]:
    content = _get(message, "content")
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _get(obj: object, key: str) -> object:
    return obj.get(key) if isinstance(obj, dict) else None


def _mapping(obj: object) -> dict[str, Any]:
    return obj if isinstance(obj, dict) else {}


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _input_tokens(usage: Mapping[str, Any]) -> int:
    """Input tokens the provider charged: plain + cache creation + cache reads."""
    return sum(_int(usage.get(k)) for k in
               ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
