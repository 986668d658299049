"""Formation directories: where each peer works, and the marker saying whose they are.

Layout (``spec/formation.md`` "The launch, step by step", step 3)::

    $MURMUR_HOME/formations/                        owner-only
    └── <project>/                                  owner-only; <project> = the project dir's name
        └── frm_<32 hex>/                           owner-only; one per launch, never reused
            ├── formation.json                      0600, written before the first peer dir
            └── <member>/                           0700; a peer's work folder

``<project>`` is the last component of the roster's project directory (symlinks resolved).
Two projects with the same name share that directory; ``formation.json`` names the project
that owns each formation, so neither removes the other's (see :mod:`murmur.formation.launch.retention`).

A peer's records live under ``$MURMUR_HOME/records/`` followed by its work folder's absolute
path without the leading ``/`` (:func:`records_dir_for`).

The entry member runs in the project directory itself; a roster with no peers makes no
formation directory and no marker.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path

import attrs

from murmur import paths, procstat

MARKER_NAME = "formation.json"
"""The ownership marker's file name inside a formation directory."""


def formations_root() -> Path:
    """``$MURMUR_HOME/formations``."""
    return paths.murmur_home() / "formations"


def records_root() -> Path:
    """``$MURMUR_HOME/records``."""
    return paths.murmur_home() / "records"


def project_key(project_dir: Path) -> str:
    """The ``<project>`` component for a project directory: its last path component.

    Args:
        project_dir (Path): the roster's project directory, already resolved.

    Returns:
        str: the directory's name, or ``"root"`` for ``/``.
    """
    return project_dir.name or "root"


def records_dir_for(work_folder: Path) -> Path:
    """Where the records of sessions working in ``work_folder`` are kept.

    Args:
        work_folder (Path): an absolute path.

    Returns:
        Path: ``$MURMUR_HOME/records/<work_folder without its leading />``.
    """
    return records_root() / str(work_folder).lstrip("/")


@attrs.frozen
class FormationLayout:
    """The paths of one launch's formation directory.

    Attributes:
        project_dir (Path): the roster's project directory (resolved).
        formation_id (str): ``frm_`` + 32 hex.
        root (Path): ``$MURMUR_HOME/formations``.
    """

    project_dir: Path
    formation_id: str
    root: Path = attrs.field(factory=formations_root)

    @property
    def project_formations(self) -> Path:
        """``<root>/<project>``: every formation directory of this project name."""
        return self.root / project_key(self.project_dir)

    @property
    def formation_dir(self) -> Path:
        """``<root>/<project>/<formation-id>``."""
        return self.project_formations / self.formation_id

    @property
    def marker_path(self) -> Path:
        """``<formation_dir>/formation.json``."""
        return self.formation_dir / MARKER_NAME

    def peer_dir(self, member: str) -> Path:
        """A peer's work folder, ``<formation_dir>/<member>``."""
        return self.formation_dir / member


@attrs.frozen
class Marker:
    """The content of ``formation.json``.

    Attributes:
        project_dir (str): the roster's project directory, symlinks resolved.
        launcher_pid (int): the launcher's process id.
        launcher_start (str): the launcher's start time (:func:`murmur.procstat.start_time`)
            as decimal text; empty when it could not be read
            (:func:`murmur.formation.launch.procinfo.recorded_start` reads it back).
    """

    project_dir: str
    launcher_pid: int
    launcher_start: str

    @classmethod
    def of_this_launcher(cls, project_dir: Path) -> Marker:
        """The marker of a launch this process runs: ``project_dir``, this pid, its start time."""
        pid = os.getpid()
        started = procstat.start_time(pid)
        return cls(str(project_dir), pid, "" if started is None else str(started))

    def to_json(self) -> str:
        """The file's text (one JSON object and a newline)."""
        body = {
            "project_dir": self.project_dir,
            "launcher_pid": self.launcher_pid,
            "launcher_start": self.launcher_start,
        }
        return json.dumps(body) + "\n"


