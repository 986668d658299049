"""A2A 1.0 JSON-RPC wire shapes (pure; spec/door.md).

Builds the objects the door sends (Task, StreamResponse, JSON-RPC results and errors, the
agent card) and parses what it receives (the ``message`` of SendMessage). No I/O here: the
door (:mod:`murmur.session.door`) parses HTTP, calls these, and serialises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from murmur.jsonbody import ECHO_LIMIT as ECHO_LIMIT  # re-exported: the door cuts echoed input
from murmur.jsonbody import echo as echo
from murmur.session.tasks.book import StreamEvent, Task

# --- JSON-RPC / A2A error codes (spec/door.md "Request checks, in order", "Methods") -------------
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
TASK_NOT_FOUND = -32001
TASK_NOT_CANCELABLE = -32002
PUSH_NOT_SUPPORTED = -32003
UNSUPPORTED_OPERATION = -32004
CONTENT_TYPE_NOT_SUPPORTED = -32005
VERSION_NOT_SUPPORTED = -32009
COMPLETION_MISADDRESSED = -31001
COMPLETION_NOT_AWAITED = -31002

_REASONS = {
    PARSE_ERROR: "PARSE_ERROR",
    INVALID_REQUEST: "INVALID_REQUEST",
    METHOD_NOT_FOUND: "METHOD_NOT_FOUND",
    INVALID_PARAMS: "INVALID_PARAMS",
    INTERNAL_ERROR: "INTERNAL_ERROR",
    TASK_NOT_FOUND: "TASK_NOT_FOUND",
    TASK_NOT_CANCELABLE: "TASK_NOT_CANCELABLE",
    PUSH_NOT_SUPPORTED: "PUSH_NOTIFICATION_NOT_SUPPORTED",
    UNSUPPORTED_OPERATION: "UNSUPPORTED_OPERATION",
    CONTENT_TYPE_NOT_SUPPORTED: "CONTENT_TYPE_NOT_SUPPORTED",
    VERSION_NOT_SUPPORTED: "VERSION_NOT_SUPPORTED",
    COMPLETION_MISADDRESSED: "COMPLETION_MISADDRESSED",
    COMPLETION_NOT_AWAITED: "COMPLETION_NOT_AWAITED",
}
_MURMUR_DOMAIN = frozenset({COMPLETION_MISADDRESSED, COMPLETION_NOT_AWAITED})
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"

EXTENSION_BASE = "https://docs.murmur.nexus/reference/agent-card/"
DOOR_EXTENSION = EXTENSION_BASE + "#murmur-door-v1"
CAPSULE_EXTENSION = EXTENSION_BASE + "#murmur-capsule-v1"
STREAM_EXTENSION = "https://docs.murmur.nexus/reference/streaming-protocol/#murmur-stream-v1"

MAX_REFERENCE_TASK_IDS = 16
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100


class RpcError(Exception):
    """A JSON-RPC error the door answers with (HTTP 200).

    Args:
        code (int): the JSON-RPC code.
        message (str): one sentence.
        metadata (Mapping[str, str] | None): ``ErrorInfo.metadata`` strings.
    """

    def __init__(self, code: int, message: str, metadata: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.metadata = dict(metadata or {})

    def to_json(self) -> dict[str, Any]:
        """The ``error`` member of the response."""
        domain = "murmur.nexus" if self.code in _MURMUR_DOMAIN else "a2a-protocol.org"
        info = {
            "@type": ERROR_INFO_TYPE,
            "reason": _REASONS.get(self.code, "ERROR"),
            "domain": domain,
            "metadata": dict(self.metadata),
        }
        return {"code": self.code, "message": self.message, "data": [info]}




def rpc_result(request_id: object, result: object) -> dict[str, Any]:
    """A JSON-RPC success response echoing ``request_id``."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def rpc_error(request_id: object, err: RpcError) -> dict[str, Any]:
    """A JSON-RPC error response echoing ``request_id`` (None when unknown)."""
    return {"jsonrpc": "2.0", "id": request_id, "error": err.to_json()}


# --- requests ----------------------------------------------------------------------------------

_VERSION = re.compile(r"^1\.0(?:\.\d+)?$")


def version_ok(values: Sequence[str]) -> bool:
    """Whether the ``A2A-Version`` header values select protocol 1.0.

    Exactly one value, ``1.0`` or ``1.0.<n>``; absent, duplicated or any other value fails
    (the caller answers ``-32009``).
    """
    return len(values) == 1 and bool(_VERSION.match(values[0].strip()))


@attrs.frozen
class RpcRequest:
    """A structurally valid JSON-RPC 2.0 request."""

    id: str | int
    method: str
    params: object


