"""``transport: process`` with an agent harness: Claude Code or Codex, run once per task.

The CLI runs in a containment unit of its own (a *command* unit, so the commands its shell
tool runs may use the session's capsule links), in the workdir, with the session's shell
environment plus only what the protocol adds (:class:`~murmur.agent.harness.protocol.Invocation`),
and a ``HOME`` of its own under the session's records (``<records>/harness/<task_id>/home``);
with links, ``MURMUR_CONTEXT_FILE`` too (:func:`murmur.workload.harness_env`).
Its stdout is read line by line through the protocol's parser; each event becomes a trace
record as the http transport writes it:

* :class:`InferenceTurn` → ``inference`` (``turn``, ``input_tokens``, ``output_tokens``,
  ``decision``, ``stop_reason``, ``tool_name``/``tool_calls``, ``response_sha256``,
  ``duration_ms``), tokens into the task's usage;
* :class:`ToolUse` → ``tool_call`` (child of the turn that asked for it).

Limits end the CLI's unit at once: a turn past ``inference.max_turns`` (the CLI's own
``--max-turns`` normally stops it first) → ``max_turns_reached``; input + output tokens past
``inference.budget_tokens`` → ``spend_ceiling_reached``; a cancel (task deadline, child
watch, CancelTask, wind-down) → the unit is killed before ``trio.Cancelled`` propagates.

The provider key is resolved here, in the capsule's process, from ``inference.api_key``
(``${VAR}``) or, when the manifest gives none, the variable the CLI itself would read from
the capsule's environment (``ANTHROPIC_API_KEY`` / ``OPENAI_API_KEY``). It is handed over as
the protocol says (environment or a one-reader FIFO), never in argv, a trace record or a log.

Design: spec/agent.md, "Process transport".
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

import attrs
import trio

from murmur import procs, timing, tracectx
from murmur.agent.config import AgentConfig
from murmur.agent.harness.protocol import (
    Answer,
    Event,
    HarnessFailure,
    HarnessProtocol,
    HarnessRequest,
    HarnessSession,
    InferenceTurn,
    Invocation,
    StreamParser,
    ToolUse,
)
from murmur.agent.harness.sessions import HarnessThread
from murmur.agent.transports import InferenceError
from murmur.agent.transports.denials import denials_listener, serve_denials
from murmur.agent.transports.http import (
    GATEWAY_PLACEHOLDER,
    redact,
    resolve_api_key,
    via_gateway,
)
from murmur.grants import denied_binary
from murmur.lines import read_lines
from murmur.workload import (
    TaskContext,
    TaskOutcome,
    context_file_for,
    context_for_prompt,
    harness_env,
)

__all__ = ["ENV_FALLBACK", "LINE_CAP", "link_names", "run_harness_task"]

_UPSTREAM: Mapping[str, str] = {
    "claude-code": "https://api.anthropic.com",
    "codex": "https://api.openai.com/v1",
}
"""Where each CLI goes when nothing names an endpoint: what the gateway reaches for it."""

LINE_CAP = 8 << 20
"""A stdout line longer than this is cut (its JSON is then unreadable and ignored)."""

_STDERR_KEEP = 64 << 10
_STDERR_TAIL = 500
_CHUNK = 65536

ENV_FALLBACK: Mapping[str, tuple[str, str]] = {
    "claude-code": ("ANTHROPIC_BASE_URL", "ANTHROPIC_API_KEY"),
    "codex": ("OPENAI_BASE_URL", "OPENAI_API_KEY"),
}
"""Where the endpoint and key come from when the manifest gives none: the variables each CLI
reads itself, taken from the capsule process's environment (upstream manifests carry no
endpoint for ``transport: process``)."""


def link_names(ctx: TaskContext) -> tuple[str, ...]:
    """The session's link names (``mur`` last), or ``()`` when it has no links.

    Read from the stubs beside its ``mur context`` file (``links/bin/``, spec/links.md): one
    per name in ``capabilities.spawn.allow``, a name narrowed out of the effective set
    included (it answers 126, which the model must be able to see).
    """
    context = context_file_for(ctx)
    if context is None:
        return ()
    try:
        names = sorted(p.name for p in (context.parent / "bin").iterdir() if p.name != "mur")
    except OSError:
        return ()
    return (*names, "mur")


@attrs.define
class _Run:
    """What one task's CLI has done so far."""

    ctx: TaskContext
    config: AgentConfig
    protocol: HarnessProtocol
    secret: str | None
    turn: int = 0
    turn_id: str | None = None
    last: float = attrs.field(factory=time.monotonic)
    answer: str | None = None
    failure: HarnessFailure | None = None
    stopped: TaskOutcome | None = None  # a limit murmur enforced
    session_id: str | None = None  # the CLI session it ran in (HarnessSession)
    thread: HarnessThread | None = None

    @property
    def over(self) -> bool:
        """A limit was passed or the CLI reported a failure: its unit is ended at once."""
        return self.stopped is not None or self.failure is not None

    def apply(self, event: Event) -> None:
        if isinstance(event, InferenceTurn):
            self._turn(event)
        elif isinstance(event, ToolUse):
            self._tool(event)
        elif isinstance(event, Answer):
            self.answer = event.text
        elif isinstance(event, HarnessFailure) and self.failure is None:
            self.failure = event
        elif isinstance(event, HarnessSession) and event.id != self.session_id:
            self.session_id = event.id
            if self.thread is not None:  # remembered at once: a killed session still resumes
                self.thread.remember(event.id)

    def _turn(self, ev: InferenceTurn) -> None:
        ctx = self.ctx
        self.turn += 1
        ctx.usage.turns += 1
        ctx.usage.input_tokens += ev.input_tokens
        ctx.usage.output_tokens += ev.output_tokens
        now = time.monotonic()
        fields: dict[str, object] = {
            "turn": self.turn,
            "task_id": ctx.task_id,
            "input_tokens": ev.input_tokens,
            "output_tokens": ev.output_tokens,
            "decision": _decision(ev),
            "stop_reason": ev.stop_reason,
            "duration_ms": int((now - self.last) * 1000),
            "response_sha256": hashlib.sha256(ev.text.encode("utf-8")).hexdigest(),
            "harness": self.protocol.name,
        }
        self.last = now
        if ev.tool_names:
            fields["tool_name"] = ev.tool_names[0]
            fields["tool_calls"] = len(ev.tool_names)
        self.turn_id = ctx.trace.emit("inference", parent_id=ctx.task_event_id, **fields)
        if self.stopped is None:
            self.stopped = self._limit()

    def _limit(self) -> TaskOutcome | None:
        if self.turn > self.config.max_turns:
            return TaskOutcome(
                "max_turns_reached",
                f"the agent CLI made more than {self.config.max_turns} model calls (inference.max_turns)",
            )
        budget = self.config.budget_tokens
        used = self.ctx.usage.input_tokens + self.ctx.usage.output_tokens
        if budget is not None and used > budget:
            return TaskOutcome(
                "spend_ceiling_reached",
                f"the task used {used} tokens (input + output) against its ceiling of "
                f"{budget} (inference.budget_tokens)",
            )
        return None

    def _tool(self, ev: ToolUse) -> None:
        ctx = self.ctx
        ctx.usage.tool_calls += 1
        if ev.shell:
            ctx.usage.shell_calls += 1
        out = redact(ev.output, self.secret).encode("utf-8")
        raw = _json_bytes(ev.input)
        ctx.trace.emit(
            "tool_call",
            parent_id=self.turn_id or ctx.task_event_id,
            turn=self.turn,
            task_id=ctx.task_id,
            tool_name=ev.name,
            tool_call_id=ev.call_id,
            input=_redacted(ev.input, self.secret),
            input_bytes=len(raw),
            output_bytes=len(out),
            output_sha256=hashlib.sha256(out).hexdigest(),
            duration_ms=0,
            status="ok" if ev.ok else "error",
        )