def parse_marker(text: str) -> Marker | None:
    """Read a marker's text; None when it is not a well-formed marker."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    project = data.get("project_dir")
    pid = data.get("launcher_pid")
    start = data.get("launcher_start", "")
    if not isinstance(project, str) or not project:
        return None
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return None
    if not isinstance(start, str):
        return None
    return Marker(project, pid, start)


def read_marker(formation_dir: Path) -> Marker | None:
    """The marker of ``formation_dir``; None when absent, unreadable or malformed."""
    try:
        text = (formation_dir / MARKER_NAME).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return parse_marker(text)


@attrs.frozen
class DirRefusal:
    """Why a peer's directory could not be made (reported under ``E-RUN-045``).

    Attributes:
        member (str): the peer's name.
        reason (str): e.g. ``its directory /x/y already exists``.
    """

    member: str
    reason: str


@attrs.frozen
class PreparedDirs:
    """The outcome of :func:`prepare`.

    Attributes:
        peer_dirs (dict[str, Path]): each peer's work folder, made at mode 0700.
        marker_warning (str | None): why no marker was written (the launch goes on).
        refusals (tuple[DirRefusal, ...]): directories that could not be made; when non-empty
            nothing may be launched.
    """

    peer_dirs: dict[str, Path]
    marker_warning: str | None
    refusals: tuple[DirRefusal, ...]


def _make_owner_only(path: Path) -> None:
    """Make ``path`` (and missing parents) a directory and chmod it 0700."""
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(path, 0o700)


def _write_marker(path: Path, marker: Marker) -> None:
    """Create ``path`` exclusively at mode 0600 holding ``marker``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        data = marker.to_json().encode("utf-8")
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


def _describe(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def prepare_dirs(layout: FormationLayout, marker: Marker, peers: Sequence[str]) -> PreparedDirs:
    """Make a launch's formation directory, its marker and each peer's work folder.

    Order (``spec/formation.md``, launch step 3): ``formations/`` and ``formations/<project>/`` are made owner-only; the
    formation directory is made; ``formation.json`` is written at 0600; then each peer's
    directory at 0700. A path already there is never reused. With no peers nothing is made.

    Args:
        layout (FormationLayout): where.
        marker (Marker): what ``formation.json`` holds.
        peers (Sequence[str]): the peers' names, in roster order.

    Returns:
        PreparedDirs: the peers' directories, or the refusals (then nothing is launched). A
        marker that cannot be written is a warning, not a refusal.
    """
    if not peers:
        return PreparedDirs({}, None, ())
    try:
        _make_owner_only(layout.root)
        _make_owner_only(layout.project_formations)
    except OSError as exc:
        reason = f"its directory could not be made ({layout.project_formations}: {_describe(exc)})"
        return PreparedDirs({}, None, tuple(DirRefusal(p, reason) for p in peers))
    try:
        os.mkdir(layout.formation_dir, 0o700)
        os.chmod(layout.formation_dir, 0o700)
    except FileExistsError:
        reason = f"its directory {layout.formation_dir} already exists"
        return PreparedDirs({}, None, tuple(DirRefusal(p, reason) for p in peers))
    except OSError as exc:
        reason = f"its directory could not be made ({layout.formation_dir}: {_describe(exc)})"
        return PreparedDirs({}, None, tuple(DirRefusal(p, reason) for p in peers))
    warning: str | None = None
    try:
        _write_marker(layout.marker_path, marker)
    except OSError as exc:
        warning = f"{layout.marker_path}: {_describe(exc)}"
    made: dict[str, Path] = {}
    refusals: list[DirRefusal] = []
    for name in peers:
        target = layout.peer_dir(name)
        try:
            os.mkdir(target, 0o700)
            os.chmod(target, 0o700)
        except FileExistsError:
            refusals.append(DirRefusal(name, f"its directory {target} already exists"))
            continue
        except OSError as exc:
            refusals.append(
                DirRefusal(name, f"its directory could not be made ({target}: {_describe(exc)})")
            )
            continue
        made[name] = target
    return PreparedDirs(made, warning, tuple(refusals))


def marker_warning_line(reason: str) -> str:
    """The stderr line printed when ``formation.json`` could not be written."""
    return (
        f"[mur run] warning: formation has no ownership marker ({reason}); "
        "its directory will never be removed automatically"
    )
