"""Shared CLI plumbing: rendering diagnostics and turning exceptions into exit statuses."""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable

from murmur import paths
from murmur.diagnostics import EXIT_INTERNAL, EXIT_USAGE, Diagnostic
from murmur.errors import DiagnosticError


def emit(diagnostic: Diagnostic, *, prefix: str = "") -> None:
    """Print one diagnostic to stderr (with an optional producer prefix like ``[mur run] ``)."""
    text = diagnostic.render()
    if prefix:
        text = "\n".join(prefix + line for line in text.splitlines())
    print(text, file=sys.stderr, flush=True)


def guarded(fn: Callable[[], int], *, program: str) -> int:
    """Run ``fn`` and map failures to exit statuses; never show a traceback for bad input.

    Returns:
        int: ``fn``'s status; the diagnostic's status on :class:`DiagnosticError`; 130 on
        Ctrl-C; :data:`EXIT_INTERNAL` on anything unexpected (the traceback goes to a log
        file under ``<murmur home>/logs`` whose path is printed).
    """
    try:
        return fn()
    except DiagnosticError as exc:
        for d in exc.diagnostics:
            emit(d)
        return exc.exit_status
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else EXIT_USAGE)
    except BaseException:  # the one place a bug is reported, not hidden
        log = _write_internal_log(program)
        print(
            f"internal error: {program} hit a bug it did not expect; details in {log}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_INTERNAL


def _write_internal_log(program: str) -> str:
    try:
        d = paths.log_dir()
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"internal-{program}-{int(time.time() * 1000)}.log"
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(traceback.format_exc())
        return str(p)
    except OSError:
        return "(the log could not be written; traceback below)\n" + traceback.format_exc()
