"""mur-roost's HTTP layer: a Quart-Trio app that parses, asks the ledger, and serialises.

Specification: ``spec/roost.md``, "Endpoints"; the OpenAPI description is
``spec/roost-openapi.yaml``. Five endpoints: ``GET /health``, ``POST /spawn``,
``POST /register``, ``POST /deregister``, ``GET /status/{session_id}``.

Every decision is the ledger's (:mod:`murmur.roost.ledger`); tokens are verified and minted by
:mod:`murmur.tokens`; the registry is read through :class:`~murmur.roost.registry.Registry`.
Between the first ledger check of a request and the state change it leads to there is no
``await``, so each decision is atomic with respect to every other request.

Responses are built by :func:`_respond` alone: a compact JSON body with exactly two headers
(``content-type`` and ``content-length``; a ``413`` adds ``connection: close``, because the
unread body leaves the connection unusable), and the server is configured without ``date`` and
``server`` headers (:func:`hypercorn_config`), so two refusals with the same body are
byte-identical on the wire -- the identity refusal in particular, whether or not the session
a request names exists.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from functools import partial
from typing import Any

import attrs
import hypercorn.config
import hypercorn.trio
import trio
from quart import Response, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from murmur.errors import DiagnosticError
from murmur.httpserve import BODY_IN_SCOPE, BODY_KEY
from murmur.jsonbody import BodyError, decode_object, echo, loggable
from murmur.roost.ledger import (
    IDENTITY_MESSAGE,
    Artifact,
    Bounds,
    Ledger,
    Outcome,
    Refusal,
)
from murmur.roost.peer import Peer
from murmur.roost.registry import Lowerer, Registry
from murmur.roost.watch import ProcessWatch
from murmur.tokens import ApprovalClaims, Keyring

__all__ = [
    "APPROVAL_HEADER",
    "CREDENTIAL_HEADER",
    "MAX_BODY_BYTES",
    "TrioWallClock",
    "create_app",
    "hypercorn_config",
    "serve",
    "shield_send",
]

CREDENTIAL_HEADER = "x-murmur-spawn-credential"
APPROVAL_HEADER = "x-murmur-spawn-approval"
REGISTRANT_HEADER = "x-murmur-registrant-pid"  # a hint only: the daemon checks it (peer.py)
# the same names as the ASGI scope spells them (lowercase bytes), for :func:`_headers`
CREDENTIAL_KEY = CREDENTIAL_HEADER.encode("latin-1")
APPROVAL_KEY = APPROVAL_HEADER.encode("latin-1")
REGISTRANT_KEY = REGISTRANT_HEADER.encode("latin-1")
MAX_BODY_BYTES = 64 * 1024

ASGIApp = Any  # hypercorn's and quart's ASGI signatures differ in detail; both are ASGI 3


class TrioWallClock:
    """Unix milliseconds that advance with Trio's clock (so ``MockClock`` moves them).

    Anchored to the wall clock at the first call (which must be inside ``trio.run``).
    """

    def __init__(self, wall: Callable[[], float] = time.time) -> None:
        self._wall = wall
        self._offset_ms: float | None = None

    def __call__(self) -> int:
        """The current time in unix milliseconds."""
        trio_ms = trio.current_time() * 1000.0
        if self._offset_ms is None:
            self._offset_ms = self._wall() * 1000.0 - trio_ms
        return int(self._offset_ms + trio_ms)


class _BadRequest(Exception):
    """A request body the endpoint cannot read (answered 400)."""


_ENCODE = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode  # built once


def _respond(status: int, payload: Mapping[str, object]) -> Response:
    body = _ENCODE(payload).encode("utf-8")
    return Response(body, status=status, content_type="application/json")


def _error(status: int, message: str) -> Response:
    return _respond(status, {"error": message})


def _refused(refusal: Refusal) -> Response:
    return _error(403, refusal.message)


def _identity() -> Response:
    return _error(403, IDENTITY_MESSAGE)


def _pid_hint(value: str | None) -> int | None:
    """The registrant's own pid as its client named it (a positive decimal), or None."""
    if value is None or not value.isdigit() or len(value) > 10:
        return None
    return int(value) or None


