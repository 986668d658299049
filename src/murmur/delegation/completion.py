"""The completion path: a delegated child's outcome, on disk and on the wire.

Specification: ``spec/delegation.md`` "The completion path".

What a completion carries is the delegation's identity, the outcome and where the result is
— never the child's output::

    delegation_id, capsule_name, capsule_version, session_id, status (ok | error | crashed |
    terminated), result_path (workdir-relative, absent when none), workdir (absolute),
    duration_ms, detail (crashed / terminated only)

``completion.json`` in the child's directory holds the same fields plus ``reported_by``
(``child`` | ``launcher``), ``delivered`` and ``delivery_error``.

Exactly one reporter per delegation: whoever reports first *claims* the file by creating it
exclusively (:func:`claim` links a fully written temporary file into place, so a reader never
sees half a record and a second claimant is told no). The claimant then posts the completion
(:func:`post`) and rewrites the file with what the posting did (:func:`rewrite`). Between the
two writes the record reads ``delivered: false`` with no ``delivery_error``.

The post is one JSON-RPC ``SendMessage`` to the parent's ``POST /`` with the message text the
compact JSON of the fields above and four headers: ``x-murmur-task-origin: completion``,
``x-murmur-task-trust``, ``x-murmur-delegation-id``, ``x-murmur-completion-session``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import attrs
import httpx

from murmur import timing
from murmur.a2a import A2AClient, replies, requests
from murmur.delegation.spawner import SpawnerHandle
from murmur.ids import new_id

COMPLETION_FILE = "completion.json"
CHILD_STATUSES = ("ok", "error", "crashed", "terminated")
POST_TIMEOUT = timing.A2A_REQUEST  # seconds one completion post may take
_MAX_ERROR = 500


@attrs.frozen
class Completion:
    """One delegation's outcome (the wire fields).

    Attributes:
        delegation_id (str): ``dlg_…``.
        capsule_name (str): which capsule ran.
        capsule_version (str): its version.
        session_id (str | None): the child's session (None when it never reported one).
        status (str): ``ok`` | ``error`` | ``crashed`` | ``terminated``.
        workdir (str): the child's directory, absolute.
        duration_ms (int): how long the child ran.
        result_path (str | None): the result, relative to ``workdir``.
        detail (str | None): exit status and last stderr lines (crashed / terminated).
    """

    delegation_id: str
    capsule_name: str
    capsule_version: str
    session_id: str | None
    status: str
    workdir: str
    duration_ms: int
    result_path: str | None = None
    detail: str | None = None

    def fields(self) -> dict[str, Any]:
        """The wire fields (``result_path``/``detail`` omitted when absent)."""
        out: dict[str, Any] = {
            "delegation_id": self.delegation_id,
            "capsule_name": self.capsule_name,
            "capsule_version": self.capsule_version,
            "session_id": self.session_id,
            "status": self.status,
        }
        if self.result_path is not None:
            out["result_path"] = self.result_path
        out["workdir"] = self.workdir
        out["duration_ms"] = self.duration_ms
        if self.detail is not None:
            out["detail"] = self.detail
        return out

    def text(self) -> str:
        """The message text posted to the parent (compact JSON of :meth:`fields`)."""
        return json.dumps(self.fields(), separators=(",", ":"), ensure_ascii=False)


@attrs.frozen
class Record:
    """``completion.json``: the completion plus how its delivery went.

    Attributes:
        completion (Completion): the outcome.
        reported_by (str): ``child`` | ``launcher``.
        delivered (bool): whether the parent's door accepted it.
        delivery_error (str | None): why delivery failed (or why nothing was posted).
    """

    completion: Completion
    reported_by: str
    delivered: bool = False
    delivery_error: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object."""
        out = self.completion.fields()
        out["reported_by"] = self.reported_by
        out["delivered"] = self.delivered
        out["delivery_error"] = self.delivery_error
        return out


def _write_tmp(path: Path, record: Record) -> Path:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{new_id('tmp')[-8:]}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(record.to_json(), fh, ensure_ascii=False, indent=2)
            fh.write("\n")
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return tmp


