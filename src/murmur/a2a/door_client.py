"""The one HTTP client for the runtime's own A2A calls to loopback doors.

Specification: ``spec/a2a-client.md`` "The client". Every call the runtime makes to a door —
a formation member calling another, a launcher handing a child its task and reading its
answer, a child posting its completion, the readiness probe — goes through
:func:`loopback_client`:

* ``trust_env=False``: ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY`` and
  ``.netrc`` are never read, so a loopback call never goes through a user's proxy;
* no redirects (a door never redirects; following one could leave loopback);
* no certificate is trusted (doors speak plain HTTP; TLS through it fails closed, and no CA
  bundle is loaded);
* httpx's own request log held at WARNING, so no door URL reaches a log line;
* ``transport``: tests pass ``httpx.MockTransport`` (and drive the caller under MockClock).

:class:`A2AClient` adds one rule on top: a request is bounded as a whole by its timeout
(httpx's timeouts bound each read and write, not the request), and a request that got no HTTP
answer in time is ``None``, never an exception naming the URL.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping
from types import TracebackType

import httpx
import trio

from murmur import timing, tracectx
from murmur.a2a.replies import Reply


def loopback_client(
    *, timeout: float = timing.A2A_REQUEST, transport: httpx.AsyncBaseTransport | None = None, base_url: str = ""
) -> httpx.AsyncClient:
    """A fresh ``httpx.AsyncClient`` for loopback calls (the caller closes it): every A2A call,
    and the mur-roost client's. No proxy from the environment, no redirects, no CA bundle.

    Args:
        timeout (float): httpx's connect / read / write / pool timeout, seconds.
        transport (httpx.AsyncBaseTransport | None): None for real HTTP; a test's transport.
        base_url (str): what relative request URLs are joined to ("" for none).
    """
    quiet = logging.getLogger("httpx")
    quiet.setLevel(max(logging.WARNING, quiet.level))
    return httpx.AsyncClient(trust_env=False, follow_redirects=False, timeout=timeout, transport=transport,
                             verify=_no_trust_anchors(), base_url=base_url)


def _no_trust_anchors() -> ssl.SSLContext:
    """A TLS context that verifies and trusts no certificate: doors speak plain HTTP, so a TLS
    connection through this client fails closed, and no CA bundle is read (httpx's default
    context loads one: tens of milliseconds of every launcher's and member's start)."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class A2AClient:
    """Sends requests to doors over one :func:`loopback_client` (an async context manager).

    Args:
        timeout (float): the default bound of one request, seconds.
        transport (httpx.AsyncBaseTransport | None): for tests.
    """

    def __init__(
        self, *, timeout: float = timing.A2A_REQUEST, transport: httpx.AsyncBaseTransport | None = None
    ) -> None:
        self.timeout = timeout
        self._http = loopback_client(timeout=timeout, transport=transport)

    async def __aenter__(self) -> A2AClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections (shielded, so it also runs in a cancelled scope)."""
        with trio.CancelScope(shield=True):
            await self._http.aclose()

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, timeout: float | None = None
    ) -> Reply | None:
        """POST ``body`` to ``url``.

        Args:
            url (str): the door's JSON-RPC endpoint (:func:`murmur.a2a.requests.rpc_url`).
            body (bytes): the encoded request (:func:`murmur.a2a.requests.encode`).
            headers (Mapping[str, str]): :func:`murmur.a2a.requests.headers`.
            timeout (float | None): bound of the whole request, seconds (default: the client's).

        Returns:
            Reply | None: the HTTP reply, or None when nothing answered in time (connection
            refused or reset, timed out, not HTTP).
        """
        return await self._send("POST", url, body, headers, timeout)

    async def get(self, url: str, headers: Mapping[str, str] | None = None, *, timeout: float | None = None) -> Reply | None:
        """GET ``url`` (an agent card); like :meth:`post`."""
        return await self._send("GET", url, None, headers or {}, timeout)

    async def _send(
        self, method: str, url: str, body: bytes | None, headers: Mapping[str, str], timeout: float | None
    ) -> Reply | None:
        bound = self.timeout if timeout is None else timeout
        with trio.move_on_after(bound):
            try:
                sent = tracectx.inject(dict(headers))  # the calling work's span, unless given
                resp = await self._http.request(method, url, content=body, headers=sent, timeout=bound)
            except httpx.HTTPError:
                return None
            return Reply(resp.status_code, resp.content)
        return None
