"""The demo's values and files: options, bounds, where things go, what to audit.

Pure except :func:`prepare_layout` and :func:`copy_example`, which make the demo directory.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import attrs

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.paths import oserror_hint

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
        page (Path | None): the run's trace page (``trace.html`` in a kept demo directory;
            spec/trace.md "The page").
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
    page: Path | None = None

    def summary(self) -> dict[str, object]:
        """The ``--json`` line's object: the report's text always; the paths only when the
        demo's directory is kept (null when it was removed at the end, so no path it names is
        gone)."""

        def kept_path(path: Path | None) -> str | None:
            return str(path) if path is not None and self.kept else None

        return {
            "status": self.status,
            "report_text": self.report,
            "report": kept_path(self.report_path),
            "formation_id": self.formation_id,
            "sessions": dict(self.sessions),
            "child_dir": kept_path(self.child_dir),
            "home": kept_path(self.layout.home),
            "base": kept_path(self.layout.base),
            "kept": self.kept,
            "page": kept_path(self.page),
        }


def examples_dir() -> Path:
    """The shipped example (``murmur/examples/audit``, package data)."""
    return Path(__file__).resolve().parent.parent / "examples" / EXAMPLE


def default_target() -> Path:
    """The installed ``murmur`` package's own source directory."""
    return Path(__file__).resolve().parent.parent


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
        raise DiagnosticError(error("E-IO-002", f"cannot write {base}: {exc.strerror}", path=str(base),
                                    hint=_home_hint(exc, base))) from None
    except OSError as exc:
        raise DiagnosticError(error("E-IO-003", f"cannot make {base}: {exc.strerror}", path=str(base),
                                    hint=_home_hint(exc, base))) from None
    return Layout(base), False


def _home_hint(exc: OSError, base: Path) -> str:
    return f"{oserror_hint(exc, base)}; or leave out --home (the demo then uses a temporary directory)"


def copy_example(layout: Layout) -> None:
    """Copy ``examples/audit`` into the layout's project directory (replacing an earlier copy).

    Raises:
        DiagnosticError: ``E-IO-001`` when the example is missing from the installed package.
    """
    source = examples_dir()
    if not (source / "roster.yaml").is_file():
        raise DiagnosticError(error(
            "E-IO-001", f"the example formation is not installed with murmur (no {source / 'roster.yaml'})",
            path=str(source), hint="reinstall murmur: the package data murmur/examples/** is missing"))
    if layout.project.exists():
        shutil.rmtree(layout.project)
    shutil.copytree(source, layout.project,
                    ignore=shutil.ignore_patterns("*.mur.zip", "__pycache__", ".murmur"))
    layout.desk_workdir.mkdir(parents=True, exist_ok=True)
