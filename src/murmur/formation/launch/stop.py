"""``mur stop``: end a running formation (through its launcher) or one session.

``spec/formation.md`` "``mur stop``": ``mur stop <formation-id>`` ends a formation by sending its
launcher SIGTERM, so the launcher closes every lifeline, the entry member's included. It
never signals a member the launcher owns. Refusals: ``E-RUN-022`` (nothing running) and
``E-RUN-024`` (it could not be ended).

Finding the launcher: the formation's ``formation.json`` names the launcher's pid and start
time; both must match a live process (a reused pid is another program). A formation with no
peers has no marker; then a running record naming the formation points at its entry member,
whose parent is the launcher when that parent is a ``mur run --roster``. A member started by
hand (its record names the formation, no launcher owns it) is stopped as one session.

Stopping a process that is not our child means polling: :func:`wait_gone` checks pid and
start time every 50 ms.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import attrs
import trio

from murmur import ids, procs, procstat
from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.formation.launch import dirs, procinfo
from murmur.session import RunningRecord, list_running

POLL = 0.05
KILL_WAIT = 5.0
"""After SIGKILL, how long a process may take to disappear before ``E-RUN-024``."""

MEMBERS_WAIT = 25.0
"""After the launcher is gone, how long its members may take to wind down (``E-RUN-024``)."""

FORMATION_TIMEOUT = 30.0
"""Default wait for a launcher after SIGTERM: it may need 25 s to SIGKILL a stuck member."""

SESSION_TIMEOUT = 10.0
"""Default wait for a session the tree does not know after SIGTERM, before SIGKILL
(spec/formation.md "mur stop")."""


@attrs.frozen
class Target:
    """A process to stop, named by pid and start time."""

    pid: int
    start: int | None
    label: str


@attrs.frozen
class StopReport:
    """What ``mur stop`` did, as printed lines (``key: value``)."""

    lines: tuple[str, ...]


def wait_gone(
    target: Target,
    timeout: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> bool:
    """Poll until ``target`` no longer runs; False when it still runs after ``timeout`` s."""
    end = clock() + timeout
    while procinfo.is_running(target.pid, target.start):
        if clock() >= end:
            return False
        sleep(POLL)
    return True


def _signal(target: Target, sig: signal.Signals) -> bool:
    if not procinfo.is_running(target.pid, target.start):
        return False
    return procinfo.signal_process(target.pid, sig)


def end_process(target: Target, timeout: float) -> str:
    """SIGTERM ``target``; SIGKILL it after ``timeout`` s; the last signal sent.

    The escalation is :func:`murmur.procs.end_within`'s, in a Trio run of its own (``mur
    stop`` is synchronous; ``target`` is not this process's child, so its end is polled by
    pid and start time every 50 ms). Do not call it from inside a Trio run.

    Raises:
        DiagnosticError: ``E-RUN-024`` when the signal is refused or it outlives SIGKILL by
            5 s.
    """
    return trio.run(_end_process, target, timeout)


async def _end_process(target: Target, timeout: float) -> str:
    def ask() -> None:
        try:
            _signal(target, signal.SIGTERM)
        except PermissionError:
            raise _cannot_end(target, "the signal was refused (permission denied)") from None

    def kill() -> None:
        try:
            _signal(target, signal.SIGKILL)
        except PermissionError:
            raise _cannot_end(target, "SIGKILL was refused (permission denied)") from None

    async def gone() -> None:
        while procinfo.is_running(target.pid, target.start):  # noqa: ASYNC110 - not our child: nothing to wait on
            await trio.sleep(POLL)

    with trio.move_on_after(timeout + KILL_WAIT):
        killed = await procs.end_within(
            timeout, ask=ask, alive=lambda: procinfo.is_running(target.pid, target.start), wait=gone, kill=kill
        )
        return "SIGKILL" if killed else "SIGTERM"
    raise _cannot_end(target, f"it was still running {KILL_WAIT:g}s after SIGKILL")


def _cannot_end(target: Target, why: str) -> DiagnosticError:
    return DiagnosticError(
        error(
            "E-RUN-024",
            f"{target.label} (pid {target.pid}) could not be ended: {why}",
            hint="check the process with `ps`; end it by hand if it is still there",
        )
    )


def _not_running(name: str) -> DiagnosticError:
    return DiagnosticError(
        error(
            "E-RUN-022",
            f"{name} names nothing running here",
            hint="`mur ps` lists the running sessions and their formations",
        )
    )


# --- formations ------------------------------------------------------------------------


def _members(formation_id: str) -> list[Target]:
    """Live sessions whose running record names ``formation_id``."""
    out = []
    for rec in list_running(prune=False).live:
        if rec.formation_id == formation_id:
            out.append(Target(rec.pid, rec.start_time, f"session {rec.session_id}"))
    return out


def _launcher_from_marker(formation_id: str, root: Path | None = None) -> Target | None:
    base = root or dirs.formations_root()
    try:
        candidates = sorted(base.glob(f"*/{formation_id}/{dirs.MARKER_NAME}"))
    except OSError:
        candidates = []
    for path in candidates:
        marker = dirs.read_marker(path.parent)
        if marker is None:
            continue
        start = procinfo.recorded_start(marker.launcher_start)
        if procinfo.is_running(marker.launcher_pid, start):
            return Target(marker.launcher_pid, start, f"the launcher of {formation_id}")
    return None


def _is_roster_launcher(pid: int) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"--roster" in argv and b"run" in argv


def _owner_pid(pid: int) -> int | None:
    """The process that started member ``pid``: its parent, or its parent's parent when the
    parent is the launcher's warm starter (``mur starter …``; spec/formation.md)."""
    parent = procstat.parent_pid(pid)
    if parent and parent > 1:
        try:
            title = Path(f"/proc/{parent}/cmdline").read_bytes()
        except OSError:
            return parent
        if title.startswith(b"mur starter "):
            return procstat.parent_pid(parent)
    return parent


