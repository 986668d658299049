"""The member side of a formation: what ``mur run`` does when its environment places it in one.

Seed 004, "The formation channel", "How a formation ends", "How reachability is enforced",
"What each member learns"; contract sheet sections 6.4, 6.6, 7.2 and 9. :func:`contribute` is a session contributor
(:mod:`murmur.assembly.contributors`): it runs while a ``mur run`` in a formation is prepared.

A ``mur run`` belongs to a formation only when its own environment says so:

==============================  =====================================================
``MURMUR_FORMATION_ID``         the formation (``frm_`` + 32 lowercase hex, else
                                ``E-RUN-044``)
``MURMUR_FORMATION_CHANNEL``    the inherited descriptor its credentials are read from
``MURMUR_FORMATION_LIFELINE``   the inherited descriptor whose EOF means "the formation
                                ended"
==============================  =====================================================

:func:`join` checks them in this order, refusing with ``E-RUN-046`` and the reason:
``MURMUR_FORMATION_PEERS`` set in ``mur run``'s own environment; the channel or lifeline set
without ``MURMUR_FORMATION_ID``; a lifeline that is not a usable pipe read end; a channel
descriptor that is not open, or not a pipe or a file; no first line within 10 s; a first line
that is not this member's credentials, names another formation, or holds a token not issued to
this member. It reads the first line (and whatever follows it at once: the entry member's
addresses and role) before the session is staged. A run with ``MURMUR_FORMATION_ID`` but no
lifeline, that is not a delegated child (no ``MURMUR_SPAWNER``), prints ``W-RUN-007``.

:func:`install` then extends the session (see ``murmur.session.session``):

* ``formation_id``; ``session_start`` gets ``formation_id``, and with credentials
  ``formation_member`` and ``formation_callees`` (roster order);
* the door recognises ``mft1.`` formation tokens (:class:`FormationVerifier`);
* a watcher reads later channel lines (callees' door URLs, the entry role);
* a watcher waits for the lifeline's EOF, then winds the session down: ``formation_ended``
  first, then as a first SIGTERM (the session's 20 s guard exits 143 wherever teardown is);
* with callees: the ``call-member`` services (:mod:`murmur.formation.calls`), and
  ``W-RUN-008`` when ``capabilities.network.allow`` reaches no member door.

No token is ever put in an exception message, a diagnostic, a record or a log line.
"""

from __future__ import annotations

import errno
import fcntl
import os
import select
import stat
import sys
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from murmur import timing
from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.formation import channel
from murmur.formation.addresses import AddressBook
from murmur.formation.call_policy import call_deadline_secs
from murmur.formation.calls import CallEngine
from murmur.formation.envnames import CHANNEL_ENV, ID_ENV, LIFELINE_ENV, PEERS_ENV
from murmur.formation.reach import reaches_member_doors
from murmur.formation.tokens import FormationTokenError, Reason, VerifyKey
from murmur.lifeline import claim_lifeline, wait_for_eof
from murmur.routing.gather import member_refusal
from murmur.session.auth import AuthRefusal, Principal, invalid_token
from murmur.session.winddown import deadline_wind_down, lifeline_wind_down
from murmur.workload import TaskContext, TaskOutcome, TaskServices, Workload

if TYPE_CHECKING:
    from murmur.session.session import Session, SessionSetup, SessionSummary, WindDownControl
    from murmur.session.tasks import Task

SPAWNER_ENV = "MURMUR_SPAWNER"

FORMATION_SCOPES = frozenset({"SendMessage", "GetTask", "CancelTask", "ListTasks", "SubscribeToTask"})
"""The five door methods a formation token reaches."""

_HAND_SET_HINT = "{var} is set by `mur run --roster` only; do not set it by hand"
_MAX_FD = 1 << 20
_MAX_FILE_CHANNEL = 4 << 20  # bytes read from a channel that is a regular file


# --- pure checks -------------------------------------------------------------------------------


def formation_id_problem(value: str) -> str | None:
    """Why ``value`` is not a formation id (``E-RUN-044``), or None.

    Returns:
        str | None: ``it does not start with frm_``, ``it has <n> digits after frm_, not 32``,
        or ``it has a character that is not a lowercase hex digit``.
    """
    if not value.startswith("frm_"):
        return "it does not start with frm_"
    rest = value[4:]
    if len(rest) != 32:
        return f"it has {len(rest)} characters after frm_, not 32"
    if any(c not in "0123456789abcdef" for c in rest):
        return "it has a character that is not a lowercase hex digit"
    return None


