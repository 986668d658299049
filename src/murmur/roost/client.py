"""An async client for mur-roost, used by a capsule's runtime (never by the capsule itself).

Specification: ``spec/roost.md``, "Endpoints" and "Tokens". The client holds no token: each
call takes the credential or approval it presents, and nothing it raises or returns shows a
token in ``str``/``repr`` (the approval field of :class:`SpawnApproval` is hidden from repr).

Errors::

    MurmurError
    └── RoostError                  anything that kept a call from getting its answer
        ├── RoostUnreachable        no daemon answered (connection refused, timeout, ...)
        └── RoostRefused            the daemon answered 4xx/5xx; ``status`` and ``message``
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

import attrs
import httpx

from murmur import tracectx
from murmur.a2a import loopback_client
from murmur.errors import MurmurError

__all__ = [
    "ROOST_URL_ENV",
    "RoostClient",
    "RoostError",
    "RoostRefused",
    "RoostUnreachable",
    "SessionFigures",
    "SpawnApproval",
    "roost_url_fault",
    "roost_url_from_env",
]

ROOST_URL_ENV = "MURMUR_ROOST_URL"
_CREDENTIAL = "x-murmur-spawn-credential"
_APPROVAL = "x-murmur-spawn-approval"
_REGISTRANT = "x-murmur-registrant-pid"  # our addition: spec/roost.md "Finding the process"


class RoostError(MurmurError):
    """A roost call that did not get its answer."""


class RoostUnreachable(RoostError):
    """No daemon answered at the base URL."""


class RoostRefused(RoostError):
    """The daemon answered with an error status.

    Attributes:
        status (int): the HTTP status (403 refusals, 400 bad requests, 500 unresolvable).
        message (str): the daemon's ``error`` sentence (never holds a token).
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"mur-roost refused ({status}): {message}")
        self.status = status
        self.message = message


@attrs.frozen
class SpawnApproval:
    """A granted ``POST /spawn``: the approval and the artifact it names.

    Attributes:
        approval (str): the ``msa1.`` token (hidden from repr); give it to the child on stdin.
        name (str): the artifact the referee judged.
        version (str): its version.
        sha256 (str): its content hash; launch exactly this artifact.
        expires_at_ms (int): absolute expiry, unix milliseconds (60 s after the grant).
    """

    approval: str = attrs.field(repr=False)
    name: str
    version: str
    sha256: str
    expires_at_ms: int


@attrs.frozen
class SessionFigures:
    """``GET /status/{session_id}``."""

    status: str
    depth_remaining: int
    live_children: int
    live_capsules: int


def roost_url_from_env(environ: Mapping[str, str]) -> str | None:
    """``MURMUR_ROOST_URL``, or None when it is unset or blank."""
    value = environ.get(ROOST_URL_ENV, "").strip()
    return value or None


def roost_url_fault(value: str) -> str | None:
    """Why ``value`` cannot be a daemon's base URL, or None when it can.

    A base URL is ``http://HOST:PORT`` (a path of ``/`` at most; no user, query or
    fragment): mur-roost serves plain HTTP on one loopback port (spec/roost.md).
    """
    try:
        parts = urlsplit(value)
        port = parts.port
    except ValueError:
        return "its port is not a number from 1 to 65535"
    if parts.scheme != "http":
        return "it is not an http:// URL" if parts.scheme else "it has no http:// scheme"
    if not parts.hostname:
        return "it names no host"
    if port is None:
        return "it names no port"
    if parts.username is not None or parts.query or parts.fragment or parts.path not in ("", "/"):
        return "a base URL has no user, path, query or fragment"
    return None


def _field(body: Mapping[str, Any], name: str, kind: type) -> Any:
    value = body.get(name)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise RoostError(f"mur-roost answered without a valid `{name}`")
    return value


