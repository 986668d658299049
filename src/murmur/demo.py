"""``mur demo``: the example audit formation, end to end (issue 8; README "What the demo just did").

The demo runs the capsules shipped in ``murmur/examples/audit/`` the way a user would by hand:

1. copy the example into a private directory (a temporary one, or ``--home DIR``) and build and
   install every capsule into a private ``MURMUR_HOME`` (``mur install -g``);
2. start ``mur-roost`` on a free loopback port with exactly one ``--spawn-allow`` name, the
   check desk's (the only top-level capsule that delegates);
3. start the check desk (``mur run --capsule local/audit-desk``): an ordinary session outside
   the formation, registered at mur-roost, on a public loopback door;
4. run the formation: ``mur run --roster <project> --task "audit PATH"`` with the desk's URL
   in ``AUDIT_DESK_URL`` (the ``checker`` member's one ``capabilities.env.allow`` name);
5. print progress on stderr as members come up and report (read from their traces), print
   the entry member's ``out/result.txt`` (the report) and its path, stop the desk and
   mur-roost, and exit with the formation's status.

Why the desk is outside the formation: a roster with any edge needs ``network.authentication``
on every member (E-ROS-006) and ``murmur.yaml`` refuses ``network.authentication`` beside a
non-empty ``capabilities.spawn.allow`` (E-MAN-003), so no member of a roster with edges can
delegate (seed 004, "Authentication"). The checker member reaches the delegating desk over
loopback HTTP instead.

Every process the demo starts runs in a process group of its own and is stopped and reaped
before the demo returns, whatever ends it: the end of the formation, Ctrl-C / SIGTERM /
SIGHUP (a second one SIGKILLs everything at once), an error. A small watchdog process holds
the read end of a pipe only the demo writes to; if the demo itself dies (even by SIGKILL),
the watchdog reads EOF and stops every group the demo had started.

Pure pieces (commands, environment, progress lines, the ``--keep`` script) are separate
functions so tests can check them without starting anything.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import trio

from murmur.diagnostics import error
from murmur.errors import DiagnosticError

__all__ = [
    "CAPSULE_DIRS",
    "DESK_URL_ENV",
    "DemoOptions",
    "DemoOutcome",
    "DemoRun",
    "Layout",
    "Timers",
    "child_environment",
    "default_target",
    "demo",
    "describe_record",
    "desk_command",
    "examples_dir",
    "formation_command",
    "install_command",
    "parse_roost_port",
    "prepare_layout",
    "rerun_script",
    "resolve_target",
    "roost_command",
    "run_demo",
    "shell_status",
    "watchdog_main",
]

EXAMPLE = "audit"
CAPSULE_DIRS = ("lead", "inventory", "checker", "desk", "pycheck")
"""The example's capsule directories, in the order they are installed."""
VERSION = "0.1.0"
DESK = "audit-desk"
CHILD = "audit-pycheck"
ENTRY = "lead"
DESK_URL_ENV = "AUDIT_DESK_URL"
MARKER = ".mur-demo"
"""A file marking a directory as one the demo made (``--home`` reuses only such a directory)."""

# Variables the demo sets itself, or that would make its processes something else (a
# formation member, a delegated child, a fake mur binary).
_DROPPED_ENV_PREFIXES = ("MURMUR_FORMATION_", "MURMUR_SPAWNER")
_DROPPED_ENV = frozenset({"MURMUR_HOME", "MURMUR_ROOST_URL", "MURMUR_MUR_BINARY", DESK_URL_ENV})


@attrs.frozen
class Timers:
    """Bounds the demo keeps (seconds). Tests may shorten them; production never changes them.

    Attributes:
        startup (float): for mur-roost and the check desk to report themselves ready.
        launcher_stop (float): SIGTERM to the formation launcher → SIGKILL of its group (it
            needs up to 25 s itself to stop its members).
        desk_stop (float): SIGTERM to the check desk → SIGKILL (its own guard is 20 s).
        roost_stop (float): SIGTERM to mur-roost → SIGKILL.
        poll (float): how often member traces are read for progress lines.
        watchdog_grace (float): the watchdog's SIGTERM → SIGKILL bound.
    """

    startup: float = 120.0
    launcher_stop: float = 30.0
    desk_stop: float = 25.0
    roost_stop: float = 10.0
    poll: float = 0.15
    watchdog_grace: float = 25.0


@attrs.frozen
class DemoOptions:
    """What ``mur demo`` was asked to do.

    Attributes:
        target (Path | None): the directory to audit (None: the murmur package's own source).
        home (Path | None): keep everything under this directory (None: a temporary one).
        keep (bool): leave the roster, home and records behind and print how to rerun.
        json (bool): print one JSON summary line on stdout instead of the report.
        timers (Timers): bounds (tests only).
    """

    target: Path | None = None
    home: Path | None = None
    keep: bool = False
    json: bool = False
    timers: Timers = attrs.field(factory=Timers)


