"""Is a peer ready? Its readiness line, and its door answering as the session it reported.

``spec/formation.md`` "Readiness": a peer is ready when the door at the URL its ``--json`` readiness line
reported serves an agent card naming the session id that line reported. The door is probed
every 100 ms. Each way a peer can fail is one reason in the ``E-RUN-045`` report.

Pure pieces: :func:`parse_readiness_line`, :func:`card_session_id`. The probe loop
:func:`wait_for_door` takes its fetcher and interval as arguments, so MockClock tests drive it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
import httpx
import trio

from murmur import procs, timing
from murmur.a2a import A2AClient, replies, requests
from murmur.procs import normalise_url as normalise_url  # its one home: murmur.procs

MAX_READINESS_LINE = procs.MAX_READY_LINE
"""A first line longer than this (bytes) is not a readiness line."""

CAPSULE_EXTENSION_SUFFIX = "murmur-capsule-v1"
"""The card extension whose ``params.sessionId`` names the session (``spec/door.md`` "The card")."""


@attrs.frozen
class Report:
    """What a peer's readiness line reported.

    Attributes:
        session_id (str): ``ses_`` + 32 hex.
        url (str): its door, always ``http://host:port`` (a bare ``host:port`` gains ``http://``).
        pid (int | None): the pid it reported.
        formation_id (str | None): the formation it says it belongs to.
        operator_token (str | None): the door's operator token when the door is authenticated;
            used only to read the extended card, never printed.
    """

    session_id: str
    url: str
    pid: int | None = None
    formation_id: str | None = None
    operator_token: str | None = attrs.field(default=None, repr=False)


# Reasons, worded for the E-RUN-045 body: "'<name>' (<capsule>@<version>): <reason>".
NOT_A_READINESS_LINE = "its first line was not a readiness line"
NO_DOOR = "it reported no door"
NO_FORMATION = "it reported no formation"
OTHER_FORMATION = "it reported another formation"


def parse_readiness_line(line: bytes, formation_id: str) -> Report | str:
    """Judge a peer's first stdout line (:func:`murmur.procs.parse_ready_line`, the one parser,
    then the formation's own rule: it names this formation).

    Args:
        line (bytes): the line, with or without its newline.
        formation_id (str): the formation the peer was launched in.

    Returns:
        Report | str: the report, or the refusal reason (one of the module constants).
    """
    got = procs.parse_ready_line(line)
    if got == procs.NO_DOOR:
        return NO_DOOR
    if isinstance(got, str):
        return NOT_A_READINESS_LINE
    if got.formation_id is None:
        return NO_FORMATION
    if got.formation_id != formation_id:
        return OTHER_FORMATION
    assert got.url is not None
    return Report(
        session_id=got.session_id,
        url=got.url,
        pid=got.pid,
        formation_id=got.formation_id,
        operator_token=got.operator_token,
    )


def card_session_id(card: object) -> str | None:
    """The session id an agent card names, or None.

    Looks in ``capabilities.extensions[]`` for the murmur capsule extension (matched by its
    ``uri`` suffix) and reads ``params.sessionId``; failing that, any extension whose params
    carry a ``sessionId``.
    """
    if not isinstance(card, dict):
        return None
    caps = card.get("capabilities")
    exts = caps.get("extensions") if isinstance(caps, dict) else None
    if not isinstance(exts, list):
        return None
    fallback: str | None = None
    for ext in exts:
        if not isinstance(ext, dict):
            continue
        params = ext.get("params")
        sid = params.get("sessionId") if isinstance(params, dict) else None
        if not isinstance(sid, str):
            continue
        uri = ext.get("uri")
        if isinstance(uri, str) and uri.endswith(CAPSULE_EXTENSION_SUFFIX):
            return sid
        fallback = fallback or sid
    return fallback


async def wait_for_door(
    report: Report,
    fetch_session_id: Callable[[Report], Awaitable[str | None]],
    *,
    interval: float,
) -> None:
    """Probe the reported door until it answers as the reported session.

    Never returns otherwise: the caller bounds it (readiness deadline, process exit).

    Args:
        report (Report): the peer's readiness report.
        fetch_session_id: one probe; returns the session id the door's card names, or None
            when the door did not answer (connection refused, bad status, not a card).
        interval (float): seconds between probes (100 ms in production).
    """
    while True:
        if await fetch_session_id(report) == report.session_id:
            return
        await trio.sleep(interval)


CARD_PATH = requests.CARD_PATH


class HttpProbe:
    """Reads the session id a live door's card names, over real HTTP (:mod:`murmur.a2a`).

    The public card is tried first; when it names no session and the readiness line carried
    an operator token (an authenticated door), the extended card is read with
    ``GetExtendedAgentCard``. Any transport error or unexpected answer counts as "did not
    answer". Use as an async context manager (it owns one :class:`murmur.a2a.A2AClient`).

    Args:
        request_timeout (float): seconds per HTTP request.
        transport (httpx.AsyncBaseTransport | None): for tests.
    """

    def __init__(
        self, request_timeout: float = timing.READINESS_PROBE_REQUEST, *, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self._client = A2AClient(timeout=request_timeout, transport=transport)

    async def __aenter__(self) -> HttpProbe:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()

    async def __call__(self, report: Report) -> str | None:
        """One probe of ``report.url``; the session id its card names, or None."""
        card = await self._client.get(report.url + CARD_PATH, {"A2A-Version": requests.VERSION})
        if card is not None and card.status == 200:
            sid = card_session_id(card.object())
            if sid is not None or report.operator_token is None:
                return sid
        if report.operator_token is None:
            return None
        extended = await self._client.post(
            requests.rpc_url(report.url),
            requests.encode(requests.get_extended_card()),
            requests.headers(bearer=report.operator_token),
        )
        if extended is None or extended.status != 200:
            return None
        body = extended.object()
        return card_session_id(replies.result(body)) if body is not None else None
