"""Console output that survives a closed stdout or stderr (spec/session.md "Output").

A supervisor may read the readiness line and close the pipe. A closed stream must not stop
the session: a line that cannot be written goes to ``logs/bootstrap.log`` in the records
directory instead, and the dead descriptor is pointed at ``/dev/null`` so later writes (and the
interpreter's final flush) cannot fail.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TextIO

from murmur.session.records import open_private_append


class Console:
    """Writes lines to stdout/stderr, diverting to a log file once a stream is closed."""

    def __init__(self) -> None:
        self.log_path: Path | None = None
        self._dead: set[str] = set()
        self._pending: list[str] = []

    def attach_log(self, path: Path) -> None:
        """Use ``path`` for diverted lines (earlier diverted lines are written first)."""
        self.log_path = path
        pending, self._pending = self._pending, []
        for line in pending:
            self._log(line)

    def out(self, line: str) -> None:
        """One line on stdout."""
        self._write("stdout", sys.stdout, line)

    def err(self, line: str) -> None:
        """One line (or several) on stderr."""
        self._write("stderr", sys.stderr, line)

    def _write(self, name: str, stream: TextIO, line: str) -> None:
        if name not in self._dead:
            try:
                stream.write(line + "\n")
                stream.flush()
                return
            except (OSError, ValueError):
                self._dead.add(name)
                _blackhole(stream)
        self._log(f"[{name}] {line}")

    def _log(self, line: str) -> None:
        if self.log_path is None:
            self._pending.append(line)
            return
        try:
            with os.fdopen(open_private_append(self.log_path), "a", encoding="utf-8") as fh:
                fh.write(line + "\n")
        except OSError:
            pass


def _blackhole(stream: TextIO) -> None:
    """Point ``stream``'s descriptor at /dev/null so nothing later fails on it."""
    try:
        fd = stream.fileno()
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except (OSError, ValueError):
        pass
