"""The readiness line: the typed first stdout line of a ``mur run --json``, and its one parser.

Specification: ``spec/session.md`` "Readiness". A session writes one :class:`ReadyLine`
(:func:`murmur.session.describe.readiness` builds it; :meth:`ReadyLine.to_json` is the line's
object); every owner that started a ``mur run`` — the formation launcher for a peer, a
delegating session for a child — reads it with :func:`parse_ready_line` and :func:`read_first_line`, and
words a refusal in its own terms (its reason is one of :data:`NOT_A_READY_LINE`,
:data:`NO_SESSION`, :data:`NO_DOOR`).

The rules, once: at most :data:`MAX_READY_LINE` bytes of UTF-8 JSON, an object; its
``session_id`` is ``ses_`` + 32 hex digits; its ``url`` a non-blank string (a bare
``host:port`` gains ``http://``, a trailing ``/`` is dropped).
"""

from __future__ import annotations

import json
from typing import Any

import attrs
import trio

from murmur import ids

__all__ = [
    "MAX_READY_LINE",
    "NOT_A_READY_LINE",
    "NO_DOOR",
    "NO_SESSION",
    "FirstLine",
    "ReadyLine",
    "normalise_url",
    "parse_ready_line",
    "read_first_line",
]

MAX_READY_LINE = 1 << 20
"""A first line longer than this (bytes) is not a readiness line."""

NOT_A_READY_LINE = "not-a-readiness-line"
NO_SESSION = "no-session"
NO_DOOR = "no-door"


def normalise_url(url: str) -> str:
    """``host:port`` -> ``http://host:port``; an ``http(s)://`` URL loses a trailing ``/``."""
    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    return text.rstrip("/")


@attrs.frozen
class ReadyLine:
    """What a session says once its door serves (the ``--json`` readiness object).

    Attributes:
        session_id (str): ``ses_`` + 32 hex.
        url (str | None): its door.
        name, version (str | None): the capsule.
        pid (int | None): the session's process.
        workdir, records_dir (str | None): where it works and records.
        formation_id (str | None): the formation it belongs to.
        fields (dict[str, Any]): what its setup adds (``readiness_fields``), after ``formation_id``.
        lineage (Any): its lineage, when it has one.
        tokens (dict[str, str] | None): the door's tokens on an authenticated door (never in repr).
    """

    session_id: str
    url: str | None
    name: str | None = None
    version: str | None = None
    pid: int | None = None
    workdir: str | None = None
    records_dir: str | None = None
    formation_id: str | None = None
    fields: dict[str, Any] = attrs.field(factory=dict)
    lineage: Any = None
    tokens: dict[str, str] | None = attrs.field(default=None, repr=False)

    @property
    def operator_token(self) -> str | None:
        """The door's operator token, when the door is authenticated."""
        token = (self.tokens or {}).get("operator")
        return token if isinstance(token, str) else None

    def to_json(self) -> dict[str, Any]:
        """The object the line holds, keys in the order ``mur run --json`` prints them."""
        out: dict[str, Any] = {
            "session_id": self.session_id,
            "url": self.url,
            "name": self.name,
            "version": self.version,
            "pid": self.pid,
            "workdir": self.workdir,
            "records_dir": self.records_dir,
        }
        if self.formation_id:
            out["formation_id"] = self.formation_id
        out.update(self.fields)
        if self.lineage is not None:
            out["lineage"] = self.lineage
        if self.tokens is not None:
            out["tokens"] = dict(self.tokens)
        return out


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def parse_ready_line(line: bytes) -> ReadyLine | str:
    """Judge a first stdout line (with or without its newline).

    Returns:
        ReadyLine | str: the line, or the reason it is refused (:data:`NOT_A_READY_LINE`,
        :data:`NO_SESSION`, :data:`NO_DOOR`).
    """
    if len(line) > MAX_READY_LINE:
        return NOT_A_READY_LINE
    try:
        data = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return NOT_A_READY_LINE
    if not isinstance(data, dict):
        return NOT_A_READY_LINE
    session = data.get("session_id")
    if not isinstance(session, str) or not ids.is_id(session, "ses"):
        return NO_SESSION
    url = data.get("url")
    if not isinstance(url, str) or not url.strip():
        return NO_DOOR
    pid = data.get("pid")
    tokens = data.get("tokens")
    known = {"session_id", "url", "name", "version", "pid", "workdir", "records_dir", "formation_id",
             "lineage", "tokens"}
    formation = data.get("formation_id")
    return ReadyLine(
        session_id=session,
        url=normalise_url(url),
        name=_text(data.get("name")),
        version=_text(data.get("version")),
        pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
        workdir=_text(data.get("workdir")),
        records_dir=_text(data.get("records_dir")),
        formation_id=formation if isinstance(formation, str) else None,
        fields={k: v for k, v in data.items() if k not in known},
        lineage=data.get("lineage"),
        tokens={k: v for k, v in tokens.items() if isinstance(v, str)} if isinstance(tokens, dict) else None,
    )


@attrs.frozen
class FirstLine:
    """How reading a first line ended: ``line`` (without its newline) or ``why`` not.

    Attributes:
        line (bytes | None): the line.
        why (str | None): ``too-long``, ``timeout`` or ``eof`` when there is no line.
    """

    line: bytes | None
    why: str | None = None


async def read_first_line(stream: trio.abc.ReceiveStream, bound: float, *, limit: int = MAX_READY_LINE) -> FirstLine:
    """The first line of ``stream`` within ``bound`` seconds (what follows it is left unread
    only in so far as it arrived in the same read: callers drain the rest)."""
    buf = bytearray()
    with trio.move_on_after(bound) as scope:
        while b"\n" not in buf:
            try:
                chunk = await stream.receive_some(65536)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                chunk = b""
            if not chunk:
                break
            buf += chunk
            if b"\n" not in buf and len(buf) > limit:
                return FirstLine(None, "too-long")
    if scope.cancelled_caught:
        return FirstLine(None, "timeout")
    if b"\n" not in buf:
        return FirstLine(None, "eof")
    return FirstLine(bytes(buf.split(b"\n", 1)[0]))
