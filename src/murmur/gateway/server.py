"""The inference gateway's handler: place the caller, check its reach and budget, pass through.

Specification: ``spec/gateway.md``. One :class:`Gateway` per root (a top-level ``mur run`` or
a formation launcher), served by :func:`murmur.gateway.wire.serve_listener` (one HTTP/1.1 loop per
connection). Routes:

* ``POST /_murmur/sessions`` — a session of the tree registers itself. The registrant is the
  TCP peer's process; its parent node is the nearest registered process above it. Body
  ``{"session", "network_allow": [..], "budget_tokens": int|null, "key": {"endpoint",
  "reference", "value"?}|null}`` (the key claim: :mod:`murmur.gateway.keys`); reply
  ``{"session", "parent", "budget_tokens"}`` (the ceiling it got). Outside the tree: 403.
* ``/up/<scheme>/<authority>/<path>`` — one model request, passed through to
  ``<scheme>://<authority>/<path>`` byte for byte (status, headers but hop-by-hop ones, body,
  streamed as it arrives), with the endpoint's key attached here. The client's own
  ``x-api-key`` / ``Authorization`` (a placeholder) is dropped.

A connection's TCP peer is placed once, at its first request (a connection's peer process does
not change); each request then finds its node in the tree as it is now. Every proxied call is
one ``model_call`` record handed to ``emit``; a call refused for budget also emits
``spend_ceiling_reached`` naming the node whose budget ran out. The upstream transport is
injectable (``connect``, a :class:`murmur.gateway.upstream.Connector`; tests hand in an
in-memory one).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import trio

from murmur.gateway.callers import caller_ancestry, quick_ancestry
from murmur.gateway.keys import KeyTable, parse_claim
from murmur.gateway.nodes import Node, Tree, reaches
from murmur.gateway.refusal import Refusal, body_for
from murmur.gateway.route import Upstream, key_headers, parse_path
from murmur.gateway.upstream import Connector, Pool, Reply, UpstreamError
from murmur.gateway.usage import UsageMeter
from murmur.gateway.wire import Connection, Exchange, Responder
from murmur.roost.peer import PeerFinder

__all__ = ["REGISTER_PATH", "TASK_HEADER", "Gateway"]

REGISTER_PATH = "/_murmur/sessions"
TASK_HEADER = "x-murmur-task"
"""A label a driver may send naming its task (recorded, never trusted for identity)."""

Send = Responder

_HOP = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
    }
)
_DROP_UP = _HOP | {b"authorization", b"x-api-key", b"accept-encoding", TASK_HEADER.encode()}
_DROP_DOWN = _HOP - {b"content-length"}
_JSON = (b"content-type", b"application/json")
_PEER_HINTS = 8
FLUSH_DELAY = 0.01
"""Seconds the spend files wait after a charge, so a burst of calls costs one write."""


class Gateway:
    """The request handler of one tree's gateway (``await gateway(exchange, responder)``).

    Args:
        tree (Tree): the tree's nodes (the root's, at least).
        keys (KeyTable): the key per endpoint.
        emit (Callable[[dict], None]): receives every record (``model_call``,
            ``spend_ceiling_reached``, ``gateway_refused``, ``gateway_session``).
        connect (Connector | None): opens upstream streams (default: TCP, TLS for https;
            tests inject an in-memory one).
        finder (PeerFinder | None): places TCP peers (default: this host's ``/proc``, the
            gateway's own process included, since the root's calls come from it).
        on_spend (Callable[[list[Node]], object] | None): persists the nodes whose spend
            changed (:func:`murmur.gateway.spend.write_spend`; blocking, so it runs in a
            worker thread). A charged call (its caller and each ancestor) or a registration
            marks nodes; :meth:`flush_forever` (run by :func:`~murmur.gateway.serve.run_gateway`)
            writes the latest of each marked node as soon as it can, off the call's path, and
            :meth:`flush` writes what is marked now (the gateway's end flushes once more).
    """

    def __init__(
        self,
        tree: Tree,
        keys: KeyTable,
        emit: Callable[[dict[str, object]], None],
        *,
        connect: Connector | None = None,
        finder: PeerFinder | None = None,
        on_spend: Callable[[list[Node]], object] | None = None,
    ) -> None:
        self.tree = tree
        self.on_spend = on_spend
        self._dirty: dict[str, Node] = {}
        self._wake = trio.Event()
        self._writing = trio.Lock()
        self.keys = keys
        self.emit = emit
        self.finder = finder if finder is not None else PeerFinder(include_self=True)
        self._pool = Pool(connect)
        self._peers: dict[int, None] = {}  # the peers of recent connections, the latest last

    async def aclose(self) -> None:
        """Close the upstream connection pool."""
        await self._pool.aclose()

    async def __call__(self, exchange: Exchange, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in exchange.headers}
        path = exchange.path
        anthropic = "anthropic-version" in headers or path.rstrip("/").endswith("/messages")
        found = await self._ancestry(exchange.connection)
        node = self.tree.by_process(found) if found else None
        if node is None and path != REGISTER_PATH:
            refusal = Refusal(
                403,
                "E-GWY-001",
                "this process is not in the gateway's tree (its TCP peer is no session of the"
                " tree, nor a process under one)",
            )
            await self._refuse(send, refusal, anthropic, session=None, path=path)
            return
        body = exchange.body
        if path == REGISTER_PATH and exchange.method == "POST":
            await self._register(send, body, found)
            return
        upstream = parse_path(path, exchange.query)
        if upstream is None or node is None:
            refusal = Refusal(
                404, "E-GWY-003", f"no upstream endpoint in path {path!r}", "not_found_error"
            )
            await self._refuse(
                send, refusal, anthropic, session=node.session if node else None, path=path
            )
            return
        if not reaches(node.allow, upstream.target):
            refusal = Refusal(
                403,
                "E-GWY-002",
                f"session {node.session}'s network.allow does not cover {upstream.origin}",
            )
            await self._refuse(send, refusal, anthropic, session=node.session, path=path)
            return
        out = self.tree.spent_out(node.session)
        if out is not None:
            self.emit(
                {
                    "type": "spend_ceiling_reached",
                    "node": out.session,
                    "caller": node.session,
                    "budget_tokens": out.budget,
                    "spent_tokens": out.spent,
                }
            )
            refusal = Refusal(
                400,
                "E-GWY-004",
                f"the token budget of session {out.session} is spent ({out.spent} of"
                f" {out.budget} tokens); no further model call is made in its tree",
                "invalid_request_error",
            )
            await self._refuse(send, refusal, anthropic, session=node.session, path=path)
            return
        await self._pass(exchange, send, headers, node, upstream)

    async def _ancestry(self, connection: Connection) -> list[tuple[int, int]]:
        """The TCP peer's process and its ancestors (see :mod:`murmur.gateway.callers`),
        found once per connection."""
        if isinstance(connection.placed, list):
            return connection.placed
        client, server = connection.client, connection.server
        if not client or not server:
            return []
        known = quick_ancestry(self.finder, client, server)
        if known is None:
            hints = list(reversed(self._peers))
            known = await trio.to_thread.run_sync(
                caller_ancestry, self.finder, client, server, hints
            )
        connection.placed = known
        if known:  # the peers seen last are tried first for the next new connection
            self._peers.pop(known[0][0], None)
            self._peers[known[0][0]] = None
            while len(self._peers) > _PEER_HINTS:
                del self._peers[next(iter(self._peers))]
        return known

    async def _register(self, send: Send, body: bytes, found: list[tuple[int, int]]) -> None:
        parent = self.tree.by_process(found[1:]) if len(found) > 1 else None
        again = self.tree.by_process(found[:1]) if found else None
        try:
            asked = json.loads(body)
            session = str(asked["session"])
            allow = [str(e) for e in asked.get("network_allow") or []]
            own = asked.get("budget_tokens")
            if own is not None and (not isinstance(own, int) or isinstance(own, bool) or own < 0):
                raise ValueError("budget_tokens")
            claim = parse_claim(asked.get("key"))
        except (ValueError, KeyError, TypeError, AttributeError):
            refusal = Refusal(
                400,
                "E-GWY-005",
                "a registration needs {session, network_allow?, budget_tokens?, key?}",
                "invalid_request_error",
            )
            await self._refuse(send, refusal, False, session=None, path=REGISTER_PATH)
            return
        if parent is None or again is not None or session in self.tree.nodes:
            refusal = Refusal(
                403,
                "E-GWY-001",
                "this process is not under a session of the gateway's tree (or is one already)",
            )
            await self._refuse(send, refusal, False, session=None, path=REGISTER_PATH)
            return
        ceiling = self.tree.ceiling(parent.session, own)
        self.tree = self.tree.add(
            Node(session, found[0][0], found[0][1], parent.session, tuple(allow), ceiling, key=claim)
        )
        node = self.tree.nodes[session]
        self._spent([node])
        self.emit(
            {
                "type": "gateway_session",
                "session": session,
                "parent": parent.session,
                "budget_tokens": ceiling,
                "network_allow": list(node.allow),
                "key": claim.reference if claim is not None else None,  # never its value
                "own_key": claim is not None and claim.value is not None,
            }
        )
        reply = {
            "session": session,
            "parent": parent.session,
            "budget_tokens": ceiling,
            "network_allow": list(node.allow),
        }
        await _send_json(send, 200, json.dumps(reply).encode())

    async def _refuse(
        self, send: Send, refusal: Refusal, anthropic: bool, *, session: str | None, path: str
    ) -> None:
        self.emit(
            {
                "type": "gateway_refused",
                "session": session,
                "code": refusal.code,
                "status": refusal.status,
                "path": path,
            }
        )
        await _send_json(send, refusal.status, body_for(refusal, anthropic=anthropic))

    async def _pass(
        self,
        exchange: Exchange,
        send: Send,
        headers: dict[str, str],
        node: Node,
        upstream: Upstream,
    ) -> None:
        origin, url, path = upstream.origin, upstream.url, exchange.path
        out_headers = [(k, v) for k, v in exchange.headers if k not in _DROP_UP]
        out_headers.append((b"accept-encoding", b"identity"))  # usage is read from the bytes
        chain = self.tree.chain(node.session)  # the caller, then each ancestor up to the root
        entry = self.keys.key_for(origin, chain)
        if entry is not None:
            out_headers += [
                (k.encode("latin-1"), v.encode("latin-1"))
                for k, v in key_headers(path, headers, entry.value).items()
            ]
        target = url[len(origin) :] or "/"
        started = time.monotonic()
        record: dict[str, object] = {
            "type": "model_call",
            "session": node.session,
            "parent": node.parent,
            "root": chain[-1].session if chain else node.session,
            "task": headers.get(TASK_HEADER),
            "endpoint": origin,
            "path": target.split("?")[0],
            "key": entry.reference if entry is not None else None,
        }
        assert upstream.target.scheme is not None and upstream.target.port is not None
        try:
            async with self._pool.request(
                upstream.target.scheme,
                upstream.target.host,
                upstream.target.port,
                exchange.method.encode("latin-1"),
                target.encode("latin-1"),
                out_headers,
                exchange.body,
            ) as reply:
                await self._relay(send, reply, node, record, started)
        except UpstreamError as exc:
            if send.started:
                return  # cut short after the head: unended, the client's connection closes
            record.update(
                status=502, latency_ms=_ms(started), tokens_in=0, tokens_out=0, model=None
            )
            self.emit(record)
            refusal = Refusal(
                502,
                "E-GWY-006",
                f"the upstream {origin} could not be reached ({exc.reason})",
                "api_error",
            )
            await _send_json(
                send, 502, body_for(refusal, anthropic="x-api-key" in key_headers(path, headers, ""))
            )

    async def _relay(
        self, send: Send, reply: Reply, node: Node, record: dict[str, object], started: float
    ) -> None:
        """Send the reply on as it arrives; account for it before its last byte goes."""
        streamed = False
        for name, value in reply.headers:
            if name == b"content-type":
                streamed = value.startswith(b"text/event-stream")
        meter = UsageMeter(streamed=streamed)
        accounted = False

        def account() -> None:
            # Once per call, before the client sees the reply end: so that the next call of
            # the same client always meets the spend of this one.
            nonlocal accounted
            if accounted:
                return
            accounted = True
            meter.close()
            self.tree = self.tree.charge(node.session, meter.total)
            if meter.total > 0:  # the spend files, written off this call's path
                self._spent(self.tree.chain(node.session))
            record.update(
                status=reply.status,
                latency_ms=_ms(started),
                model=meter.model,
                tokens_in=meter.tokens_in,
                tokens_out=meter.tokens_out,
            )
            self.emit(record)

        try:
            await send.start(reply.status, [h for h in reply.headers if h[0] not in _DROP_DOWN])
            reply.before_wait = send.flush  # the head goes with the first bytes, or before a wait
            left = reply.length
            async for chunk in reply:
                meter.feed(chunk)
                if left is not None:
                    left -= len(chunk)
                    if left <= 0:  # the last bytes of a sized body: account first
                        account()
                await send.body(chunk)
            account()
            await send.end()
        finally:
            account()  # a reply cut short still counts what it reported

    def _spent(self, nodes: list[Node]) -> None:
        if self.on_spend is not None and nodes:
            self._dirty.update((n.session, n) for n in nodes)
            self._wake.set()

    async def flush(self) -> None:
        """Write every node marked since the last write (after any write under way)."""
        async with self._writing:
            batch, self._dirty = list(self._dirty.values()), {}
            if batch and self.on_spend is not None:
                try:
                    await trio.to_thread.run_sync(self.on_spend, batch)
                except OSError:
                    pass  # the files are a view; a call is never failed for them

    async def flush_forever(self) -> None:
        """Write marked nodes as they are marked, until cancelled (coalescing bursts: what
        is marked within :data:`FLUSH_DELAY` seconds of a first mark is written at once)."""
        while True:
            await self._wake.wait()
            await trio.sleep(FLUSH_DELAY)
            self._wake = trio.Event()
            await self.flush()


def _ms(started: float) -> float:
    return round((time.monotonic() - started) * 1000.0, 3)


async def _send_json(send: Send, status: int, body: bytes) -> None:
    await send.start(status, [_JSON, (b"content-length", str(len(body)).encode())])
    await send.end(body)
