"""The session contributor for the process tree (called for every ``mur run``).

:func:`contribute` decides the session's lineage and effective spawn set
(:mod:`murmur.tree.lineage`) and wires the journal (:mod:`murmur.tree.journal`) into the
session: a ``start`` event before the readiness line (the first start hook), a
``winding_down`` event and the cascade to every live descendant when the wind-down begins
(:mod:`murmur.tree.cascade`), an ``end`` event once ``session_end`` is written, and an
``end`` event from the forced exit (143) too. A narrowing outside the manifest prints one
``W-TRE-001`` on stderr. Specification: spec/tree.md.

It runs after the formation contributor (it reads ``formation_id`` and the member name) and
before the delegation contributor (whose runtime reads the effective set from
``setup.lineage``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from murmur import procstat
from murmur.session import Contribution, WindDown, add_forced_exit_hook
from murmur.stderr import say
from murmur.tree import journal
from murmur.tree.lineage import (
    LINEAGE_ENV,
    Lineage,
    Narrowing,
    child_lineage,
    effective_spawn,
    lineage_from_json,
    member_lineage,
    parse_handed,
    root_lineage,
)

if TYPE_CHECKING:
    from murmur.session import SessionHandle, SessionSetup, SessionSummary


def decide_lineage(setup: SessionSetup, environ: Mapping[str, str], *, spawner_session: str | None = None,
                   spawner_delegation: str | None = None) -> tuple[Lineage, tuple[Any, ...]]:
    """The session's lineage and the warnings to print (pure given its inputs).

    Args:
        setup (SessionSetup): the session being prepared (manifest, formation fields).
        environ (Mapping[str, str]): its environment (``MURMUR_LINEAGE`` is read).
        spawner_session (str | None): ``session_id`` of the parsed ``MURMUR_SPAWNER`` handle
            (None: the run was not delegated); the caller parses the handle.
        spawner_delegation (str | None): its ``delegation_id``.

    Raises:
        DiagnosticError: ``E-TRE-001`` for an unreadable ``MURMUR_LINEAGE`` or one that
            disagrees with the spawner handle.
    """
    handed = parse_handed(
        environ.get(LINEAGE_ENV), spawner_session=spawner_session, spawner_delegation=spawner_delegation
    )
    narrow: tuple[Narrowing, ...] = tuple(setup.spawn_narrowings)
    decision = effective_spawn(
        setup.manifest.spawn_allow, ceiling=handed.ceiling if handed else None, narrow=narrow
    )
    if handed is not None:
        lineage = child_lineage(handed, decision.spawn)
    elif setup.formation_id is not None:
        member = setup.trace_start_fields.get("formation_member")
        lineage = member_lineage(setup.formation_id, member if isinstance(member, str) else None, decision.spawn,
                                 entry=setup.trace_start_fields.get("formation_entry") is True)
    else:
        lineage = root_lineage(setup.session_id, decision.spawn)
    return lineage, decision.warnings


def contribute(setup: SessionSetup, environ: Mapping[str, str], *, spawner_session: str | None = None,
               spawner_delegation: str | None = None) -> Contribution:
    """Decide the lineage (written on ``setup``) and return the journal's hooks (see the module
    docstring; merged once by :mod:`murmur.assembly.contributors`).

    ``spawner_session`` and ``spawner_delegation`` come from the run's ``MURMUR_SPAWNER``
    handle, parsed by the caller (:func:`murmur.assembly.contributors.process_tree`).

    Raises:
        DiagnosticError: ``E-TRE-001`` (see :func:`decide_lineage`).
    """
    lineage, warnings = decide_lineage(
        setup, environ, spawner_session=spawner_session, spawner_delegation=spawner_delegation
    )
    setup.lineage = lineage.to_json()
    for w in warnings:
        say(w.render())
    hooks = JournalHooks(setup)
    hooks.caps = _caps_shown(environ)
    return Contribution(start_hooks_first=(hooks.start,), wind_down_hooks=(hooks.winding_down,),
                        after_end=(hooks.end,))


def session_lineage(setup: SessionSetup) -> Lineage:
    """``setup.lineage`` as a value (a root lineage from the manifest when none was decided)."""
    found = lineage_from_json(setup.lineage)
    return found if found is not None else root_lineage(setup.session_id, setup.manifest.spawn_allow)


def _now_ms() -> int:
    return int(time.time() * 1000)


class JournalHooks:
    """The session's journal events (each best effort: a journal that cannot be written
    never fails the session; one line goes to stderr)."""

    def __init__(self, setup: SessionSetup) -> None:
        self.setup = setup
        self._ended = False
        self._started = False
        self._unregister: Any = None
        self._winding: WindDown | None = None
        self.caps: dict[str, int | None] | None = None  # the tree caps, when set (spec/tree.md "Caps")

    def _append(self, event: str, fields: Mapping[str, Any]) -> None:
        _journal(event, self.setup.session_id, _now_ms(), fields)

    async def start(self, session: SessionHandle) -> None:
        """Start hook (runs first): the ``start`` event, before the readiness line."""
        pid = os.getpid()
        m = self.setup.manifest
        self._append(
            "start",
            {
                "pid": pid,
                "start_time": procstat.start_time(pid) or 0,
                "capsule": f"{m.name}@{m.version}",
                "lineage": self.setup.lineage,
                "workdir": str(self.setup.workdir),
                "records_dir": str(self.setup.records.root),
                **({"caps": self.caps} if self.caps is not None else {}),
            },
        )
        self._started = True
        self._unregister = add_forced_exit_hook(self._forced)

    def winding_down(self, reason: WindDown) -> None:
        """Wind-down hook: the ``winding_down`` event, then the cascade to the subtree."""
        self._winding = reason
        if self._started:
            self._append("winding_down", {"how": reason.detail, "cause": reason.cause})
        from murmur.tree.cascade import cascade_from_session

        cascade_from_session(self.setup.session_id)

    def end(self, summary: SessionSummary) -> None:
        """After ``session_end``: the ``end`` event."""
        if self._unregister is not None:
            self._unregister()
        if not self._started or self._ended:
            return
        self._ended = True
        self._append(
            "end",
            {
                "status": summary.status,
                "exit_code": summary.exit_code,
                "delegations": dict(self.setup.delegation_counts),
            },
        )

    def _forced(self) -> None:
        """Forced exit (143): the ``end`` event the normal path will never write."""
        if not self._started or self._ended:
            return
        self._ended = True
        status = self._winding.status or self._winding.busy_status if self._winding else "terminated"
        self._append(
            "end",
            {"status": status, "exit_code": 143, "forced": True,
             "delegations": dict(self.setup.delegation_counts)},
        )


def _journal(event: str, ident: str, at_ms: int, fields: Mapping[str, Any]) -> None:
    """Append one tree-journal event; a failure to write is said on stderr, never raised
    (spec/tree.md "The journal")."""
    try:
        journal.append(event, ident, at_ms, fields)
    except OSError as exc:
        say(f"[capsule-runtime] the tree journal could not be written: {exc.strerror or exc}")


def mark_uncertain(session_id: str, reason: str) -> None:
    """Journal that ``session_id`` is ``uncertain`` (its parent or mur-roost was lost)."""
    _journal("uncertain", session_id, _now_ms(), {"reason": reason})


def mark_ended_by_parent(session_id: str, status: str, exit_code: int | None) -> None:
    """Journal the ``end`` of a child that ended without recording one (SIGKILLed, crashed),
    as its parent's launcher saw it: ``crashed`` rather than ``uncertain`` for ever. The
    journal keeps a session's first ``end``, so a child that recorded its own keeps it."""
    _journal("end", session_id, _now_ms(), {"status": status, "exit_code": exit_code, "by": "parent"})


