"""The door: the session's A2A 1.0 JSON-RPC endpoint (spec/door.md).

A plain ASGI app (no web framework: the door's three answers do not need one, and a
framework's import would be paid by every member) served by hypercorn's Trio worker on
127.0.0.1 (port chosen by the OS), wrapped in :func:`shield_send`. Routes:

* ``GET /.well-known/agent-card.json``: the card, never behind auth;
* any other path: a JSON 404; another method on these paths: a JSON 405 with ``Allow``;
* ``POST /``: one JSON-RPC 2.0 request. Checks run in the order of spec/door.md "Request
  checks, in order": token → peer consent → ``-32700`` → ``-32600`` → ``-32009``
  (``A2A-Version``) → completion addressing (``-31001``) → ``-32601`` → method scope (403) →
  ``-32602`` → the method.

The door only parses, asks its :class:`DoorBackend` (the session) and serialises. JSON-RPC
errors travel with HTTP 200; auth refusals are HTTP 401/403. Streams (SendStreamingMessage,
SubscribeToTask) send the task snapshot first, then every status/artifact event, a
``: keepalive`` comment every :data:`murmur.timing.SSE_KEEPALIVE` seconds of silence, and end
when the task reaches a terminal state.
"""

from __future__ import annotations

import json
import logging
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from functools import partial
from typing import Any, Protocol

import attrs
import trio

from murmur import jsonbody, timing
from murmur.session import held, wire
from murmur.session.auth import Authenticator, AuthRefusal, Principal, peer_not_accepted
from murmur.session.origin import Classification, classify, forget_requested
from murmur.session.states import TaskState
from murmur.session.tasks import Task
from murmur.session.wire import RpcError

