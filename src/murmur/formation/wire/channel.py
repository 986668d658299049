"""Formation channel lines: pure encode/decode.

The launcher hands each member its credentials on a pipe only that member's ``mur run``
inherits (``MURMUR_FORMATION_CHANNEL`` names the descriptor). Every line is one JSON object
followed by ``\\n``, at most :data:`MAX_LINE_BYTES` bytes before the newline
(``spec/formation-tokens.md`` "The formation channel"):

* **first line** — the member's credentials, written before the member starts::

      {"formation_id":"frm_…","member":"coder","verify_key":"<b64url 32 bytes>",
       "calls":[{"name":"reviewer","token":"mft1.…"}]}

  ``calls`` in roster order, ``[]`` when the member may call nobody. Every token must verify
  under ``verify_key`` as issued in that formation by this member to that callee.
* **later lines** — door URLs of the members it may call, once every peer's door answers
  (for the entry member, before it starts)::

      {"addresses":[{"name":"reviewer","url":"http://127.0.0.1:41234"}]}

  Names the member may not call are ignored by the reader; a bad later line is ignored with
  a stderr note (the reader's job: :func:`decode_later` raises :class:`ChannelLineError`).
* **role line** — the entry member's role, written before it starts (S004 names this but the
  upstream format was not recovered; this project's own format)::

      {"role":"entry"}

* **callees line** — what the launcher read from each callee's admitted manifest, written
  right after the first line of a member with callees (this project's own format; so that a
  ``call-member`` to a callee not running yet is judged by its spending ceiling,
  spec/routing.md "Spending ceilings")::

      {"callees":[{"name":"reviewer","capsule":"app-reviewer",
                   "ceiling":{"max_turns":4,"budget_tokens":20000}}]}

  ``capsule`` is the callee manifest's ``name``; ``ceiling`` is its ``inference.max_turns``
  and ``inference.budget_tokens`` (null when not set), or null for a callee that is no agent.

Nothing here does I/O. No function puts a token in an exception message or a ``repr``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from urllib.parse import urlsplit

import attrs

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.formation.roster.schema import MEMBER_NAME_RE
from murmur.formation.wire.edge_tokens import FormationTokenError, VerifyKey
from murmur.ids import is_id

MAX_LINE_BYTES = 1 << 20
"""The longest channel line, in bytes, not counting its newline (1 MiB)."""

_FIRST_KEYS = frozenset({"formation_id", "member", "verify_key", "calls"})


class ChannelLineError(ValueError):
    """A channel line that cannot be decoded. ``reason`` never quotes the line."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


@attrs.frozen
class Call:
    """One member this member may call, and the token for that edge (never in a repr)."""

    name: str
    token: str = attrs.field(repr=False)


@attrs.frozen
class Credentials:
    """The first channel line.

    Attributes:
        formation_id (str): the ``frm_`` id of the launch.
        member (str): this member's roster name.
        verify_key (VerifyKey): the formation's public key (its door checks tokens with it).
        calls (tuple[Call, ...]): one per callee, in roster order.
    """

    formation_id: str
    member: str
    verify_key: VerifyKey
    calls: tuple[Call, ...] = ()

    @property
    def callees(self) -> tuple[str, ...]:
        """The callee names, in roster order."""
        return tuple(c.name for c in self.calls)

    def token_for(self, callee: str) -> str | None:
        """The token for ``callee``'s door, or None when this member may not call it."""
        for c in self.calls:
            if c.name == callee:
                return c.token
        return None


@attrs.frozen
class Address:
    """A callee's door URL (``http://host:port``)."""

    name: str
    url: str


@attrs.frozen
class Addresses:
    """A later ``addresses`` line."""

    addresses: tuple[Address, ...]

    def known(self, callees: Iterable[str]) -> dict[str, str]:
        """``name -> url`` for the names in ``callees`` only (others are ignored)."""
        wanted = set(callees)
        return {a.name: a.url for a in self.addresses if a.name in wanted}


@attrs.frozen
class EntryRole:
    """The ``{"role":"entry"}`` line: this member is the formation's entry member."""


@attrs.frozen
class CalleeFacts:
    """One callee as its admitted manifest says (a callees line entry).

    Attributes:
        name (str): its member name.
        capsule (str): its manifest's ``name``.
        agent (bool): it has an ``inference`` block.
        max_turns (int): ``inference.max_turns`` (0 when no agent).
        budget_tokens (int | None): ``inference.budget_tokens``.
    """

    name: str
    capsule: str
    agent: bool
    max_turns: int = 0
    budget_tokens: int | None = None


@attrs.frozen
class Callees:
    """A callees line."""

    callees: tuple[CalleeFacts, ...]

    def known(self, callees: Iterable[str]) -> dict[str, CalleeFacts]:
        """``name -> facts`` for the names in ``callees`` only (others are ignored)."""
        wanted = set(callees)
        return {c.name: c for c in self.callees if c.name in wanted}