def parse_request(body: object) -> RpcRequest:
    """Check the JSON-RPC envelope.

    Raises:
        RpcError: ``-32600`` when ``body`` is not an object with ``jsonrpc: "2.0"``, a
            string ``method`` and a string or integer ``id`` (notifications are refused).
    """
    if not isinstance(body, dict):
        raise RpcError(INVALID_REQUEST, "the request must be one JSON-RPC 2.0 object")
    rid = body.get("id")
    if body.get("jsonrpc") != "2.0":
        raise RpcError(INVALID_REQUEST, 'the request must carry "jsonrpc": "2.0"')
    if not isinstance(body.get("method"), str) or not body["method"]:
        raise RpcError(INVALID_REQUEST, "the request must name a method")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)):
        raise RpcError(INVALID_REQUEST, "the request must carry a string or integer id")
    return RpcRequest(rid, body["method"], body.get("params", {}))


def request_id_of(body: object) -> object:
    """The ``id`` to echo in an error for a body that failed validation (None if unusable)."""
    if isinstance(body, dict):
        rid = body.get("id")
        if isinstance(rid, (str, int)) and not isinstance(rid, bool):
            return rid
    return None


@attrs.frozen
class InboundMessage:
    """The ``message`` of a SendMessage, checked.

    Attributes:
        message (dict[str, Any]): the message as received.
        text (str): text parts joined with newlines; data parts as compact JSON.
        task_id (str | None), context_id (str | None): as the caller gave them.
        parts_bytes (int): total UTF-8 size of the parts' content.
    """

    message: dict[str, Any]
    text: str
    task_id: str | None
    context_id: str | None
    parts_bytes: int


def _params_obj(params: object) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise RpcError(INVALID_PARAMS, "params must be an object")
    return params


def parse_send_params(params: object) -> tuple[InboundMessage, dict[str, Any]]:
    """Check SendMessage / SendStreamingMessage params.

    Returns:
        tuple[InboundMessage, dict[str, Any]]: the message and the ``configuration`` object.

    Raises:
        RpcError: ``-32602`` for a missing/malformed message (empty ``messageId``, a role
            other than ``ROLE_USER``, no parts, a part without exactly one content key, more
            than 16 ``referenceTaskIds``); ``-32005`` for a ``raw`` or ``url`` part.
    """
    import json

    p = _params_obj(params)
    msg = p.get("message")
    if not isinstance(msg, dict):
        raise RpcError(INVALID_PARAMS, "params.message must be an object")
    mid = msg.get("messageId")
    if not isinstance(mid, str) or not mid:
        raise RpcError(INVALID_PARAMS, "message.messageId must be a non-empty string")
    if msg.get("role") != "ROLE_USER":
        raise RpcError(INVALID_PARAMS, "message.role must be ROLE_USER")
    parts = msg.get("parts")
    if not isinstance(parts, list) or not parts:
        raise RpcError(INVALID_PARAMS, "message.parts must be a non-empty list")
    texts: list[str] = []
    size = 0
    for i, part in enumerate(parts):
        if not isinstance(part, dict):
            raise RpcError(INVALID_PARAMS, f"message.parts[{i}] must be an object")
        keys = [k for k in ("text", "raw", "url", "data") if k in part]
        if len(keys) != 1:
            raise RpcError(
                INVALID_PARAMS, f"message.parts[{i}] must hold exactly one of text, raw, url, data"
            )
        if keys[0] in ("raw", "url"):
            raise RpcError(
                CONTENT_TYPE_NOT_SUPPORTED,
                f"message.parts[{i}] is a {keys[0]} part; this door takes text and data parts",
            )
        if keys[0] == "text":
            if not isinstance(part["text"], str):
                raise RpcError(INVALID_PARAMS, f"message.parts[{i}].text must be a string")
            texts.append(part["text"])
        else:
            texts.append(json.dumps(part["data"], separators=(",", ":"), ensure_ascii=False))
        size += len(texts[-1].encode("utf-8"))
    refs = msg.get("referenceTaskIds", [])
    if not isinstance(refs, list) or len(refs) > MAX_REFERENCE_TASK_IDS:
        raise RpcError(INVALID_PARAMS, "message.referenceTaskIds must be a list of at most 16 ids")
    task_id = msg.get("taskId")
    context_id = msg.get("contextId")
    for name, val in (("taskId", task_id), ("contextId", context_id)):
        if val is not None and (not isinstance(val, str) or not val):
            raise RpcError(INVALID_PARAMS, f"message.{name} must be a non-empty string")
    config = p.get("configuration") or {}
    if not isinstance(config, dict):
        raise RpcError(INVALID_PARAMS, "params.configuration must be an object")
    hist = config.get("historyLength")
    if hist is not None and (isinstance(hist, bool) or not isinstance(hist, int) or hist < 0):
        raise RpcError(INVALID_PARAMS, "configuration.historyLength must be a non-negative integer")
    return InboundMessage(msg, "\n".join(texts), task_id, context_id, size), config


