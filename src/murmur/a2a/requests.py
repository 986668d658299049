"""The requests the runtime sends to a door: JSON-RPC 2.0 bodies and their headers (pure).

Specification: ``spec/a2a-client.md`` "Requests" (the wire shapes are ``spec/door.md``'s, the
A2A 1.0 JSON-RPC binding). Every body is one JSON-RPC object; ``params`` use the 1.0 names
(camelCase keys, ``ROLE_USER``, defaults left out).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

VERSION = "1.0"
"""The ``A2A-Version`` header every request carries."""

CARD_PATH = "/.well-known/agent-card.json"
"""Where a door serves its public agent card."""

RpcId = str | int


def rpc(method: str, params: Mapping[str, object], rpc_id: RpcId = 1) -> dict[str, Any]:
    """One JSON-RPC 2.0 request object: ``{jsonrpc, id, method, params}``."""
    return {"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": dict(params)}


def send_message(
    text: str,
    *,
    message_id: str,
    context_id: str | None = None,
    return_immediately: bool = True,
    rpc_id: RpcId = 1,
) -> dict[str, Any]:
    """A ``SendMessage`` of one text part.

    Args:
        text (str): the message's only part.
        message_id (str): its ``messageId``.
        context_id (str | None): its ``contextId`` (a completion names the delegating context).
        return_immediately (bool): ``configuration.returnImmediately`` (the door answers as soon
            as the task exists); False sends ``"configuration": {}`` (blocking).
        rpc_id (str | int): the JSON-RPC ``id``.
    """
    message: dict[str, Any] = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}
    if context_id is not None:
        message["contextId"] = context_id
    configuration = {"returnImmediately": True} if return_immediately else {}
    return rpc("SendMessage", {"message": message, "configuration": configuration}, rpc_id)


def get_task(task_id: str, *, history_length: int | None = None, rpc_id: RpcId = 1) -> dict[str, Any]:
    """A ``GetTask`` of ``task_id`` (``historyLength`` only when given)."""
    params: dict[str, object] = {"id": task_id}
    if history_length is not None:
        params["historyLength"] = history_length
    return rpc("GetTask", params, rpc_id)


def cancel_task(task_id: str, *, rpc_id: RpcId = 1) -> dict[str, Any]:
    """A ``CancelTask`` of ``task_id``."""
    return rpc("CancelTask", {"id": task_id}, rpc_id)


def cancel_by_message(message_id: str, *, rpc_id: RpcId = 1) -> dict[str, Any]:
    """A ``CancelTask`` of the task taken from message ``message_id`` (spec/door.md
    "Cancelling by the offer's messageId": no ``id``, ``metadata.messageId``)."""
    return rpc("CancelTask", {"metadata": {"messageId": message_id}}, rpc_id)


def get_extended_card(*, rpc_id: RpcId = 1) -> dict[str, Any]:
    """A ``GetExtendedAgentCard`` (an authenticated door's full card)."""
    return rpc("GetExtendedAgentCard", {}, rpc_id)


def headers(*, bearer: str | None = None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers of one request: JSON, ``A2A-Version: 1.0``, the bearer token when given,
    then ``extra`` (murmur's own ``x-murmur-*`` headers, ``traceparent``)."""
    out = {"content-type": "application/json", "A2A-Version": VERSION}
    if bearer is not None:
        out["Authorization"] = f"Bearer {bearer}"
    out.update(extra or {})
    return out


def encode(body: Mapping[str, object]) -> bytes:
    """``body`` as compact UTF-8 JSON (what goes on the wire)."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def rpc_url(door_url: str) -> str:
    """The JSON-RPC endpoint of a door: its URL with exactly one trailing ``/``."""
    return door_url.rstrip("/") + "/"