@attrs.frozen
class Layout:
    """Where one demo keeps its files; everything is under ``base``.

    Attributes:
        base (Path): the demo directory (absolute).
    """

    base: Path

    @property
    def home(self) -> Path:
        """The private ``MURMUR_HOME``."""
        return self.base / "home"

    @property
    def project(self) -> Path:
        """The roster's project directory (a copy of ``examples/audit``; the entry's workdir)."""
        return self.base / EXAMPLE

    @property
    def desk_workdir(self) -> Path:
        """The check desk's workdir (its children's directories are made beneath it)."""
        return self.base / "desk"

    @property
    def artifacts(self) -> Path:
        """The global store of the private home (mur-roost's ``--registry-path``)."""
        return self.home / "artifacts"

    def records_dir(self, workdir: Path, session_id: str) -> Path:
        """A session's records directory under the private home (spec/session.md)."""
        return self.home / "records" / workdir.resolve().as_posix().lstrip("/") / session_id


@attrs.define
class DemoOutcome:
    """What a demo run produced.

    Attributes:
        status (int): the exit status (the formation's; 128 + signal when interrupted).
        layout (Layout): where its files are (gone unless kept).
        kept (bool): whether they were left behind.
        report (str | None): the report text (the entry member's ``out/result.txt``).
        report_path (Path | None): where that file is (or was).
        formation_id (str | None): ``frm_…``.
        sessions (dict[str, str]): session ids by role (``lead``, ``inventory``, ``checker``,
            ``audit-desk``, ``audit-pycheck``).
        child_dir (Path | None): the delegated child's directory (its records, completion.json).
        pids (dict[str, int]): process ids the demo started, by role (for tests).
    """

    status: int
    layout: Layout
    kept: bool = False
    report: str | None = None
    report_path: Path | None = None
    formation_id: str | None = None
    sessions: dict[str, str] = attrs.field(factory=dict)
    child_dir: Path | None = None
    pids: dict[str, int] = attrs.field(factory=dict)

    def summary(self) -> dict[str, object]:
        """The ``--json`` line's object."""
        return {
            "status": self.status,
            "report": str(self.report_path) if self.report_path else None,
            "formation_id": self.formation_id,
            "sessions": dict(self.sessions),
            "child_dir": str(self.child_dir) if self.child_dir else None,
            "home": str(self.layout.home),
            "base": str(self.layout.base),
            "kept": self.kept,
        }


# --- pure pieces ------------------------------------------------------------------------------


def examples_dir() -> Path:
    """The shipped example (``murmur/examples/audit``, package data)."""
    return Path(__file__).resolve().parent / "examples" / EXAMPLE


def default_target() -> Path:
    """The installed ``murmur`` package's own source directory."""
    return Path(__file__).resolve().parent


def resolve_target(target: Path | None) -> Path:
    """The directory to audit, absolute and resolved.

    Raises:
        DiagnosticError: ``E-IO-001`` when it is not an existing directory.
    """
    path = (target or default_target()).expanduser()
    if not path.is_dir():
        raise DiagnosticError(error(
            "E-IO-001", f"nothing to audit: {path} is not a directory", path=str(path),
            hint="name a directory of source code: `mur demo PATH` (default: murmur's own source)"))
    return path.resolve()


def task_text(target: Path) -> str:
    """The formation's task: ``audit <absolute path>``."""
    return f"audit {target}"


def shell_status(code: int) -> int:
    """An exit status as a shell reports it: ``n``, or ``128 + sig`` for ``-sig``."""
    return code if code >= 0 else 128 - code


def child_environment(environ: Mapping[str, str], layout: Layout, python_dir: Path | None) -> dict[str, str]:
    """The environment of every process the demo starts (before role-specific additions).

    The caller's environment, minus the variables the demo owns or that would turn its
    processes into something else (``MURMUR_HOME``, ``MURMUR_ROOST_URL``,
    ``MURMUR_MUR_BINARY``, ``MURMUR_FORMATION_*``, ``MURMUR_SPAWNER*``, ``AUDIT_DESK_URL``),
    plus ``MURMUR_HOME`` = the private home. When ``python_dir`` holds a ``python3`` it is
    put first on ``PATH``, so the checks run with the Python that runs murmur.

    Args:
        environ (Mapping[str, str]): the demo's own environment.
        layout (Layout): the demo's directories.
        python_dir (Path | None): the running interpreter's directory.
    """
    env = {
        k: v for k, v in environ.items()
        if k not in _DROPPED_ENV and not k.startswith(_DROPPED_ENV_PREFIXES)
    }
    env["MURMUR_HOME"] = str(layout.home)
    path = env.get("PATH") or "/usr/local/bin:/usr/bin:/bin"
    if python_dir is not None and (python_dir / "python3").exists():
        parts = [p for p in path.split(os.pathsep) if p and Path(p) != python_dir]
        path = os.pathsep.join([str(python_dir), *parts])
    env["PATH"] = path
    return env


