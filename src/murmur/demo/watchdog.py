"""The watchdog: a small process that stops the demo's process groups if the demo dies.

The demo holds the only write end of a pipe; the watchdog reads it. ``+<pgid>`` and
``-<pgid>`` lines keep its list of groups current, ``done`` ends it quietly, and EOF (the demo
is gone, by any means, SIGKILL included) makes it SIGTERM every group it knows, SIGKILL what
is left after a grace period, sweep whatever else still runs for the demo (the processes those
groups started in groups of their own, the sessions under the demo's ``MURMUR_HOME``; see
:mod:`murmur.demo.sweep`) and, for a temporary demo directory, remove that directory last, when
nothing is left that could write into it again.
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path

from murmur import procstat
from murmur.demo import sweep


def watchdog_main(fd: int, grace: float = 25.0, home: str | None = None, remove: str | None = None) -> int:
    """The watchdog process: stop the demo's process groups when the demo is gone.

    Reads lines from ``fd`` (the read end of a pipe only the demo writes to): ``+<pgid>``
    adds a group, ``-<pgid>`` forgets one, ``done`` ends the watchdog with nothing to do.
    EOF before ``done`` means the demo died: every remembered group gets SIGTERM, and after
    ``grace`` seconds whatever is left gets SIGKILL; then every process still linked to those
    groups (as they were when the demo died) or named by a running record under ``home`` is
    killed (:func:`murmur.demo.sweep.kill_tree`), and only then ``remove`` is deleted.

    Args:
        fd (int): the pipe's read end.
        grace (float): seconds between SIGTERM and SIGKILL.
        home (str | None): the demo's ``MURMUR_HOME`` (its running records name its sessions).
        remove (str | None): the temporary demo directory to delete at the end (None: keep).

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
    table = sweep.process_table()
    tree = {pid: procstat.start_time(pid) for pid in sweep.linked(groups, table, {os.getpid()})}
    end_groups(list(groups), grace)
    still = {pid for pid, started in tree.items() if started is not None and procstat.start_time(pid) == started}
    extra = sweep.session_pids(Path(home)) if home else set()
    dead = {g for g in groups if procstat.start_time(g) is None}  # a gone leader still links its group
    sweep.kill_tree({*dead, *still, *extra})
    if remove:
        shutil.rmtree(remove, ignore_errors=True)
    return 0


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to a group; False when the group is empty."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def end_groups(groups: list[int], grace: float) -> None:
    """SIGTERM each group, wait up to ``grace`` s for all to empty, SIGKILL what is left."""
    live = [g for g in groups if signal_group(g, signal.SIGTERM)]
    end = time.monotonic() + grace
    while live and time.monotonic() < end:
        time.sleep(0.1)
        live = [g for g in live if signal_group(g, 0)]
    for g in live:
        signal_group(g, signal.SIGKILL)
