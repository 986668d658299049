"""The session's own log file, ``logs/door.log`` (spec/session.md, the records directory): where the door, the
workload runner and the hooks record what went wrong; never a token.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from murmur.session.records import QuietFileHandler, open_private_append


def attach_log(logger: logging.Logger, path: Path) -> logging.Handler | None:
    """Send ``logger`` to ``path`` only (created 0600); None when the file cannot be opened."""
    try:
        os.close(open_private_append(path))  # created 0600 before the handler appends to it
        handler: logging.Handler = QuietFileHandler(path, encoding="utf-8")
    except OSError:
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    return handler


def detach_log(logger: logging.Logger, handler: logging.Handler | None) -> None:
    """Undo :func:`attach_log` (closing its file)."""
    if handler is None:
        return
    logger.removeHandler(handler)
    handler.close()
