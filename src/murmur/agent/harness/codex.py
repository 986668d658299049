"""The Codex protocol: ``codex exec --json`` run once per task.

Chosen when ``inference.command``'s program is ``codex``. Relied on (checked against
``@openai/codex`` 0.171.0; spec/agent.md, "Codex protocol"):

* **Start.** ``<command…> exec --json --color never --skip-git-repo-check --ephemeral
  --sandbox <mode> -``: the task is read from stdin (``-``), JSON Lines events go to stdout,
  no session files are kept (``--ephemeral``).
* **Configuration.** Everything else is one ``config.toml`` in ``CODEX_HOME`` =
  ``<home>/.codex`` (the CLI's own home, never ``~/.codex``): the model, a provider
  ``murmur`` (``base_url`` = the endpoint, ``wire_api = "responses"``, ``env_key`` naming
  :data:`KEY_ENV`), ``developer_instructions`` = the system prompt then the ``mur context``
  text, ``approval_policy = "never"``, the sandbox's network switch, the shell tool's
  environment (the key variable excluded) and the offline switches. The key itself is only
  in the CLI's environment (:data:`KEY_ENV`): never argv, stdin or a file.
* **Shell grant.** Codex cannot limit *which* programs its shell tool runs. An empty
  ``capabilities.shell.allow`` removes the tool (``features.shell_tool = false``: the model
  is offered no shell at all); a non-empty one offers Codex's ``exec_command`` under its own
  ``workspace-write`` sandbox (writes only in the workdir and the temporary directories), and
  that sandbox is the only guard: the listed names are not enforced one by one.
* **Events.** ``item.completed`` of type ``command_execution`` / ``file_change`` /
  ``mcp_tool_call`` / ``web_search`` → :class:`ToolUse`; ``agent_message`` items are held and
  the turn's last one is the answer; ``turn.completed`` (usage for the whole ``exec`` run:
  Codex reports neither per-call usage nor per-call boundaries) → one :class:`InferenceTurn`
  with the totals, then the turn's :class:`ToolUse` events, then :class:`Answer`;
  ``turn.failed``, or an ``error`` naming status 401/403 → :class:`HarnessFailure`, and
  nothing after it. Other top-level ``error`` events are retries (the last one is kept for a
  stream that ends without a turn result); ``error`` items (e.g. missing model metadata) are
  warnings.

Design: spec/agent.md, "Codex protocol".
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping

import attrs

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

__all__ = [
    "CONFIG_PATH",
    "DEFAULT_BASE_URL",
    "KEY_ENV",
    "PROTOCOL",
    "Codex",
    "CodexParser",
    "config_toml",
    "events_of",
    "key_names",
    "provider_base_url",
    "toml_string",
]

KEY_ENV = "MURMUR_CODEX_API_KEY"
"""The variable holding the provider key in the CLI's environment (provider ``env_key``)."""

CONFIG_PATH = ".codex/config.toml"
"""Where the configuration goes, relative to ``request.home`` (``CODEX_HOME`` = ``home/.codex``)."""

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""The provider base URL when the manifest names no endpoint."""

PROVIDER_ID = "murmur"
# A 5xx / 429 is retried at two levels, (1 + request) x (1 + stream) requests in all: six,
# like the http transport's RetryPolicy.max_attempts.
REQUEST_MAX_RETRIES = 2
STREAM_MAX_RETRIES = 1
_MESSAGE_CAP = 500  # characters of a Codex error quoted in a failure
_TOOL_ITEMS = ("command_execution", "file_change", "mcp_tool_call", "web_search")
_REJECTED = re.compile(r"\bstatus (401|403)\b")
_RETRY_NOTICE = re.compile(r"^Reconnecting\.\.\. \d+/\d+ \((.*)\)$", re.DOTALL)


# --- invocation (pure) -------------------------------------------------------------------


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string, quotes included (every control character escaped)."""
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def provider_base_url(endpoint: str | None) -> str:
    """The provider ``base_url`` for ``endpoint`` (Codex appends ``/responses`` itself).

    A base URL (``http://127.0.0.1:8080/v1``) is kept; a full ``…/responses`` URL loses that
    suffix; a trailing ``/`` is dropped; None → :data:`DEFAULT_BASE_URL`.
    """
    if not endpoint:
        return DEFAULT_BASE_URL
    base = endpoint.rstrip("/")
    if base.endswith("/responses"):
        base = base[: -len("/responses")]
    return base