def _headers(scope: Mapping[str, Any], name: bytes) -> list[str]:
    """Every value of header ``name`` (lowercase, as ASGI gives names) in the request's order.

    Read from the ASGI scope's header list -- what Quart builds ``request.headers`` from, so
    the same values (latin-1, as Quart decodes them) -- in one pass without case folding.
    """
    return [value.decode("latin-1") for key, value in scope["headers"] if key == name]


def _one_header(scope: Mapping[str, Any], name: bytes) -> str | None:
    """The header's value when sent exactly once; None when absent or repeated."""
    values = _headers(scope, name)
    return values[0] if len(values) == 1 else None


async def _body(scope: Mapping[str, Any]) -> bytes:
    """The request body: taken from the scope when hypercorn has parsed all of it
    (:data:`murmur.httpserve.BODY_KEY`, which this daemon's server config asks for), else
    awaited as Quart awaits it (which also raises the 413 of an oversized one).

    Quart's own loop hands a body to the request only after the endpoint has started (one
    scheduling round per body message), so awaiting it cost a park and a wake-up on every
    POST; the scope holds it as soon as hypercorn has read it.
    """
    kept = scope.get(BODY_KEY)
    if isinstance(kept, bytes) and len(kept) <= MAX_BODY_BYTES:
        return kept
    raw = await request.get_data(cache=False, as_text=False)
    return raw if isinstance(raw, bytes) else raw.encode()


async def _json_object(scope: Mapping[str, Any]) -> dict[str, object]:
    raw = await _body(scope)
    try:
        return decode_object(raw)
    except BodyError as exc:
        raise _BadRequest(str(exc)) from None


def _string_field(body: Mapping[str, object], field: str) -> str:
    value = body.get(field)
    if not isinstance(value, str):
        raise _BadRequest(f"`{field}` is required and must be a string")
    return value


