"""Tests of wind-down reasons, forced-exit hooks and the guard."""

from __future__ import annotations

import threading

from murmur.session.winddown import (
    Guard,
    add_forced_exit_hook,
    deadline_wind_down,
    lifeline_wind_down,
    run_forced_exit_hooks,
    signal_wind_down,
)


class TestReasons:
    def test_signal(self) -> None:
        """A signal cancels as `canceled` and writes no record of its own."""
        w = signal_wind_down("SIGINT")
        assert (w.cause, w.busy_status, w.status, w.trace_event) == ("signal", "canceled", None, None)

    def test_deadline(self) -> None:
        """The deadline always ends deadline_reached, E-RUN-053, record written first."""
        w = deadline_wind_down(1_800_000_000.0, formation_id="frm_x")
        assert w.status == "deadline_reached" and w.trace_event == "deadline_reached"
        assert w.trace_fields == {"deadline": "2027-01-15T08:00:00.000Z", "formation_id": "frm_x"}
        assert w.diagnostic is not None and w.diagnostic.code == "E-RUN-053"

    def test_lifeline(self) -> None:
        """A formation lifeline ends formation_ended when busy."""
        w = lifeline_wind_down(trace_event="formation_ended", detail="the formation ended", busy_status="formation_ended")
        assert (w.cause, w.busy_status, w.cancel_note) == ("lifeline", "formation_ended", "the formation ended")


class TestForcedExitHooks:
    def test_newest_first_and_failures_ignored(self) -> None:
        """Hooks run newest first; one that raises does not stop the others; remove works."""
        ran: list[str] = []

        def boom() -> None:
            raise RuntimeError("x")

        removers = [
            add_forced_exit_hook(lambda: ran.append("a")),
            add_forced_exit_hook(boom),
            add_forced_exit_hook(lambda: ran.append("c")),
        ]
        try:
            run_forced_exit_hooks()
        finally:
            for remove in removers:
                remove()
        assert ran == ["c", "a"]
        run_forced_exit_hooks()
        assert ran == ["c", "a"]


class TestGuard:
    def test_fires_once_after_delay(self) -> None:
        """An armed guard calls the exit with 143 after its delay."""
        fired = threading.Event()
        codes: list[int] = []

        def exit_fn(code: int) -> None:
            codes.append(code)
            fired.set()

        g = Guard(0.05, exit_fn)
        g.start()
        g.start()  # idempotent
        assert fired.wait(5) and codes == [143]

    def test_cancel(self) -> None:
        """A cancelled guard never fires."""
        codes: list[int] = []
        g = Guard(0.05, codes.append)
        g.start()
        g.cancel()
        assert not g.armed
        threading.Event().wait(0.15)
        assert codes == []
