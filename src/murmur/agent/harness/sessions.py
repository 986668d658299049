"""Harness sessions: under ``transport: process`` a threaded context is one agent CLI session.

The CLI keeps the history itself (Claude Code's ``--resume <id>``, Codex's ``exec resume
<id>``); murmur keeps which CLI session each context maps to, in one map file, and gives the
context a ``HOME`` of its own that outlives the session, so a later task (or a later ``mur
run --resume``) finds the CLI's session files (spec/conversations.md "Agent CLIs")::

    $MURMUR_HOME/conversations/harness-session.json          the map (0600, replaced atomically)
    $MURMUR_HOME/conversations/<record>/<context-id>/harness/home/   the CLI's HOME (0700)

Map entries are keyed ``<record>/<context-id>`` and hold ``protocol``, ``session_id`` and
``updated_ms``. A map that cannot be read counts as empty (and is reported once); a write
failure is reported once and the conversation goes on unmapped.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from murmur.conversation.record import bad_segment

__all__ = ["MAP_FILE", "HarnessMap", "HarnessThread"]

MAP_FILE = "harness-session.json"


@attrs.frozen
class HarnessThread:
    """One task's use of its context's CLI session.

    Attributes:
        home (Path): the CLI's ``HOME`` for this context (kept between tasks).
        resume_id (str | None): the CLI session to continue; None starts a new one.
        remember (Callable[[str], None]): records the CLI session the task ran in.
    """

    home: Path
    resume_id: str | None
    remember: Callable[[str], None]


@attrs.define
class HarnessMap:
    """The context → CLI session map of one record store.

    Attributes:
        root (Path): ``$MURMUR_HOME/conversations``.
        record (str): the record store's name (checked).
        protocol (str): ``claude-code`` | ``codex``.
        report (Callable[[str], None]): where the first failure is told.
    """

    root: Path
    record: str
    protocol: str
    report: Callable[[str], None]
    _failed: bool = False

    @property
    def path(self) -> Path:
        """The map file."""
        return self.root / MAP_FILE

    def _key(self, context_id: str) -> str:
        return f"{self.record}/{context_id}"

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            self._fail(f"the harness session map {self.path} cannot be read ({exc}); contexts start new CLI sessions")
            return {}
        return data if isinstance(data, dict) else {}

    def entry(self, context_id: str) -> dict[str, Any] | None:
        """The map entry of ``context_id`` for this protocol, or None."""
        got = self._read().get(self._key(context_id))
        if isinstance(got, dict) and got.get("protocol") == self.protocol and isinstance(got.get("session_id"), str):
            return got
        return None

    def home(self, context_id: str) -> Path | None:
        """The CLI's ``HOME`` for ``context_id`` (created 0700), or None for a bad id or a failure."""
        if bad_segment(context_id) is not None:
            return None
        home = self.root / self.record / context_id / "harness" / "home"
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            for d in (self.root / self.record, home.parent.parent, home.parent, home):
                d.mkdir(mode=0o700, exist_ok=True)
        except OSError as exc:
            self._fail(f"the agent CLI's home {home} cannot be made ({exc.strerror or exc}); the task runs unthreaded")
            return None
        return home

    def holds(self, context_id: str) -> bool:
        """Whether the CLI's files for the mapped session are still in the context's home."""
        got = self.entry(context_id)
        if got is None:
            return False
        home = self.root / self.record / context_id / "harness" / "home"
        sid = str(got["session_id"])
        try:
            return any(sid in p.name for p in home.rglob("*.jsonl"))
        except OSError:
            return False

    def thread(self, context_id: str, *, resume: bool) -> HarnessThread | None:
        """The task's :class:`HarnessThread` (``resume``: continue the mapped session)."""
        home = self.home(context_id)
        if home is None:
            return None
        got = self.entry(context_id) if resume else None
        return HarnessThread(home, str(got["session_id"]) if got else None,
                             lambda sid: self.remember(context_id, sid))

    def remember(self, context_id: str, session_id: str) -> None:
        """Map ``context_id`` to ``session_id``."""
        self._update(context_id, {"protocol": self.protocol, "session_id": session_id,
                                  "updated_ms": int(time.time() * 1000)})

    def forget(self, context_id: str) -> str | None:
        """Drop ``context_id``'s entry; returns the dropped CLI session id (None: none)."""
        got = self.entry(context_id)
        if got is None:
            return None
        self._update(context_id, None)
        return str(got["session_id"])

    def _update(self, context_id: str, value: dict[str, Any] | None) -> None:
        data = self._read()
        if value is None:
            data.pop(self._key(context_id), None)
        else:
            data[self._key(context_id)] = value
        tmp = self.path.with_name(f".{MAP_FILE}.{os.getpid()}.tmp")
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2, sort_keys=True)
            os.replace(tmp, self.path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            self._fail(f"the harness session map {self.path} cannot be written ({exc.strerror or exc})")

    def _fail(self, message: str) -> None:
        if not self._failed:
            self._failed = True
            self.report(f"warning: {message}")