class RoostClient:
    """Calls the five endpoints of one daemon.

    Args:
        base_url (str): e.g. ``http://127.0.0.1:7700`` (``MURMUR_ROOST_URL``).
        timeout (float): seconds per request (connect, read, write, pool).
        transport (httpx.AsyncBaseTransport | None): for tests (e.g. ``ASGITransport``).

    Use as ``async with RoostClient(url) as roost: ...`` or call :meth:`aclose`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 10.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        # mur-roost listens on loopback only: the one loopback client factory (no proxy named
        # in the environment, no redirects)
        self._http = loopback_client(base_url=self.base_url, timeout=timeout, transport=transport)

    async def __aenter__(self) -> RoostClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _call(
        self, method: str, path: str, *, json: object = None, headers: Mapping[str, str] | None = None
    ) -> tuple[int, dict[str, Any]]:
        try:
            sent = tracectx.inject(dict(headers or {}))  # the approval path carries the caller's span
            r = await self._http.request(method, path, json=json, headers=sent)
        except httpx.HTTPError as exc:
            raise RoostUnreachable(
                f"mur-roost at {self.base_url} did not answer ({type(exc).__name__})"
            ) from None
        try:
            body = r.json()
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise RoostError(f"mur-roost at {self.base_url} answered {r.status_code} without a JSON object")
        return r.status_code, body

    def _check(self, status: int, body: Mapping[str, Any], ok: tuple[int, ...] = (200,)) -> None:
        if status not in ok:
            message = body.get("error")
            raise RoostRefused(status, message if isinstance(message, str) else "(no message)")

    async def health(self) -> bool:
        """True when the daemon answers ``GET /health`` with 200.

        Raises:
            RoostUnreachable: when nothing answers.
        """
        status, _ = await self._call("GET", "/health")
        return status == 200

    async def register(
        self, session_id: str, name: str, version: str, *, approval: str | None = None
    ) -> str:
        """``POST /register``: announce a session and take its credential.

        Args:
            session_id (str): the session's own id.
            name (str): the capsule name as published.
            version (str): its version.
            approval (str | None): the approval the session was launched with (None on the
                top-level path, which ``--spawn-allow`` gates).

        Returns:
            str: the ``msc1.`` credential (keep it in runtime memory only).

        Raises:
            RoostRefused: 400, 403 or 500 with the daemon's message.
            RoostUnreachable: when nothing answers.
        """
        headers = {_REGISTRANT: str(os.getpid())}
        if approval is not None:
            headers[_APPROVAL] = approval
        body = {"session_id": session_id, "name": name, "version": version}
        status, out = await self._call("POST", "/register", json=body, headers=headers)
        self._check(status, out)
        return str(_field(out, "credential", str))

    async def spawn(self, credential: str, name: str, version: str) -> SpawnApproval:
        """``POST /spawn``: ask permission to spawn ``name@version``.

        Raises:
            RoostRefused: 400, 403 (identity, allow list, bounds, envelope) or 500.
            RoostUnreachable: when nothing answers.
        """
        status, out = await self._call(
            "POST", "/spawn", json={"name": name, "version": version}, headers={_CREDENTIAL: credential}
        )
        self._check(status, out)
        return SpawnApproval(
            _field(out, "approval", str),
            _field(out, "name", str),
            _field(out, "version", str),
            _field(out, "sha256", str),
            _field(out, "expires_at_ms", int),
        )

    async def deregister(self, credential: str, outcome: str) -> None:
        """``POST /deregister`` with ``complete`` or ``failed``.

        Raises:
            RoostRefused: 400 or 403.
            RoostUnreachable: when nothing answers (callers treat this call as best effort).
        """
        status, out = await self._call(
            "POST", "/deregister", json={"outcome": outcome}, headers={_CREDENTIAL: credential}
        )
        self._check(status, out)

    async def status(self, session_id: str) -> SessionFigures | None:
        """``GET /status/{session_id}``, or None when the daemon knows no such session.

        Raises:
            RoostRefused: for any status other than 200 and 404.
            RoostUnreachable: when nothing answers.
        """
        status, out = await self._call("GET", f"/status/{quote(session_id, safe='')}")
        if status == 404:
            return None
        self._check(status, out)
        return SessionFigures(
            _field(out, "status", str),
            _field(out, "depth_remaining", int),
            _field(out, "live_children", int),
            _field(out, "live_capsules", int),
        )