def _script_beside_interpreter(name: str, module: str) -> list[str]:
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-c", f"import sys; from {module} import main; sys.exit(main())"]


def mur_binary() -> list[str]:
    """``mur`` beside the running interpreter, else ``python -m murmur.cli.mur``."""
    beside = Path(sys.executable).parent / "mur"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-m", "murmur.cli.mur"]


def roost_binary() -> list[str]:
    """``mur-roost`` beside the running interpreter, else the same entry point via ``python -c``."""
    return _script_beside_interpreter("mur-roost", "murmur.cli.roost")


def install_command(mur: Sequence[str], capsule_dir: Path) -> list[str]:
    """``mur install -g <capsule dir>`` (builds the archive, then installs it globally)."""
    return [*mur, "install", "-g", str(capsule_dir)]


def roost_command(roost: Sequence[str], layout: Layout, port: int = 0) -> list[str]:
    """mur-roost on ``port`` (0: a free one), reading the private store, admitting the desk."""
    return [*roost, "--port", str(port), "--registry-path", str(layout.artifacts),
            "--spawn-allow", DESK]


def desk_command(mur: Sequence[str], layout: Layout) -> list[str]:
    """The check desk: an ordinary session of ``local/audit-desk`` that prints its readiness line."""
    return [*mur, "run", "--capsule", f"local/{DESK}", "--capsule-version", VERSION,
            "--workdir", str(layout.desk_workdir), "--project-dir", str(layout.project),
            "--no-env-file", "--json"]


def formation_command(mur: Sequence[str], layout: Layout, target: Path) -> list[str]:
    """The formation: ``mur run --roster <project> --task "audit <target>" --json``."""
    return [*mur, "run", "--roster", str(layout.project), "--task", task_text(target),
            "--no-env-file", "--json"]


def parse_roost_port(line: bytes) -> int | None:
    """The port in ``mur-roost: listening on 127.0.0.1:<port>``, or None for any other line."""
    text = line.decode("utf-8", "replace").strip()
    prefix = "mur-roost: listening on 127.0.0.1:"
    if not text.startswith(prefix):
        return None
    digits = text[len(prefix):]
    return int(digits) if digits.isdigit() else None


def rerun_script(layout: Layout, target: Path) -> list[str]:
    """Shell lines that rerun the kept demo by hand (``--keep``), one command each."""
    q = shlex.quote
    home = q(str(layout.home))
    return [
        f"export MURMUR_HOME={home}",
        f"mur-roost --port 7700 --registry-path {q(str(layout.artifacts))} --spawn-allow {DESK} &",
        (f"MURMUR_ROOST_URL=http://127.0.0.1:7700 mur run --capsule local/{DESK} "
         f"--capsule-version {VERSION} --workdir {q(str(layout.desk_workdir))} "
         f"--project-dir {q(str(layout.project))} &"
         "    # prints `murmur: url http://127.0.0.1:<port>`"),
        (f"AUDIT_DESK_URL=http://127.0.0.1:<port> mur run --roster {q(str(layout.project))} "
         f"--task {q(task_text(target))}"),
        "mur ps          # then stop the desk (mur stop <session>) and mur-roost (kill %1)",
    ]


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _seconds(ms: object) -> str:
    return f"{int(ms) / 1000:.1f}s" if isinstance(ms, int) else "?"


_ORIGINS = {
    "user": "its launch task",
    "peer": "a task from a member",
    "event": "a task over its door",
    "completion": "a child's completion",
}


def describe_record(label: str, record: Mapping[str, Any]) -> str | None:
    """The progress line for one trace record of ``label``'s session, or None to stay quiet.

    Args:
        label (str): who wrote the trace (``lead``, ``inventory``, ``audit-desk`` …).
        record (Mapping[str, Any]): one ``trace.jsonl`` object (spec/trace.md).
    """
    kind = record.get("event_type")
    if kind == "task_start":
        origin = str(record.get("origin", ""))
        return f"{label}: took {_ORIGINS.get(origin, 'a task')}"
    if kind == "task_end":
        status = record.get("exit_status", "?")
        shells = record.get("shell_calls", 0)
        extra = f", {shells} shell command{'' if shells == 1 else 's'}" if shells else ""
        return f"{label}: task {status} in {_seconds(record.get('duration_ms'))}{extra}"
    if kind == "delegation_start":
        return (f"{label}: delegated to {record.get('capsule')} {record.get('version')} through "
                f"mur-roost; child session {record.get('child_session_id')}")
    if kind == "delegation":
        return f"{label}: delegation to {record.get('capsule')} ended {record.get('outcome')}"
    if kind == "plan_step" and record.get("kind") in ("member", "capsule") and record.get("status") != "ok":
        return f"{label}: step {record.get('step')} {record.get('status')}: {record.get('reason', '')}".rstrip(": ")
    return None