@attrs.define
class _Roost:
    """The app's collaborators (one per app instance)."""

    ledger: Ledger
    registry: Registry
    lowerer: Lowerer
    keyring: Keyring
    clock: Callable[[], int]
    watch: ProcessWatch | None = None
    notice: Callable[[str], None] | None = None

    def resolve(self, name: str, version: str) -> Artifact | Response:
        """The judged artifact, or the 500 the daemon answers when it cannot be resolved."""
        try:
            resolved = self.registry.resolve(name, version)
            if resolved is None:
                return _error(
                    500, f"capsule '{echo(name)}@{echo(version)}' could not be resolved from this daemon's registry"
                )
            return self.lowerer(resolved)
        except DiagnosticError as exc:
            d = exc.diagnostics[0]
            return _error(
                500,
                f"capsule '{echo(name)}@{echo(version)}' could not be resolved from this daemon's registry: "
                f"[{d.code}] {d.message}",
            )

    # --- endpoints ---------------------------------------------------------------------

    async def health(self) -> Response:
        # our addition (spec/roost.md): the top-level --spawn-allow names, so `mur agent who`
        # can tell a route mur-roost would refuse (names only; no credential, no session)
        return _respond(200, {"spawn_allow": sorted(self.ledger.spawn_allow)})

    async def spawn(self) -> Response:
        scope = request.scope
        claims = self.keyring.verify_credential(_one_header(scope, CREDENTIAL_KEY))
        session_id = claims.session_id if claims is not None else None
        if session_id is None or not self.ledger.is_running(session_id):
            return _identity()
        body = await _json_object(scope)
        name, version = _string_field(body, "name"), _string_field(body, "version")
        # From here to the grant there is no await: the decision is atomic.
        now = self.clock()
        refusal = self.ledger.check_spawn(session_id, name, now)
        if refusal is not None:
            return _refused(refusal)
        child = self.resolve(name, version)
        if isinstance(child, Response):
            return child
        out = self.ledger.grant_spawn(session_id, name, child, now)
        if isinstance(out, Refusal):
            return _refused(out)
        return _respond(200, self._approval_body(out))

    def _approval_body(self, claims: ApprovalClaims) -> dict[str, object]:
        return {
            "approval": self.keyring.mint_approval(claims),
            "name": claims.name,
            "version": claims.version,
            "sha256": claims.sha256,
            "expires_at_ms": claims.expires_at_ms,
        }

    async def register(self) -> Response:
        scope = request.scope
        body = await _json_object(scope)
        session_id = _string_field(body, "session_id")
        if not session_id:
            raise _BadRequest("`session_id` must not be empty")
        name, version = _string_field(body, "name"), _string_field(body, "version")
        presented = _headers(scope, APPROVAL_KEY)
        if not presented:  # the top-level path: --spawn-allow first, then the registry
            refusal = self.ledger.check_top_level(name)
            if refusal is not None:
                return _refused(refusal)
            artifact = self.resolve(name, version)
            if isinstance(artifact, Response):
                return artifact
            refusal = self.ledger.register_top_level(session_id, name, artifact, self.clock())
        else:  # the delegated path: the registry first, then the approval
            artifact = self.resolve(name, version)
            if isinstance(artifact, Response):
                return artifact
            token = presented[0] if len(presented) == 1 else None
            approval = self.keyring.verify_approval(token)
            refusal = self.ledger.register_delegated(session_id, approval, artifact, self.clock())
        if refusal is not None:
            return _refused(refusal)
        await self._watch_process(scope, session_id)
        return _respond(200, {"credential": self.keyring.mint_credential(session_id)})

    async def _watch_process(self, scope: Mapping[str, Any], session_id: str) -> None:
        """Watch the registering process, so its end retires the session (spec/roost.md)."""
        if self.watch is None:
            return
        client, server = scope.get("client"), scope.get("server")
        hints = _headers(scope, REGISTRANT_KEY)
        hint = _pid_hint(hints[0] if hints else None)
        on_end = partial(self.process_ended, session_id)
        done, _ = self.watch.watch_quickly(session_id, client, server, on_end, hint=hint)
        if done:
            return
        with trio.CancelScope(shield=True):  # bounded by the watch's own lookup bound
            await self.watch.watch(session_id, client, server, on_end, hint=hint, tried_quickly=True)

    def process_ended(self, session_id: str, peer: Peer) -> None:
        """The registering process of ``session_id`` ended: retire it as ``failed``."""
        if self.ledger.process_ended(session_id, self.clock()) and self.notice is not None:
            self.notice(
                f"mur-roost: session {loggable(session_id)} ended without deregistering (process "
                f"{peer.pid} exited); marked failed and its slots released"
            )

    async def deregister(self) -> Response:
        scope = request.scope
        claims = self.keyring.verify_credential(_one_header(scope, CREDENTIAL_KEY))
        session_id = claims.session_id if claims is not None else None
        if session_id is None or not self.ledger.is_running(session_id):
            return _identity()
        body = await _json_object(scope)
        outcome = body.get("outcome")
        if outcome not in ("complete", "failed"):
            raise _BadRequest("`outcome` must be `complete` or `failed`")
        refusal = self.ledger.deregister(session_id, Outcome(outcome), self.clock())
        if refusal is not None:
            return _refused(refusal)
        if self.watch is not None:
            self.watch.forget(session_id)
        return _respond(200, {})

    async def status(self, session_id: str) -> Response:
        view = self.ledger.status(session_id, self.clock())
        if view is None:
            return _error(404, "session not found")
        return _respond(
            200,
            {
                "status": view.status.value,
                "depth_remaining": view.depth_remaining,
                "live_children": view.live_children,
                "live_capsules": view.live_capsules,
            },
        )


