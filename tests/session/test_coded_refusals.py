"""Codes that had an emitter but no test asserting them (issue 16's catalogue audit)."""

from __future__ import annotations

import gc
import signal
import socket
from pathlib import Path

import pytest
import trio

from murmur.errors import DiagnosticError
from murmur.formation.launch import stop as formation_stop
from murmur.session import running_record as running
from murmur.tree.forest import Node
from murmur.tree.stop import find_node
from murmur.workload import TaskContext, TaskOutcome

from .helpers import EchoWorkload, make_setup, manifest
from .helpers import running as running_session


def test_running_record_removal_denied_is_e_io_002(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """EPERM removing a running record is E-IO-002 naming the record (injected: tests run as root)."""
    monkeypatch.setenv("MURMUR_HOME", str(tmp_path))
    path = running.record_path("ses_x")

    unlink = Path.unlink

    def refuse(self: Path, missing_ok: bool = False) -> None:
        if self != path:
            unlink(self, missing_ok)
            return
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "unlink", refuse)
    d = running.remove_running("ses_x")
    assert d is not None and d.code == "E-IO-002"
    assert d.location is not None and d.location.path == str(path)
    assert "Permission denied" in d.message


@pytest.mark.filterwarnings("ignore:unclosed <socket:ResourceWarning")
@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
async def test_door_that_cannot_bind_is_e_run_001(tmp_path: Path) -> None:
    """A door address already taken ends the session at launch with E-RUN-001 (it was exit
    70: the bind error reached the session inside an exception group).

    hypercorn 0.18 leaves the socket of a failed bind to the garbage collector; it is
    collected here, under this test's warning filter.
    """
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    try:
        port = taken.getsockname()[1]
        setup = make_setup(tmp_path, manifest(), EchoWorkload(), bind=f"127.0.0.1:{port}")
        with trio.fail_after(30):
            async with running_session(setup) as h:
                summary = await h.wait(timeout=20)
    finally:
        taken.close()
        gc.collect()
    assert summary.diagnostic is not None and summary.diagnostic.code == "E-RUN-001"
    assert f"127.0.0.1:{port}" in summary.diagnostic.message


def test_an_id_naming_two_nodes_is_e_tre_003() -> None:
    """A suffix two nodes share is ambiguous: E-TRE-003 naming both short ids."""
    roots = [Node("ses_aaaa1234", "session", "running"), Node("ses_bbbb1234", "session", "running")]
    with pytest.raises(DiagnosticError) as info:
        find_node(roots, "1234")
    (d,) = info.value.diagnostics
    assert d.code == "E-TRE-003" and "names 2 nodes" in d.message


def test_a_process_that_refuses_the_signal_is_e_run_024(monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM refused (EPERM, injected) is E-RUN-024 naming the process."""
    sent: list[signal.Signals] = []

    def refuse(target: formation_stop.Target, sig: signal.Signals) -> bool:
        sent.append(sig)
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(formation_stop, "_signal", refuse)
    with pytest.raises(DiagnosticError) as info:
        formation_stop.end_process(formation_stop.Target(4242, None, "the launcher"), 1.0)
    (d,) = info.value.diagnostics
    assert d.code == "E-RUN-024"
    assert d.message == "the launcher (pid 4242) could not be ended: the signal was refused (permission denied)"
    assert sent == [signal.SIGTERM]


class _RefusingFile:
    """A trace file whose writes fail as on a file made immutable mid-run (EPERM)."""

    def write(self, text: str) -> int:
        raise PermissionError(1, "Operation not permitted")

    def flush(self) -> None:
        raise PermissionError(1, "Operation not permitted")

    def close(self) -> None:
        pass


class TraceInCancel:
    """A workload whose steps run in its own nursery and trace again when cancelled (as the
    plan executor does)."""

    def __init__(self) -> None:
        self.started = trio.Event()
        self.emitted_in_cancel = False

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        async def step() -> None:
            try:
                self.started.set()
                await trio.sleep_forever()
            except trio.Cancelled:
                ctx.trace.emit("plan_step", parent_id=ctx.task_event_id, status="canceled")
                self.emitted_in_cancel = True
                raise

        async with trio.open_nursery() as n:
            n.start_soon(step)
        return TaskOutcome("ok", "unreachable")


async def test_trace_that_fails_mid_task_is_e_run_007(tmp_path: Path) -> None:
    """EPERM on trace.jsonl while a task runs: the session ends failed with E-RUN-007 (it was
    exit 70: the workload's own trace write, in its cancellation handler, raised the error
    out of its nursery)."""
    work = TraceInCancel()
    setup = make_setup(tmp_path, manifest(), work, task_text="go")
    with trio.fail_after(30):
        async with running_session(setup) as h:
            await work.started.wait()
            file = h.session.trace._file
            assert file is not None
            file.close()
            h.session.trace._file = _RefusingFile()  # type: ignore[assignment]
            with pytest.raises(DiagnosticError):
                h.session.trace.emit("probe", parent_id=None)
            summary = await h.wait(timeout=20)
    assert work.emitted_in_cancel
    assert summary.status == "failed"
    assert summary.diagnostic is not None and summary.diagnostic.code == "E-RUN-007"
