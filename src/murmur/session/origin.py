"""Task origin, trust class and lane from request headers (pure; spec/session.md "Tasks").

Only two origins are accepted from the wire: ``peer`` (``x-murmur-task-origin: peer``) and
``completion``. Every other inbound request, including one whose origin header is absent or
unknown, is an ``event``: untrusted, background lane. A ``peer`` or ``completion`` request
carries its trust class in ``x-murmur-task-trust``; a missing or unknown value is untrusted.
Tasks started locally (``--task``, the idle run) are ``user``: trusted, user lane.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

ORIGIN_HEADER = "x-murmur-task-origin"
TRUST_HEADER = "x-murmur-task-trust"
DELEGATION_HEADER = "x-murmur-delegation-id"
COMPLETION_SESSION_HEADER = "x-murmur-completion-session"

TRUST_CLASSES = ("trusted", "untrusted")


@attrs.frozen
class Classification:
    """Where a task came from and how it is treated.

    Attributes:
        origin (str): ``user`` | ``peer`` | ``event`` | ``completion`` | ``schedule`` | ``system``.
        trust (str): ``trusted`` | ``untrusted`` (recorded, not enforced).
        lane (str): ``user`` | ``peer`` | ``bg``.
        delegation_id (str | None): ``x-murmur-delegation-id`` (completion requests only).
        completion_session (str | None): ``x-murmur-completion-session`` (completion only).
        forget_session (bool): ``x-murmur-forget-session: true``: start the message's context
            in a new agent CLI session (process transport; spec/conversations.md).
        traceparent (str | None): the W3C ``traceparent`` header as sent (any origin).
    """

    origin: str
    trust: str
    lane: str
    delegation_id: str | None = None
    completion_session: str | None = None
    forget_session: bool = False
    traceparent: str | None = None


LOCAL_USER = Classification(origin="user", trust="trusted", lane="user")


def _trust(value: str | None) -> str:
    v = (value or "").strip().lower()
    return v if v in TRUST_CLASSES else "untrusted"


FORGET_HEADER = "x-murmur-forget-session"


def forget_requested(headers: Mapping[str, str]) -> bool:
    """Whether ``x-murmur-forget-session`` is ``true`` (case-insensitive)."""
    return (headers.get(FORGET_HEADER) or "").strip().lower() == "true"


def classify(headers: Mapping[str, str]) -> Classification:
    """:func:`classify_origin`, with the request's ``traceparent`` header kept."""
    cls = classify_origin(headers)
    tp = headers.get("traceparent")
    return cls if tp is None else attrs.evolve(cls, traceparent=tp[:128])


def classify_origin(headers: Mapping[str, str]) -> Classification:
    """Classify an inbound door request.

    Args:
        headers (Mapping[str, str]): request headers with lower-case names (one value each).

    Returns:
        Classification: ``peer`` → peer lane with the sender's trust; ``completion`` → bg lane,
        inherited trust, the two delegation headers read; anything else → ``event``,
        untrusted, bg lane (the delegation headers are ignored).
    """
    origin = (headers.get(ORIGIN_HEADER) or "").strip().lower()
    if origin == "peer":
        return Classification("peer", _trust(headers.get(TRUST_HEADER)), "peer")
    if origin == "completion":
        return Classification(
            "completion",
            _trust(headers.get(TRUST_HEADER)),
            "bg",
            delegation_id=(headers.get(DELEGATION_HEADER) or "").strip() or None,
            completion_session=(headers.get(COMPLETION_SESSION_HEADER) or "").strip() or None,
        )
    return Classification("event", "untrusted", "bg")
