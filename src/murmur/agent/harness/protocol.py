"""The contract between the process transport and one agent CLI's protocol.

A *harness protocol* knows how to start one agent CLI (Claude Code, Codex) for one task and
how to read what it prints. It does no I/O: the process transport
(:mod:`murmur.agent.transports.stdio`) owns the process, its containment unit, the trace,
the task's usage and every limit. The split is

1. the transport builds a :class:`HarnessRequest` from the manifest and the task;
2. ``protocol.invocation(request)`` (pure) says how to start the CLI: an :class:`Invocation`;
3. the transport writes ``Invocation.files`` under ``request.home``, starts
   ``Invocation.argv`` in the task's containment unit with cwd ``request.workdir`` and the
   environment ``request.shell_env | Invocation.env``, writes ``Invocation.stdin`` then EOF;
4. every line the CLI prints on stdout goes to ``parser.feed(line)`` (``parser =
   protocol.parser()``, one per task); when stdout ends, ``parser.finish()``;
5. the transport turns the :data:`Event` values into trace records (``inference``,
   ``tool_call``) and usage, and ends the CLI's containment unit when ``max_turns``,
   ``inference.budget_tokens`` or a deadline is passed.

Outcome rule (applied by the transport, so every protocol gets the same one): the task ends
``ok`` with the text of the last :class:`Answer` when the CLI exits 0; a
:class:`HarnessFailure` ends it with the failure's ``status`` and ``message``; an exit status
other than 0, or no :class:`Answer` at all, ends it ``failed`` naming the exit status and the
tail of stderr.

A protocol module (``harness/claude.py``, ``harness/codex.py``) exposes one object
satisfying :class:`HarnessProtocol`, e.g. ``PROTOCOL = ClaudeCode()``.

Design: spec/agent.md, "Process transport".
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Literal, Protocol

import attrs

__all__ = [
    "Answer",
    "Event",
    "HarnessFailure",
    "HarnessProtocol",
    "HarnessRequest",
    "HarnessSession",
    "InferenceTurn",
    "Invocation",
    "StreamParser",
    "ToolUse",
]


@attrs.frozen
class HarnessRequest:
    """Everything a protocol may use to start its CLI for one task.

    Attributes:
        command (tuple[str, ...]): ``inference.command`` split into words; ``command[0]`` is
            the bare program name (``claude``, ``codex``). The protocol keeps these words
            first and in order and adds its own arguments after them.
        task_text (str): the task exactly as the model must read it (already fenced under
            ``task:<origin>`` when untrusted; ``(the task has no text)`` when empty).
        system_prompt (str | None): the capsule's system prompt (``inference.system_prompt``
            / ``system_prompt_file`` / ``mur run --system-prompt``), or None.
        context_text (str | None): the ``mur context`` text (spec/links.md) when the session
            has a non-empty spawn set, else None. Hand it to the model through the CLI's own
            system-prompt / instructions option, after ``system_prompt``; never by writing
            into the project, ``CLAUDE.md``, ``AGENTS.md``, ``~/.claude`` or ``~/.codex``.
        model (str | None): ``inference.model``, or None (the CLI's default).
        endpoint (str | None): the provider base URL (``inference.endpoint`` or the driver
            artifact's ``gateway.endpoint``), or None (the CLI's default provider).
        api_key (str | None): the resolved key (never a ``${VAR}`` reference), or None when
            keyless. It may appear only in :attr:`Invocation.env` (or a file under
            ``home`` if a CLI offers nothing else; say so in spec/agent.md) — never in
            ``argv`` or ``stdin``. Not part of ``repr``.
        max_turns (int): ``inference.max_turns``: model calls allowed for the task. Pass it
            to the CLI where it has an option; the transport also enforces it by counting
            :class:`InferenceTurn` events.
        shell_allow (tuple[str, ...]): the programs the CLI's shell tool may run:
            ``capabilities.shell.allow`` (bare names, may hold ``fnmatch`` globs) followed by,
            when the session has capsule links, each link name and ``mur`` (spec/links.md).
            Map it onto the CLI's own tool permissions where it has them (and document
            where the CLI's own sandbox is the only guard).
        home (Path): the CLI's own ``HOME`` (an empty, owner-only directory under the
            session's records, created by the transport). Put every config or state
            directory the CLI uses (``CODEX_HOME``, ``CLAUDE_CONFIG_DIR``) inside it.
        workdir (Path): the capsule's workdir; the CLI's cwd.
        shell_env (Mapping[str, str]): the session's reduced shell environment
            (``TaskContext.shell_env``: ``PATH`` with the links ``bin/`` first, ``HOME``,
            ``TMPDIR``, locale, ``capabilities.env.allow``). The CLI's environment is this
            plus :attr:`Invocation.env`; do not repeat it in ``Invocation.env``.
        enclosed (str | None): the session's sandbox class when the CLI runs inside it
            (``scoped``/``sealed``; spec/containment.md), else None. A CLI whose own sandbox
            would need what ours refuses (namespaces) turns it off then: ours encloses it.
        keep_session (bool): a threaded context: let the CLI keep its session files (under
            ``home``, which then outlives the task) so a later task can continue it.
        resume_id (str | None): the CLI session to continue (its ``--resume`` / ``exec
            resume`` id); None starts a new one (spec/conversations.md "Agent CLIs").
        capsule (str): the capsule's name (what a refusal of an ungranted program names).
    """

    command: tuple[str, ...]
    task_text: str
    system_prompt: str | None
    context_text: str | None
    model: str | None
    endpoint: str | None
    api_key: str | None = attrs.field(repr=False)
    max_turns: int
    shell_allow: tuple[str, ...]
    home: Path
    workdir: Path
    shell_env: Mapping[str, str] = attrs.field(repr=False, eq=False)
    enclosed: str | None = None
    keep_session: bool = False
    resume_id: str | None = None
    capsule: str = ""

    def instructions(self) -> str | None:
        """``system_prompt`` then ``context_text``, separated by a blank line (None if neither)."""
        parts = [p.strip("\n") for p in (self.system_prompt, self.context_text) if p]
        return "\n\n".join(parts) if parts else None


@attrs.frozen
class Invocation:
    """How to start the CLI for one task (what :meth:`HarnessProtocol.invocation` returns).

    Attributes:
        argv (tuple[str, ...]): the full argv, starting with ``request.command``; no key,
            token or credential in it.
        env (Mapping[str, str]): variables added to ``request.shell_env`` (they win on a
            clash): ``HOME`` = ``request.home``, the endpoint, the key, the CLI's offline
            switches. Not part of ``repr`` (it may hold the key).
        stdin (bytes): written to the CLI's stdin, then EOF (``b""``: EOF at once).
        files (Mapping[str, bytes]): files the transport writes before the start, keyed by
            a relative POSIX path under ``request.home`` (``".codex/config.toml"``); parent
            directories are created 0700, files 0600. No ``..``, no absolute path.
        key_fifo (str | None): optional (Claude Code uses it; Codex need not): a relative
            path under ``request.home`` where the transport makes a FIFO (0600) and writes
            ``request.api_key`` to its first reader only, then removes it — for a CLI that
            would otherwise pass a key from its environment on to the commands it runs.
            The key then reaches neither ``env`` nor the disk. None: no FIFO.
        deny_socket (str | None): optional (Claude Code's PreToolUse hook uses it): a
            relative path under ``request.home`` where the transport listens, for the CLI's
            life, on a Unix socket (0600) answering one binary name per connection with the
            message the built-in loop gives for it (the session's ``denied_binary``: the
            ready routes; :mod:`murmur.agent.harness.pretool`). None: no socket.
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = attrs.field(factory=dict, repr=False, eq=False)
    stdin: bytes = b""
    files: Mapping[str, bytes] = attrs.field(factory=dict, repr=False, eq=False)
    key_fifo: str | None = None
    deny_socket: str | None = None


@attrs.frozen
class InferenceTurn:
    """One model call the CLI made, emitted once per call when its usage is known.

    The transport writes one ``inference`` record per event (``turn`` numbered from 1),
    adds the tokens to the task's usage, counts it against ``max_turns`` and checks
    ``budget_tokens`` after it. A CLI that reports usage only per task (not per call)
    emits one event with the totals.

    Attributes:
        input_tokens (int): prompt tokens the provider counted for this call (0 if not
            reported). Include cached / cache-creation input tokens when the CLI reports
            them separately, so the sum is what the provider charged as input.
        output_tokens (int): completion tokens for this call (0 if not reported).
        stop_reason (str): the provider's stop word as the CLI reports it (``end_turn``,
            ``tool_use``, ``max_tokens``, ``stop`` …; ``""`` when unknown).
        tool_names (tuple[str, ...]): the CLI's tool names the model asked for in this call,
            in order (``("Bash",)``); empty when it only answered.
        text (str): the assistant text of this call (hashed into ``response_sha256``).
    """

    input_tokens: int
    output_tokens: int
    stop_reason: str = ""
    tool_names: tuple[str, ...] = ()
    text: str = ""


@attrs.frozen
class ToolUse:
    """One tool call the CLI ran (or refused), emitted when its result is known.

    The transport writes one ``tool_call`` record (``tool_name``, ``tool_call_id``,
    ``input``, ``input_bytes``, ``output_bytes``, ``output_sha256``, ``status``) and counts
    it in ``usage.tool_calls``; a shell tool (``Bash``, Codex's command execution) also
    counts in ``usage.shell_calls``.

    Attributes:
        call_id (str): the CLI's id for the call (``toolu_…``, ``item_…``); ``""`` if none.
        name (str): the CLI's tool name (``Bash``, ``command_execution`` …).
        input (Mapping[str, object]): the tool input as a JSON object (``{"command": "ls"}``).
        output (str): the result text the model read (may be cut by the CLI).
        ok (bool): False when the tool failed or was refused (a non-zero exit, a denied
            permission).
        shell (bool): True for a tool that runs a shell command.
    """

    call_id: str
    name: str
    input: Mapping[str, object] = attrs.field(eq=False)
    output: str
    ok: bool
    shell: bool = False


@attrs.frozen
class Answer:
    """The CLI's final answer to the task (its last agent message / result text)."""

    text: str


@attrs.frozen
class HarnessFailure:
    """The CLI reported that the task did not end with an answer.

    The transport ends the CLI's unit as soon as it reads one (a parser may emit it before
    the CLI gives up by itself, e.g. on a rejected credential the CLI would keep retrying);
    only the first one counts.

    Attributes:
        message (str): one sentence for the trace and the outcome; never the key.
        status (str): the task's end: ``failed``, or ``max_turns_reached`` when the CLI
            stopped at its own turn limit.
        cause (str): the ``task_failed`` cause: ``driver_error`` (default),
            ``credential_rejected`` (the provider refused the key), ``malformed_response``.
    """

    message: str
    status: Literal["failed", "max_turns_reached"] = "failed"
    cause: str = "driver_error"


@attrs.frozen
class HarnessSession:
    """The CLI named the session it runs in (Claude Code's ``session_id``, Codex's
    ``thread_id``); a threaded context maps to it."""

    id: str


Event = InferenceTurn | ToolUse | Answer | HarnessFailure | HarnessSession
"""What a :class:`StreamParser` reports, in the order the CLI did it."""


class StreamParser(Protocol):
    """Reads one task's stdout, line by line. One instance per task; not thread-safe.

    ``feed`` gets each line without its trailing newline (``b"\\r"`` stripped too); lines
    longer than the transport's cap (8 MiB) are cut. A line that is not JSON, or an event
    type the protocol does not know, yields ``[]`` — never raises. ``finish`` is called
    once, after stdout ended (also when the CLI was killed), and yields whatever was still
    pending (e.g. a call whose usage arrived without a closing event). Neither may block or
    do I/O.
    """

    def feed(self, line: bytes) -> list[Event]: ...

    def finish(self) -> list[Event]: ...


class HarnessProtocol(Protocol):
    """One agent CLI's protocol.

    Attributes:
        name (str): the manifest-facing name (``claude-code``, ``codex``), as written in
            trace records and spec/agent.md.
        install_hint (str): one line telling the user how to install the CLI
            (``npm install -g @anthropic-ai/claude-code``), quoted by ``E-RUN-006``.
    """

    name: str
    install_hint: str

    def invocation(self, request: HarnessRequest) -> Invocation:
        """How to start the CLI for ``request`` (pure)."""
        ...

    def parser(self) -> StreamParser:
        """A fresh parser for one task's stdout."""
        ...