TASK_METHODS = frozenset({"SendMessage", "SendStreamingMessage"})
PUSH_METHODS = frozenset(
    {
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)
KNOWN_METHODS = TASK_METHODS | PUSH_METHODS | frozenset(
    {"GetTask", "ListTasks", "CancelTask", "SubscribeToTask", "GetExtendedAgentCard"}
)
DOOR_GRACE = 2.0  # seconds in-flight requests get once the door is told to stop


@attrs.frozen
class CompletionRequest:
    """A request classified ``completion`` that is addressed to this session.

    Attributes:
        delegation_id (str | None): ``x-murmur-delegation-id``.
        trust (str): the inherited trust class.
        message (wire.InboundMessage): the checked message (its text carries the fields).
    """

    delegation_id: str | None
    trust: str
    message: wire.InboundMessage


@attrs.frozen
class CompletionVerdict:
    """What the completion hook decided.

    Attributes:
        accept (bool): false refuses it with ``error`` (default ``-31002``).
        run_as_task (bool): queue it as a ``completion``-origin task in the bg lane.
        context_id (str | None): the context the task runs under (the delegating one).
        text (str | None): the task text (default: the message text).
        error (RpcError | None): the refusal when ``accept`` is false.
    """

    accept: bool
    run_as_task: bool = True
    context_id: str | None = None
    text: str | None = None
    error: RpcError | None = None


CompletionHandler = Callable[[CompletionRequest], CompletionVerdict]


def default_completion_handler(req: CompletionRequest) -> CompletionVerdict:
    """Without a delegation module: run every well-addressed completion as a bg-lane task."""
    return CompletionVerdict(accept=True, run_as_task=True, context_id=req.message.context_id)


class DoorBackend(Protocol):
    """What the door needs from its session."""

    session_id: str

    @property
    def serves_tasks(self) -> bool:
        """False under ``task_acceptance: none``."""
        ...

    @property
    def accepts_peer_tasks(self) -> bool:
        """``exports.peer_tasks.accept``."""
        ...

    def get_task(self, task_id: str) -> Task | None:
        """The task with this id (any owner), or None."""
        ...

    def all_tasks(self) -> list[Task]:
        """Every task held, in arrival order."""
        ...

    def submit(
        self, msg: wire.InboundMessage, cls: Classification, principal: Principal, *, context_id: str | None
    ) -> Task:
        """Admit (or reject) a new task; always returns the task (maybe REJECTED)."""
        ...

    def cancel(self, task: Task, reason: str) -> bool:
        """Cancel a task that has not ended; whether it changed."""
        ...

    def answer(self, task: Task, text: str) -> bool:
        """Answer a task waiting in ``input-required``; whether it took the answer."""
        ...

    def forget_session(self, context_id: str | None) -> None:
        """``x-murmur-forget-session``: drop the context's agent CLI session.

        Raises:
            RpcError: ``-32602`` (``E-RUN-039``) when the capsule's transport is not ``process``.
        """
        ...

    def card(self, *, extended: bool) -> dict[str, Any]:
        """The agent card (or the extended card)."""
        ...

    def completion(self, req: CompletionRequest) -> CompletionVerdict:
        """Decide a well-addressed completion."""
        ...


def shield_send(app: Any, bound: float = 5.0) -> Any:
    """Wrap an ASGI app so each response's last body chunk is sent in a shielded scope.

    A handler whose scope is being cancelled as it answers still finishes its response, and
    hypercorn, which re-arms the connection's keep-alive timer from inside that send, keeps
    the timer (spec/door.md, its opening). The shielded send is bounded, so a client that
    stopped reading cannot hold it.

    Args:
        app: the ASGI app.
        bound (float): seconds the shielded send may take.
    """

    async def wrapped(scope: Any, receive: Any, send: Any) -> Any:
        if scope["type"] != "http":
            return await app(scope, receive, send)

        async def shielded_send(msg: Any) -> None:
            if msg["type"] == "http.response.body" and not msg.get("more_body", False):
                with trio.CancelScope(shield=True, deadline=trio.current_time() + bound):
                    await send(msg)
            else:
                await send(msg)

        return await app(scope, receive, shielded_send)

    return wrapped


def _dumps(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _sse_frame(obj: object, *, event: str | None = None) -> bytes:
    head = f"event: {event}\n".encode() if event else b""
    return head + b"data: " + _dumps(obj) + b"\n\n"


def _visible(task: Task | None, principal: Principal) -> Task | None:
    """Formation callers see only the tasks they started; a hidden task is "not found"."""
    if task is None:
        return None
    if principal.is_formation_member and task.owner != principal.credential:
        return None
    return task


def _settled(task: Task) -> bool:
    """Whether a blocking SendMessage answers now: the task ended, or it asks for input."""
    return task.terminal or task.state is TaskState.INPUT_REQUIRED


def _not_found(task_id: str) -> RpcError:
    return RpcError(wire.TASK_NOT_FOUND, f"task {wire.echo(task_id)} was not found")


@attrs.frozen
class Reply:
    """An HTTP answer of the JSON-RPC route, independent of the web framework.

    Attributes:
        status (int): the HTTP status.
        body (bytes): the body (ignored when ``stream`` is set).
        content_type (str): ``application/json`` or ``text/event-stream``.
        headers (tuple[tuple[str, str], ...]): extra headers.
        stream (AsyncIterator[bytes] | None): SSE chunks, sent as they come.
    """

    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: tuple[tuple[str, str], ...] = ()
    stream: AsyncIterator[bytes] | None = None


MAX_BODY = 16 * 1024 * 1024  # bytes of one JSON-RPC request
MAX_LIST_BYTES = 8 * 1024 * 1024
"""Bytes of tasks one ``ListTasks`` page carries; a page always has at least one task."""
MAX_NESTING = 100  # deepest array/object nesting of a request (data parts included)


class Door:
    """The door of one session: an ASGI app.

    Plain ASGI: ``POST /`` (the JSON-RPC route), the card, JSON 404/405 answers and the
    lifespan protocol, every response ``application/json`` (streams: ``text/event-stream``).

    Args:
        backend (DoorBackend): the session.
        authenticator (Authenticator): the door's auth policy.
        keepalive (float): seconds of stream silence before a ``: keepalive`` comment.
        logger (logging.Logger | None): where request errors are logged.
    """

    def __init__(
        self,
        backend: DoorBackend,
        authenticator: Authenticator,
        *,
        keepalive: float = timing.SSE_KEEPALIVE,
        logger: logging.Logger | None = None,
    ) -> None:
        self.backend = backend
        self.auth = authenticator
        self.keepalive = keepalive
        self.log = logger or logging.getLogger("murmur.session.door")
        self.max_list_bytes = MAX_LIST_BYTES
        self.app = shield_send(self)

    # -- ASGI -----------------------------------------------------------------------------

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        """ASGI entry: the lifespan, ``POST /``, the card, and JSON 404/405 for the rest."""
        kind = scope["type"]
        if kind == "lifespan":
            await _lifespan(receive, send)
            return
        if kind != "http":
            await _refuse_websocket(scope, send)
            return
        path, method = scope["path"], scope["method"]
        allowed = ROUTES.get(path)
        if allowed is None:
            await _send_reply(send, _http_error(404))
        elif method not in allowed:
            await _send_reply(send, _http_error(405, allow=", ".join(allowed)))
        elif path == "/":
            await self._asgi_rpc(scope, receive, send)
        else:
            await self._card(send, head=method == "HEAD")

    async def _card(self, send: Any, *, head: bool) -> None:
        try:
            body = _dumps(self.backend.card(extended=False))
        except Exception:
            self.log.error("door card failed:\n%s", traceback.format_exc())
            await _send_reply(send, _http_error(500))
            return
        await _send_reply(send, Reply(200, body, headers=(("cache-control", "no-cache"),)), head=head)

    async def _asgi_rpc(self, scope: Any, receive: Any, send: Any) -> None:
        authorization: list[str] = []
        versions: list[str] = []
        headers: dict[str, str] = {}
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").lower()
            value = raw_value.decode("latin-1")
            if name == "authorization":
                authorization.append(value)
            elif name == "a2a-version":
                versions.extend(v.strip() for v in value.split(",") if v.strip())
            headers[name] = value
        too_big = False

        async def read_body() -> bytes:
            nonlocal too_big
            chunks: list[bytes] = []
            size = 0
            while True:
                msg = await receive()
                if msg["type"] != "http.request":
                    break
                chunk = msg.get("body", b"")
                size += len(chunk)
                if size > MAX_BODY:
                    too_big = True
                    return b""
                chunks.append(chunk)
                if not msg.get("more_body", False):
                    break
            return b"".join(chunks)

        try:
            reply = await self.handle(authorization=authorization, versions=versions, headers=headers, read_body=read_body)
        except Exception:
            self.log.error("door request failed:\n%s", traceback.format_exc())
            reply = Reply(500, _dumps(wire.rpc_error(None, RpcError(wire.INTERNAL_ERROR, "internal error"))))
        if too_big:
            reply = Reply(413, b'{"error":"payload_too_large","message":"the request body is larger than 16 MiB"}')
        if reply.stream is None:
            await _send_reply(send, reply)
            return
        await send({"type": "http.response.start", "status": reply.status, "headers": _headers(reply)})
        stream = reply.stream
        async with trio.open_nursery() as n:

            async def watch_disconnect() -> None:
                while (await receive())["type"] != "http.disconnect":
                    pass
                n.cancel_scope.cancel()

            n.start_soon(watch_disconnect)
            try:
                async for chunk in stream:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
            finally:
                n.cancel_scope.cancel()

    def _json(self, obj: object, status: int = 200) -> Reply:
        return Reply(status, _dumps(obj))

    def _refusal(self, refusal: AuthRefusal) -> Reply:
        headers = (("www-authenticate", refusal.www_authenticate),) if refusal.www_authenticate else ()
        return Reply(refusal.status, refusal.body(), headers=headers)

    def _stream(self, chunks: AsyncIterator[bytes]) -> Reply:
        return Reply(200, content_type="text/event-stream", headers=(("cache-control", "no-store"),), stream=chunks)

    # -- request handling -----------------------------------------------------------------

    async def handle(
        self,
        *,
        authorization: list[str],
        versions: list[str],
        headers: Mapping[str, str],
        read_body: Callable[[], Awaitable[bytes | str]],
    ) -> Reply:
        """Answer one ``POST /`` (spec/door.md "Request checks, in order").

        Args:
            authorization (list[str]): every ``Authorization`` header value, in order.
            versions (list[str]): every ``A2A-Version`` header value.
            headers (Mapping[str, str]): the request's headers, lower-case names.
            read_body (Callable[[], Awaitable[bytes | str]]): reads the whole body (the ASGI
                side bounds it at 16 MiB); awaited only after the authentication and origin
                checks passed, so a refused caller's body is never read.

        Returns:
            Reply: the HTTP status, headers and JSON body (or event stream) to send.
        """
        admitted = self.auth.authenticate(authorization)
        if isinstance(admitted, AuthRefusal):
            return self._refusal(admitted)
        principal = admitted
        cls = classify(headers)
        if forget_requested(headers):
            cls = attrs.evolve(cls, forget_session=True)
        if cls.origin == "peer" and not self.backend.accepts_peer_tasks:
            return self._refusal(peer_not_accepted())
        raw = await read_body()
        try:
            body = jsonbody.decode(raw, max_depth=MAX_NESTING)
        except jsonbody.BodyError as exc:
            _, _, why = str(exc).partition(": ")
            message = "the body is not valid JSON" + (f": {why}" if why else "")
            return self._json(wire.rpc_error(None, RpcError(wire.PARSE_ERROR, message)))
        try:
            req = wire.parse_request(body)
        except RpcError as err:
            return self._json(wire.rpc_error(wire.request_id_of(body), err))
        try:
            if not wire.version_ok(versions):
                raise RpcError(
                    wire.VERSION_NOT_SUPPORTED,
                    "this door speaks A2A 1.0: send exactly one A2A-Version: 1.0 header",
                    {"supported": "1.0"},
                )
            if cls.origin == "completion" and cls.completion_session != self.backend.session_id:
                raise RpcError(
                    wire.COMPLETION_MISADDRESSED,
                    f"completion is addressed to session {wire.echo(cls.completion_session or '(none)')}, "
                    "which is not the session running here",
                )
            if req.method not in KNOWN_METHODS:
                raise RpcError(wire.METHOD_NOT_FOUND, f"method {wire.echo(repr(req.method))} is not served by this door")
            if req.method in TASK_METHODS and not self.backend.serves_tasks:
                raise RpcError(wire.METHOD_NOT_FOUND, f"method {wire.echo(repr(req.method))} is not served: this capsule takes no tasks")
            refusal = self.auth.authorize(principal, req.method)
            if refusal is not None:
                return self._refusal(refusal)
            if not isinstance(req.params, dict):
                raise RpcError(wire.INVALID_PARAMS, "params must be an object")
            return await self._dispatch(req, principal, cls)
        except RpcError as err:
            return self._json(wire.rpc_error(req.id, err))

    async def _dispatch(self, req: wire.RpcRequest, principal: Principal, cls: Classification) -> Reply:
        m = req.method
        if m in TASK_METHODS:
            return await self._send(req, principal, cls, streaming=m == "SendStreamingMessage")
        if m == "GetTask":
            tid, hist = wire.parse_task_id(req.params)
            task = _visible(self.backend.get_task(tid), principal)
            if task is None:
                raise _not_found(tid)
            task = await self._served(task)
            return self._json(wire.rpc_result(req.id, wire.task_json(task, history_length=hist)))
        if m == "ListTasks":
            listed = await self._list(wire.parse_list_params(req.params), principal)
            return self._json(wire.rpc_result(req.id, listed))
        if m == "CancelTask":
            tid, _ = wire.parse_task_id(req.params)
            task = _visible(self.backend.get_task(tid), principal)
            if task is None:
                raise _not_found(tid)
            if task.terminal:
                raise RpcError(wire.TASK_NOT_CANCELABLE, f"task {tid} has already ended ({task.state.value})")
            self.backend.cancel(task, "CancelTask")
            if not task.terminal:  # cannot happen: cancel is immediate for any live task
                raise RpcError(wire.TASK_NOT_CANCELABLE, f"task {tid} could not be cancelled")
            return self._json(wire.rpc_result(req.id, wire.task_json(task)))
        if m == "SubscribeToTask":
            tid, _ = wire.parse_task_id(req.params)
            task = _visible(self.backend.get_task(tid), principal)
            if task is None:
                raise _not_found(tid)
            if task.terminal:
                raise RpcError(wire.UNSUPPORTED_OPERATION, f"task {tid} has already ended ({task.state.value})")
            return self._stream(self._events(task, req.id))
        if m == "GetExtendedAgentCard":
            if not self.auth.authenticated:
                raise RpcError(wire.UNSUPPORTED_OPERATION, "this public door has no extended card")
            return self._json(wire.rpc_result(req.id, self.backend.card(extended=True)))
        raise RpcError(wire.PUSH_NOT_SUPPORTED, "push notifications are not supported by this door")

    async def _send(self, req: wire.RpcRequest, principal: Principal, cls: Classification, *, streaming: bool) -> Reply:
        msg, config = wire.parse_send_params(req.params)
        if msg.task_id is not None:
            return await self._respond(req, self._answer(msg, principal), config, streaming=streaming)
        context_id = msg.context_id
        if cls.origin == "completion":
            verdict = self.backend.completion(CompletionRequest(cls.delegation_id, cls.trust, msg))
            if not verdict.accept:
                raise verdict.error or RpcError(wire.COMPLETION_NOT_AWAITED, "this session awaits no such completion")
            if not verdict.run_as_task:
                return self._json(wire.rpc_result(req.id, {"message": _ack(msg, "completion accepted")}))
            if verdict.text is not None:
                msg = attrs.evolve(msg, text=verdict.text)
            context_id = verdict.context_id or context_id
        if cls.forget_session:
            self.backend.forget_session(context_id)
        task = self.backend.submit(msg, cls, principal, context_id=context_id)
        if cls.origin == "completion" and task.state is not TaskState.REJECTED:
            return self._json(wire.rpc_result(req.id, {"message": _ack(msg, "completion accepted", task=task)}))
        return await self._respond(req, task, config, streaming=streaming)

    def _answer(self, msg: wire.InboundMessage, principal: Principal) -> Task:
        """The task a message naming ``taskId`` answers (spec/conversations.md "Input-required").

        Raises:
            RpcError: ``-32001`` unknown or invisible task; ``-32602`` another ``contextId``;
                ``-32004`` a task that has ended or is not waiting for input.
        """
        assert msg.task_id is not None
        known = _visible(self.backend.get_task(msg.task_id), principal)
        if known is None:
            raise _not_found(msg.task_id)
        if msg.context_id is not None and msg.context_id != known.context_id:
            raise RpcError(wire.INVALID_PARAMS, f"message.contextId does not match task {msg.task_id}")
        if known.terminal:
            raise RpcError(
                wire.UNSUPPORTED_OPERATION,
                f"task {msg.task_id} has ended ({known.state.value}); send a new message in context {known.context_id}",
            )
        if known.state is not TaskState.INPUT_REQUIRED or not self.backend.answer(known, msg.text):
            raise RpcError(
                wire.UNSUPPORTED_OPERATION,
                f"task {msg.task_id} is not waiting for input ({known.state.value})",
            )
        return known

    async def _respond(self, req: wire.RpcRequest, task: Task, config: Mapping[str, Any], *, streaming: bool) -> Reply:
        """The answer to a SendMessage: a stream, or the task once it ended or asks for input
        (at once with ``returnImmediately``)."""
        if streaming:
            return self._stream(self._events(task, req.id))
        if not config.get("returnImmediately", False):
            while not _settled(task):
                changed = task.changed()
                if _settled(task):
                    break
                await changed.wait()
        hist = config.get("historyLength")
        task = await self._served(task)
        return self._json(wire.rpc_result(req.id, {"task": wire.task_json(task, history_length=hist)}))

    async def _served(self, task: Task) -> Task:
        """``task`` as it is served: a spilled answer read back from the records directory.

        Raises:
            RpcError: ``-32603`` when the records file no longer holds the answer.
        """
        if task.spilled is None:
            return task
        try:
            answer = await trio.to_thread.run_sync(held.load_answer, task.spilled)
        except held.AnswerUnavailable as exc:
            self.log.error("the answer of %s could not be read back: %s", task.id, exc)
            raise RpcError(
                wire.INTERNAL_ERROR, f"the answer of task {task.id} could not be read back from the session's records"
            ) from None
        return held.restored(task, answer)

    async def _list(self, q: wire.ListQuery, principal: Principal) -> dict[str, Any]:
        tasks = [t for t in self.backend.all_tasks() if _visible(t, principal) is not None]
        if q.context_id is not None:
            tasks = [t for t in tasks if t.context_id == q.context_id]
        if q.state is not None:
            tasks = [t for t in tasks if t.state.wire == q.state]
        if q.after is not None:
            after = q.after
            tasks = [t for t in tasks if t.timestamp > after]
        tasks.sort(key=lambda t: t.timestamp, reverse=True)
        page: list[dict[str, Any]] = []
        size = 0
        for t in tasks[q.offset : q.offset + q.page_size]:
            shown = wire.task_json(await self._served(t), history_length=q.history_length, include_artifacts=q.include_artifacts)
            size += len(_dumps(shown))
            if page and size > self.max_list_bytes:
                break  # the page is full by bytes: the next page starts at this task
            page.append(shown)
        nxt = q.offset + len(page)
        return {
            "tasks": page,
            "nextPageToken": str(nxt) if nxt < len(tasks) else "",
            "pageSize": q.page_size,
            "totalSize": len(tasks),
        }

    def _events(self, task: Task, request_id: object) -> AsyncIterator[bytes]:
        """Snapshot now, then each later event, with keep-alives, until the task has ended."""
        first = _sse_frame(wire.rpc_result(request_id, {"task": wire.task_json(task)}))
        return self._follow(task, request_id, first, len(task.events))

    async def _follow(self, task: Task, request_id: object, first: bytes, seen: int) -> AsyncIterator[bytes]:
        yield first
        while True:
            if seen < len(task.events):
                try:
                    shown = await self._served(task)
                except RpcError as err:
                    yield _sse_frame(wire.rpc_error(request_id, err))
                    return
                while seen < len(shown.events):
                    yield _sse_frame(wire.rpc_result(request_id, wire.stream_event_json(shown, shown.events[seen])))
                    seen += 1
            if task.terminal:
                return
            changed = task.changed()
            if seen < len(task.events) or task.terminal:
                continue
            with trio.move_on_after(self.keepalive) as waited:
                await changed.wait()
            if waited.cancelled_caught:
                yield b": keepalive\n\n"


_HTTP_ERRORS = {
    400: ("bad_request", "the request could not be read"),
    404: ("not_found", "this door serves only POST / and GET /.well-known/agent-card.json"),
    405: ("method_not_allowed", "this path does not answer that method"),
    413: ("payload_too_large", "the request body is larger than 16 MiB"),
}


def http_error_body(status: int) -> tuple[str, str]:
    """The ``error`` code and ``message`` sentence of an HTTP-level error the door sends."""
    return _HTTP_ERRORS.get(status, ("http_error", f"the request was answered HTTP {status}"))


ROUTES: dict[str, tuple[str, ...]] = {"/": ("POST",), "/.well-known/agent-card.json": ("GET", "HEAD")}
"""The door's paths and the methods each answers (anything else: 404, or 405 with ``Allow``)."""


def _http_error(status: int, *, allow: str | None = None) -> Reply:
    """A JSON ``{"error", "message"}`` answer of an HTTP-level error (405 carries ``Allow``)."""
    error, message = http_error_body(status)
    headers = (("allow", allow),) if allow else ()
    return Reply(status, _dumps({"error": error, "message": message}), headers=headers)


def _headers(reply: Reply) -> list[tuple[bytes, bytes]]:
    out = [(b"content-type", reply.content_type.encode())]
    out += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers]
    return out


async def _send_reply(send: Any, reply: Reply, *, head: bool = False) -> None:
    """Send a whole (non-stream) reply; ``head`` sends its headers and no body."""
    headers = [*_headers(reply), (b"content-length", str(len(reply.body)).encode())]
    await send({"type": "http.response.start", "status": reply.status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else reply.body})


async def _lifespan(receive: Any, send: Any) -> None:
    """The ASGI lifespan protocol: nothing to start or stop, so acknowledge both."""
    while True:
        msg = await receive()
        if msg["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif msg["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _refuse_websocket(scope: Any, send: Any) -> None:
    """The door serves no WebSocket: a JSON 404 where the server allows one, else a close."""
    if scope["type"] != "websocket":
        return
    if "websocket.http.response" in scope.get("extensions", {}):
        reply = _http_error(404)
        await send({"type": "websocket.http.response.start", "status": 404, "headers": _headers(reply)})
        await send({"type": "websocket.http.response.body", "body": reply.body})
    else:
        await send({"type": "websocket.close", "code": 1008})


def _ack(msg: wire.InboundMessage, text: str, *, task: Task | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "messageId": "msg_ack_" + str(msg.message.get("messageId", "")),
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
    }
    if task is not None:
        out["taskId"] = task.id
        out["contextId"] = task.context_id
    return out


def hypercorn_config(*, bind: str = "127.0.0.1:0", graceful: float = DOOR_GRACE, logger: logging.Logger | None = None) -> Any:
    """A hypercorn config for a door: loopback, no access log, errors to ``logger``.

    Args:
        bind (str): ``host:port`` (port 0: the OS chooses).
        graceful (float): seconds hypercorn waits for open requests when told to stop.
        logger (logging.Logger | None): where hypercorn's errors go (default ``murmur.door``).

    Returns:
        Any: a ``hypercorn.config.Config`` (typed ``Any`` so that importing this module does
        not import hypercorn).
    """
    from hypercorn.config import Config

    cfg = Config()
    cfg.bind = [bind]
    cfg.graceful_timeout = graceful
    cfg.accesslog = None
    cfg.errorlog = logger or logging.getLogger("murmur.door")
    cfg.keep_alive_timeout = 30
    cfg.keep_alive_max_requests = 1 << 30
    return cfg


async def serve_door(
    door: Door,
    stop: trio.Event,
    *,
    bind: str = "127.0.0.1:0",
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve ``door`` until ``stop`` is set; ``task_status.started`` gets ``http://host:port``.

    Raises:
        OSError: the address cannot be bound.
    """
    from hypercorn.trio import serve

    from murmur.httpserve import install

    install()  # bounded sends, prompt close on EOF
    cfg = hypercorn_config(bind=bind, logger=door.log)
    up = False
    try:
        async with trio.open_nursery() as n:
            binds = await n.start(partial(serve, door.app, cfg, shutdown_trigger=stop.wait, mode="asgi"))
            up = True
            task_status.started(str(binds[0]))
    except BaseExceptionGroup as group:
        cause = None if up else _lone_os_error(group)
        if cause is None:
            raise
        raise cause from None  # the address could not be bound: the caller's E-RUN-001


def _lone_os_error(group: BaseExceptionGroup[BaseException]) -> OSError | None:
    """The one ``OSError`` a (nested) exception group holds, or None when it holds anything else."""
    leaves: list[BaseException] = []
    pending: list[BaseException] = [group]
    while pending:
        exc = pending.pop()
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        else:
            leaves.append(exc)
    return leaves[0] if len(leaves) == 1 and isinstance(leaves[0], OSError) else None
