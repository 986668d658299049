"""Joining a formation: what the environment and channel of a ``mur run`` say about its place.

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
lifeline, that is not a delegated child (no ``MURMUR_SPAWNER``), gets ``W-RUN-007``.
Spec: spec/formation.md "What each member learns". No token is ever put in a message.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Mapping
from typing import Any

import attrs

from murmur import timing
from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.formation.member.addresses import AddressBook
from murmur.formation.member.firstline import ChannelReadError, read_first_line
from murmur.formation.wire import channel
from murmur.formation.wire.envnames import CHANNEL_ENV, ID_ENV, LIFELINE_ENV, PEERS_ENV
from murmur.lifeline import claim_lifeline
from murmur.stderr import say

SPAWNER_ENV = "MURMUR_SPAWNER"

_HAND_SET_HINT = "{var} is set by `mur run --roster` only; do not set it by hand"
_MAX_FD = 1 << 20


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


def _channel_refusal(reason: str) -> DiagnosticError:
    return DiagnosticError(
        error(
            "E-RUN-046",
            f"the formation channel ({CHANNEL_ENV}) cannot be used: {reason}",
            hint=_HAND_SET_HINT.format(var=CHANNEL_ENV),
        )
    )


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
        callee_facts (dict[str, channel.CalleeFacts]): what the launcher read from each
            callee's manifest (the callees line), by member name.
        splitter (channel.LineSplitter): the channel's line splitter (holds a partial line).
        warnings (list[Diagnostic]): warnings to print at launch (``W-RUN-007``, ``W-RUN-008``).
    """

    formation_id: str
    credentials: channel.Credentials | None = None
    lifeline_fd: int | None = None
    channel_fd: int | None = None
    entry: bool = False
    addresses: AddressBook = attrs.field(factory=lambda: AddressBook(()))
    callee_facts: dict[str, channel.CalleeFacts] = attrs.field(factory=dict)
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
        elif isinstance(meaning, channel.Callees):
            self.callee_facts.update(meaning.known(self.callees))
        else:
            self.addresses.update(meaning.known(self.callees))


def _note(note: Any, text: str) -> None:
    if note is not None:
        note(text)
        return
    say(f"[mur run] note: {text}")


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