def key_names(request: HarnessRequest) -> list[str]:
    """The variables Codex withholds from its commands: :data:`KEY_ENV`, then every variable
    of the session's shell environment that holds the key itself (an ``env.allow``-listed
    ``OPENAI_API_KEY``, say)."""
    same = sorted(k for k, v in request.shell_env.items()
                  if request.api_key and v == request.api_key and k != KEY_ENV)
    return [KEY_ENV, *same]


def sandbox_mode(request: HarnessRequest) -> str:
    """``workspace-write`` when the capsule has a shell grant, else ``read-only``; under a
    session sandbox (``request.enclosed``) with a shell grant, ``danger-full-access``: Codex's
    own sandbox is bubblewrap (namespaces), which ours refuses, and ours encloses every
    command it runs (and enforces ``shell.allow`` name by name, which Codex's cannot)."""
    if request.shell_allow and request.enclosed:
        return "danger-full-access"
    return "workspace-write" if request.shell_allow else "read-only"


def config_toml(request: HarnessRequest) -> str:
    """The ``config.toml`` for one task (pure; never holds the key).

    Shape: root keys (model, provider, approvals, instructions, offline switches), then the
    tables ``history``, ``analytics``, ``feedback``, ``features``, ``agents``,
    ``shell_environment_policy``, ``sandbox_workspace_write``, ``model_providers.murmur``.
    """
    root: dict[str, object] = {}
    if request.model:
        root["model"] = request.model
    root["model_provider"] = PROVIDER_ID
    root["approval_policy"] = "never"
    root["check_for_update_on_startup"] = False
    root["web_search"] = "disabled"
    # `bash -c`, not `bash -lc`: a login shell's /etc/profile would reset PATH (and with it
    # the links' bin/ the session put first).
    root["allow_login_shell"] = False
    instructions = request.instructions()
    if instructions is not None:
        root["developer_instructions"] = instructions
    provider: dict[str, object] = {
        "name": PROVIDER_ID,
        "base_url": provider_base_url(request.endpoint),
        "wire_api": "responses",
        "request_max_retries": REQUEST_MAX_RETRIES,
        "stream_max_retries": STREAM_MAX_RETRIES,
    }
    if request.api_key is not None:
        provider["env_key"] = KEY_ENV
    tables: list[tuple[str, Mapping[str, object]]] = [
        ("history", {"persistence": "none"}),
        ("analytics", {"enabled": False}),
        ("feedback", {"enabled": False}),
        # No sub-agents or goals: every model call is this task's, counted in its usage.
        ("features", {"shell_tool": bool(request.shell_allow), "goals": False}),
        ("agents", {"enabled": False}),
        # Commands see the session's environment as given (capabilities.env.allow included:
        # no default *KEY*/*TOKEN* filter), minus the provider key under any name.
        ("shell_environment_policy",
         {"inherit": "all", "ignore_default_excludes": True, "exclude": key_names(request)}),
        # Links (`mur context`) reach the session's door over loopback.
        ("sandbox_workspace_write", {"network_access": request.context_text is not None}),
        (f"model_providers.{PROVIDER_ID}", provider),
    ]
    lines = ['# Written by murmur for one task (spec/agent.md, "Codex protocol").']
    lines += [f"{k} = {_toml_value(v)}" for k, v in root.items()]
    for name, table in tables:
        lines += ["", f"[{name}]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in table.items()]
    return "\n".join(lines) + "\n"


def argv(request: HarnessRequest) -> tuple[str, ...]:
    """``request.command`` then ``exec`` (unless already its second word) and the flags.

    A threaded context keeps Codex's session files (no ``--ephemeral``); continuing one ends
    with ``resume <id> -`` instead of ``-`` (spec/conversations.md "Agent CLIs").
    """
    words = tuple(request.command)
    head = words if words[1:2] in (("exec",), ("e",)) else (*words, "exec")
    keep = () if request.keep_session else ("--ephemeral",)
    tail = ("resume", request.resume_id, "-") if request.resume_id else ("-",)
    return (
        *head,
        "--json",
        "--color",
        "never",
        "--skip-git-repo-check",
        *keep,
        "--sandbox",
        sandbox_mode(request),
        *tail,
    )


# --- the event stream ---------------------------------------------------------------------


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def _cap(message: str) -> str:
    message = " ".join(message.split())
    return message if len(message) <= _MESSAGE_CAP else message[: _MESSAGE_CAP - 1] + "…"


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def tool_use(item: Mapping[str, object], *, finished: bool = True) -> ToolUse | None:
    """The :class:`ToolUse` for one Codex tool item (None for any other item type).

    ``finished=False`` is for an item that started and never completed (the CLI was
    ended): it is reported failed with no output.
    """
    kind = item.get("type")
    call_id = _text(item.get("id"))
    status = item.get("status")
    ok = finished and status == "completed"
    if kind == "command_execution":
        exit_code = item.get("exit_code")
        return ToolUse(
            call_id=call_id,
            name="command_execution",
            input={"command": _text(item.get("command"))},
            output=_text(item.get("aggregated_output")) if finished else "",
            ok=ok and exit_code == 0,
            shell=True,
        )
    if kind == "file_change":
        changes = item.get("changes")
        return ToolUse(call_id, "file_change",
                       {"changes": changes if isinstance(changes, list) else []}, "", ok)
    if kind == "mcp_tool_call":
        result = item.get("result")
        error = item.get("error")
        output = json.dumps(result) if result is not None else ""
        if isinstance(error, dict):
            output = _text(error.get("message"))
        return ToolUse(
            call_id,
            "mcp_tool_call",
            {"server": _text(item.get("server")), "tool": _text(item.get("tool")),
             "arguments": item.get("arguments")},
            output if finished else "",
            ok and error is None,
        )
    if kind == "web_search":
        return ToolUse(call_id, "web_search", {"query": _text(item.get("query"))}, "",
                       finished and status in (None, "completed"))
    return None


def failure(message: str) -> HarnessFailure:
    """A failed Codex turn: ``credential_rejected`` when the provider answered 401/403.

    A retry notice (``Reconnecting... 1/2 (<error>)``) is reported as its ``<error>``.
    """
    notice = _RETRY_NOTICE.match(message)
    if notice:
        message = notice.group(1)
    cause = "credential_rejected" if _REJECTED.search(message) else "driver_error"
    return HarnessFailure(f"codex: {_cap(message)}" if message else "codex: the turn failed",
                          cause=cause)


@attrs.define
class CodexParser:
    """Reads ``codex exec --json`` output line by line (one instance per task).

    Codex reports one turn per ``exec`` and its usage only when the turn ends, so the tool
    uses of the turn are held until then and come after its :class:`InferenceTurn` (as the
    http transport writes a turn's ``inference`` record before its ``tool_call`` records).
    A turn that never ends (the CLI was ended) or fails yields the held uses first.

    State: the turn's agent messages and completed tool uses, the tool items that started
    and did not complete yet (by id), the last top-level ``error`` message, and whether the
    turn ended (``turn.completed``, ``turn.failed``, or a rejected key).
    """

    _messages: list[str] = attrs.field(factory=list)
    _uses: list[ToolUse] = attrs.field(factory=list)
    _running: dict[str, Mapping[str, object]] = attrs.field(factory=dict)
    _last_error: str = ""
    _ended: bool = False

    def feed(self, line: bytes) -> list[Event]:
        """Events for one stdout line (``[]`` for anything not understood)."""
        try:
            event = json.loads(line)
        except ValueError:
            return []
        if not isinstance(event, dict) or self._ended:
            return []
        kind = event.get("type")
        item = event.get("item")
        if kind == "thread.started" and isinstance(event.get("thread_id"), str):
            return [HarnessSession(event["thread_id"])]
        if kind == "item.started" and isinstance(item, dict):
            if item.get("type") in _TOOL_ITEMS:
                self._running[_text(item.get("id"))] = item
            return []
        if kind == "item.completed" and isinstance(item, dict):
            self._completed(item)
            return []
        if kind == "turn.completed":
            return self._turn_completed(event.get("usage"))
        if kind == "turn.failed":
            error = event.get("error")
            message = _text(error.get("message")) if isinstance(error, dict) else ""
            return self._failed(message or self._last_error)
        if kind == "error":
            self._last_error = _text(event.get("message"))
            if _REJECTED.search(self._last_error):  # a refused key: Codex would only retry
                return self._failed(self._last_error)
        return []

    def finish(self) -> list[Event]:
        """After stdout ended: held and unfinished tool uses, then a failure if one was seen
        and the turn did not end."""
        if self._ended:
            return []
        events = self._flush()
        events += [u for u in (tool_use(i, finished=False) for i in self._running.values()) if u]
        self._running.clear()
        if self._last_error:
            self._ended = True
            events.append(failure(self._last_error))
        return events

    def _flush(self) -> list[Event]:
        events: list[Event] = list(self._uses)
        self._uses = []
        return events

    def _completed(self, item: Mapping[str, object]) -> None:
        if item.get("type") == "agent_message":
            self._messages.append(_text(item.get("text")))
            return
        use = tool_use(item)
        if use is not None:
            self._running.pop(use.call_id, None)
            self._uses.append(use)

    def _failed(self, message: str) -> list[Event]:
        self._ended = True
        return [*self._flush(), failure(message)]

    def _turn_completed(self, usage: object) -> list[Event]:
        self._ended = True
        usage = usage if isinstance(usage, dict) else {}
        text = self._messages[-1] if self._messages else ""
        turn = InferenceTurn(
            input_tokens=_int(usage.get("input_tokens")),
            output_tokens=_int(usage.get("output_tokens")),
            stop_reason="",
            tool_names=tuple(u.name for u in self._uses),
            text=text,
        )
        events: list[Event] = [turn, *self._flush()]
        if self._messages:
            events.append(Answer(text))
        return events


@attrs.frozen
class Codex:
    """The Codex protocol (:class:`murmur.agent.harness.protocol.HarnessProtocol`)."""

    name: str = "codex"
    install_hint: str = "npm install -g @openai/codex"

    def invocation(self, request: HarnessRequest) -> Invocation:
        """``codex exec --json`` for ``request`` (pure): argv, environment, stdin, config file.

        The environment adds ``HOME`` = ``request.home``, ``CODEX_HOME`` =
        ``request.home/.codex`` and, when there is a key, :data:`KEY_ENV`.
        """
        env = {"HOME": str(request.home), "CODEX_HOME": str(request.home / ".codex")}
        if request.api_key is not None:
            env[KEY_ENV] = request.api_key
        return Invocation(
            argv=argv(request),
            env=env,
            stdin=request.task_text.encode("utf-8"),
            files={CONFIG_PATH: config_toml(request).encode("utf-8")},
        )

    def parser(self) -> CodexParser:
        """A fresh :class:`CodexParser`."""
        return CodexParser()


PROTOCOL = Codex()


def events_of(lines: Iterable[bytes]) -> list[Event]:
    """Every event of a whole recorded stream (feed each line, then finish)."""
    parser = CodexParser()
    out: list[Event] = []
    for line in lines:
        out += parser.feed(line)
    return out + parser.finish()
