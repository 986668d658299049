"""One line for a person on stderr, that never raises (spec/session.md "Output").

A supervisor may close the pipe a runtime writes its notes to; a note that cannot be written
must not stop anything. :func:`say` is the one place the runtime's notes, warnings and relayed
lines are written that way (a session's own console, which diverts to ``logs/bootstrap.log``,
is :class:`murmur.session.console.Console`).
"""

from __future__ import annotations

import sys
from typing import TextIO

__all__ = ["say"]


def say(text: str, stream: TextIO | None = None) -> None:
    """Write ``text`` and a newline to ``stream`` (default: ``sys.stderr`` now), flushed.

    A closed or broken stream (``OSError``, ``ValueError``) is ignored.
    """
    try:
        print(text, file=sys.stderr if stream is None else stream, flush=True)
    except (OSError, ValueError):
        pass
