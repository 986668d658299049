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

import logging
import traceback
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

import attrs
import trio

from murmur import jsonbody, timing
from murmur.session import wire
from murmur.session.auth import Authenticator, AuthRefusal, Principal, peer_not_accepted
from murmur.session.completion_hook import CompletionRequest, CompletionVerdict
from murmur.session.door_asgi import DOOR_GRACE as DOOR_GRACE  # re-exported for callers
from murmur.session.door_asgi import (
    ROUTES,
    Reply,
    dumps,
    http_error,
    lifespan,
    refuse_websocket,
    reply_headers,
    send_reply,
    shield_send,
    sse_frame,
)
from murmur.session.door_asgi import http_error_body as http_error_body
from murmur.session.door_asgi import hypercorn_config as hypercorn_config
from murmur.session.door_asgi import serve_door as serve_door
from murmur.session.origin import Classification, classify, forget_requested
from murmur.session.states import TaskState
from murmur.session.tasks import held
from murmur.session.tasks.book import Task
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

    def task_for_message(self, message_id: str, owner: str | None) -> str | None:
        """The task accepted from message ``message_id`` of ``owner``, or None."""
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
            await lifespan(receive, send)
            return
        if kind != "http":
            await refuse_websocket(scope, send)
            return
        path, method = scope["path"], scope["method"]
        allowed = ROUTES.get(path)
        if allowed is None:
            await send_reply(send, http_error(404))
        elif method not in allowed:
            await send_reply(send, http_error(405, allow=", ".join(allowed)))
        elif path == "/":
            await self._asgi_rpc(scope, receive, send)
        else:
            await self._card(send, head=method == "HEAD")

    async def _card(self, send: Any, *, head: bool) -> None:
        try:
            body = dumps(self.backend.card(extended=False))
        except Exception:
            self.log.error("door card failed:\n%s", traceback.format_exc())
            await send_reply(send, http_error(500))
            return
        await send_reply(send, Reply(200, body, headers=(("cache-control", "no-cache"),)), head=head)

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
            reply = Reply(500, dumps(wire.rpc_error(None, RpcError(wire.INTERNAL_ERROR, "internal error"))))
        if too_big:
            reply = Reply(413, b'{"error":"payload_too_large","message":"the request body is larger than 16 MiB"}')
        if reply.stream is None:
            await send_reply(send, reply)
            return
        await send({"type": "http.response.start", "status": reply.status, "headers": reply_headers(reply)})
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
        return Reply(status, dumps(obj))

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
            asked, mid = wire.parse_cancel(req.params)
            if asked is None:  # by the offer's messageId (spec/door.md)
                owner = principal.credential if principal.is_formation_member else None
                asked = self.backend.task_for_message(str(mid), owner)
                if asked is None:
                    raise _not_found(f"offered in message {mid}")
            tid = asked
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
        return task.restored(answer)

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
            size += len(dumps(shown))
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
        first = sse_frame(wire.rpc_result(request_id, {"task": wire.task_json(task)}))
        return self._follow(task, request_id, first, len(task.events))

    async def _follow(self, task: Task, request_id: object, first: bytes, seen: int) -> AsyncIterator[bytes]:
        yield first
        while True:
            if seen < len(task.events):
                try:
                    shown = await self._served(task)
                except RpcError as err:
                    yield sse_frame(wire.rpc_error(request_id, err))
                    return
                # The list as it is now: a spill while this generator is suspended in a yield
                # puts placeholder events in a new list on the task, never into this one.
                events = shown.events
                while seen < len(events):
                    yield sse_frame(wire.rpc_result(request_id, wire.stream_event_json(shown, events[seen])))
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
