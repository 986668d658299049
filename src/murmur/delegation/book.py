"""The delegating session's book of delegations, and its door's completion decisions.

Every delegation this session's launcher made is an :class:`Entry`, opened when the call is
answered with a grant. A delegation is *closed* exactly once — by the first completion for it
that the door accepts, or by the launcher recording an outcome it posts to nobody — and
closing writes the ``delegation`` trace record carrying the child's own outcome word
(``ok``, ``error``, ``crashed``, ``terminated``, ``unknown``). The call's own word
(``completed``, ``timed_out``, ``failed``, ``refused``) is written by the launcher when the call
ends (:meth:`DelegationBook.call_ended`). Specification: ``spec/delegation.md`` "Trace records
(the delegating session)" and "At the parent's door".

:meth:`DelegationBook.decide` is the session's completion handler: a completion for a
delegation this session made and that is still open becomes a ``completion``-origin task in
the bg lane, under the context the delegation was made from; any other is refused with
``-31002`` (``COMPLETION_NOT_AWAITED``), so an outcome is never taken twice.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import attrs

from murmur.delegation.completion import CHILD_STATUSES
from murmur.session import COMPLETION_NOT_AWAITED, CompletionRequest, CompletionVerdict, RpcError

Emit = Callable[..., None]  # emit(event_type, **fields)


@attrs.define
class Entry:
    """One delegation made by this session.

    Attributes:
        delegation_id (str): ``dlg_…``.
        capsule (str): the capsule name.
        version (str): its version.
        context_id (str): the context the delegation was made from.
        trust (str): the delegating task's trust class.
        child_workdir (str): the child's directory, relative to this session's workdir.
        child_session_id (str | None): once the child reported ready.
        opened_at (float): ``time.monotonic()`` at the grant.
        closed (bool): an outcome has been recorded.
        outcome (str | None): the child's outcome word, once closed.
        caller (tuple[str, ...] | None): the calling command of a capsule link that made this
            delegation (handed to the child's lineage as ``via: "link"``; spec/links.md).
    """

    delegation_id: str
    capsule: str
    version: str
    context_id: str
    trust: str
    child_workdir: str
    child_session_id: str | None = None
    opened_at: float = attrs.field(factory=time.monotonic)
    closed: bool = False
    outcome: str | None = None
    caller: tuple[str, ...] | None = None

    def duration_ms(self) -> int:
        """Milliseconds since the grant."""
        return int((time.monotonic() - self.opened_at) * 1000)


def outcome_of(text: str) -> str:
    """The ``status`` a completion's message text carries (``unknown`` when unreadable)."""
    try:
        data = json.loads(text)
    except ValueError:
        return "unknown"
    status = data.get("status") if isinstance(data, dict) else None
    return status if status in CHILD_STATUSES else "unknown"


class DelegationBook:
    """Delegations by id, and the ``delegation`` trace records.

    Args:
        emit (Emit): writes one trace record, ``emit(event_type, **fields)``.
    """

    def __init__(self, emit: Emit) -> None:
        self._emit = emit
        self._entries: dict[str, Entry] = {}

    def open(self, entry: Entry) -> Entry:
        """Start tracking ``entry`` (its id must be new)."""
        self._entries[entry.delegation_id] = entry
        return entry

    def get(self, delegation_id: str) -> Entry | None:
        """The entry with this id, or None."""
        return self._entries.get(delegation_id)

    def entries(self) -> list[Entry]:
        """Every entry, in the order opened."""
        return list(self._entries.values())

    def close(self, delegation_id: str, outcome: str, reason: str | None = None) -> bool:
        """Record the child's outcome once; write the ``delegation`` record.

        Returns:
            bool: True when this call closed it (False: unknown or already closed).
        """
        entry = self._entries.get(delegation_id)
        if entry is None or entry.closed:
            return False
        entry.closed = True
        entry.outcome = outcome
        self._record(entry.capsule, entry.version, entry.delegation_id, entry.child_session_id,
                     entry.duration_ms(), outcome, reason if outcome not in ("ok", "error") else None)
        return True

    def call_ended(
        self,
        capsule: str,
        version: str,
        outcome: str,
        *,
        entry: Entry | None = None,
        reason: str | None = None,
        duration_ms: int = 0,
    ) -> None:
        """Write the ``delegation`` record of a call (``completed``/``timed_out``/``failed``/``refused``)."""
        self._record(
            capsule,
            version,
            entry.delegation_id if entry else None,
            entry.child_session_id if entry else None,
            entry.duration_ms() if entry else duration_ms,
            outcome,
            None if outcome == "completed" else reason,
        )

    def _record(
        self,
        capsule: str,
        version: str,
        delegation_id: str | None,
        child_session_id: str | None,
        duration_ms: int,
        outcome: str,
        reason: str | None,
    ) -> None:
        self._emit(
            "delegation",
            capsule=capsule,
            version=version,
            delegation_id=delegation_id,
            child_session_id=child_session_id,
            duration_ms=duration_ms,
            outcome=outcome,
            reason=reason,
        )

    def decide(self, req: CompletionRequest) -> CompletionVerdict:
        """The door's completion handler (see the module docstring)."""
        dlg = req.delegation_id
        entry = self._entries.get(dlg) if dlg else None
        if entry is None:
            return _refuse(f"this session awaits no completion for delegation {dlg or '(none)'}")
        if entry.closed:
            return _refuse(f"delegation {dlg} has already reported its outcome")
        outcome = outcome_of(req.message.text)
        self.close(entry.delegation_id, outcome, _detail(req.message.text))
        return CompletionVerdict(accept=True, run_as_task=True, context_id=entry.context_id)


def _detail(text: str) -> str | None:
    try:
        data: Any = json.loads(text)
    except ValueError:
        return None
    detail = data.get("detail") if isinstance(data, dict) else None
    return detail if isinstance(detail, str) else None


def _refuse(message: str) -> CompletionVerdict:
    return CompletionVerdict(accept=False, error=RpcError(COMPLETION_NOT_AWAITED, message))
