"""The host-wide journal of session starts and ends (spec/tree.md "The journal").

``$MURMUR_HOME/tree/journal.jsonl``: append-only JSON lines, one event each, so ended and
lost nodes stay listable after every restart. Events::

    {"v":1,"event":"start","id":"ses_…","unix_ms":N,"pid":N,"start_time":N,
     "capsule":"name@version","lineage":{…},"workdir":"…","records_dir":"…"}
    {"v":1,"event":"winding_down","id":"ses_…","unix_ms":N,"how":"SIGTERM"}
    {"v":1,"event":"uncertain","id":"ses_…","unix_ms":N,"reason":"…"}
    {"v":1,"event":"end","id":"ses_…","unix_ms":N,"status":"ok","exit_code":0,
     "delegations":{"started":N,"refused":N}}
    {"v":1,"event":"delegation","id":"dlg_…","unix_ms":N,"parent":"ses_…","root":"ses_…|frm_…",
     "capsule":"name@version","status":"refused|failed","reason":"…"}   (never started a session)

Safe under concurrent writers: every append and every prune holds an exclusive ``flock`` on
``journal.lock`` and writes one line with one ``write`` on an ``O_APPEND`` descriptor.
Bounded: when the file passes :data:`MAX_BYTES`, whole trees are pruned (oldest first, trees
with a live member never) until it is under half of that. A line that does not parse (a torn
write from a killed process) is skipped by readers.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from murmur import paths, procstat

VERSION = 1
MAX_BYTES = 2 * 1024 * 1024
"""The journal is pruned once it grows past this (whole trees, oldest first)."""
MAX_LINE = 16 * 1024
"""A longer event is not written (no event the runtime writes comes near it)."""


def tree_dir() -> Path:
    """``$MURMUR_HOME/tree``."""
    return paths.murmur_home() / "tree"


def journal_path() -> Path:
    """``$MURMUR_HOME/tree/journal.jsonl``."""
    return tree_dir() / "journal.jsonl"


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    d = tree_dir()
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(d / "journal.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def append(event: str, ident: str, unix_ms: int, fields: Mapping[str, Any] | None = None) -> None:
    """Append one event (and prune when the journal has grown past :data:`MAX_BYTES`).

    Args:
        event (str): ``start`` | ``winding_down`` | ``uncertain`` | ``end``.
        ident (str): the session id.
        unix_ms (int): when, Unix milliseconds.
        fields (Mapping[str, Any] | None): the event's own fields.

    Raises:
        OSError: the journal cannot be written.
    """
    record: dict[str, Any] = {"v": VERSION, "event": event, "id": ident, "unix_ms": unix_ms}
    record.update(fields or {})
    line = (json.dumps(record, separators=(",", ":"), ensure_ascii=False) + "\n").encode("utf-8")
    if len(line) > MAX_LINE:
        raise OSError(f"a journal event of {len(line)} bytes is too long")
    with _locked():
        fd = os.open(journal_path(), os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            size = os.fstat(fd).st_size
            if size and _last_byte(size) != b"\n":
                line = b"\n" + line  # a writer killed mid-line: start on a line of our own
            os.write(fd, line)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > MAX_BYTES:
            _prune_locked()


def _last_byte(size: int) -> bytes:
    with journal_path().open("rb") as fh:
        fh.seek(size - 1)
        return fh.read(1)


def read_events(path: Path | None = None) -> list[dict[str, Any]]:
    """Every readable event, in journal order (unparseable lines skipped; absent file: none)."""
    p = path or journal_path()
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        return []
    out: list[dict[str, Any]] = []
    for line in raw.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), str) and isinstance(obj.get("event"), str):
            out.append(obj)
    return out


def trees_of(events: list[dict[str, Any]]) -> dict[str, str]:
    """Session id (or never-started ``dlg_`` id) -> the id of its tree's root (from each
    ``start`` event's lineage, each ``delegation`` event's ``root``)."""
    roots: dict[str, str] = {}
    for ev in events:
        if ev["event"] == "start":
            lineage = ev.get("lineage")
            root = lineage.get("root") if isinstance(lineage, dict) else None
            roots[ev["id"]] = root if isinstance(root, str) else ev["id"]
        elif ev["event"] == "delegation":  # a never-started delegation belongs to its parent's tree
            root = ev.get("root")
            roots[ev["id"]] = root if isinstance(root, str) else ev["id"]
    return roots


def prune_plan(events: list[dict[str, Any]], live: set[str], target_bytes: int) -> set[str]:
    """Which trees to drop so the journal fits ``target_bytes`` (pure).

    Args:
        events (list[dict]): the journal's events, oldest first.
        live (set[str]): session ids whose process still runs (their trees are kept).
        target_bytes (int): the size to get under.

    Returns:
        set[str]: root ids whose every event goes.
    """
    roots = trees_of(events)
    size: dict[str, int] = {}
    order: list[str] = []
    for ev in events:
        root = roots.get(ev["id"], ev["id"])
        if root not in size:
            size[root] = 0
            order.append(root)
        size[root] += len(json.dumps(ev, separators=(",", ":"))) + 1
    keep_live = {roots.get(s, s) for s in live}
    total = sum(size.values())
    drop: set[str] = set()
    for root in order:  # oldest tree first
        if total <= target_bytes:
            break
        if root in keep_live:
            continue
        drop.add(root)
        total -= size[root]
    return drop


def _prune_locked() -> None:
    events = read_events()
    live: set[str] = set()
    for ev in events:
        pid, start = ev.get("pid"), ev.get("start_time")
        if ev["event"] != "start" or not isinstance(pid, int) or pid <= 0 or not isinstance(start, int):
            continue
        if procstat.start_time(pid) == start:
            live.add(ev["id"])
    drop = prune_plan(events, live, MAX_BYTES // 2)
    if not drop:
        return
    roots = trees_of(events)
    kept = [ev for ev in events if roots.get(ev["id"], ev["id"]) not in drop]
    text = "".join(json.dumps(ev, separators=(",", ":"), ensure_ascii=False) + "\n" for ev in kept)
    tmp = journal_path().with_name(f".journal.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, journal_path())
    for root in drop:  # the gateway's spend files of a pruned tree go with it (spec/tree.md "TOKENS")
        shutil.rmtree(tree_dir() / "spend" / os.path.basename(root), ignore_errors=True)
