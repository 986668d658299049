"""Table tests of how a formation launch ends: the exit status and the closing refusals."""

from __future__ import annotations

import signal

import pytest

from murmur.formation.launch.ending import EndReason, closing_diagnostics, exit_status


class TestExitStatus:
    @pytest.mark.parametrize(
        ("reason", "signum", "started", "code", "want"),
        [
            (EndReason.ENTRY_ENDED, None, True, 0, 0),
            (EndReason.ENTRY_ENDED, None, True, 1, 1),
            (EndReason.ENTRY_ENDED, None, True, -9, 137),
            (EndReason.SIGNAL, signal.SIGTERM, True, 0, 143),
            (EndReason.SIGNAL, signal.SIGINT, False, None, 130),
            (EndReason.SIGNAL, signal.SIGHUP, True, 1, 129),
            (EndReason.PEER_FAILED, None, False, None, 1),
            (EndReason.REFUSED, None, False, None, 1),
            (EndReason.DEADLINE, None, False, None, 1),
            (EndReason.DEADLINE, None, True, 1, 1),
            (EndReason.DEADLINE, None, True, 0, 0),
            (EndReason.DEADLINE, None, True, -15, 143),
            (None, None, False, None, 1),
        ],
    )
    def test_table(self, reason, signum, started, code, want) -> None:
        """Each way a formation ends maps to the documented launcher status."""
        assert exit_status(reason, signum=signum, entry_started=started, entry_code=code) == want


WORKER_DOWN = ("worker", "local/worker@0.1.0", "its door did not answer within 180 seconds", "E-RUN-045")
HELPER_DOWN = ("helper", "local/helper@0.1.0", "it exited with status 1 before reporting", "E-RUN-045")
LEAD_CHANGED = ("lead", "local/lead@0.1.0", "its installed artifact /x changed since admission", "E-RUN-047")
STOPPED = [("worker", 101), ("helper", 102)]


class TestClosingDiagnostics:
    @pytest.mark.parametrize(
        ("failures", "deadline_first", "codes"),
        [
            ([], False, []),
            ([WORKER_DOWN], False, ["E-RUN-045"]),
            ([WORKER_DOWN, HELPER_DOWN], False, ["E-RUN-045"]),
            ([LEAD_CHANGED], False, ["E-RUN-047"]),
            ([WORKER_DOWN, LEAD_CHANGED], False, ["E-RUN-047", "E-RUN-045"]),
            ([], True, ["E-RUN-053"]),
            ([WORKER_DOWN], True, ["E-RUN-053"]),
            ([LEAD_CHANGED, WORKER_DOWN], True, ["E-RUN-047", "E-RUN-053"]),
        ],
    )
    def test_table(self, failures, deadline_first, codes) -> None:
        """One code per cause, E-RUN-047 first; a deadline before the entry replaces E-RUN-045."""
        got = closing_diagnostics(failures, STOPPED, deadline_first=deadline_first)
        assert [d.code for d in got] == codes

    def test_not_launched_names_every_member_and_the_stopped(self) -> None:
        """E-RUN-045 names each member that did not come up, in order, then what was stopped."""
        (diag,) = closing_diagnostics([WORKER_DOWN, HELPER_DOWN], STOPPED, deadline_first=False)
        lines = diag.message.splitlines()
        assert lines[0] == "the formation could not be launched"
        assert lines[1].strip().startswith("'worker' (local/worker@0.1.0): its door")
        assert lines[2].strip().startswith("'helper' (local/helper@0.1.0): it exited")
        assert lines[3].strip() == "stopped: worker (pid 101), helper (pid 102)"

    def test_deadline_names_the_stopped(self) -> None:
        """E-RUN-053 before the entry started says what was stopped (or none)."""
        (diag,) = closing_diagnostics([], [], deadline_first=True)
        assert diag.message.endswith("stopped: none")
