"""What ``mur run --resume [SESSION]`` continues: the session it names and that session's context.

A session is named as ``mur ps`` and ``mur stop`` name one — a full ``ses_`` id, a
case-insensitive unique suffix of 4 or more characters, ``@N`` (the Nth newest, ``@1`` the
newest) — or by the path of its records directory (or of its ``trace.jsonl``). Ids and
suffixes and ordinals are looked up among the sessions of this work folder
(``$MURMUR_HOME/records/<work folder>/``); a full id is also found in any work folder.

The context is the ``context_id`` of the session's **first** ``task_start``; the trace is
read only that far, so the trace of a killed session whose last line is torn still resumes.
Spec: spec/conversations.md "Resume".
"""

from __future__ import annotations

import json
from pathlib import Path

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.ids import is_id

__all__ = ["first_context", "pick", "resolve_session_dir"]

TRACE = "trace.jsonl"


def _sessions_in(folder: Path) -> dict[str, Path]:
    try:
        return {p.name: p for p in folder.iterdir() if p.is_dir() and is_id(p.name, "ses")}
    except OSError:
        return {}


def pick(address: str, ids: list[str]) -> tuple[str | None, str | None]:
    """The id among ``ids`` that ``address`` names (pure): ``(id, None)`` or ``(None, why)``.

    ``@N`` counts from the newest (ids sort in creation order); a suffix must be at least 4
    characters and name exactly one id.
    """
    text = address.strip().lower()
    if text.startswith("@"):
        n = int(text[1:]) if text[1:].isdigit() else 0
        newest = sorted(ids, reverse=True)
        if 1 <= n <= len(newest):
            return newest[n - 1], None
        return None, f"there are {len(newest)} sessions in this work folder" if n >= 1 else "`@` takes a number from 1"
    if text in ids:
        return text, None
    if len(text) < 4:
        return None, "a suffix must have at least 4 characters"
    found = [i for i in ids if i.endswith(text)]
    if len(found) == 1:
        return found[0], None
    if found:
        return None, f"it names {len(found)} sessions; give more of the id"
    return None, "no session of this work folder has that id"


def resolve_session_dir(address: str, *, folder: Path, records_root: Path, cwd: Path) -> Path:
    """The records directory of the session ``address`` names.

    Args:
        address (str): the ``--resume`` value.
        folder (Path): this work folder's records (``records/<work folder>``).
        records_root (Path): ``$MURMUR_HOME/records`` (a full id is searched there too).
        cwd (Path): what a relative path is relative to.

    Raises:
        DiagnosticError: ``E-CNV-001`` when it names no session, or several.
    """
    text = address.strip()
    if "/" in text:
        path = Path(text).expanduser()
        path = (path if path.is_absolute() else cwd / path)
        if path.name == TRACE:
            path = path.parent
        if (path / TRACE).is_file():
            return path
        raise _unknown(address, f"{path} holds no {TRACE}")
    here = _sessions_in(folder)
    chosen, why = pick(text, sorted(here))
    if chosen is not None:
        return here[chosen]
    if is_id(text.lower(), "ses"):
        try:
            hits = sorted(records_root.rglob(text.lower()))
        except OSError:
            hits = []
        hits = [h for h in hits if (h / TRACE).is_file()]
        if hits:
            return hits[0]
    raise _unknown(address, why or "no such session")


def _unknown(address: str, why: str) -> DiagnosticError:
    return DiagnosticError(
        error(
            "E-CNV-001",
            f"--resume {address} names no session to resume: {why}",
            hint="name a session of this work folder: its ses_ id, a unique suffix of 4+ "
            "characters, @1 for the newest, or the path of its records directory",
        )
    )


def first_context(records_dir: Path) -> str | None:
    """The ``context_id`` of the first ``task_start`` in the session's trace that carries one.

    Reads line by line and stops there; unreadable lines are skipped; None when the trace
    has no such record (or cannot be read).
    """
    try:
        with (records_dir / TRACE).open("rb") as f:
            for raw in f:
                try:
                    rec = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(rec, dict) and rec.get("event_type") == "task_start":
                    ctx = rec.get("context_id")
                    if isinstance(ctx, str) and ctx:
                        return ctx
    except OSError:
        return None
    return None