def channel_fd_problem(value: str) -> str | None:
    """Why ``value`` does not name a formation channel this process can read, or None.

    The channel must be an open descriptor (not 0-2), readable, and a pipe or a regular file.
    """
    text = value.strip()
    if not text.isascii() or not text.isdigit():
        return "it is not a decimal file descriptor number"
    if len(text) > 7 or int(text) > _MAX_FD:
        return "the number is too large"
    fd = int(text)
    if fd <= 2:
        return "it names a standard stream (0-2)"
    try:
        mode = os.fstat(fd).st_mode
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    except OSError:
        return "the file descriptor is not open"
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        for test, what in ((stat.S_ISCHR, "a character device"), (stat.S_ISDIR, "a directory"), (stat.S_ISSOCK, "a socket")):
            if test(mode):
                return f"it is {what}, not a pipe or a file"
        return "it is not a pipe or a file"
    if flags & os.O_ACCMODE == os.O_WRONLY:
        return "it is not open for reading"
    return None


# --- the channel -------------------------------------------------------------------------------


@attrs.frozen
class FirstRead:
    """What the launch-time read of a channel found.

    Attributes:
        first (bytes): the first line (no newline).
        later (tuple[bytes, ...]): complete lines that had already arrived after it.
        splitter (channel.LineSplitter): holds any incomplete line after those; the later
            reads continue with it.
        finished (bool): the channel is done (EOF seen, or it is a regular file).
    """

    first: bytes
    later: tuple[bytes, ...] = ()
    splitter: channel.LineSplitter = attrs.field(factory=channel.LineSplitter, eq=False)
    finished: bool = False


class ChannelReadError(Exception):
    """The first line could not be read; ``reason`` is the E-RUN-046 reason."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


def _read_some(fd: int) -> bytes | None:
    """One read; None when it would block."""
    while True:
        try:
            return os.read(fd, 65536)
        except BlockingIOError:
            return None
        except InterruptedError:
            continue
        except OSError as exc:
            if exc.errno == errno.EAGAIN:
                return None
            raise ChannelReadError(f"it cannot be read ({exc.strerror or exc})") from None


def read_first_line(fd: int, timeout: float) -> FirstRead:
    """Read a channel's first line within ``timeout`` seconds, plus whatever already follows.

    Blocking, for the launch (no Trio yet). A pipe is polled; a regular file is read whole
    (at most 4 MiB) and is then finished.

    Raises:
        ChannelReadError: no first line in time; the channel ended first; it is over 1 MiB.
    """
    splitter = channel.LineSplitter()
    lines: list[bytes] = []
    is_file = stat.S_ISREG(os.fstat(fd).st_mode)
    finished = False
    if is_file:
        data = b""
        while len(data) < _MAX_FILE_CHANNEL:
            chunk = _read_some(fd)
            if not chunk:
                break
            data += chunk
        lines = splitter.feed(data)
        if splitter.pending:
            lines += splitter.feed(b"\n")
        finished = True
    else:
        deadline = time.monotonic() + timeout
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while not lines and not finished:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ChannelReadError(f"no first line arrived within {timeout:g} seconds")
            if not poller.poll(max(1, int(left * 1000))):
                continue
            chunk = _read_some(fd)
            if chunk is None:
                continue
            if not chunk:
                finished = True
                break
            lines += splitter.feed(chunk)
        # the entry member's addresses and role were written with its credentials: take them
        while not finished and poller.poll(0):
            chunk = _read_some(fd)
            if chunk is None:
                break
            if not chunk:
                finished = True
                break
            lines += splitter.feed(chunk)
    if not lines:
        raise ChannelReadError("the channel ended before its first line")
    if lines[0] == channel.LineSplitter.OVERSIZED:
        raise ChannelReadError("the first line is over the 1 MiB limit")
    return FirstRead(lines[0], tuple(lines[1:]), splitter, finished)


def _channel_refusal(reason: str) -> DiagnosticError:
    return DiagnosticError(
        error(
            "E-RUN-046",
            f"the formation channel ({CHANNEL_ENV}) cannot be used: {reason}",
            hint=_HAND_SET_HINT.format(var=CHANNEL_ENV),
        )
    )


# --- membership --------------------------------------------------------------------------------


@attrs.define(eq=False)
class Membership:
    """This run's place in its formation, as its environment and channel describe it.

    Attributes:
        formation_id (str): ``frm_…``.
        credentials (channel.Credentials | None): the channel's first line (None without a
            channel: a delegated child, or a member started by hand).
        lifeline_fd (int | None): the claimed lifeline (None when there is none).
        channel_fd (int | None): the channel, still to be read (None once finished).
        entry (bool): the channel named this member the entry member.
        addresses (AddressBook): callees' door URLs.
        splitter (channel.LineSplitter): the channel's line splitter (holds a partial line).
        warnings (list[Diagnostic]): warnings to print at launch (``W-RUN-007``, ``W-RUN-008``).
    """

    formation_id: str
    credentials: channel.Credentials | None = None
    lifeline_fd: int | None = None
    channel_fd: int | None = None
    entry: bool = False
    addresses: AddressBook = attrs.field(factory=lambda: AddressBook(()))
    splitter: channel.LineSplitter = attrs.field(factory=channel.LineSplitter)
    warnings: list[Diagnostic] = attrs.field(factory=list)

    @property
    def member(self) -> str | None:
        """This member's roster name (None without credentials)."""
        return self.credentials.member if self.credentials else None

    @property
    def callees(self) -> tuple[str, ...]:
        """The members it may call, in roster order."""
        return self.credentials.callees if self.credentials else ()

    def take_line(self, line: bytes, note: Any = None) -> None:
        """Apply a channel line after the first (addresses, role); a bad one is noted and ignored."""
        if line == channel.LineSplitter.OVERSIZED:
            _note(note, "ignored a formation channel line: it is over the 1 MiB limit")
            return
        try:
            meaning = channel.decode_later(line)
        except channel.ChannelLineError as exc:
            _note(note, f"ignored a formation channel line: {exc.reason}")
            return
        if isinstance(meaning, channel.EntryRole):
            self.entry = True
        else:
            self.addresses.update(meaning.known(self.callees))