def parse_task_id(params: object) -> tuple[str, int | None]:
    """``{id, historyLength?}`` of GetTask / CancelTask / SubscribeToTask.

    Raises:
        RpcError: ``-32602`` when ``id`` is missing or ``historyLength`` is malformed.
    """
    p = _params_obj(params)
    tid = p.get("id")
    if not isinstance(tid, str) or not tid:
        raise RpcError(INVALID_PARAMS, "params.id must name a task")
    hist = p.get("historyLength")
    if hist is not None and (isinstance(hist, bool) or not isinstance(hist, int) or hist < 0):
        raise RpcError(INVALID_PARAMS, "params.historyLength must be a non-negative integer")
    return tid, hist


MESSAGE_ID_KEY = "messageId"
"""The ``CancelTask`` ``params.metadata`` key naming the offer's ``messageId`` instead of a
task id (spec/door.md "Cancelling by the offer's messageId")."""


def parse_cancel(params: object) -> tuple[str | None, str | None]:
    """``CancelTask`` params: ``(task id, None)``, or ``(None, messageId)`` when ``params.id``
    is absent and ``params.metadata.messageId`` names the message the task was offered in.

    Raises:
        RpcError: ``-32602`` when neither names a task.
    """
    p = _params_obj(params)
    meta = p.get("metadata")
    mid = meta.get(MESSAGE_ID_KEY) if isinstance(meta, dict) else None
    if p.get("id") in (None, "") and isinstance(mid, str) and mid:
        return None, mid
    return parse_task_id(params)[0], None


@attrs.frozen
class ListQuery:
    """ListTasks parameters, checked."""

    context_id: str | None = None
    state: str | None = None
    page_size: int = DEFAULT_PAGE_SIZE
    offset: int = 0
    history_length: int | None = None
    after: str | None = None
    include_artifacts: bool = False


def parse_list_params(params: object) -> ListQuery:
    """Check ListTasks params (``pageToken`` is an opaque offset this door minted).

    Raises:
        RpcError: ``-32602`` for a bad page size (not 1..100), page token, status or type.
    """
    p = _params_obj(params)
    size = p.get("pageSize", DEFAULT_PAGE_SIZE) or DEFAULT_PAGE_SIZE
    if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= MAX_PAGE_SIZE:
        raise RpcError(INVALID_PARAMS, "params.pageSize must be an integer from 1 to 100")
    token = p.get("pageToken") or ""
    if not isinstance(token, str) or (token and not token.isdigit()):
        raise RpcError(INVALID_PARAMS, "params.pageToken is not a token this door issued")
    status = p.get("status")
    if status is not None and (not isinstance(status, str) or not status.startswith("TASK_STATE_")):
        raise RpcError(INVALID_PARAMS, "params.status must be a TASK_STATE_… name")
    if status == "TASK_STATE_UNSPECIFIED":
        status = None
    ctx = p.get("contextId") or None
    if ctx is not None and not isinstance(ctx, str):
        raise RpcError(INVALID_PARAMS, "params.contextId must be a string")
    hist = p.get("historyLength")
    if hist is not None and (isinstance(hist, bool) or not isinstance(hist, int) or hist < 0):
        raise RpcError(INVALID_PARAMS, "params.historyLength must be a non-negative integer")
    after = p.get("statusTimestampAfter") or None
    if after is not None and not isinstance(after, str):
        raise RpcError(INVALID_PARAMS, "params.statusTimestampAfter must be an RFC 3339 time")
    return ListQuery(
        context_id=ctx,
        state=status,
        page_size=size,
        offset=int(token or 0),
        history_length=hist,
        after=after,
        include_artifacts=bool(p.get("includeArtifacts", False)),
    )


# --- responses ---------------------------------------------------------------------------------


def agent_message(text: str, *, task: Task) -> dict[str, Any]:
    """An agent message with one text part, addressed to ``task``."""
    return {
        "messageId": f"msg_{task.id.removeprefix('tsk_')}",
        "contextId": task.context_id,
        "taskId": task.id,
        "role": "ROLE_AGENT",
        "parts": [{"text": text}],
    }


def _status(task: Task, state_wire: str, message: str | None, timestamp: str) -> dict[str, Any]:
    status: dict[str, Any] = {"state": state_wire, "timestamp": timestamp}
    if message is not None:
        status["message"] = agent_message(message, task=task)
    return status


def user_message(task: Task) -> dict[str, Any]:
    """The task's user message as it appears in ``history`` (ids filled in)."""
    msg = dict(task.message)
    msg["taskId"] = task.id
    msg["contextId"] = task.context_id
    return msg


