"""The spawner handle: where a delegated child reports its outcome.

Specification: ``spec/delegation.md`` "Launching a child" (step 4) and "The child's side".

A parent's launcher sets ``MURMUR_SPAWNER`` on each child to compact JSON with exactly five
fields::

    {"url":"http://127.0.0.1:PORT","session_id":"ses_…","context_id":"ctx_…",
     "trust":"trusted","delegation_id":"dlg_…"}

Unset or blank is normal (a capsule nobody delegated). Anything else that is not a handle
refuses the launch with ``E-RUN-020``; the message names the reason and never the value.
Pure: no I/O.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from murmur.diagnostics import error
from murmur.errors import DiagnosticError

SPAWNER_ENV = "MURMUR_SPAWNER"
SPAWNER_LIFELINE_ENV = "MURMUR_SPAWNER_LIFELINE"
TRUST_CLASSES = ("trusted", "untrusted")
FIELDS = ("url", "session_id", "context_id", "trust", "delegation_id")
_MAX_LEN = 8192
_HINT = (
    "MURMUR_SPAWNER is set by a delegating capsule's runtime on the child it launches; "
    "unset it to run this capsule on its own"
)


@attrs.frozen
class SpawnerHandle:
    """A parsed ``MURMUR_SPAWNER``.

    Attributes:
        url (str): the parent's door, ``http://host:port``.
        session_id (str): the parent's session (``ses_…``); a completion goes only there.
        context_id (str): the conversation the delegation was made from.
        trust (str): ``trusted`` | ``untrusted`` — the delegating task's class.
        delegation_id (str): ``dlg_…``, minted by the parent's launcher.
    """

    url: str
    session_id: str
    context_id: str
    trust: str
    delegation_id: str

    def encode(self) -> str:
        """The compact JSON value the launcher puts in ``MURMUR_SPAWNER``."""
        return json.dumps(
            {name: getattr(self, name) for name in FIELDS}, separators=(",", ":"), ensure_ascii=True
        )


def spawner_problem(value: str) -> str | None:
    """Why ``value`` (non-blank) is not a spawner handle, or None when it is one.

    The reason names a field or a shape, never the value or any part of it.
    """
    if len(value) > _MAX_LEN:
        return "the value is too long to be a spawner handle"
    try:
        data: Any = json.loads(value)
    except ValueError:
        return "the value is not JSON"
    if not isinstance(data, dict):
        return "the value is not a JSON object"
    for name in FIELDS:
        if name not in data:
            return f"the field `{name}` is missing"
        if not isinstance(data[name], str) or not data[name].strip():
            return f"the field `{name}` is not a non-empty string"
    if not data["url"].startswith(("http://", "https://")):
        return "the field `url` is not an http:// address"
    if data["trust"] not in TRUST_CLASSES:
        return "the field `trust` is neither `trusted` nor `untrusted`"
    if not data["session_id"].startswith("ses_"):
        return "the field `session_id` is not a session id (ses_…)"
    if not data["delegation_id"].startswith("dlg_"):
        return "the field `delegation_id` is not a delegation id (dlg_…)"
    return None


def parse_spawner(value: str | None) -> SpawnerHandle | None:
    """Parse ``MURMUR_SPAWNER``.

    Args:
        value (str | None): the variable's value; None or blank means "not delegated".

    Returns:
        SpawnerHandle | None: the handle, or None when unset/blank.

    Raises:
        DiagnosticError: ``E-RUN-020`` naming the reason (never the value).
    """
    if value is None or not value.strip():
        return None
    problem = spawner_problem(value.strip())
    if problem is not None:
        raise DiagnosticError(
            error("E-RUN-020", f"{SPAWNER_ENV} is not a readable spawner handle: {problem}", hint=_HINT)
        )
    data = json.loads(value)
    return SpawnerHandle(*(data[name].strip() for name in FIELDS))