def _decision(ev: InferenceTurn) -> str:
    if ev.tool_names:
        return "tool_call"
    return "end_turn" if ev.stop_reason in ("end_turn", "stop", "") else "text"


def _json_bytes(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), default=str).encode("utf-8")


def _redacted(value: Mapping[str, object], secret: str | None) -> object:
    if not secret:
        return dict(value)
    text = json.dumps(value, default=str)
    return json.loads(text) if secret not in text else json.loads(text.replace(secret, "[redacted]"))


# --- the request ------------------------------------------------------------------------


def _endpoint_and_key(
    config: AgentConfig, protocol: HarnessProtocol, environ: Mapping[str, str]
) -> tuple[str | None, str | None]:
    """The endpoint and the resolved key (raises InferenceError for an unset ``${VAR}``)."""
    url_var, key_var = ENV_FALLBACK.get(protocol.name, ("", ""))
    endpoint = config.endpoint or (environ.get(url_var) or None if url_var else None)
    upstream = endpoint or _UPSTREAM.get(protocol.name)
    # Under the tree's gateway the CLI holds a placeholder, and the root attaches the key its
    # ``inference.api_key`` names. A manifest that names neither a key nor an endpoint (the
    # CLI's own login, its own base-URL and key variables) is left to the CLI: the gateway has
    # nothing to attach for it (spec/gateway.md "Addresses").
    named = config.api_key_ref is not None or config.endpoint is not None
    gatewayed = via_gateway(upstream, environ) if upstream and named else None
    if gatewayed is not None:
        return gatewayed, GATEWAY_PLACEHOLDER
    if config.api_key_ref is not None:
        key: str | None = resolve_api_key(config.api_key_ref, environ)
    else:
        key = (environ.get(key_var) or None) if key_var else None
    return endpoint, key


