"""What a member's door answered a call: to an offer (``SendMessage``), to a poll (``GetTask``).

Specification: ``spec/formation.md`` "`call-member`". Pure: the readers are
:mod:`murmur.a2a`'s; this module decides what each answer means for a call. Reasons name no
URL, port or token.
"""

from __future__ import annotations

import enum

import attrs

from murmur.a2a import replies
from murmur.session import BUSY_MESSAGE

REJECTED_PREFIX = "task rejected: "

_PENDING = frozenset({replies.SUBMITTED, replies.WORKING, replies.INPUT_REQUIRED})


class Offer(enum.Enum):
    """What one SendMessage offer came to."""

    TAKEN = "taken"  # the door holds the task
    BUSY = "busy"  # REJECTED with exactly "task rejected: capsule is busy"
    REJECTED = "rejected"  # REJECTED for another reason
    FAILED = "failed"  # refused (401/403), a JSON-RPC error, nonsense
    UNANSWERED = "unanswered"  # no answer at all (connection, timeout, 5xx)


@attrs.frozen
class SendReply:
    """A classified SendMessage reply.

    Attributes:
        offer (Offer): the outcome.
        task_id (str | None): the member's task id, when the reply named one.
        context_id (str | None): its context id.
        state (str | None): the wire state (``TASK_STATE_…``) when a task came back.
        reason (str): why, for REJECTED / FAILED / UNANSWERED (no URL, port or token).
    """

    offer: Offer
    task_id: str | None = None
    context_id: str | None = None
    state: str | None = None
    reason: str = ""


NO_ANSWER = SendReply(Offer.UNANSWERED, reason="the member's door did not answer")
"""The offer got no HTTP answer at all."""


def _auth_reason(status: int, body: bytes) -> str:
    obj = replies.json_object(body) or {}
    code = obj.get("error")
    what = code if isinstance(code, str) and code.isascii() and len(code) < 64 else "refused"
    return f"the member's door refused the call ({status} {what})"


def classify_send(status: int, body: bytes) -> SendReply:
    """Classify one SendMessage HTTP reply (pure).

    Args:
        status (int): the HTTP status.
        body (bytes): the response body.
    """
    if status in (401, 403):
        return SendReply(Offer.FAILED, reason=_auth_reason(status, body))
    if status != 200:
        if status >= 500:
            return SendReply(Offer.UNANSWERED, reason=f"the member's door answered HTTP {status}")
        return SendReply(Offer.FAILED, reason=f"the member's door answered HTTP {status}")
    obj = replies.json_object(body)
    if obj is None:
        return SendReply(Offer.UNANSWERED, reason="the member's door sent a reply that is not JSON")
    if "error" in obj:
        err = replies.fault(obj)
        code = err.code if err is not None else None
        return SendReply(Offer.FAILED, reason=f"the member's door refused the task (JSON-RPC error {code})")
    task = replies.sent_task(obj)
    if task is None or task.id is None:
        return SendReply(Offer.FAILED, reason="the member's door answered without a task")
    tid, ctx, state = task.id, task.context_id, task.state
    if state == replies.REJECTED:
        text = task.message_text
        if text == BUSY_MESSAGE:
            return SendReply(Offer.BUSY, tid, ctx, state, text)
        return SendReply(Offer.REJECTED, tid, ctx, state, text.removeprefix(REJECTED_PREFIX) or "rejected")
    if state in _PENDING or task.end_word is not None:
        return SendReply(Offer.TAKEN, tid, ctx, state)
    return SendReply(Offer.FAILED, tid, ctx, None, "the member's door answered with an unknown task state")


@attrs.frozen
class Poll:
    """A classified GetTask reply.

    Attributes:
        ok (bool): False for a failed read (counts toward ``unreachable``).
        status (str | None): the call's final status once the task has ended
            (``completed``, ``failed``, ``canceled``, ``rejected``, ``no_answer``), else None.
        output (str): the answer (completed) or the status message (otherwise), uncut.
    """

    ok: bool
    status: str | None = None
    output: str = ""


def classify_get(status: int, body: bytes) -> Poll:
    """Classify one GetTask HTTP reply (pure)."""
    if status != 200:
        return Poll(False)
    obj = replies.json_object(body)
    task = replies.got_task(obj) if obj is not None else None
    if task is None:
        return Poll(False)
    if task.state in _PENDING:
        return Poll(True)
    final = task.end_word
    if final is None:
        return Poll(False)
    if final == "completed":
        return Poll(True, final, task.answer or task.message_text)
    if final == "failed" and task.no_answer:
        final = "no_answer"
    return Poll(True, final, task.message_text)