# --- files ------------------------------------------------------------------------------------


def prepare_layout(home: Path | None) -> tuple[Layout, bool]:
    """Make the demo directory: ``--home DIR`` (new, empty, or an earlier demo's), else a temp one.

    Returns:
        tuple[Layout, bool]: the layout and whether it is a fresh temporary directory.

    Raises:
        DiagnosticError: ``E-DMO-001`` when ``DIR`` holds anything but an earlier demo;
        ``E-IO-002``/``E-IO-003`` when it cannot be made.
    """
    if home is None:
        base = Path(tempfile.mkdtemp(prefix="mur-demo-")).resolve()
        (base / MARKER).write_text("mur demo\n", encoding="utf-8")
        return Layout(base), True
    base = home.expanduser().resolve()
    try:
        if base.exists() and (not base.is_dir() or (any(base.iterdir()) and not (base / MARKER).is_file())):
            raise DiagnosticError(error(
                "E-DMO-001", f"{base} is not empty and is not a directory `mur demo` made",
                path=str(base), hint="name a new or empty directory (or one an earlier `mur demo --home` used)"))
        base.mkdir(parents=True, exist_ok=True)
        (base / MARKER).write_text("mur demo\n", encoding="utf-8")
    except PermissionError as exc:
        raise DiagnosticError(error("E-IO-002", f"cannot write {base}: {exc.strerror}", path=str(base))) from None
    except OSError as exc:
        raise DiagnosticError(error("E-IO-003", f"cannot make {base}: {exc.strerror}", path=str(base))) from None
    return Layout(base), False


def copy_example(layout: Layout) -> None:
    """Copy ``examples/audit`` into the layout's project directory (replacing an earlier copy)."""
    if layout.project.exists():
        shutil.rmtree(layout.project)
    shutil.copytree(examples_dir(), layout.project,
                    ignore=shutil.ignore_patterns("*.mur.zip", "__pycache__", ".murmur"))
    layout.desk_workdir.mkdir(parents=True, exist_ok=True)


# --- the watchdog -----------------------------------------------------------------------------


def watchdog_main(fd: int, grace: float = 25.0) -> int:
    """The watchdog process: stop the demo's process groups when the demo is gone.

    Reads lines from ``fd`` (the read end of a pipe only the demo writes to): ``+<pgid>``
    adds a group, ``-<pgid>`` forgets one, ``done`` ends the watchdog with nothing to do.
    EOF before ``done`` means the demo died: every remembered group gets SIGTERM, and after
    ``grace`` seconds whatever is left gets SIGKILL.

    Args:
        fd (int): the pipe's read end.
        grace (float): seconds between SIGTERM and SIGKILL.

    Returns:
        int: 0.
    """
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    groups: dict[int, None] = {}
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except InterruptedError:
            continue
        except OSError:
            chunk = b""
        if not chunk:
            break
        *lines, pending = (pending + chunk).split(b"\n")
        for line in lines:
            if line == b"done":
                return 0
            if line[:1] in (b"+", b"-") and line[1:].isdigit():
                if line[:1] == b"+":
                    groups[int(line[1:])] = None
                else:
                    groups.pop(int(line[1:]), None)
    _end_groups(list(groups), grace)
    return 0


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a group; False when the group is empty."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def _end_groups(groups: list[int], grace: float) -> None:
    live = [g for g in groups if _signal_group(g, signal.SIGTERM)]
    end = time.monotonic() + grace
    while live and time.monotonic() < end:
        time.sleep(0.1)
        live = [g for g in live if _signal_group(g, 0)]
    for g in live:
        _signal_group(g, signal.SIGKILL)


# --- processes --------------------------------------------------------------------------------


