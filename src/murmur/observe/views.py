"""What each ``mur trace`` command reads (the I/O in front of the pure renderers).

* :func:`session_trace`: the ``trace.jsonl`` an address names (``mur trace show``, ``diff``).
* :func:`tree_of`: the :class:`~murmur.observe.tree.TreeModel` of the tree an address is in
  (``show --tree``, ``view``; no address: the newest root).
* :func:`report_files`: the traces ``mur trace report DIR`` aggregates.

Refusals are coded ``E-TRC-…`` diagnostics (spec/diagnostics.md).
"""

from __future__ import annotations

from pathlib import Path

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.observe.address import (
    Known,
    is_path,
    known_sessions,
    newest_root,
    newest_session,
    resolve,
    root_of,
    trace_file,
)
from murmur.observe.tree import TreeModel, build, gather_tree, only_the_trees, read_records


def journal_sessions(path: Path | None = None) -> list[Known]:
    """The sessions ``$MURMUR_HOME/tree/journal.jsonl`` (or the journal at ``path``) names
    (none when it is absent)."""
    from murmur.tree import journal

    return known_sessions(journal.read_events(path))


def write_page(root: str, journal: Path, out: Path) -> Path:
    """The page of ``root``'s tree, from the journal at ``journal`` (``mur demo``'s own home),
    written to ``out``.

    Raises:
        DiagnosticError: as :func:`tree_of` and :func:`murmur.observe.page.write`.
    """
    from murmur.observe import page

    return page.write(tree_of(root, journal_sessions(journal)), out)


def session_trace(address: str | None, known: list[Known] | None = None) -> Path:
    """The ``trace.jsonl`` of the session ``address`` names (None: the newest session).

    Raises:
        DiagnosticError: ``E-TRC-001``/``002``/``003``/``005``; ``E-TRC-006`` when the
            address names a formation (it has no trace of its own).
    """
    if address is not None and is_path(address):
        return trace_file(address)
    sessions = journal_sessions() if known is None else known
    ident = newest_session(sessions) if address is None else resolve(sessions, address)
    if ident.startswith("frm_"):
        raise DiagnosticError(error(
            "E-TRC-006", f"{ident} is a formation: it has no trace of its own",
            hint=f"`mur trace show --tree {address}` shows every member; give a member's session id to show one",
        ))
    found = next((s for s in sessions if s.id == ident), None)
    path = found.trace_path if found is not None else None
    if path is None or not path.is_file():
        raise DiagnosticError(error(
            "E-TRC-003", f"the trace of {ident} is gone (its records directory was removed)",
            hint="records are kept under $MURMUR_HOME/records; run the capsule again to record a new trace",
        ))
    return path


def tree_of(address: str | None, known: list[Known] | None = None) -> TreeModel:
    """The tree ``address`` is in (None: the newest root), read from every session's trace."""
    sessions = journal_sessions() if known is None else known
    if address is not None and is_path(address):
        path = trace_file(address)
        sid = path.parent.name
        match = [s for s in sessions if s.id == sid]
        if not match:  # a trace the journal never knew: a tree of one
            one = Known(sid, path.parent, {}, 0)
            return build(sid, [one], read_records([one]))
        ident = sid
    else:
        ident = newest_root(sessions) if address is None else resolve(sessions, address)
    root = root_of(sessions, ident)
    g = gather_tree(sessions, root)
    return build(root, g.sessions, only_the_trees(read_records(g.sessions), g), g.traces or None)


def report_files(directory: str | None) -> tuple[Path, list[Path]]:
    """``DIR`` (default ``$MURMUR_HOME/records``) and the traces in it: every ``*.jsonl``
    directly in it, and every ``trace.jsonl`` below it.

    Raises:
        DiagnosticError: ``E-TRC-007`` the directory is missing or holds no trace.
    """
    if directory is None:
        from murmur import paths

        where = paths.murmur_home() / "records"
    else:
        where = Path(directory).expanduser()
    if not where.is_dir():
        raise DiagnosticError(error(
            "E-TRC-007", f"{where} is not a directory", path=str(where),
            hint="give the directory holding the traces (a records directory, or a folder of .jsonl files)",
        ))
    files = {p for p in where.glob("*.jsonl") if p.is_file()}
    files |= {p for p in where.rglob("trace.jsonl") if p.is_file()}
    if not files:
        raise DiagnosticError(error(
            "E-TRC-007", f"{where} holds no .jsonl trace", path=str(where),
            hint="run a session first, or give the directory its records are in",
        ))
    return where, sorted(files)