def asked_label(capsule: str, version: str | None) -> str:
    """What a delegation asked for, as its not-started node shows it: ``name@version``, or
    ``name`` alone when no version was asked for (a capsule link without
    ``--capsule-version``; spec/tree.md "The journal")."""
    return f"{capsule}@{version}" if version else capsule


def mark_not_started(parent: SessionSetup, delegation_id: str | None, capsule: str, status: str,
                     reason: str) -> None:
    """Journal a delegation that never started a session (refused before or by mur-roost, or
    whose launch failed): a ``delegation`` event, so ``mur ps --tree`` shows it under
    ``parent`` with its reason (spec/tree.md "mur ps --tree").

    Args:
        parent (SessionSetup): the delegating session.
        delegation_id (str | None): its ``dlg_`` id; None (a refusal before mur-roost is asked,
            which mints none) gets a fresh one.
        capsule (str): what was asked for, as :func:`asked_label` spells it.
        status (str): ``refused`` | ``failed``.
        reason (str): the refusal or failure sentence (cut to 400 characters).
    """
    from murmur import ids

    ident = delegation_id if delegation_id and ids.is_id(delegation_id, "dlg") else ids.new_id("dlg")
    fields = {"parent": parent.session_id, "root": session_lineage(parent).root, "capsule": capsule,
              "status": status, "reason": reason[:400]}
    _journal("delegation", ident, _now_ms(), fields)


def _caps_shown(environ: Mapping[str, str]) -> dict[str, int | None] | None:
    """The tree caps this session runs under, for its journal ``start`` (None when none is
    set; an unreadable value is refused later by the delegation runtime, ``E-TRE-004``)."""
    from murmur.errors import DiagnosticError
    from murmur.tree.caps import parse_caps

    try:
        caps = parse_caps(environ)
    except DiagnosticError:
        return None
    return caps.to_json() if caps.total is not None or caps.same_chain is not None else None