def _note(note: Any, text: str) -> None:
    if note is not None:
        note(text)
        return
    try:
        print(f"[mur run] note: {text}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def join(
    environ: Mapping[str, str],
    *,
    first_line_timeout: float = timing.CHANNEL_FIRST_LINE,
) -> Membership | None:
    """Read this run's formation membership from its environment and channel.

    Args:
        environ (Mapping[str, str]): the process environment.
        first_line_timeout (float): seconds to wait for the channel's first line (10 s).

    Returns:
        Membership | None: None when the environment places the run in no formation.

    Raises:
        DiagnosticError: ``E-RUN-046`` (channel, lifeline or environment fault) or
            ``E-RUN-044`` (a malformed ``MURMUR_FORMATION_ID``), naming the reason.
    """
    if PEERS_ENV in environ:
        raise DiagnosticError(
            error(
                "E-RUN-046",
                f"{PEERS_ENV} is set in mur run's own environment; it is handed only to a "
                "member's components, by the runtime",
                hint=f"unset {PEERS_ENV}",
            )
        )
    fid = environ.get(ID_ENV, "").strip()
    chan = environ.get(CHANNEL_ENV, "").strip()
    life = environ.get(LIFELINE_ENV, "").strip()
    if not fid:
        for var, value in ((CHANNEL_ENV, chan), (LIFELINE_ENV, life)):
            if value:
                raise DiagnosticError(
                    error(
                        "E-RUN-046",
                        f"{var} is set without {ID_ENV}",
                        hint=_HAND_SET_HINT.format(var=var),
                    )
                )
        return None
    problem = formation_id_problem(fid)
    if problem is not None:
        shown = fid if len(fid) <= 48 else fid[:45] + "..."
        raise DiagnosticError(
            error(
                "E-RUN-044",
                f"{ID_ENV} ({shown!r}) is not a formation id: {problem}",
                hint="a formation id is frm_ followed by 32 lowercase hex digits; "
                f"{ID_ENV} is set by `mur run --roster`",
            )
        )
    lifeline_fd = claim_lifeline(life or None, var=LIFELINE_ENV, code="E-RUN-046", hint=_HAND_SET_HINT.format(var=LIFELINE_ENV))
    membership = Membership(fid, lifeline_fd=lifeline_fd)
    if chan:
        problem = channel_fd_problem(chan)
        if problem is not None:
            raise _channel_refusal(problem)
        fd = int(chan)
        os.set_inheritable(fd, False)
        try:
            got = read_first_line(fd, first_line_timeout)
        except ChannelReadError as exc:
            raise _channel_refusal(exc.reason) from None
        creds = channel.decode_credentials(got.first, formation_id=fid)
        membership.credentials = creds
        membership.addresses = AddressBook(creds.callees)
        membership.splitter = got.splitter
        for line in got.later:
            membership.take_line(line)
        if got.finished:
            _close(fd)
        else:
            membership.channel_fd = fd
    if lifeline_fd is None and not environ.get(SPAWNER_ENV, "").strip():
        membership.warnings.append(
            error(
                "W-RUN-007",
                f"this run carries {ID_ENV} ({fid}) but no formation lifeline, so nothing winds "
                "it down when its formation ends",
                hint=f"end it with `mur stop <session-id>` or `mur stop {fid}`",
            )
        )
    return membership