class _LineReader:
    """Whole lines from a trio receive stream (the last partial line at EOF too)."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = b""
        self._eof = False

    async def line(self) -> bytes | None:
        """The next line without its newline; None at EOF."""
        while b"\n" not in self._buf:
            if self._eof:
                if self._buf:
                    out, self._buf = self._buf, b""
                    return out
                return None
            chunk = await self._stream.receive_some(65536)
            if not chunk:
                self._eof = True
            self._buf += chunk
        out, _, self._buf = self._buf.partition(b"\n")
        return out


@attrs.define
class _Child:
    """One process the demo started, in a process group of its own (pgid = pid)."""

    label: str
    process: trio.Process
    stop_signal: int = signal.SIGTERM

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    def kill_group(self) -> None:
        """SIGKILL the whole group (synchronous; used by the second signal)."""
        _signal_group(self.pid, signal.SIGKILL)

    async def stop(self, grace: float) -> int:
        """SIGTERM the process, wait ``grace`` s, SIGKILL its group, reap, sweep the group."""
        if self.running:
            try:
                self.process.send_signal(self.stop_signal)
            except ProcessLookupError:
                pass
            with trio.move_on_after(grace):
                await self.process.wait()
            if self.running:
                self.kill_group()
        code = await self.process.wait()
        _signal_group(self.pid, signal.SIGKILL)
        return code


class _Say:
    """Progress lines on stderr, behind ``[demo] ``."""

    def __init__(self, err: TextIO) -> None:
        self._err = err

    def __call__(self, text: str) -> None:
        try:
            self._err.write(f"[demo] {text}\n")
            self._err.flush()
        except (OSError, ValueError):
            pass


class _Traces:
    """Follows trace files and turns their records into progress lines."""

    def __init__(self, say: Callable[[str], None], on_record: Callable[[str, dict[str, Any]], None]) -> None:
        self._say = say
        self._on_record = on_record
        self._files: dict[Path, tuple[str, int, bytes]] = {}

    def follow(self, path: Path, label: str) -> None:
        """Start following ``path`` (it may not exist yet)."""
        self._files.setdefault(path, (label, 0, b""))

    def poll(self) -> None:
        """Read what each file gained since the last poll."""
        for path, (label, offset, pending) in list(self._files.items()):
            try:
                with path.open("rb") as fh:
                    fh.seek(offset)
                    data = fh.read()
            except OSError:
                continue
            *lines, rest = (pending + data).split(b"\n")
            self._files[path] = (label, offset + len(data), rest)
            for raw in lines:
                try:
                    record = json.loads(raw)
                except ValueError:
                    continue
                if isinstance(record, dict):
                    self._on_record(label, record)
                    line = describe_record(label, record)
                    if line:
                        self._say(line)


async def _relay(stream: trio.abc.ReceiveStream | None, prefix: str, err: TextIO) -> None:
    if stream is None:
        return
    reader = _LineReader(stream)
    while (raw := await reader.line()) is not None:
        try:
            err.write(prefix + raw.decode("utf-8", "replace") + "\n")
            err.flush()
        except (OSError, ValueError):
            pass


class _StartFailed(Exception):
    def __init__(self, what: str, detail: str) -> None:
        super().__init__(what)
        self.what = what
        self.detail = detail


class DemoRun:
    """The state of one demo run (processes, ids, progress); made by :func:`demo`."""

    def __init__(self, options: DemoOptions, layout: Layout, target: Path, environ: Mapping[str, str],
                 out: TextIO, err: TextIO) -> None:
        self.options = options
        self.timers = options.timers
        self.layout = layout
        self.target = target
        self.out = out
        self.err = err
        self.say = _Say(err)
        self.env = child_environment(environ, layout, Path(sys.executable).parent)
        self.mur = mur_binary()
        self.children: list[_Child] = []
        self.outcome = DemoOutcome(status=1, layout=layout)
        self.traces = _Traces(self.say, self._on_record)
        self.watchdog: trio.Process | None = None
        self.watch_fd: int | None = None
        self.launcher: _Child | None = None
        self.work_scope = trio.CancelScope()
        self.signum: int | None = None
        self.failure: _StartFailed | None = None

    # -- bookkeeping

    def _on_record(self, label: str, record: dict[str, Any]) -> None:
        if record.get("event_type") == "delegation_start" and label == DESK:
            child_sid = record.get("child_session_id")
            rel = record.get("child_workdir")
            if isinstance(child_sid, str) and isinstance(rel, str):
                child_dir = (self.layout.desk_workdir / rel).resolve()
                self.outcome.sessions[CHILD] = child_sid
                self.outcome.child_dir = child_dir
                self.traces.follow(child_dir / ".murmur" / child_sid / "trace.jsonl", f"{CHILD} (child)")

    def _tell_watchdog(self, line: str) -> None:
        if self.watch_fd is None:
            return
        try:
            os.write(self.watch_fd, line.encode() + b"\n")
        except OSError:
            pass

    async def _spawn(self, label: str, argv: list[str], env: Mapping[str, str], *,
                     stdout: bool = True, stderr_prefix: str | None = None,
                     nursery: trio.Nursery) -> _Child:
        proc = await trio.lowlevel.open_process(
            argv, env=dict(env), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE if stdout else subprocess.DEVNULL,
            stderr=subprocess.PIPE if stderr_prefix is not None else None,
            start_new_session=True,
        )
        child = _Child(label, proc)
        self.children.append(child)
        self.outcome.pids[label] = proc.pid
        self._tell_watchdog(f"+{proc.pid}")
        if stderr_prefix is not None:
            nursery.start_soon(_relay, proc.stderr, stderr_prefix, self.err)
        return child

    async def start_watchdog(self) -> None:
        """Start the watchdog process (see :func:`watchdog_main`)."""
        read_fd, write_fd = os.pipe()
        try:
            code = f"import sys; from murmur.demo import watchdog_main; sys.exit(watchdog_main({read_fd}, {self.timers.watchdog_grace!r}))"
            self.watchdog = await trio.lowlevel.open_process(
                [sys.executable, "-c", code], stdin=subprocess.DEVNULL, pass_fds=(read_fd,),
                start_new_session=True, env=dict(self.env))
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        self.watch_fd = write_fd

    async def stop_watchdog(self) -> None:
        """Tell the watchdog the demo ended in order, and reap it."""
        if self.watch_fd is not None:
            self._tell_watchdog("done")
            os.close(self.watch_fd)
            self.watch_fd = None
        if self.watchdog is not None:
            with trio.move_on_after(5):
                await self.watchdog.wait()
            if self.watchdog.returncode is None:
                self.watchdog.kill()
                await self.watchdog.wait()

    # -- phases

    async def install(self) -> None:
        """Build and install every example capsule into the private home (concurrently)."""
        t0 = time.monotonic()
        failures: list[str] = []

        async def one(name: str) -> None:
            cmd = install_command(self.mur, self.layout.project / name)
            result = await trio.run_process(cmd, env=self.env, capture_stdout=True, capture_stderr=True,
                                            check=False, start_new_session=True,
                                            deliver_cancel=_kill_group_now)
            if result.returncode != 0:
                failures.append(result.stderr.decode("utf-8", "replace").strip() or f"`{shlex.join(cmd)}` failed")

        async with trio.open_nursery() as n:
            for name in CAPSULE_DIRS:
                n.start_soon(one, name)
        if failures:
            raise DiagnosticError(error("E-DMO-002", "the example capsules could not be installed:\n" + "\n".join(failures)))
        names = ", ".join(f"local/audit-{d}" for d in CAPSULE_DIRS)
        self.say(f"built and installed {len(CAPSULE_DIRS)} capsules ({names}) in {time.monotonic() - t0:.1f}s")

    async def start_roost(self, nursery: trio.Nursery) -> str:
        """Start mur-roost on a free port; return its base URL."""
        child = await self._spawn("mur-roost", roost_command(roost_binary(), self.layout), self.env,
                                  stderr_prefix="[mur-roost] ", nursery=nursery)
        assert child.process.stdout is not None
        reader = _LineReader(child.process.stdout)
        port: int | None = None
        with trio.move_on_after(self.timers.startup):
            while (raw := await reader.line()) is not None:
                port = parse_roost_port(raw)
                if port is not None:
                    break
        if port is None:
            raise _StartFailed("mur-roost", "it printed no `listening on` line" if child.running
                               else f"it exited with status {await child.process.wait()}")
        nursery.start_soon(_drain, reader)
        self.say(f"mur-roost listening on 127.0.0.1:{port} (pid {child.pid}), admitting one top-level "
                 f"capsule: --spawn-allow {DESK}")
        return f"http://127.0.0.1:{port}"

    async def start_desk(self, nursery: trio.Nursery, roost_url: str) -> str:
        """Start the check desk; return its door's URL."""
        env = {**self.env, "MURMUR_ROOST_URL": roost_url}
        child = await self._spawn(DESK, desk_command(self.mur, self.layout), env,
                                  stderr_prefix=f"[{DESK}] ", nursery=nursery)
        assert child.process.stdout is not None
        reader = _LineReader(child.process.stdout)
        ready: dict[str, Any] | None = None
        with trio.move_on_after(self.timers.startup):
            raw = await reader.line()
            if raw is not None:
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = None
                ready = parsed if isinstance(parsed, dict) else None
        if ready is None or not isinstance(ready.get("url"), str):
            detail = ("its first line was not a readiness line" if child.running
                      else f"it exited with status {await child.process.wait()}")
            raise _StartFailed("the check desk", detail)
        nursery.start_soon(_drain, reader)
        sid = str(ready.get("session_id"))
        self.outcome.sessions[DESK] = sid
        records = ready.get("records_dir")
        if isinstance(records, str):
            self.traces.follow(Path(records) / "trace.jsonl", DESK)
        self.say(f"check desk {DESK} up outside the formation: session {sid} at {ready['url']} "
                 "(public loopback door; it may delegate)")
        return str(ready["url"])

    async def run_formation(self, nursery: trio.Nursery, desk_url: str) -> int:
        """Run the formation to its end; return the launcher's exit status (shell form)."""
        env = {**self.env, DESK_URL_ENV: desk_url}
        cmd = formation_command(self.mur, self.layout, self.target)
        self.say(f"launching the formation: mur run --roster {self.layout.project} --task {shlex.quote(task_text(self.target))}")
        child = await self._spawn("launcher", cmd, env, stderr_prefix="", nursery=nursery)
        self.launcher = child
        self.say(f"formation launcher: pid {child.pid}")
        assert child.process.stdout is not None
        reader = _LineReader(child.process.stdout)
        while (raw := await reader.line()) is not None:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                self._formation_line(line)
        code = await child.process.wait()
        self._tell_watchdog(f"-{child.pid}")
        if code < 0:
            self.say(f"the formation launcher was killed by {_signal_name(-code)}")
        return shell_status(code)

    def _formation_line(self, line: dict[str, Any]) -> None:
        if "formation_id" in line and "peers" in line:
            self.outcome.formation_id = str(line["formation_id"])
            self.say(f"formation {line['formation_id']} launched; entry member {line.get('entry')} starts last")
            for peer in line.get("peers") or []:
                if not isinstance(peer, dict):
                    continue
                name, sid = str(peer.get("name")), str(peer.get("session_id"))
                self.outcome.sessions[name] = sid
                self.say(f"member {name} up: session {sid}, pid {peer.get('pid')}, door {peer.get('url')}")
                workdir = peer.get("workdir")
                if isinstance(workdir, str):
                    self.traces.follow(self.layout.records_dir(Path(workdir), sid) / "trace.jsonl", name)
        elif "session_id" in line:
            sid = str(line["session_id"])
            self.outcome.sessions[ENTRY] = sid
            self.say(f"entry member {ENTRY} up: session {sid}, task {task_text(self.target)!r}")
            records = line.get("records_dir")
            if isinstance(records, str):
                self.outcome.report_path = Path(records) / "out" / "result.txt"
                self.traces.follow(Path(records) / "trace.jsonl", ENTRY)

    async def follow_traces(self) -> None:
        while True:
            self.traces.poll()
            await trio.sleep(self.timers.poll)

    async def stop_all(self) -> None:
        """Stop every child still running, in order: the launcher, then the desk and mur-roost."""
        grace = {"launcher": self.timers.launcher_stop, DESK: self.timers.desk_stop,
                 "mur-roost": self.timers.roost_stop}
        launcher = [c for c in self.children if c.label == "launcher"]
        others = [c for c in self.children if c.label != "launcher"]
        for c in launcher:
            if c.running:
                self.say("stopping the formation (SIGTERM to its launcher)")
            await c.stop(grace["launcher"])
            self._tell_watchdog(f"-{c.pid}")

        async def stop(c: _Child) -> None:
            await c.stop(grace.get(c.label, 10.0))
            self._tell_watchdog(f"-{c.pid}")

        if any(c.running for c in others):
            self.say("stopping the check desk and mur-roost")
        async with trio.open_nursery() as n:
            for c in others:
                n.start_soon(stop, c)

    def kill_all_now(self) -> None:
        """SIGKILL every group at once (the second signal)."""
        for c in self.children:
            c.kill_group()

    def interrupt(self, signum: int) -> bool:
        """Stop the run in order because of ``signum``; False when it was already stopping."""
        if self.signum is not None:
            return False
        self.signum = signum
        self.work_scope.cancel()
        return True

    def abandon(self) -> None:
        """The second signal: SIGKILL every group now and drop a temporary directory."""
        self.kill_all_now()
        self.say("second signal: killed every process group the demo started")
        if not (self.options.keep or self.options.home is not None):
            shutil.rmtree(self.layout.base, ignore_errors=True)

    async def launch_all(self) -> None:
        """mur-roost, then the desk, then the formation; everything is stopped on the way out."""
        async with trio.open_nursery() as relays:
            try:
                roost_url = await self.start_roost(relays)
                desk_url = await self.start_desk(relays, roost_url)
                async with trio.open_nursery() as watching:
                    watching.start_soon(self.follow_traces)
                    self.outcome.status = await self.run_formation(relays, desk_url)
                    watching.cancel_scope.cancel()
            except _StartFailed as exc:
                self.failure = exc
            finally:
                with trio.CancelScope(shield=True):
                    await self.stop_all()
                    self.traces.poll()
                # Let the relays print the last lines of processes that are gone, briefly.
                relays.cancel_scope.deadline = trio.current_time() + 1.0