def claim(child_dir: Path, record: Record) -> bool:
    """Create ``completion.json`` in ``child_dir`` unless a reporter already did.

    Returns:
        bool: True when this call created it (the caller is the delegation's reporter).

    Raises:
        OSError: the directory cannot be written.
    """
    path = child_dir / COMPLETION_FILE
    tmp = _write_tmp(path, record)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def rewrite(child_dir: Path, record: Record) -> None:
    """Replace ``completion.json`` atomically with ``record``.

    Raises:
        OSError: the file cannot be written.
    """
    path = child_dir / COMPLETION_FILE
    tmp = _write_tmp(path, record)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_completion(child_dir: Path) -> dict[str, Any] | None:
    """``completion.json`` as a JSON object, or None when absent or unreadable."""
    try:
        data = json.loads((child_dir / COMPLETION_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def record_from_json(data: dict[str, Any]) -> Record | None:
    """Rebuild a :class:`Record` from ``completion.json`` (None when it is not one)."""
    try:
        completion = Completion(
            delegation_id=str(data["delegation_id"]),
            capsule_name=str(data["capsule_name"]),
            capsule_version=str(data["capsule_version"]),
            session_id=data.get("session_id") if isinstance(data.get("session_id"), str) else None,
            status=str(data["status"]),
            workdir=str(data["workdir"]),
            duration_ms=int(data.get("duration_ms") or 0),
            result_path=data.get("result_path") if isinstance(data.get("result_path"), str) else None,
            detail=data.get("detail") if isinstance(data.get("detail"), str) else None,
        )
        err = data.get("delivery_error")
        return Record(completion, str(data["reported_by"]), bool(data.get("delivered")), err if isinstance(err, str) else None)
    except (KeyError, TypeError, ValueError):
        return None


def request_body(handle: SpawnerHandle, completion: Completion) -> dict[str, Any]:
    """The JSON-RPC ``SendMessage`` request carrying ``completion`` (its id the delegation's)."""
    return requests.send_message(
        completion.text(), message_id=new_id("msg"), context_id=handle.context_id, rpc_id=completion.delegation_id
    )


def request_headers(handle: SpawnerHandle) -> dict[str, str]:
    """The headers of a completion post (the four ``x-murmur-*`` ones included)."""
    return requests.headers(
        extra={
            "x-murmur-task-origin": "completion",
            "x-murmur-task-trust": handle.trust,
            "x-murmur-delegation-id": handle.delegation_id,
            "x-murmur-completion-session": handle.session_id,
        }
    )


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_ERROR else text[:_MAX_ERROR] + "…"


def delivery_problem(status_code: int, body: object) -> str | None:
    """Why a door's answer to a completion post is not an acceptance, or None (accepted).

    Accepted: HTTP 200 with a JSON-RPC ``result`` holding a ``message`` (the door's
    acknowledgement). Anything else names what came back: a JSON-RPC error's message and
    code, a rejected task's status message, or the HTTP status.
    """
    if not isinstance(body, dict):
        return f"the parent's door answered HTTP {status_code} without a JSON-RPC body"
    err = replies.fault(body)
    if err is not None:
        return _cut(f"the parent's door refused it: {err.message or '(no message)'} ({err.code})")
    if status_code != 200:
        return f"the parent's door answered HTTP {status_code}"
    if replies.sent_message(body) is not None:
        return None
    task = replies.sent_task(body)
    if task is not None:
        text = task.message_text
        return _cut(f"the parent's door did not take it ({task.state or '?'}{': ' + text if text else ''})")
    return "the parent's door answered without an acknowledgement"


async def post(
    handle: SpawnerHandle,
    completion: Completion,
    *,
    timeout: float = POST_TIMEOUT,
    transport: httpx.AsyncBaseTransport | None = None,
) -> str | None:
    """Post ``completion`` to the parent's door once.

    Args:
        handle (SpawnerHandle): where to (the parent's door and session).
        completion (Completion): what.
        timeout (float): seconds for the whole request.
        transport (httpx.AsyncBaseTransport | None): for tests.

    Returns:
        str | None: None when the door accepted it, else why it was not delivered.
    """
    async with A2AClient(timeout=timeout, transport=transport) as client:
        reply = await client.post(
            requests.rpc_url(handle.url), requests.encode(request_body(handle, completion)), request_headers(handle)
        )
    if reply is None:
        return f"the parent's door at {handle.url} did not answer"
    try:
        body: object = reply.json()
    except ValueError:
        body = None
    return delivery_problem(reply.status, body)
