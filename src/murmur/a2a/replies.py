"""What a door answered: the HTTP reply, its JSON-RPC result or error, the task in it (pure).

Specification: ``spec/a2a-client.md`` "Replies". Facts of the A2A 1.0 JSON-RPC binding these
readers rely on (``spec/door.md``):

* a JSON-RPC error keeps HTTP 200 and sits in ``error{code, message}``; a refused credential
  is an HTTP 401/403 whose body is for humans (``{"error": "<word>"}``);
* ``SendMessage`` wraps its task as ``result.task`` (or answers ``result.message``);
  ``GetTask`` and ``CancelTask`` return the bare Task as ``result``;
* states are ``TASK_STATE_*``: terminal COMPLETED, FAILED, CANCELED, REJECTED; interrupted
  INPUT_REQUIRED, AUTH_REQUIRED;
* a text part is ``{"text": …}`` (1.0 has no ``kind``); a murmur door puts a completed task's
  answer in the artifact ``response`` and marks a task that ended without one with
  ``metadata.murmur.noAnswer``.

Nothing here raises on a malformed body: a reader answers None (or an empty text) instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

SUBMITTED = "TASK_STATE_SUBMITTED"
WORKING = "TASK_STATE_WORKING"
COMPLETED = "TASK_STATE_COMPLETED"
FAILED = "TASK_STATE_FAILED"
CANCELED = "TASK_STATE_CANCELED"
REJECTED = "TASK_STATE_REJECTED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

TERMINAL: Mapping[str, str] = {
    COMPLETED: "completed",
    FAILED: "failed",
    CANCELED: "canceled",
    REJECTED: "rejected",
}
"""Each terminal state and the word murmur reports it by."""

ANSWER_ARTIFACT = "response"
"""The ``artifactId`` of a murmur task's answer."""


def json_object(body: bytes) -> dict[str, Any] | None:
    """``body`` parsed as a JSON object, or None (not JSON, not an object)."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


@attrs.frozen
class Fault:
    """A JSON-RPC ``error`` object.

    Attributes:
        code (object): its ``code`` as sent (an int from a well-behaved door).
        message (str | None): its ``message``, when it is a string.
    """

    code: object
    message: str | None


@attrs.frozen
class Reply:
    """One HTTP reply from a door.

    Attributes:
        status (int): the HTTP status.
        body (bytes): the response body.
    """

    status: int
    body: bytes = attrs.field(repr=False)

    def json(self) -> object:
        """The body parsed as JSON (any value).

        Raises:
            ValueError: the body is not JSON.
        """
        try:
            return json.loads(self.body)
        except (UnicodeDecodeError, RecursionError) as exc:
            raise ValueError(str(exc)) from None

    def object(self) -> dict[str, Any] | None:
        """The body as a JSON object, or None."""
        return json_object(self.body)


def fault(obj: Mapping[str, Any]) -> Fault | None:
    """The JSON-RPC error of a response object, when it has one as an object."""
    err = obj.get("error")
    if not isinstance(err, dict):
        return None
    message = err.get("message")
    return Fault(err.get("code"), message if isinstance(message, str) else None)


def result(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The ``result`` of a response object, when it is an object."""
    res = obj.get("result")
    return res if isinstance(res, dict) else None


def texts(parts: object) -> str:
    """The text parts of ``parts`` joined (non-text and malformed parts skipped)."""
    if not isinstance(parts, list):
        return ""
    return "".join(str(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


@attrs.frozen
class TaskView:
    """The fields of a Task the runtime reads.

    Attributes:
        id (str | None): its ``id`` (None when absent or not a string).
        context_id (str | None): its ``contextId``.
        state (str | None): ``status.state`` (``TASK_STATE_…``), when a string.
        message_text (str): the text of ``status.message`` (empty when none).
        answer (str | None): the text of the ``response`` artifact; None when there is none.
        no_answer (bool): ``metadata.murmur.noAnswer`` is true.
    """

    id: str | None
    context_id: str | None
    state: str | None
    message_text: str
    answer: str | None
    no_answer: bool

    @property
    def end_word(self) -> str | None:
        """``completed`` | ``failed`` | ``canceled`` | ``rejected`` once terminal, else None."""
        return TERMINAL.get(self.state) if self.state is not None else None


def task_view(task: object) -> TaskView | None:
    """Read a Task object; None when ``task`` is not an object."""
    if not isinstance(task, dict):
        return None
    status = task.get("status")
    status = status if isinstance(status, dict) else {}
    state = status.get("state")
    message = status.get("message")
    answer: str | None = None
    for art in task.get("artifacts") or ():
        if isinstance(art, dict) and art.get("artifactId") == ANSWER_ARTIFACT:
            answer = texts(art.get("parts"))
            break
    meta = task.get("metadata")
    murmur = meta.get("murmur") if isinstance(meta, dict) else None
    tid, ctx = task.get("id"), task.get("contextId")
    return TaskView(
        id=tid if isinstance(tid, str) else None,
        context_id=ctx if isinstance(ctx, str) else None,
        state=state if isinstance(state, str) else None,
        message_text=texts(message.get("parts")) if isinstance(message, dict) else "",
        answer=answer,
        no_answer=isinstance(murmur, dict) and murmur.get("noAnswer") is True,
    )


def sent_task(obj: Mapping[str, Any]) -> TaskView | None:
    """The task of a ``SendMessage`` response (``result.task``), or None."""
    res = result(obj)
    return task_view(res.get("task")) if res is not None else None


def sent_message(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """The message of a message-only ``SendMessage`` response (``result.message``), or None."""
    res = result(obj)
    msg = res.get("message") if res is not None else None
    return msg if isinstance(msg, dict) else None


def got_task(obj: Mapping[str, Any]) -> TaskView | None:
    """The task of a ``GetTask`` / ``CancelTask`` response (the bare ``result``), or None."""
    return task_view(result(obj))