async def _drain(reader: _LineReader) -> None:
    while await reader.line() is not None:
        pass


async def _kill_group_now(process: trio.Process) -> None:
    _signal_group(process.pid, signal.SIGKILL)


# --- the whole run ----------------------------------------------------------------------------


async def demo(options: DemoOptions, *, out: TextIO, err: TextIO,
               environ: Mapping[str, str] | None = None,
               started: Callable[[DemoRun], None] | None = None) -> DemoOutcome:
    """Run the demo once (see the module docstring); returns with every process reaped.

    Args:
        options (DemoOptions): what to do.
        out (TextIO): where the report (or the ``--json`` line) goes.
        err (TextIO): where progress goes.
        environ (Mapping[str, str] | None): the environment to start from (default ``os.environ``).
        started (Callable | None): called with the run's state as soon as it exists; its
            :meth:`DemoRun.interrupt` stops the run in order (signal handlers use it).

    Returns:
        DemoOutcome: status, report, ids and paths. An interrupted run has status
        ``128 + signal``.

    Raises:
        DiagnosticError: ``E-IO-001`` (no such directory to audit), ``E-DMO-001`` (``--home``
        holds something else), ``E-DMO-002`` (installs, mur-roost or the desk failed).
    """
    target = resolve_target(options.target)
    layout, _ = prepare_layout(options.home)
    keep = options.keep or options.home is not None
    run = DemoRun(options, layout, target, os.environ if environ is None else environ, out, err)
    try:
        if started is not None:
            started(run)
        run.say(f"auditing {target}")
        run.say(f"demo directory: {layout.base} ({'kept' if keep else 'removed at the end; --keep leaves it'})")
        t0 = time.monotonic()
        with run.work_scope:
            try:
                copy_example(layout)
                await run.start_watchdog()
                await run.install()
                await run.launch_all()
            finally:
                with trio.CancelScope(shield=True):
                    await run.stop_all()
                    await run.stop_watchdog()
        if run.failure is not None:
            raise DiagnosticError(error(
                "E-DMO-002", f"{run.failure.what} did not come up: {run.failure.detail}",
                hint="its own lines above say why"))
        if run.signum is not None:
            run.outcome.status = 128 + run.signum
        run.outcome.kept = keep
        _finish(run, time.monotonic() - t0)
        if keep and not options.json:
            run.say(f"kept {layout.base}; to run it again by hand:")
            for line in rerun_script(layout, target):
                run.say(f"  {line}")
        if options.json:
            print(json.dumps(run.outcome.summary()), file=out, flush=True)
        return run.outcome
    finally:
        if not keep:
            shutil.rmtree(layout.base, ignore_errors=True)