def _home(ctx: TaskContext) -> Path:
    home = ctx.records_dir / "harness" / ctx.task_id / "home"
    home.mkdir(parents=True, mode=0o700, exist_ok=True)
    os.chmod(home, 0o700)
    return home


def _write_files(home: Path, files: Mapping[str, bytes]) -> None:
    for rel, data in files.items():
        parts = PurePosixPath(rel).parts
        if not parts or PurePosixPath(rel).is_absolute() or ".." in parts:
            raise ValueError(f"a harness file must be a relative path under HOME: {rel}")
        path = home.joinpath(*parts)
        path.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)


async def _hand_key(path: Path, key: str) -> None:
    """Write ``key`` into the FIFO at ``path`` for its first reader, then remove the FIFO."""

    def write() -> None:
        fd = os.open(path, os.O_WRONLY)  # waits for the reader
        try:
            data = key.encode("utf-8")
            while data:
                data = data[os.write(fd, data):]
        finally:
            os.close(fd)

    try:
        await trio.to_thread.run_sync(write, abandon_on_cancel=True)
    except OSError:
        pass
    finally:
        try:  # a writer still waiting for a reader is released by opening the read end
            os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            pass
        _unlink(path)


def _unlink(path: Path) -> None:
    path.unlink(missing_ok=True)


# --- the run ----------------------------------------------------------------------------