# --- encoding ---------------------------------------------------------------------------


def _line(obj: object) -> bytes:
    data = json.dumps(obj, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    if len(data) > MAX_LINE_BYTES:
        raise ChannelLineError(f"the line would be {len(data)} bytes, over the 1 MiB limit")
    return data + b"\n"


def encode_credentials(credentials: Credentials) -> bytes:
    """The first line (with its newline).

    Raises:
        ChannelLineError: the line would exceed :data:`MAX_LINE_BYTES`.
    """
    return _line(
        {
            "formation_id": credentials.formation_id,
            "member": credentials.member,
            "verify_key": credentials.verify_key.to_b64(),
            "calls": [{"name": c.name, "token": c.token} for c in credentials.calls],
        }
    )


def encode_addresses(addresses: Iterable[Address]) -> bytes:
    """An ``addresses`` line (with its newline)."""
    return _line({"addresses": [{"name": a.name, "url": a.url} for a in addresses]})


def encode_callees(callees: Iterable[CalleeFacts]) -> bytes:
    """A callees line (with its newline)."""
    return _line({"callees": [
        {"name": c.name, "capsule": c.capsule,
         "ceiling": {"max_turns": c.max_turns, "budget_tokens": c.budget_tokens} if c.agent else None}
        for c in callees
    ]})


def encode_entry_role() -> bytes:
    """The entry member's role line (with its newline)."""
    return _line({"role": "entry"})


# --- decoding ---------------------------------------------------------------------------


def _strip(line: bytes) -> bytes:
    if line.endswith(b"\n"):
        line = line[:-1]
    if len(line) > MAX_LINE_BYTES:
        raise ChannelLineError("the line is over the 1 MiB limit")
    return line


def _object(line: bytes) -> dict[str, object]:
    def no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
        if len({k for k, _ in pairs}) != len(pairs):
            raise ChannelLineError("a key is written twice")
        return dict(pairs)

    try:
        obj = json.loads(_strip(line).decode("utf-8"), object_pairs_hook=no_duplicates)
    except ChannelLineError:
        raise
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ChannelLineError("the line is not JSON") from None
    if not isinstance(obj, dict):
        raise ChannelLineError("the line is not a JSON object")
    return obj


def parse_credentials(line: bytes) -> Credentials:
    """Decode a first line's shape (no token or formation checks; see :func:`decode_credentials`).

    Raises:
        ChannelLineError: the line is not a credentials bundle.
    """
    obj = _object(line)
    if set(obj) != _FIRST_KEYS:
        raise ChannelLineError("the line is not a member's credentials")
    formation_id, member, key, calls = (
        obj["formation_id"], obj["member"], obj["verify_key"], obj["calls"]
    )
    if not isinstance(formation_id, str) or not is_id(formation_id, "frm"):
        raise ChannelLineError("its formation_id is not a formation id")
    if not isinstance(member, str) or not MEMBER_NAME_RE.fullmatch(member):
        raise ChannelLineError("its member is not a member name")
    try:
        verify_key = VerifyKey.from_b64(key) if isinstance(key, str) else None
    except ValueError:
        verify_key = None
    if verify_key is None:
        raise ChannelLineError("its verify_key is not a 32-byte base64url key")
    if not isinstance(calls, list):
        raise ChannelLineError("its calls is not a list")
    out: list[Call] = []
    for item in calls:
        if not isinstance(item, dict) or set(item) != {"name", "token"}:
            raise ChannelLineError("a calls entry is not {name, token}")
        name, token = item["name"], item["token"]
        if not isinstance(name, str) or not MEMBER_NAME_RE.fullmatch(name):
            raise ChannelLineError("a calls entry's name is not a member name")
        if not isinstance(token, str):
            raise ChannelLineError("a calls entry's token is not a string")
        if any(c.name == name for c in out):
            raise ChannelLineError("a callee is listed twice")
        out.append(Call(name, token))
    return Credentials(formation_id, member, verify_key, tuple(out))


def decode_credentials(line: bytes, *, formation_id: str) -> Credentials:
    """Decode and check a member's first channel line.

    Args:
        line (bytes): the first line (a trailing newline is allowed).
        formation_id (str): ``MURMUR_FORMATION_ID`` of this process.

    Returns:
        Credentials: the checked bundle.

    Raises:
        DiagnosticError: ``E-RUN-046`` when the line is not a member's credentials, names
            another formation than ``formation_id``, or holds a token that was not issued in
            this formation by this member to the callee it is listed for. The message names
            the reason, never a token or the line.
    """
    try:
        creds = parse_credentials(line)
    except ChannelLineError as exc:
        raise _refusal(f"the first line is not a member's credentials: {exc.reason}") from None
    if creds.formation_id != formation_id:
        raise _refusal("the first line names another formation than MURMUR_FORMATION_ID")
    for call in creds.calls:
        try:
            claims = creds.verify_key.verify_issued(call.token, formation=formation_id)
        except FormationTokenError:
            claims = None
        if claims is None or claims.caller != creds.member or claims.callee != call.name:
            raise _refusal(
                f"the token listed for '{call.name}' was not issued to this member"
            )
    return creds


def decode_later(line: bytes) -> Addresses | EntryRole | Callees:
    """Decode a line after the first.

    Returns:
        Addresses | EntryRole | Callees: the line's meaning.

    Raises:
        ChannelLineError: the line is neither (its reader ignores it with a stderr note).
    """
    obj = _object(line)
    if obj == {"role": "entry"}:
        return EntryRole()
    if set(obj) == {"callees"}:
        return _callees(obj["callees"])
    if set(obj) != {"addresses"} or not isinstance(obj["addresses"], list):
        raise ChannelLineError("the line is neither an addresses, a callees nor a role line")
    out: list[Address] = []
    for item in obj["addresses"]:
        if not isinstance(item, dict) or set(item) != {"name", "url"}:
            raise ChannelLineError("an addresses entry is not {name, url}")
        name, url = item["name"], item["url"]
        if not isinstance(name, str) or not MEMBER_NAME_RE.fullmatch(name):
            raise ChannelLineError("an addresses entry's name is not a member name")
        if not isinstance(url, str) or not is_door_url(url):
            raise ChannelLineError(f"the address of '{name}' is not http://host:port")
        out.append(Address(name, url))
    return Addresses(tuple(out))


def _count(value: object, *, none: bool) -> bool:
    return (value is None and none) or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def _callees(items: object) -> Callees:
    if not isinstance(items, list):
        raise ChannelLineError("the callees line's callees is not a list")
    out: list[CalleeFacts] = []
    for item in items:
        if not isinstance(item, dict) or set(item) != {"name", "capsule", "ceiling"}:
            raise ChannelLineError("a callees entry is not {name, capsule, ceiling}")
        name, capsule, ceiling = item["name"], item["capsule"], item["ceiling"]
        if not isinstance(name, str) or not MEMBER_NAME_RE.fullmatch(name):
            raise ChannelLineError("a callees entry's name is not a member name")
        if not isinstance(capsule, str) or not capsule:
            raise ChannelLineError(f"the capsule of '{name}' is not a name")
        if ceiling is None:
            out.append(CalleeFacts(name, capsule, False))
            continue
        if (not isinstance(ceiling, dict) or set(ceiling) != {"max_turns", "budget_tokens"}
                or not _count(ceiling["max_turns"], none=False) or not _count(ceiling["budget_tokens"], none=True)):
            raise ChannelLineError(f"the ceiling of '{name}' is not {{max_turns, budget_tokens}}")
        out.append(CalleeFacts(name, capsule, True, ceiling["max_turns"], ceiling["budget_tokens"]))
    return Callees(tuple(out))


def is_door_url(url: str) -> bool:
    """Whether ``url`` is ``http://host:port`` (optionally ``/``), nothing more."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return False
    return (
        parts.scheme == "http"
        and bool(parts.hostname)
        and port is not None
        and parts.path in ("", "/")
        and not parts.query
        and not parts.fragment
        and parts.username is None
        and parts.password is None
        and url.isascii()
        and not any(ch.isspace() for ch in url)
    )


class LineSplitter:
    """Pure incremental splitter for channel bytes into lines of at most 1 MiB.

    ``feed(data)`` returns complete lines (without newline), in order; a line over
    :data:`MAX_LINE_BYTES` comes out as :data:`OVERSIZED` instead (its bytes are discarded up
    to the next newline), so a reader never holds more than 1 MiB of one line.
    """

    OVERSIZED = b"\x00oversized"

    def __init__(self) -> None:
        self._buf = bytearray()
        self._skipping = False

    def feed(self, data: bytes) -> list[bytes]:
        """Consume ``data``; return the lines it completes."""
        out: list[bytes] = []
        start = 0
        while True:
            nl = data.find(b"\n", start)
            chunk = data[start:] if nl < 0 else data[start:nl]
            if not self._skipping:
                self._buf += chunk
                if len(self._buf) > MAX_LINE_BYTES:
                    self._buf.clear()
                    self._skipping = True
                    out.append(self.OVERSIZED)
            if nl < 0:
                return out
            if not self._skipping:
                out.append(bytes(self._buf))
            self._buf.clear()
            self._skipping = False
            start = nl + 1

    @property
    def pending(self) -> int:
        """Bytes held of an incomplete line."""
        return len(self._buf)


def _refusal(reason: str) -> DiagnosticError:
    return DiagnosticError(
        error(
            "E-RUN-046",
            f"the formation channel (MURMUR_FORMATION_CHANNEL) cannot be used: {reason}",
            hint="MURMUR_FORMATION_CHANNEL is set by `mur run --roster` only; "
            "do not set it by hand",
        )
    )
