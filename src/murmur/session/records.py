"""A session's records directory (spec/session.md "Records directory").

The runtime writes nothing into the work folder; everything a session produces lives apart,
in ``$MURMUR_HOME/records/<work folder without its leading />/<ses_id>/``, each directory
owner-only (0700)::

    task.md            the text of the task being run (rewritten per task)
    trace.jsonl        the session's trace
    out/result.txt     the outcome of the latest task that ran
    out/result_<tsk>.txt   the outcome of each task that was not rejected (same text)
    logs/              bootstrap.log (console lines that could not be printed), door.log
    home/              $HOME of shell commands
    tmp/               $TMPDIR of shell commands

``out/result.txt`` holds the answer of a completed task, ``error: <message>`` for a failed one
and ``canceled: <reason>`` for a cancelled one.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from murmur import paths
from murmur.diagnostics import Diagnostic, error


def records_root() -> Path:
    """``$MURMUR_HOME/records``."""
    return paths.murmur_home() / "records"


def records_dir_for(workdir: Path, session_id: str) -> Path:
    """Where the records of ``session_id`` working in ``workdir`` live.

    Args:
        workdir (Path): the session's work folder (made absolute and resolved).
        session_id (str): ``ses_…``.
    """
    rel = workdir.resolve().as_posix().lstrip("/")
    return records_root() / rel / session_id


@attrs.frozen
class Records:
    """The paths of one records directory."""

    root: Path

    @property
    def task_md(self) -> Path:
        """``task.md``."""
        return self.root / "task.md"

    @property
    def trace(self) -> Path:
        """``trace.jsonl``."""
        return self.root / "trace.jsonl"

    @property
    def out(self) -> Path:
        """``out/``."""
        return self.root / "out"

    @property
    def result(self) -> Path:
        """``out/result.txt``."""
        return self.out / "result.txt"

    def task_result(self, task_id: str) -> Path:
        """``out/result_<task_id>.txt``."""
        return self.out / f"result_{task_id}.txt"

    @property
    def logs(self) -> Path:
        """``logs/``."""
        return self.root / "logs"

    @property
    def bootstrap_log(self) -> Path:
        """``logs/bootstrap.log``: console lines written after stdout/stderr closed."""
        return self.logs / "bootstrap.log"

    @property
    def home(self) -> Path:
        """``home/`` (``$HOME`` of shell commands)."""
        return self.root / "home"

    @property
    def tmp(self) -> Path:
        """``tmp/`` (``$TMPDIR`` of shell commands)."""
        return self.root / "tmp"


def _mkdir_private(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)


def create_records(root: Path) -> Records:
    """Create a records directory and its sub-directories, owner-only.

    Raises:
        OSError: a directory cannot be made.
    """
    rec = Records(root)
    for d in (rec.root, rec.out, rec.logs, rec.home, rec.tmp):
        _mkdir_private(d)
    return rec


def open_private_append(path: Path) -> int:
    """Open ``path`` for appending, creating it owner-only (mode 0600); returns the descriptor.

    An existing file is narrowed to 0600 too, so a log file is never group/world readable.

    Raises:
        OSError: the file cannot be opened (a symlink at ``path`` is refused).
    """
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)
    except OSError:
        os.close(fd)
        raise
    return fd


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temporary file + rename), mode 0600.

    Raises:
        OSError: the file cannot be written.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def result_text(state: str, text: str) -> str:
    """The ``out/result.txt`` body for a terminal outcome.

    Args:
        state (str): ``completed`` | ``failed`` | ``canceled``.
        text (str): the answer, the failure message or the cancel reason.
    """
    if state == "completed":
        return text if text.endswith("\n") or not text else text + "\n"
    prefix = "error" if state == "failed" else "canceled"
    return f"{prefix}: {text}\n"


class RecordWriter:
    """Writes records files in the background, the latest text of each path winning.

    Rewriting a file atomically costs a rename that some file systems make slow (ext4 flushes
    the new data on a rename over an existing file); doing it on one background thread keeps it
    off the event loop. Writes to one path are coalesced: a path queued again before it was
    written is written once, with its latest text, so a busy session builds no backlog of
    rewrites. :meth:`flush` waits until
    everything queued is on disk; the session flushes before its end-of-session hooks and
    before ``session_end``.

    Args:
        on_error (Callable[[Path, OSError], None]): called (on the writer thread) for a write
            that failed.
    """

    def __init__(self, on_error: Callable[[Path, OSError], None]) -> None:
        self._on_error = on_error
        self._latest: dict[Path, tuple[str, Callable[[], None] | None]] = {}
        self._order: deque[Path] = deque()
        self._busy = False
        self._closing = False
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._when_idle: list[Callable[[], None]] = []

    def write(self, path: Path, text: str, *, then: Callable[[], None] | None = None) -> None:
        """Queue ``text`` to become the content of ``path`` (returns at once).

        ``then`` is called (on the writer thread) once this text is on disk; a text replaced
        by a later write of the same path before it was written never calls its ``then``.
        """
        with self._cond:
            if path not in self._latest:
                self._order.append(path)
            self._latest[path] = (text, then)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="murmur-records", daemon=True)
                self._thread.start()
            self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._order) or self._closing)
                if not self._order:
                    return
                path = self._order.popleft()
                text, then = self._latest.pop(path)
                self._busy = True
            try:
                write_private(path, text)
                del text  # a large answer is not held here once it is on disk
                if then is not None:
                    then()
            except OSError as exc:
                self._on_error(path, exc)
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
                    told, self._when_idle = (self._when_idle, []) if not self._order else ([], self._when_idle)
                for tell in told:
                    tell()

    def when_idle(self, tell: Callable[[], None]) -> bool:
        """Have ``tell`` called (on the writer thread) once every queued write is done.

        Returns:
            bool: False when nothing is queued now (``tell`` is not called); True otherwise.
        """
        with self._cond:
            if not self._order and not self._busy:
                return False
            self._when_idle.append(tell)
            return True

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued write is done; whether it finished within ``timeout`` s."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._order and not self._busy, timeout)

    def close(self) -> None:
        """Flush, then stop the thread."""
        self.flush()
        with self._cond:
            thread, self._thread = self._thread, None
            self._closing = True
            self._cond.notify_all()
        if thread is not None:
            thread.join()



def records_lost(lost: Sequence[tuple[Path, str]]) -> Diagnostic:
    """``E-RUN-007`` for a session that could not write some of its records.

    Args:
        lost (Sequence[tuple[Path, str]]): (file, reason) in the order the writes failed.
    """
    path, why = lost[0]
    more = len({p for p, _ in lost}) - 1
    tail = f" (and {more} more file{'s' if more != 1 else ''})" if more > 0 else ""
    return error(
        "E-RUN-007",
        f"the session's records could not be written: {why}{tail}; its outcome is not on disk",
        path=str(path),
        hint="free space in, or restore write access to, the records directory",
    )


class QuietFileHandler(logging.FileHandler):
    """A log file handler that drops a record it cannot write instead of printing a traceback.

    The standard handler reports a failed write (a full disk, a file made read-only) as a
    ``--- Logging error ---`` traceback on stderr; a session's log is a record like any other,
    and a record that cannot be written is reported once, by the session, as ``E-RUN-007``.
    """

    dropped = 0

    def handleError(self, record: logging.LogRecord) -> None:
        """Count the dropped record; never print."""
        self.dropped += 1