async def run_harness_task(
    ctx: TaskContext,
    config: AgentConfig,
    protocol: HarnessProtocol,
    *,
    task_text: str,
    environ: Mapping[str, str],
    thread: HarnessThread | None = None,
) -> TaskOutcome:
    """Run the agent CLI for one task under ``protocol``.

    Args:
        ctx (TaskContext): the task (workdir, shell env, records, trace, usage).
        config (AgentConfig): the checked ``inference`` block (``transport: process``).
        protocol (HarnessProtocol): Claude Code or Codex.
        task_text (str): the task as the model reads it (fenced when untrusted).
        environ (Mapping[str, str]): the capsule process's environment (the key's source).
        thread (HarnessThread | None): a threaded context's CLI session: its ``HOME``, the
            session to continue, and where the session the CLI names is remembered.

    Returns:
        TaskOutcome: ``ok`` with the CLI's answer, ``failed``, ``max_turns_reached`` or
        ``spend_ceiling_reached``.

    Raises:
        trio.Cancelled: the task was cancelled; the CLI's unit is dead by then.
    """
    try:
        endpoint, key = _endpoint_and_key(config, protocol, environ)
    except InferenceError as exc:
        return _fail(ctx, exc.message, cause=exc.cause)
    shell_allow = tuple(ctx.manifest.shell_allow) + link_names(ctx)
    from murmur.sandbox.installed import current as session_sandbox

    box = session_sandbox()
    enclosed = box.klass.value if box is not None and box.confinement() is not None else None
    request = HarnessRequest(
        command=config.command,
        task_text=task_text,
        system_prompt=config.system_prompt,
        context_text=context_for_prompt(ctx),
        model=config.model,
        endpoint=endpoint,
        api_key=key,
        max_turns=config.max_turns,
        shell_allow=shell_allow,
        home=thread.home if thread is not None else _home(ctx),
        workdir=ctx.workdir,
        shell_env=harness_env(ctx),
        enclosed=enclosed,
        keep_session=thread is not None,
        resume_id=thread.resume_id if thread is not None else None,
        capsule=ctx.manifest.name,
    )
    inv = protocol.invocation(request)
    run = _Run(ctx=ctx, config=config, protocol=protocol, secret=key, thread=thread)
    try:
        _write_files(request.home, inv.files)
    except (OSError, ValueError) as exc:
        return _fail(ctx, f"the agent CLI's HOME could not be prepared: {exc}")
    env = {**request.shell_env, **inv.env}
    if inv.key_fifo is not None:  # the key goes through the FIFO: never also in the environment
        env.pop(ENV_FALLBACK.get(protocol.name, ("", ""))[1], None)
    executable = shutil.which(inv.argv[0], path=env.get("PATH", ""))
    if executable is None:
        return _fail(ctx, f"E-RUN-006: the agent command {inv.argv[0]} is not on PATH ({env.get('PATH', '')})")
    fifo = None
    if inv.key_fifo is not None and key:
        fifo = request.home.joinpath(*PurePosixPath(inv.key_fifo).parts)
        fifo.parent.mkdir(parents=True, mode=0o700, exist_ok=True)
        fifo.unlink(missing_ok=True)
        os.mkfifo(fifo, 0o600)
    confinement = None
    if box is not None and enclosed is not None:
        # The CLI runs inside the session's sandbox (spec/containment.md, "Agent CLIs"), and
        # reaches its provider through the egress proxy.
        box.allow_provider(endpoint or PROVIDER_DEFAULTS.get(protocol.name))
        confinement = box.harness_confinement(executable, str(request.home), *_cli_helpers(inv),
                                               unix_sockets=inv.deny_socket is not None)
        if confinement is not None:
            env = confinement.environ(env)
    deny = request.home.joinpath(*PurePosixPath(inv.deny_socket).parts) if inv.deny_socket else None
    code, stderr = await _run_cli(ctx, inv, executable, env, run, fifo, key, confinement, deny)
    return _outcome(ctx, run, code, stderr)


_SHELL_START = ("/etc/bash.bashrc", "/etc/profile", "/etc/profile.d")
_TLS = ("/etc/ssl", "/etc/pki", "/etc/ca-certificates", "/etc/ca-certificates.conf", "/usr/share/ca-certificates",
        "/usr/lib/ssl")
"""The TLS configuration and CA certificates a CLI reads to reach its provider (Node refuses to
start when ``/etc/ssl/openssl.cnf`` exists but cannot be read)."""


