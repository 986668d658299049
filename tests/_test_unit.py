"""The test session's own containment unit: nothing a test starts outlives pytest (issue 32).

On a host with cgroup v2 (the cgroup class), pytest moves itself into a cgroup of its own,
``<its cgroup>/pytest-unit-<pid>-<hex>`` (not ``murmur-*``: the kill suite takes the top ``murmur-*`` cgroup of a process for its unit), before any test runs, so every process a test
starts (and everything those start: sessions, members, children, commands) is beneath it.
A janitor process outside that cgroup holds the read end of a pipe only pytest writes to.
When the pipe closes -- pytest exits, or is SIGKILLed -- the janitor kills everything in the
unit (``cgroup.kill``), waits until it is empty and removes it, bottom-up. At a normal end pytest
first waits (at most :data:`JANITOR_WAIT` s) for the containment janitors still running in the
unit -- those of sessions the last tests SIGKILLed, removing their owners' units -- then moves
itself back out and says what the tests left behind (processes, empty units).

On a host without it (the process-group class), or with ``MURMUR_TEST_UNIT=off``, nothing is
done here, and the fixtures' ``--die-with-parent`` is what ends a top-level ``mur run`` or
``mur-roost`` whose pytest died.

``MURMUR_TEST_UNIT_FILE=PATH`` makes pytest write its unit's directory there (the kill test
reads it).
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

_JANITOR = r"""
import os, sys, time
from pathlib import Path
unit = Path(sys.argv[1])
sys.stdin.buffer.read()  # EOF: pytest has exited, however it ended
def units():
    return sorted((p for p in unit.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
def kill():
    try:
        (unit / "cgroup.kill").write_text("1")
        return
    except OSError:
        pass
    for d in [unit, *units()]:
        try:
            pids = (d / "cgroup.procs").read_text().split()
        except OSError:
            continue
        for pid in pids:
            try:
                os.kill(int(pid), 9)
            except OSError:
                pass
deadline = time.monotonic() + 30
while unit.exists() and time.monotonic() < deadline:
    kill()
    for d in [*units(), unit]:
        try:
            d.rmdir()
        except OSError:
            pass
    time.sleep(0.05)
"""

_STATE: dict[str, object] = {}


def _v2_mount() -> Path | None:
    from murmur.containment.host import CGROUP, detect

    host = detect({})
    return host.base if host.name == CGROUP else None


def enter() -> None:
    """Move pytest into a unit of its own, with a janitor outside it (cgroup class only).

    Called when ``tests/conftest.py`` is imported: before any other conftest, so that what
    they read of this process's cgroup at import (``tests/containment/conftest.py``) is the
    unit's.
    """
    if os.environ.get("MURMUR_TEST_UNIT", "").strip().lower() == "off" or _STATE:
        return
    base = _v2_mount()
    if base is None:
        return
    unit = base / f"pytest-unit-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        unit.mkdir()
    except OSError:
        return
    janitor = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", _JANITOR, str(unit)],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True, close_fds=True,
    )
    try:
        (unit / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        assert janitor.stdin is not None
        janitor.stdin.close()
        janitor.wait()
        return
    _STATE.update(unit=unit, home=base, janitor=janitor)
    named = os.environ.get("MURMUR_TEST_UNIT_FILE")
    if named:
        Path(named).write_text(str(unit), encoding="utf-8")


def left_in(unit: Path, own: int) -> tuple[list[int], list[Path]]:
    """(pids in ``unit``'s subtree other than ``own``, the sub-units beneath it)."""
    pids: list[int] = []
    subunits = [p for p in unit.rglob("*") if p.is_dir()]
    for d in [unit, *subunits]:
        try:
            pids += [int(x) for x in (d / "cgroup.procs").read_text().split() if int(x) != own]
        except (OSError, ValueError):
            continue
    return pids, subunits


def _cmdline(pid: int) -> str:
    """``pid``'s command line (NULs as spaces, cut to 160 characters), or ``?`` once it is gone."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:160] or "?"


JANITOR_WAIT = 35.0
"""Seconds pytest waits at its end for the janitors of sessions the last tests killed (their
bound is 25 s, then 5 s more): each removes its owner's units, and what is left after is
reported."""


def wait_for_janitors(unit: Path, own: int, bound: float = JANITOR_WAIT) -> list[int]:
    """Wait until no containment janitor runs in ``unit`` (each one's exit, on a pidfd),
    at most ``bound`` seconds; the janitors still running then."""
    import select
    import time

    deadline = time.monotonic() + bound
    while True:
        pids, _ = left_in(unit, own)
        janitors = [p for p in pids if "containment/janitor.py" in _cmdline(p)]
        left = deadline - time.monotonic()
        if not janitors or left <= 0:
            return janitors
        poller = select.poll()
        fds = []
        for pid in janitors:
            try:
                fds.append(os.pidfd_open(pid))
            except OSError:
                continue
            poller.register(fds[-1], select.POLLIN)
        try:
            if fds:
                poller.poll(int(left * 1000) + 1)
            else:  # each had just exited: read the unit again
                time.sleep(0.01)
        finally:
            for fd in fds:
                os.close(fd)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Leave the unit, say what the tests left in it, and let the janitor remove it."""
    unit = _STATE.get("unit")
    janitor = _STATE.get("janitor")
    if not isinstance(unit, Path) or not isinstance(janitor, subprocess.Popen):
        return
    from murmur import containment

    containment.reset_for_tests()  # pytest's own containment (its janitor, its unit) ends here
    wait_for_janitors(unit, os.getpid())  # the last tests' SIGKILLed sessions: their janitors clean up
    pids, subunits = left_in(unit, os.getpid())
    pids = [p for p in pids if os.path.exists(f"/proc/{p}")]  # one that exited as it was listed is not left
    try:
        (_STATE["home"] / "cgroup.procs").write_text(str(os.getpid()))  # type: ignore[operator]
    except OSError:
        pass
    if pids or subunits:
        sys.stderr.write(
            f"\nmurmur test unit: the tests left {len(pids)} process(es) and {len(subunits)} "
            f"unit(s) behind; the janitor removes them ({unit})\n"
        )
        for pid in pids[:5]:
            sys.stderr.write(f"  left: {pid} {_cmdline(pid)}\n")
        for sub in subunits[:5]:  # the unit's name says whose it was (a session's, a formation's)
            sys.stderr.write(f"  unit: {sub.relative_to(unit)}\n")
    assert janitor.stdin is not None
    janitor.stdin.close()
    try:
        janitor.wait(timeout=40)
    except subprocess.TimeoutExpired:
        janitor.kill()
        janitor.wait()
    _STATE.clear()
