"""The kill suite's rig: it starts every process of a test and owns it to the end.

:class:`Rig` starts each process in a task of its own in the fixture's nursery
(``nursery.start``: the process is opened with ``trio.lowlevel.open_process``, in a session
of its own so a test can signal a launcher's whole group; the task waits for it and, in a
shielded ``finally``, kills its group and reaps it). It reads their stdout as lines (events)
and keeps a :class:`~._tree.Census` of everything they started. :meth:`Rig.aclose` runs in
the fixture's shielded ``finally``: every recorded process and unit is SIGKILLed, the owning
tasks are cancelled (each kills and reaps its process), and the units are removed, whatever
the test did.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import trio

from ._busy import ROOST, Fifo, Report, write_ready
from ._tree import Census, Proc, alive, read, unit_dir

CLASSES = ("cgroup", "groups")
# The warm path is the default (MURMUR_STARTER=off turns it off), so the default run kills
# formations started the default way and the exec path's kill runs are in the `soak` set
# (`python -m pytest -m soak`), which keeps CI well inside its 30 minutes on 2 cores. The exec
# path still runs in CI wherever members start through MURMUR_MUR_BINARY (the fake members).
START_PATHS = ("warm", pytest.param("exec", marks=pytest.mark.soak))
"""How a formation's members start: forked by the warm starter, or a new ``mur run`` each."""


class Started:
    """One process the rig started: its stdout as lines, its stderr in a file."""

    def __init__(self, proc: trio.Process, err_path: Path) -> None:
        self.proc = proc
        self.err_path = err_path
        self._buf = b""
        self.lines: list[str] = []
        self.t0 = time.monotonic()

    @property
    def pid(self) -> int:
        return self.proc.pid

    async def line(self) -> str:
        """The next stdout line (EOFError when stdout ends first)."""
        assert self.proc.stdout is not None
        while b"\n" not in self._buf:
            chunk = await self.proc.stdout.receive_some(65536)
            if not chunk:
                raise EOFError(f"stdout ended; stderr:\n{self.stderr()}")
            self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\n")
        text = raw.decode(errors="replace")
        self.lines.append(text)
        return text

    async def json_line(self) -> dict[str, Any]:
        line = await self.line()
        try:
            out: dict[str, Any] = json.loads(line)
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}; stderr:\n{self.stderr()}") from None
        return out

    def stderr(self) -> str:
        try:
            return self.err_path.read_text(errors="replace")
        except OSError:
            return ""

    def signal(self, sig: int, *, group: bool = False) -> None:
        with contextlib.suppress(ProcessLookupError):
            if group:
                os.killpg(self.pid, sig)
            else:
                os.kill(self.pid, sig)


