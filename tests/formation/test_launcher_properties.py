"""Property tests: whatever members do and whenever the launcher is told to stop, a launch
ends with every member reaped, lifelines closed, and the documented status (MockClock)."""

from __future__ import annotations

import io
import signal

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur import ids
from murmur.formation.launch.launcher import EndReason, FormationLaunch

from ._fakes import FakeSpawner, Script, member, plan_for, roster

ADMITTED = roster(
    member("lead", entry=True, callees=("a",)),
    member("a", callees=("b",)),
    member("b"),
)

times = st.one_of(st.none(), st.floats(min_value=0.0, max_value=300.0))

scripts = st.builds(
    Script,
    report_after=times,
    line=st.sampled_from(["ok", "ok", "ok", "garbage", "no_door", "other_formation"]),
    exit_before_report=st.one_of(st.none(), st.integers(0, 3)),
    door_after=times,
    exit_after=times,
    exit_code=st.integers(-9, 3),
    on_lifeline=st.sampled_from(["exit", "exit", "hang", "ignore"]),
    teardown=st.floats(min_value=0.0, max_value=30.0),
    lifeline_code=st.integers(0, 1),
    spawn_error=st.sampled_from([False, False, False, False, True]),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lead=scripts,
    a=scripts,
    b=scripts,
    signal_at=times,
    deadline=times,
)
def test_launch_always_ends_clean(lead: Script, a: Script, b: Script,
                                  signal_at: float | None, deadline: float | None) -> None:
    """Every started member is reaped; no member is killed before 25 s after its lifeline
    closed; the entry starts only after every peer was ready; the status matches the reason."""
    frm = ids.new_id("frm")
    spawner = FakeSpawner({"lead": lead, "a": a, "b": b}, frm)

    async def main() -> tuple[FormationLaunch, object]:
        send, recv = trio.open_memory_channel[int](2)
        launch = FormationLaunch(
            plan_for(ADMITTED, frm), spawner=spawner, probe=spawner.probe, deadline=deadline,
            out=io.StringIO(), err=io.StringIO(),
        )
        async with trio.open_nursery() as n:
            if signal_at is not None:

                async def later() -> None:
                    await trio.sleep(signal_at)
                    send.send_nowait(signal.SIGTERM)

                n.start_soon(later)
            result = await launch.run(recv)
            n.cancel_scope.cancel()
        return launch, result

    _launch, result = trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    for m in spawner.started.values():
        assert m.returncode is not None, f"{m.name} was left running"
        assert m.lifeline_closed_at is not None, f"{m.name}'s lifeline was never closed"
        if m.killed_at is not None:
            assert m.killed_at - m.lifeline_closed_at >= 25.0 - 1e-9
    if "lead" in spawner.started:
        started = spawner.started["lead"].started_at
        for p in ("a", "b"):
            peer = spawner.started[p]
            assert peer.reported_at is not None and peer.reported_at <= started
    status = result.exit_status  # type: ignore[attr-defined]
    reason = result.reason  # type: ignore[attr-defined]
    if reason is EndReason.SIGNAL:
        assert status == 143
    elif reason in (EndReason.PEER_FAILED, EndReason.REFUSED):
        assert status == 1 and result.diagnostics  # type: ignore[attr-defined]
        assert "lead" not in spawner.started or reason is EndReason.REFUSED
    elif reason is EndReason.DEADLINE and "lead" not in spawner.started:
        assert status == 1
        assert [d.code for d in result.diagnostics] == ["E-RUN-053"]  # type: ignore[attr-defined]
    else:
        code = spawner.started["lead"].returncode
        assert code is not None
        assert status == (code if code >= 0 else 128 - code)
