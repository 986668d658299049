"""The link request protocol and its exit statuses (pure; spec/links.md "Protocol").

One connection carries one request: the stub writes one JSON line
``{"op": "link", "name", "version": str | null, "task": str, "json": bool}`` (or
``{"op": "context"}`` / ``{"op": "ps"}`` from the ``mur`` link), the runtime answers one JSON
line ``{"exit": int, "stdout": str, "stderr": str}`` and closes. A connection over the cap
reads :data:`TOO_MANY` (plain text) and is closed. Closing the connection before the answer
interrupts the request (the child's subtree is ended, one grace).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs

EXIT_OK = 0
EXIT_FAILED = 1  # the child's task ended in error, or the child crashed
EXIT_USAGE = 2
EXIT_WATCH = 124  # the child watch bound ended the child (``terminated``)
EXIT_REFUSED = 125  # refused by mur-roost, or the child could not start
EXIT_OUTSIDE = 126  # outside the spawn set, or the caller is not inside this session
EXIT_INTERRUPTED = 130

TOO_MANY = "murmur: too many concurrent delegation requests in this session"
REQUEST_LIMIT = 1 << 20  # bytes of one request line (the task text included)
SOCKET_NAME = "cap.sock"


class BadRequest(ValueError):
    """A request line that is not one this protocol defines (one sentence), and what to change.

    Args:
        why (str): the sentence.
        hint (str | None): what the caller should do instead (printed as ``hint:``).
    """

    def __init__(self, why: str, hint: str | None = None) -> None:
        super().__init__(why)
        self.hint = hint


@attrs.frozen
class LinkRequest:
    """One parsed request.

    Attributes:
        op (str): ``link``, ``context`` or ``ps``.
        name (str): the capsule name (``link`` only).
        version (str | None): ``--capsule-version`` (None: the only installed one).
        task (str): the task text.
        json (bool): print the completion record instead of the result text.
        traceparent (str | None): the calling command's ``TRACEPARENT`` (``link`` only).
    """

    op: str
    name: str = ""
    version: str | None = None
    task: str = ""
    json: bool = False
    traceparent: str | None = None


@attrs.frozen
class Answer:
    """What the stub prints and how it exits; ``outcome`` is the trace word (not sent)."""

    exit: int
    stdout: str = ""
    stderr: str = ""
    outcome: str = ""

    def line(self) -> bytes:
        """The answer as one JSON line."""
        return (json.dumps({"exit": self.exit, "stdout": self.stdout, "stderr": self.stderr}) + "\n").encode()


def parse_request(raw: bytes) -> LinkRequest:
    """One request line → :class:`LinkRequest`.

    Raises:
        BadRequest: not JSON, not an object, or a field of the wrong type.
    """
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("the request is not one JSON line") from None
    if not isinstance(data, dict):
        raise BadRequest("the request is not a JSON object")
    op = data.get("op")
    if op in ("context", "ps"):
        return LinkRequest(op, json=op == "ps" and bool(data.get("json")))
    if op == "who":  # `mur agent who [--can X] [--json]` from the `mur` link: this session's own routes
        can = data.get("can")
        if can is not None and (not isinstance(can, str) or not can.strip()):
            raise BadRequest("the field `can` is not a binary name")
        return LinkRequest("who", can or "", None, "", bool(data.get("json")))
    if op != "link":
        raise BadRequest(f"unknown request {op!r}")
    name, version, task = data.get("name"), data.get("version"), data.get("task")
    if not isinstance(name, str) or not name:
        raise BadRequest("the request names no capsule")
    if version is not None and not isinstance(version, str):
        raise BadRequest("the field `version` is not a string")
    if not isinstance(task, str):
        raise BadRequest("the field `task` is not a string")
    if not task.strip():
        raise BadRequest(f"the task for {name} is empty; nothing was started",
                         hint=f'give the task as arguments (`{name} "what to do"`) or on stdin')
    tp = data.get("traceparent")
    return LinkRequest("link", name, version or None, task, bool(data.get("json")), tp if isinstance(tp, str) else None)


def pick_version(name: str, asked: str | None, installed: list[str]) -> tuple[str | None, str | None]:
    """(version, refusal): ``asked`` as given, else the only installed version.

    Returns:
        tuple[str | None, str | None]: the version to ask mur-roost for, or a refusal
        sentence (none installed, several installed and none chosen).
    """
    if asked is not None:
        return asked, None
    if not installed:
        return None, (f"spawn refused: no version of {name} is installed on this host; "
                      f"install it (`mur install --global <dir>`) or pass --capsule-version")
    if len(installed) > 1:
        return None, (f"spawn refused: several versions of {name} are installed ({', '.join(installed)}); "
                      f"choose one with --capsule-version V")
    return installed[0], None


def exit_for(result: Mapping[str, Any], record_status: str | None) -> int:
    """The link's exit status for a finished ``Launcher.delegate(wait=True)`` result.

    Args:
        result: the call's result (``status`` ``completed`` | ``failed`` | ``refused`` | …).
        record_status (str | None): the child's completion record status, when one was read
            (``ok`` | ``error`` | ``crashed`` | ``terminated``).
    """
    status = result.get("status")
    if status == "completed":
        return EXIT_OK
    if status == "refused" or ("session_id" not in result and "delegation_id" not in result):
        return EXIT_REFUSED
    if status == "failed" and "session_id" not in result:
        return EXIT_REFUSED  # the child never answered its launch: could not start
    if record_status == "terminated":
        return EXIT_WATCH
    return EXIT_FAILED


def status_word(code: int, record_status: str | None) -> str:
    """The word of the stderr status line for exit ``code``."""
    if code == EXIT_OK:
        return "ok"
    if code == EXIT_WATCH:
        return "terminated"
    if code == EXIT_FAILED:
        return record_status if record_status in ("error", "crashed") else "error"
    return "refused"