def _close(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


# --- the door ----------------------------------------------------------------------------------


def not_permitted_for(caller: str) -> AuthRefusal:
    """403 ``not_permitted``: a valid formation token for another door, naming only its holder."""
    return AuthRefusal(
        403,
        "not_permitted",
        f"the formation token presented by member '{caller}' was not issued for this door",
    )


@attrs.frozen
class FormationVerifier:
    """Recognises ``mft1.`` formation tokens at a member's door (``auth.TokenVerifier``).

    Order (``tokens.VerifyKey.verify``): tag, signature, payload, formation id — any failure is
    401 ``invalid_token``, byte-identical to every other invalid token; then a token for
    another member's door is 403 ``not_permitted``. A token that passes is the credential
    ``member:<from>`` with the five formation scopes, seeing only the tasks it started.

    Attributes:
        verify_key (VerifyKey): the formation's public key.
        formation_id (str): this door's formation.
        member (str): this door's member.
        realm (str): the ``www-authenticate`` realm (the capsule name).
    """

    verify_key: VerifyKey
    formation_id: str
    member: str
    realm: str

    def verify(self, token: str) -> Principal | AuthRefusal | None:
        """None for a token that is not ``mft1.``; else the admitted member or the refusal."""
        if not token.startswith("mft1."):
            return None
        try:
            claims = self.verify_key.verify(token, formation=self.formation_id, member=self.member)
        except FormationTokenError as exc:
            if exc.reason is Reason.NOT_FOR_THIS_DOOR and exc.claims is not None:
                return not_permitted_for(exc.claims.caller)
            return invalid_token(self.realm)
        return Principal(claims.credential, FORMATION_SCOPES, member=claims.caller)


# --- installing into a session -----------------------------------------------------------------


class CallsEndWithTask:
    """Wraps a workload so its task's member calls are settled when the task ends.

    Args:
        inner (Workload): the plan executor or agent loop.
        engine (CallEngine): the member's calls.
    """

    def __init__(self, inner: Workload, engine: CallEngine) -> None:
        self.inner = inner
        self.engine = engine

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Run the task; however it ends, abandon its open calls (``CallEngine.task_ended``)."""
        try:
            return await self.inner.run_task(ctx)
        finally:
            self.engine.task_ended(ctx.task_id)


def _print_warning(diag: Diagnostic) -> None:
    try:
        print(diag.render(), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def install(setup: SessionSetup, membership: Membership, *, engine: CallEngine | None = None) -> CallEngine | None:
    """Extend ``setup`` for ``membership`` (see the module docstring).

    Args:
        setup (SessionSetup): the session being prepared.
        membership (Membership): from :func:`join`.
        engine (CallEngine | None): the call engine to use (tests inject one); by default one
            is made when the member has callees.

    Returns:
        CallEngine | None: the member's call engine (None when it may call nobody).
    """
    m = membership
    setup.formation_id = m.formation_id
    setup.trace_start_fields["formation_id"] = m.formation_id
    creds = m.credentials
    if creds is not None:
        setup.trace_start_fields["formation_member"] = creds.member
        setup.trace_start_fields["formation_callees"] = list(creds.callees)
        setup.running_fields.update(member=creds.member, callees=list(creds.callees))
        setup.token_verifiers.append(
            FormationVerifier(creds.verify_key, m.formation_id, creds.member, setup.manifest.name)
        )
        if creds.callees and not reaches_member_doors(setup.manifest.network_allow):
            m.warnings.append(
                error(
                    "W-RUN-008",
                    f"this member may call {', '.join(creds.callees)}, but its "
                    "capabilities.network.allow reaches no member door, so every call it makes "
                    "will fail",
                    hint="member doors listen on loopback http at a port chosen at launch; add "
                    "the bare host `localhost` to capabilities.network.allow",
                )
            )
    if m.lifeline_fd is not None:
        setup.watchers.append(_lifeline_watcher(setup, m))
    if m.channel_fd is not None:
        setup.watchers.append(_channel_watcher(m))
    if creds is not None and creds.callees and engine is None:
        engine = CallEngine(
            member=creds.member,
            tokens={c.name: c.token for c in creds.calls},
            addresses=m.addresses,
            network_allow=setup.manifest.network_allow,
            deadline_secs=call_deadline_secs(setup.manifest.lifecycle.delegation_deadline_secs, setup.parent_env),
        )
    if engine is not None:
        _install_engine(setup, m, engine)
    elif creds is not None:
        _install_services(setup, lambda task: TaskServices(entry_member=m.entry))
    if creds is not None:
        _install_routes(setup, member_refusal(creds.member, creds.callees, m.formation_id, setup.manifest))
    return engine


def _install_routes(setup: SessionSetup, refuse: Any) -> None:
    """Give every task the denied-binary message that names this member's ready routes."""
    earlier = setup.services
    if earlier is None:
        return

    def services(task: Task) -> TaskServices:
        return attrs.evolve(earlier(task), denied_binary=refuse)

    setup.services = services


def _install_services(setup: SessionSetup, make: Any) -> None:
    """Set ``setup.services``, keeping what an earlier contributor's factory provides."""
    earlier = setup.services

    def services(task: Task) -> TaskServices:
        mine: TaskServices = make(task)
        if earlier is None:
            return mine
        theirs = earlier(task)
        return attrs.evolve(
            theirs,
            call_member=mine.call_member,
            member_answer=mine.member_answer,
            callees=mine.callees,
            entry_member=mine.entry_member,
        )

    setup.services = services


def _install_engine(setup: SessionSetup, m: Membership, engine: CallEngine) -> None:
    async def run_engine(ctl: WindDownControl) -> None:
        await engine.run()

    async def bind(session: Session) -> None:
        engine.bind(session.trace, session.trace.session_event_id)

    async def drain(summary: SessionSummary) -> None:
        await engine.drain()

    setup.watchers.append(run_engine)
    setup.start_hooks.append(bind)
    setup.end_hooks.append(drain)
    setup.workload = CallsEndWithTask(setup.workload, engine)
    _install_services(setup, lambda task: engine.services(task.id, task.trust, entry_member=m.entry))


def _lifeline_watcher(setup: SessionSetup, m: Membership) -> Any:
    fd = m.lifeline_fd
    assert fd is not None

    async def watch(ctl: WindDownControl) -> None:
        await wait_for_eof(fd)
        if setup.deadline is not None and ctl.deadline_reached:
            # the member reached the formation's deadline; the lifeline closed after it
            ctl.trigger(deadline_wind_down(setup.deadline, formation_id=m.formation_id))
            return
        ctl.trigger(
            lifeline_wind_down(
                trace_event="formation_ended",
                detail="the formation ended",
                busy_status="formation_ended",
                trace_fields={"formation_id": m.formation_id},
            )
        )

    return watch


def _channel_watcher(m: Membership) -> Any:
    fd = m.channel_fd
    assert fd is not None

    async def read(ctl: WindDownControl) -> None:
        splitter = m.splitter
        stream = trio.lowlevel.FdStream(fd)
        try:
            while True:
                try:
                    data = await stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    return
                for line in splitter.feed(data):
                    m.take_line(line)
        finally:
            m.channel_fd = None
            with trio.CancelScope(shield=True):
                await stream.aclose()

    return read


def contribute(setup: SessionSetup, environ: Mapping[str, str]) -> None:
    """The session contributor: join the formation the environment names, if any.

    Raises:
        DiagnosticError: ``E-RUN-044`` / ``E-RUN-046`` (see :func:`join`).
    """
    membership = join(environ)
    if membership is None:
        return
    install(setup, membership)
    for diag in membership.warnings:
        _print_warning(diag)