def _cli_helpers(inv: Invocation) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What an agent CLI runs of its own inside the sandbox (spec/containment.md "What runs
    inside"): ``(programs, read-only directories)``. Every CLI runs its commands through a
    shell (and Claude Code its key helper); a shell granted here still execs only what the
    session's rules allow. Murmur's PreToolUse hook runs this interpreter with murmur's package."""
    helpers: tuple[str, ...] = ("sh", "bash")
    ro: tuple[str, ...] = (*_SHELL_START, *_TLS)  # what the shell reads as it starts; TLS
    if inv.deny_socket is not None:
        import murmur  # its package directory, for the hook

        helpers += (sys.executable,)
        # the sys.path entry holding the package: the import system lists that directory
        ro += (os.path.dirname(os.path.dirname(os.path.abspath(murmur.__file__))),)
    return helpers, ro


PROVIDER_DEFAULTS = {"claude-code": "https://api.anthropic.com", "codex": "https://api.openai.com"}
"""The provider each CLI calls when the capsule names no endpoint (let through the proxy)."""


async def _run_cli(
    ctx: TaskContext,
    inv: Invocation,
    executable: str,
    env: dict[str, str],
    run: _Run,
    fifo: Path | None,
    key: str | None,
    confinement: procs.Confinement | None = None,
    deny: Path | None = None,
) -> tuple[int | None, bytes]:
    """Start the CLI in a command unit (:func:`murmur.procs.open_process`), read its events,
    kill the unit at the end; with ``deny``, answer the CLI's PreToolUse hook on that socket
    for the CLI's life."""
    parser = run.protocol.parser()
    err = bytearray()
    listener = None
    if deny is not None:
        try:
            listener = await denials_listener(deny)
        except OSError:  # the hook then gives the plain refusal (no routes)
            listener = None
    try:
        proc = await procs.open_process(
            [executable, *inv.argv[1:]], label="cmd", env=tracectx.with_env(env), cwd=ctx.workdir, executable=executable,
            stdin=procs.PIPE, confinement=confinement,
        )
    except OSError as exc:
        if fifo is not None:
            _unlink(fifo)
        if listener is not None:
            await listener.aclose()
        return None, f"the agent CLI could not be started: {exc.strerror or exc}".encode()
    try:
        async with trio.open_nursery() as nursery:
            if fifo is not None and key:
                nursery.start_soon(_hand_key, fifo, key)
            if listener is not None:
                nursery.start_soon(serve_denials, listener, _denial_for(ctx))
            assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
            nursery.start_soon(procs.write_stdin, proc.stdin, inv.stdin)
            nursery.start_soon(_tail, proc.stderr, err)
            await _events(proc.stdout, parser, run)
            for event in parser.finish():
                run.apply(event)
            if run.over:
                proc.kill()
            await proc.wait()
            proc.kill()
            nursery.cancel_scope.deadline = trio.current_time() + timing.SHELL_DRAIN_AFTER_EXIT
    finally:
        await proc.kill_and_reap()
        if fifo is not None:
            _unlink(fifo)
        if listener is not None:
            with trio.CancelScope(shield=True):
                await listener.aclose()
            if deny is not None:
                _unlink(deny)
    return proc.returncode, bytes(err)


def _denial_for(ctx: TaskContext) -> Callable[[str], str]:
    """What the built-in loop's shell tool says of an ungranted binary (``dispatch._missing``):
    the session's ``denied_binary`` (its ready routes), else the plain refusal."""
    deny = ctx.services.denied_binary
    if deny is not None:
        return deny
    manifest = ctx.manifest
    return lambda name: denied_binary(name, manifest.name, manifest.shell_allow)


async def _events(stdout: trio.abc.ReceiveStream, parser: StreamParser, run: _Run) -> None:
    """Feed each stdout line to the parser until EOF, a passed limit or a reported failure
    (lines split by :func:`murmur.lines.read_lines`; one longer than :data:`LINE_CAP` is cut)."""
    feed = parser.feed
    with trio.CancelScope() as scope:

        def take(line: bytes) -> None:
            if run.over:
                return
            for event in feed(line.rstrip(b"\r")[:LINE_CAP]):
                run.apply(event)
            if run.over:
                scope.cancel()

        await read_lines(stdout, take, lambda: LINE_CAP)


async def _tail(stream: trio.abc.ReceiveStream, keep: bytearray) -> None:
    while True:
        chunk = await stream.receive_some(_CHUNK)
        if not chunk:
            return
        keep += chunk
        if len(keep) > _STDERR_KEEP:
            del keep[: len(keep) - _STDERR_KEEP]


# --- the outcome ------------------------------------------------------------------------


def _outcome(ctx: TaskContext, run: _Run, code: int | None, stderr: bytes) -> TaskOutcome:
    if run.stopped is not None:  # as the http loop: the session's task_end says how it ended
        return run.stopped
    if run.failure is not None:
        if run.failure.status == "max_turns_reached":
            return TaskOutcome("max_turns_reached", redact(run.failure.message, run.secret))
        return _fail(ctx, redact(run.failure.message, run.secret), cause=run.failure.cause, turn=run.turn)
    if code == 0 and run.answer is not None:
        return TaskOutcome("ok", run.answer)
    tail = redact(stderr.decode("utf-8", "replace").strip()[-_STDERR_TAIL:], run.secret)
    if code is None:
        message = tail
    elif run.answer is None and code == 0:
        message = f"the agent command {run.config.command[0]} exited without an answer"
    else:
        message = f"the agent command {run.config.command[0]} exited with status {code}"
    if tail and code is not None:
        message += f": {tail}"
    return _fail(ctx, message, turn=run.turn)


def _fail(ctx: TaskContext, message: str, *, cause: str = "driver_error", turn: int = 0) -> TaskOutcome:
    ctx.trace.emit(
        "task_failed",
        parent_id=ctx.task_event_id,
        task_id=ctx.task_id,
        turn=turn,
        cause=cause,
        reason=message.encode("utf-8")[:2000].decode("utf-8", "ignore"),
    )
    return TaskOutcome("failed", message)