def create_app(
    *,
    bounds: Bounds,
    spawn_allow: tuple[str, ...] | list[str],
    registry: Registry,
    environ: Mapping[str, str] | None = None,
    keyring: Keyring | None = None,
    clock: Callable[[], int] | None = None,
    watch: ProcessWatch | None = None,
    notice: Callable[[str], None] | None = None,
) -> QuartTrio:
    """Build the mur-roost app. Everything it holds lives in memory, in this app alone.

    Args:
        bounds (Bounds): ``--max-depth``, ``--max-concurrent``, ``--max-live-capsules``.
        spawn_allow (tuple[str, ...] | list[str]): the ``--spawn-allow`` names.
        registry (Registry): where capsules are resolved from.
        environ (Mapping[str, str] | None): the environment ``${VAR}`` references resolve
            against (default: empty -- the CLI passes ``os.environ``).
        keyring (Keyring | None): the MAC keys (default: fresh random keys).
        clock (Callable[[], int] | None): unix milliseconds (default :class:`TrioWallClock`).
        watch (ProcessWatch | None): when given (and running), each registering process is
            watched and its end retires its session as ``failed`` (spec/roost.md, "When a
            session's process ends"); None watches nothing.
        notice (Callable[[str], None] | None): receives one line per session so retired
            (the daemon prints it to stderr).

    Returns:
        QuartTrio: the app; serve it with :func:`serve` (wrapped in :func:`shield_send`).
    """
    roost = _Roost(
        Ledger(bounds, spawn_allow),
        registry,
        Lowerer(environ or {}),
        keyring or Keyring.generate(),
        clock or TrioWallClock(),
        watch,
        notice,
    )
    app = QuartTrio("murmur.roost")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES
    app.config["PROVIDE_AUTOMATIC_OPTIONS"] = False
    app.add_url_rule("/health", "health", roost.health, methods=["GET"])
    app.add_url_rule("/spawn", "spawn", roost.spawn, methods=["POST"])
    app.add_url_rule("/register", "register", roost.register, methods=["POST"])
    app.add_url_rule("/deregister", "deregister", roost.deregister, methods=["POST"])
    app.add_url_rule("/status/<session_id>", "status", roost.status, methods=["GET"])

    @app.errorhandler(_BadRequest)
    async def bad_request(exc: _BadRequest) -> Response:
        return _error(400, str(exc))

    @app.errorhandler(HTTPException)
    async def http_error(exc: HTTPException) -> Response:
        code = exc.code or 500
        messages = {404: "not found", 405: "method not allowed", 413: "request body too large"}
        response = _error(code, messages.get(code, exc.name.lower()))
        if code == 413:
            # The body was left unread, so the connection cannot carry another request; say
            # so, or a pooled client sends its next request into a closed socket.
            response.headers["connection"] = "close"
        return response

    @app.errorhandler(Exception)
    async def internal(exc: Exception) -> Response:
        logging.getLogger("murmur.roost").exception("internal error answering a request")
        return _error(500, "internal error")

    return app


def shield_send(app: ASGIApp, bound: float = 5.0) -> ASGIApp:
    """Wrap an ASGI app so the final body send cannot be cancelled.

    Quart-Trio cancels its per-request nursery as soon as the response is sent, which kills
    hypercorn's keep-alive timer; shielding the last send keeps keep-alive and graceful
    shutdown working.
    """

    async def wrapped(
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def shielded_send(message: Any) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                with trio.CancelScope(shield=True, deadline=trio.current_time() + bound):
                    await send(message)
            else:
                await send(message)

        await app(scope, receive, shielded_send)

    return wrapped


def hypercorn_config(
    port: int, *, host: str = "127.0.0.1", keep_alive_timeout: float = 30.0
) -> hypercorn.config.Config:
    """The daemon's server config: loopback, no access log, no ``date``/``server`` headers.

    Args:
        port (int): the TCP port (0 lets the OS choose; :func:`serve` reports the real one).
        host (str): the bind address; the daemon only ever uses loopback.
        keep_alive_timeout (float): seconds an idle keep-alive connection is held.
    """
    cfg = hypercorn.config.Config()
    cfg.bind = [f"{host}:{port}"]
    cfg.accesslog = None
    cfg.errorlog = logging.getLogger("hypercorn.error")
    cfg.include_date_header = False
    cfg.include_server_header = False
    cfg.graceful_timeout = 3.0
    cfg.keep_alive_timeout = keep_alive_timeout
    cfg.backlog = 1024
    setattr(cfg, BODY_IN_SCOPE, MAX_BODY_BYTES)  # each body in the scope (murmur.httpserve)
    return cfg


async def serve(
    app: QuartTrio,
    config: hypercorn.config.Config,
    shutdown_trigger: Callable[[], Awaitable[Any]],
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``app`` (wrapped in :func:`shield_send`) until ``shutdown_trigger`` returns.

    Args:
        app (QuartTrio): from :func:`create_app`.
        config (hypercorn.config.Config): from :func:`hypercorn_config`.
        shutdown_trigger (Callable): awaited; its return starts a graceful shutdown.
        task_status (trio.TaskStatus): ``started`` receives hypercorn's bound URLs (the
            real port filled in), e.g. ``["http://127.0.0.1:41235"]``.

    Raises:
        OSError: when the address cannot be bound.
    """
    from murmur.httpserve import install

    install()  # bounded sends, prompt close on EOF
    cfg = config
    await hypercorn.trio.serve(
        shield_send(app),
        cfg,
        shutdown_trigger=shutdown_trigger,
        mode="asgi",
        task_status=task_status,
    )


