"""Removing old formation directories by the entry member's ``trace.retain``.

``spec/formation.md`` "Retention": at the end of every ``mur run --roster`` — after
every member of that launch has stopped, however the launch ended — the entry member's
``trace.retain`` bounds its project's formation directories:

* ``max_sessions``: keep this many of the project's formation directories, newest first, the
  current one included;
* ``max_age`` (seconds): remove a directory older than this, measured from the time in its
  ``frm_`` id.

A directory over either limit is removed whole, with its members' records. It is never removed
when it is the current launch's formation or one minted after it; when its launcher still runs,
or a running record names the formation and that member still runs (an unreadable
``running/`` directory counts every formation as running); when its ``formation.json`` names
another project; or when it has no (parseable) ``formation.json``.

:func:`decide` is the pure rule; :func:`retention_pass` reads the disk, removes and prints one
stderr line per removal, newest first.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TextIO

import attrs

from murmur import ids, paths
from murmur.formation.launch import dirs, procinfo
from murmur.manifest import Retain


@attrs.frozen
class FormationEntry:
    """One formation directory as the pass sees it.

    Attributes:
        formation_id (str): its directory name (``frm_`` + 32 hex).
        minted_ms (int): Unix milliseconds in its id.
        marker (dirs.Marker | None): its parsed ``formation.json``; None when absent or bad.
        running (bool): its launcher, or one of its members, still runs.
    """

    formation_id: str
    minted_ms: int
    marker: dirs.Marker | None
    running: bool


@attrs.frozen
class Removal:
    """A formation directory the pass removes, and why (``max_sessions`` or ``max_age``)."""

    formation_id: str
    reason: str


def decide(
    entries: Iterable[FormationEntry],
    *,
    project_dir: str,
    current_id: str,
    retain: Retain | None,
    now_ms: int,
) -> list[Removal]:
    """Which formation directories to remove (pure).

    Args:
        entries (Iterable[FormationEntry]): every formation directory under this project name.
        project_dir (str): the launching roster's project directory (resolved).
        current_id (str): the current launch's formation id.
        retain (Retain | None): the entry member's ``trace.retain``; None removes nothing.
        now_ms (int): the current time, Unix milliseconds.

    Returns:
        list[Removal]: newest first; ``max_age`` is the reason for a directory over both limits.
    """
    if retain is None or (retain.max_sessions is None and retain.max_age is None):
        return []
    own = sorted(
        (e for e in entries if e.marker is not None and e.marker.project_dir == project_dir),
        key=lambda e: e.formation_id,
        reverse=True,
    )
    out: list[Removal] = []
    for rank, entry in enumerate(own):
        if entry.formation_id >= current_id or entry.running:
            continue
        over_age = (
            retain.max_age is not None and now_ms - entry.minted_ms > retain.max_age * 1000
        )
        over_count = retain.max_sessions is not None and rank >= retain.max_sessions
        if over_age:
            out.append(Removal(entry.formation_id, "max_age"))
        elif over_count:
            out.append(Removal(entry.formation_id, "max_sessions"))
    return out


def running_formations(running_dir: Path | None = None) -> set[str] | None:
    """Formation ids named by a running record whose session still runs.

    Args:
        running_dir (Path | None): default ``$MURMUR_HOME/running``.

    Returns:
        set[str] | None: the ids; an empty set when the directory does not exist; None when it
        exists but cannot be read (then every formation counts as running).
    """
    where = running_dir or paths.running_dir()
    try:
        names = sorted(p for p in where.iterdir() if p.suffix == ".json")
    except FileNotFoundError:
        return set()
    except OSError:
        return None
    out: set[str] = set()
    for path in names:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if not isinstance(data, dict):
            continue
        formation = data.get("formation_id")
        pid = data.get("pid")
        if not isinstance(formation, str) or not isinstance(pid, int):
            continue
        if procinfo.is_running(pid, _record_start(data)):
            out.add(formation)
    return out


def _record_start(data: dict[str, object]) -> int | None:
    """The process start time a running record holds, under any of its spellings."""
    for key in ("pid_start", "process_start", "start_time", "launcher_start"):
        value = data.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
            return procinfo.recorded_start(value)
    return None


def scan(project_formations: Path, running: set[str] | None) -> list[FormationEntry]:
    """Read every formation directory under ``<formations>/<project>``.

    Args:
        project_formations (Path): ``$MURMUR_HOME/formations/<project>``.
        running (set[str] | None): from :func:`running_formations` (None = all running).

    Returns:
        list[FormationEntry]: one per directory named by a formation id; others are ignored.
    """
    try:
        children = list(project_formations.iterdir())
    except OSError:
        return []
    out: list[FormationEntry] = []
    for child in children:
        name = child.name
        minted = ids.id_timestamp_ms(name)
        if minted is None or not ids.is_id(name, "frm") or not child.is_dir():
            continue
        marker = dirs.read_marker(child)
        alive = running is None or name in running
        if marker is not None and procinfo.is_running(
            marker.launcher_pid, procinfo.recorded_start(marker.launcher_start)
        ):
            alive = True
        out.append(FormationEntry(name, minted, marker, alive))
    return out


def retention_line(removal: Removal) -> str:
    """The stderr line for one removal."""
    return f"[mur run] retention: removed formation {removal.formation_id} ({removal.reason})"


def retention_pass(
    project_dir: Path,
    current_id: str,
    retain: Retain | None,
    *,
    now_ms: int | None = None,
    err: TextIO | None = None,
) -> Sequence[Removal]:
    """Apply the entry member's ``trace.retain`` to this project's formation directories.

    Removes each chosen directory whole, and its members' records under
    ``$MURMUR_HOME/records/``; prints one line per removal to ``err`` (default stderr),
    newest first. Never writes to stdout. A directory that cannot be removed is skipped
    silently (the next pass tries again).

    Args:
        project_dir (Path): the roster's project directory (resolved).
        current_id (str): the current launch's formation id.
        retain (Retain | None): the entry member's ``trace.retain``.
        now_ms (int | None): Unix milliseconds (default: now).
        err (TextIO | None): where removal lines go.

    Returns:
        Sequence[Removal]: what was removed.
    """
    if retain is None:
        return []
    layout = dirs.FormationLayout(project_dir, current_id)
    entries = scan(layout.project_formations, running_formations())
    chosen = decide(
        entries,
        project_dir=str(project_dir),
        current_id=current_id,
        retain=retain,
        now_ms=int(time.time() * 1000) if now_ms is None else now_ms,
    )
    stream = err or sys.stderr
    done: list[Removal] = []
    for removal in chosen:
        target = layout.project_formations / removal.formation_id
        try:
            shutil.rmtree(target)
        except OSError:
            continue
        shutil.rmtree(dirs.records_dir_for(target), ignore_errors=True)
        print(retention_line(removal), file=stream, flush=True)
        done.append(removal)
    return done
