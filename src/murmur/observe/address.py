"""Which sessions an address names (spec/trace.md "Addresses").

The sessions are the tree journal's (``$MURMUR_HOME/tree/journal.jsonl``): each ``start``
event names a session, its lineage and its records directory. An address is:

* a path: anything holding ``/`` or ending ``.jsonl`` (a ``trace.jsonl``, or a directory
  holding one);
* ``@N``: the Nth newest session the journal recorded (``@1`` the newest);
* a formation id, a session id, a short id as ``mur ps --tree`` prints it (``ses_…c1c4``), or
  a unique suffix of 4 or more characters (case-insensitive), as ``mur stop`` takes them;
* nothing: the newest session (with ``--tree``: the newest root).

Refusals: ``E-TRC-001`` names nothing, ``E-TRC-002`` names several, ``E-TRC-005`` no session
was ever recorded here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.ids import id_timestamp_ms


@attrs.frozen
class Known:
    """One session as the journal recorded it.

    Attributes:
        id (str): ``ses_…``.
        records_dir (Path | None): where its ``trace.jsonl`` is.
        lineage (Mapping[str, Any]): its lineage (spec/tree.md).
        started_ms (int): the start event's Unix ms.
        capsule (str): ``name@version``.
        order (int): position of its start event in the journal.
        end (Mapping[str, Any] | None): its ``end`` event.
        winding_down_ms (int | None): when its wind-down began (journal).
        pid (int | None), start_time (int | None): its process, as the start event names it.
    """

    id: str
    records_dir: Path | None
    lineage: Mapping[str, Any]
    started_ms: int
    capsule: str = ""
    order: int = 0
    end: Mapping[str, Any] | None = None
    winding_down_ms: int | None = None
    pid: int | None = None
    start_time: int | None = None

    @property
    def root(self) -> str:
        """The lineage's root (its own id when the lineage names none)."""
        root = self.lineage.get("root")
        return root if isinstance(root, str) and root else self.id

    @property
    def trace_path(self) -> Path | None:
        """Its ``trace.jsonl`` (None when the journal named no records directory)."""
        return None if self.records_dir is None else self.records_dir / "trace.jsonl"


def known_sessions(events: Sequence[Mapping[str, Any]]) -> list[Known]:
    """Every session the journal's events name, in start order (pure)."""
    starts: dict[str, dict[str, Any]] = {}
    ends: dict[str, Mapping[str, Any]] = {}
    winding: dict[str, int] = {}
    for ev in events:
        ident = ev.get("id")
        if not isinstance(ident, str):
            continue
        kind = ev.get("event")
        if kind == "start" and ident not in starts:
            starts[ident] = dict(ev)
        elif kind == "end":
            ends[ident] = ev
        elif kind == "winding_down" and ident not in winding and isinstance(ev.get("unix_ms"), int):
            winding[ident] = ev["unix_ms"]
    out = []
    for order, (ident, ev) in enumerate(starts.items()):
        rd = ev.get("records_dir")
        lineage = ev.get("lineage") if isinstance(ev.get("lineage"), dict) else {}
        started = ev.get("unix_ms")
        out.append(Known(ident, Path(rd) if isinstance(rd, str) and rd else None, lineage or {},
                         started if isinstance(started, int) else 0,
                         str(ev.get("capsule") or ""), order, ends.get(ident), winding.get(ident),
                         ev.get("pid") if isinstance(ev.get("pid"), int) else None,
                         ev.get("start_time") if isinstance(ev.get("start_time"), int) else None))
    return out


def is_path(text: str) -> bool:
    """Whether an address is a path (holds ``/`` or ends ``.jsonl``)."""
    return "/" in text or text.endswith(".jsonl")


def trace_file(text: str) -> Path:
    """The ``trace.jsonl`` a path address names (a directory holding one, or the file).

    Raises:
        DiagnosticError: ``E-TRC-003`` nothing is there.
    """
    path = Path(text).expanduser()
    if path.is_dir():
        path = path / "trace.jsonl"
    if not path.is_file():
        raise DiagnosticError(error(
            "E-TRC-003", f"no trace at {path}", path=str(path),
            hint="give a trace.jsonl, the records directory holding one, or a session id (`mur ps --tree --all`)",
        ))
    return path


def _nodes(sessions: Iterable[Known]) -> list[str]:
    ids: list[str] = []
    for s in sessions:
        ids.append(s.id)
        frm = s.lineage.get("formation_id")
        if isinstance(frm, str) and frm not in ids:
            ids.append(frm)
    return ids


_AT = re.compile(r"^@(\d+)$")


def resolve(sessions: Sequence[Known], text: str) -> str:
    """The one session or formation id ``text`` names (not a path).

    Raises:
        DiagnosticError: ``E-TRC-001`` (names nothing), ``E-TRC-002`` (names several).
    """
    wanted = text.strip().lower()
    at = _AT.match(wanted)
    if at:
        n = int(at.group(1))
        newest = sorted(sessions, key=lambda s: s.order, reverse=True)
        if 1 <= n <= len(newest):
            return newest[n - 1].id
        raise DiagnosticError(error(
            "E-TRC-001", f"{text} names no session: {len(newest)} recorded here",
            hint="@1 is the newest session; `mur ps --tree --all` lists them",
        ))
    ids = _nodes(sessions)
    if wanted in ids:
        return wanted
    tail = wanted.split("…", 1)[1] if "…" in wanted else wanted
    prefix = wanted.split("_", 1)[0] + "_" if "…" in wanted else ""
    found = [i for i in ids if len(tail) >= 4 and i.endswith(tail) and i.startswith(prefix)]
    if len(found) == 1:
        return found[0]
    if not found:
        raise DiagnosticError(error(
            "E-TRC-001", f"{text} names no session or formation recorded here",
            hint="give a session id, a formation id, a short id as `mur ps --tree` prints it, a suffix of 4+ "
                 "characters, @N, or the path of a trace.jsonl",
        ))
    raise DiagnosticError(error(
        "E-TRC-002", f"{text} names {len(found)} sessions or formations ({', '.join(found[:4])})",
        hint="give more of the id; `mur ps --tree` lists short ids that are unique",
    ))


def nothing_recorded() -> DiagnosticError:
    """``E-TRC-005``: the journal names no session."""
    return DiagnosticError(error(
        "E-TRC-005", "no session has been recorded here (the tree journal is empty)",
        hint="run a capsule first (`mur run`, `mur demo`), set MURMUR_HOME to where it ran, or give a trace.jsonl path",
    ))


def newest_session(sessions: Sequence[Known]) -> str:
    """The newest session's id.

    Raises:
        DiagnosticError: ``E-TRC-005`` there is none.
    """
    if not sessions:
        raise nothing_recorded()
    return max(sessions, key=lambda s: s.order).id


def newest_root(sessions: Sequence[Known]) -> str:
    """The newest root (a formation or a root session) by the time its id names.

    Raises:
        DiagnosticError: ``E-TRC-005`` there is none.
    """
    if not sessions:
        raise nothing_recorded()
    roots = {s.root for s in sessions}
    return max(roots, key=lambda r: (id_timestamp_ms(r) or 0, r))


def root_of(sessions: Sequence[Known], ident: str) -> str:
    """The root of the tree ``ident`` (a session or formation) is in."""
    if ident.startswith("frm_"):
        return ident
    for s in sessions:
        if s.id == ident:
            return s.root
    return ident