def _launcher_from_members(formation_id: str, members: Sequence[Target]) -> Target | None:
    for m in members:
        parent = _owner_pid(m.pid)
        if parent and parent > 1 and _is_roster_launcher(parent):
            return Target(parent, procstat.start_time(parent), f"the launcher of {formation_id}")
    return None


def stop_formation(formation_id: str, *, timeout: float = FORMATION_TIMEOUT) -> StopReport:
    """End formation ``formation_id``: SIGTERM its launcher, then wait for its members.

    Args:
        formation_id (str): ``frm_`` + 32 hex.
        timeout (float): seconds to wait for the launcher after SIGTERM before SIGKILL.

    Returns:
        StopReport: ``stopped:``, ``launcher:``, ``signal:`` lines, and one ``session:`` line
        per hand-started member stopped as a session.

    Raises:
        DiagnosticError: ``E-RUN-022`` when nothing of the formation runs here; ``E-RUN-024``
            when the launcher or a member could not be ended.
    """
    members = _members(formation_id)
    launcher = _launcher_from_marker(formation_id) or _launcher_from_members(
        formation_id, members
    )
    if launcher is None and not members:
        raise _not_running(formation_id)
    lines = [f"stopped: {formation_id}"]
    if launcher is not None:
        sig = end_process(launcher, timeout)
        lines += [f"launcher: pid {launcher.pid}", f"signal: {sig}"]
        # the launcher's members wind down on lifeline EOF within 20 s
        end = time.monotonic() + MEMBERS_WAIT
        for m in _members(formation_id):
            if not wait_gone(m, max(0.0, end - time.monotonic())):
                # a member no launcher owns (started by hand) is stopped as one session
                if _owner_pid(m.pid) == launcher.pid:
                    raise _cannot_end(
                        m, f"it was still running {MEMBERS_WAIT:g}s after its launcher"
                    )
                sig = end_process(m, timeout)
                lines.append(f"session: {m.label.removeprefix('session ')} ({sig})")
    else:
        for m in members:
            sig = end_process(m, timeout)
            lines.append(f"session: {m.label.removeprefix('session ')} ({sig})")
    return StopReport(tuple(lines))


# --- sessions --------------------------------------------------------------------------


def resolve_session(address: str) -> RunningRecord:
    """The running record ``address`` names: a full ``ses_`` id, a suffix of 4+ characters
    (case-insensitive; ambiguous refused) or ``@N`` (newest first).

    Raises:
        DiagnosticError: ``E-RUN-022`` when it names nothing running, or several sessions.
    """
    live = list(list_running(prune=False).live)
    text = address.strip()
    if text.startswith("@"):
        try:
            n = int(text[1:])
        except ValueError:
            n = 0
        newest = sorted(live, key=lambda r: r.session_id, reverse=True)
        if 1 <= n <= len(newest):
            return newest[n - 1]
        raise _not_running(address)
    low = text.lower()
    exact = [r for r in live if r.session_id == low]
    if exact:
        return exact[0]
    if len(low) >= 4:
        found = [r for r in live if r.session_id.endswith(low)]
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise DiagnosticError(
                error(
                    "E-RUN-022",
                    f"{address} names {len(found)} running sessions",
                    hint="give more of the session id",
                )
            )
    raise _not_running(address)


def stop_session(address: str, *, timeout: float = SESSION_TIMEOUT) -> StopReport:
    """End one session: SIGTERM, then SIGKILL after ``timeout`` s.

    Raises:
        DiagnosticError: ``E-RUN-022`` / ``E-RUN-024``.
    """
    rec = resolve_session(address)
    target = Target(rec.pid, rec.start_time, f"session {rec.session_id}")
    sig = end_process(target, timeout)
    lines = [f"stopped: {rec.session_id}", f"capsule: {rec.name} {rec.version}", f"signal: {sig}"]
    return StopReport(tuple(lines))


def stop_named(name: str, *, timeout: float | None = None) -> StopReport:
    """``mur stop NAME``: a formation id goes to its launcher, anything else is a session."""
    if ids.is_id(name.strip(), "frm"):
        wait = FORMATION_TIMEOUT if timeout is None else timeout
        return stop_formation(name.strip(), timeout=wait)
    return stop_session(name, timeout=SESSION_TIMEOUT if timeout is None else timeout)