def _finish(run: DemoRun, elapsed: float) -> None:
    outcome, say = run.outcome, run.say
    path = outcome.report_path
    if path is not None:
        try:
            outcome.report = path.read_text(encoding="utf-8")
        except OSError:
            outcome.report = None
    if run.signum is not None:
        say(f"interrupted by {_signal_name(run.signum)}; every process the demo started is stopped")
    if outcome.report is not None and not run.options.json:
        print(outcome.report.rstrip("\n"), file=run.out, flush=True)
    if path is not None and outcome.report is not None:
        say(f"report: {path}" + ("" if outcome.kept else " (removed with the demo directory; --keep leaves it)"))
    elif run.signum is None:
        say("no report was written")
    say(f"status {outcome.status} after {elapsed:.1f}s")


def run_demo(options: DemoOptions, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``mur demo`` from the command line: run :func:`demo` under signal handling.

    The first SIGINT, SIGTERM or SIGHUP stops the run in order (the formation first, then the
    desk and mur-roost); a second one SIGKILLs every process group the demo started and exits
    ``128 + signal`` at once.

    Returns:
        int: the formation's exit status (``128 + signal`` when interrupted).

    Raises:
        DiagnosticError: as :func:`demo`.
    """
    out_stream = out or sys.stdout
    err_stream = err or sys.stderr

    async def main() -> int:
        runs: list[DemoRun] = []
        pending: list[int] = []

        def started(run: DemoRun) -> None:
            runs.append(run)
            for signum in pending:
                run.interrupt(signum)

        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async with trio.open_nursery() as n:

                async def watch() -> None:
                    async for signum in signals:
                        if not runs:
                            pending.append(int(signum))
                        elif not runs[0].interrupt(int(signum)):
                            runs[0].abandon()
                            os._exit(128 + int(signum))

                n.start_soon(watch)
                try:
                    outcome = await demo(options, out=out_stream, err=err_stream, started=started)
                finally:
                    n.cancel_scope.cancel()
        return outcome.status

    return trio.run(main)