class Rig:
    """Processes, readiness FIFO and census of one kill-suite test.

    Args:
        tmp (Path): the test's scratch directory.
        klass (str): ``cgroup`` or ``groups`` (the latter sets ``MURMUR_CONTAINMENT=groups``
            in the environment of every process the rig starts).
        start_path (str): ``warm`` sets ``MURMUR_STARTER=on`` (members forked by the warm
            starter), ``exec`` sets it ``off`` (new processes); ``default`` leaves it unset.
    """

    def __init__(self, tmp: Path, klass: str, nursery: trio.Nursery, *, start_path: str = "default") -> None:
        self.tmp = tmp
        self._nursery = nursery
        self.klass = klass
        self.home = Path(os.environ["MURMUR_HOME"])  # the test's private home (tests/conftest.py)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("MURMUR_") or k == "MURMUR_HOME"}
        if klass == "groups":
            env["MURMUR_CONTAINMENT"] = "groups"
        if start_path in ("exec", "warm"):
            env["MURMUR_STARTER"] = "on" if start_path == "warm" else "off"
        self.start_path = start_path
        self.env = env
        self.census = Census()
        self.started: list[Started] = []
        self.ready = write_ready(tmp)
        self.fifo = Fifo(tmp / "ready.fifo")
        self._n = 0

    async def start(self, argv: Sequence[str], *, cwd: Path | None = None,
                    env: dict[str, str] | None = None) -> Started:
        """Start ``argv`` in a session of its own, stdout piped, stderr to a file; a task of
        the rig's nursery owns it until it has exited and been reaped."""
        self._n += 1
        err_path = self.tmp / f"proc-{self._n}.err"
        started: Started = await self._nursery.start(self._own, list(argv), env or self.env,
                                                     cwd or self.tmp, err_path)
        return started

    async def _own(self, argv: list[str], env: dict[str, str], cwd: Path, err_path: Path,
                   task_status: trio.TaskStatus[Started] = trio.TASK_STATUS_IGNORED) -> None:
        with err_path.open("wb") as err:
            proc = await trio.lowlevel.open_process(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err,
                env=env, cwd=str(cwd), start_new_session=True)
        s = Started(proc, err_path)
        try:
            self.started.append(s)
            task_status.started(s)
            await proc.wait()
            await trio.sleep_forever()  # its stdout stays readable until the rig closes
        finally:
            with trio.CancelScope(shield=True):
                self.record(proc.pid)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its group: it and what it left there
                with contextlib.suppress(OSError):
                    proc.kill()
                with trio.move_on_after(10):
                    await proc.wait()
                if proc.stdout is not None:
                    await proc.stdout.aclose()

    async def roost(self, *flags: str) -> tuple[Started, str]:
        """A real mur-roost on a free port with its registry in the test's home."""
        r = await self.start([*ROOST, "--port", "0", "--registry-path", str(self.home / "artifacts"), *flags])
        with trio.fail_after(30):
            line = await r.line()
        prefix = "mur-roost: listening on "
        assert line.startswith(prefix), (line, r.stderr())
        return r, "http://" + line[len(prefix):].strip()

    async def busy(self, count: int, timeout: float = 60.0) -> list[Report]:
        """Wait (bounded) until ``count`` busy steps have reported; record them and their trees."""
        with trio.fail_after(timeout):
            reports = await self.fifo.expect(count)
        self.census.record([r.pid for r in reports])
        return reports

    def record(self, *roots: int) -> list[Proc]:
        return self.census.record(roots)

    def check_contained(self, reports: Sequence[Report]) -> None:
        """cgroup class: every reported busy process (escapees too) is inside a ``murmur-*``
        unit; groups class: none is (nothing made a unit)."""
        for r in reports:
            p = self.census.procs.get(r.pid) or read(r.pid)
            assert p is not None, f"{r.tag} (pid {r.pid}) ended before it was recorded"
            if self.klass == "cgroup":
                assert p.unit is not None, f"{r.tag} escaped containment: {p.describe()}"
            else:
                assert p.unit is None, f"{r.tag} is in a unit on the groups class: {p.describe()}"

    async def wait_nothing_left(self, case: str, t0: float, among: Sequence[Proc] | None = None,
                                *, bound: float = 30.0, units: bool = True) -> float:
        """Wait until every recorded process (of ``among``) has ended and every recorded unit
        is empty; print and return the time from ``t0``. Fails past ``bound`` seconds,
        naming every survivor."""
        try:
            with trio.fail_after(max(0.1, t0 + bound - time.monotonic())):
                await self.census.wait_gone(among, units=units)
        except trio.TooSlowError:
            left = self.census.survivors(among)
            cells = self.census.populated_units() if units else []
            raise AssertionError(
                f"{case}: still running {bound}s after the kill:\n  "
                + "\n  ".join(p.describe() for p in left) + f"\n  populated units: {cells}"
            ) from None
        took = time.monotonic() - t0
        print(f"\n[kill suite] {self.klass:6s} {case}: nothing left after {took * 1000:.0f} ms")
        return took

    async def aclose(self) -> None:
        """Kill everything this test started and recorded (call shielded); the owning tasks
        are cancelled, and each kills and reaps its process."""
        for s in self.started:
            self.record(s.pid)
        self.census.kill_all()
        self._nursery.cancel_scope.cancel()
        await self.census.clean()
        await self.fifo.aclose()
        for u in list(self.census.units):
            assert not unit_dir(u).exists() or alive_nothing(u), f"unit {u} could not be cleaned"


def alive_nothing(unit: str) -> bool:
    from murmur.containment import cgroup

    return not cgroup.populated(unit_dir(unit))


def escaped(p: Proc, r: Report) -> bool:
    """Whether the reported process had left its command's process group when recorded."""
    return p.pgid != r.command


__all__ = ["CLASSES", "Rig", "Started", "alive", "escaped"]
