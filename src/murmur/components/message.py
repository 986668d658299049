"""``murmur:message/send@0.1.0`` for script capsules: an A2A message to a peer's door.

``send(peer-url, message{message-id, context-id?, text}) -> result<task-result{task-id,
context-id, state}, string>``. The peer URL must be covered by the component's effective
``network.allow`` (the same check as its outgoing HTTP, :func:`murmur.components.outgoing_http.decide`);
a virtual ``<callee>.formation.invalid`` URL is resolved as HTTP requests are (the door URL,
checked, then through the call's relay, which attaches the edge's token, origin ``peer`` and
the task's trust); any other name under ``formation.invalid`` is refused with the same
sentence. The decision is reported like an HTTP request's (a ``component_http`` record naming
the URL as the component wrote it). The message is a blocking A2A ``SendMessage`` (the
runtime's own client requests); ``state`` is the task's ``status.state``.
Specification: ``spec/components.md``.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from wasmtime import component as wc

from murmur.components.outgoing_http import (
    HttpDecision,
    HttpPolicy,
    _virtual,
    _virtual_name,
    decide,
)


def send(policy: HttpPolicy | None, peer_url: str, message: Any, on_http: Any) -> Any:
    """The host side of ``send`` (on the component's worker thread); a record or an error text."""
    import httpx

    from murmur.a2a import replies, requests

    parts = urlsplit(peer_url)
    verdict = decide(policy, parts.scheme, parts.netloc)
    target = peer_url
    name = _virtual_name(parts.netloc)
    peers = policy.peers if policy is not None else None
    if name is not None and peers is not None and name in peers.relays:
        verdict, relay = _virtual(policy or HttpPolicy(), peers, name, verdict.url)
        target = f"http://{relay}" if relay is not None else peer_url
    verdict = HttpDecision(peer_url, verdict.allowed, verdict.reason)
    if on_http is not None:
        on_http(verdict)
    if not verdict.allowed:
        return f"message/send to {peer_url} refused: {verdict.reason}"
    body = requests.send_message(str(message.text), message_id=str(getattr(message, "message-id")),
                                 context_id=getattr(message, "context-id"), return_immediately=False)
    try:
        with httpx.Client(trust_env=False, timeout=60, follow_redirects=False) as client:
            reply = client.post(requests.rpc_url(target), content=requests.encode(body), headers=requests.headers())
    except httpx.HTTPError as exc:
        return f"failed to reach {peer_url}: {type(exc).__name__}"
    obj = replies.json_object(reply.content)
    if obj is None:
        return f"failed to parse the response from {peer_url} (HTTP {reply.status_code})"
    fault = replies.fault(obj)
    if fault is not None:
        return f"A2A error from {peer_url}: {fault.message or fault.code}"
    task = replies.sent_task(obj)
    if task is None or task.id is None:
        return f"no task in the A2A response from {peer_url}"
    rec = wc.Record()
    setattr(rec, "task-id", task.id)
    setattr(rec, "context-id", task.context_id or "")
    setattr(rec, "state", task.state or "")  # noqa: B010 (a Record takes any field)
    return rec