def task_json(
    task: Task, *, history_length: int | None = None, include_artifacts: bool = True
) -> dict[str, Any]:
    """The A2A Task object for ``task``.

    Args:
        task (Task): the task.
        history_length (int | None): None = whole history; 0 = none; n = the last n messages.
        include_artifacts (bool): include ``artifacts`` (ListTasks leaves them out by default).
    """
    out: dict[str, Any] = {
        "id": task.id,
        "contextId": task.context_id,
        "status": _status(task, task.state.wire, task.status_message, task.timestamp),
    }
    if include_artifacts and task.artifacts:
        out["artifacts"] = list(task.artifacts)
    history = [user_message(task)]
    if task.terminal and task.status_message is not None:
        history.append(agent_message(task.status_message, task=task))
    if history_length is not None:
        history = history[len(history) - history_length :] if history_length else []
    if history:
        out["history"] = history
    meta = dict(task.metadata)
    meta.setdefault("murmur", {})
    meta["murmur"] = {**meta["murmur"], "origin": task.origin, "lane": task.lane}
    out["metadata"] = meta
    return out


def stream_event_json(task: Task, ev: StreamEvent) -> dict[str, Any]:
    """The StreamResponse for one event of ``task``'s log."""
    if ev.kind == "artifact":
        update: dict[str, Any] = {"taskId": task.id, "contextId": task.context_id, "artifact": ev.artifact}
        if ev.append:
            update["append"] = True
        update["lastChunk"] = ev.last_chunk
        return {"artifactUpdate": update}
    return {
        "statusUpdate": {
            "taskId": task.id,
            "contextId": task.context_id,
            "status": _status(task, ev.state.wire, ev.message, ev.timestamp),
        }
    }


def door_methods(*, serves_tasks: bool, authenticated: bool) -> list[str]:
    """The methods this door serves, in the card's order."""
    methods = ["GetTask", "ListTasks", "CancelTask", "SubscribeToTask"]
    if serves_tasks:
        methods = ["SendMessage", "SendStreamingMessage", *methods]
    if authenticated:
        methods.append("GetExtendedAgentCard")
    return methods


def agent_card(
    *,
    name: str,
    version: str,
    url: str,
    session_id: str,
    serves_tasks: bool,
    authenticated: bool,
    peer_tasks: bool,
    capsule_params: Mapping[str, Any] | None = None,
    description: str | None = None,
    extended: bool = False,
) -> dict[str, Any]:
    """The agent card (spec/door.md "The card").

    Args:
        name (str), version (str): the capsule.
        url (str): the door's absolute JSON-RPC URL (``http://127.0.0.1:<port>/``).
        session_id (str): ``ses_…``, carried in the capsule extension's ``params.sessionId``.
        serves_tasks (bool): false under ``task_acceptance: none`` (no task skill).
        authenticated (bool): the door requires a bearer token.
        peer_tasks (bool): ``exports.peer_tasks.accept``.
        capsule_params (Mapping[str, Any] | None): extra capsule-extension params (grants),
            shown on a public card and on the extended card of an authenticated door.
        description (str | None): overrides ``Murmur capsule <name> <version>``.
        extended (bool): build the extended card (authenticated doors' GetExtendedAgentCard).
    """
    methods = door_methods(serves_tasks=serves_tasks, authenticated=authenticated)
    capsule: dict[str, Any] = {"sessionId": session_id}
    if not authenticated or extended:
        capsule.update(capsule_params or {})
    card: dict[str, Any] = {
        "name": name,
        "description": description or f"Murmur capsule {name} {version}",
        "version": version,
        "supportedInterfaces": [{"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {
            "streaming": True,
            "pushNotifications": False,
            "extendedAgentCard": authenticated,
            "extensions": [
                {"uri": DOOR_EXTENSION, "required": False, "params": {"methods": methods, "peerTasks": peer_tasks}},
                {"uri": CAPSULE_EXTENSION, "required": False, "params": capsule},
                {"uri": STREAM_EXTENSION, "required": False, "params": {"frames": ["status", "artifact"]}},
            ],
        },
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [],
    }
    if serves_tasks:
        skill: dict[str, Any] = {
            "id": "task",
            "name": "task",
            "description": f"Run a task with {name}",
            "tags": ["task"],
        }
        if authenticated:
            skill["securityRequirements"] = [{"schemes": {"bearer": {"list": [m]}}} for m in ("SendMessage", "SendStreamingMessage")]
        card["skills"] = [skill]
    if authenticated:
        card["securitySchemes"] = {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "opaque"}}}
        card["securityRequirements"] = [{"schemes": {"bearer": {"list": []}}}]
    return card
