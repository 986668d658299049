"""Tests of the formation launcher's decisions and timers, with fake members under MockClock."""

from __future__ import annotations

import io
import json
import signal
from typing import NoReturn

import pytest
import trio
import trio.testing

from murmur import ids
from murmur.cli.run_roster import refuse_inside_formation
from murmur.errors import DiagnosticError
from murmur.formation.launch.ending import EndReason
from murmur.formation.launch.launcher import FormationLaunch, LaunchResult
from murmur.formation.launch.supervise import Timers
from murmur.formation.wire import channel

from ._fakes import FakeSpawner, Script, member, plan_for, roster

# lead -> worker, lead -> helper, worker -> helper
ROSTER = roster(
    member("lead", entry=True, callees=("worker", "helper")),
    member("worker", callees=("helper",)),
    member("helper"),
)


class _Exited(BaseException):
    def __init__(self, status: int) -> None:
        self.status = status


def _exit_now(status: int) -> NoReturn:
    raise _Exited(status)


def _leaves(group: BaseExceptionGroup) -> list:
    out: list = []
    for e in group.exceptions:
        out.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return out


async def _launch(
    scripts: dict[str, Script],
    *,
    admitted=ROSTER,
    signals: trio.MemoryReceiveChannel[int] | None = None,
    deadline: float | None = None,
    verify: dict | None = None,
    json_mode: bool = True,
    timers: Timers | None = None,
) -> tuple[LaunchResult, FakeSpawner, FormationLaunch, str]:
    frm = ids.new_id("frm")
    spawner = FakeSpawner(scripts, frm)
    out, err = io.StringIO(), io.StringIO()
    launch = FormationLaunch(
        plan_for(admitted, frm, json_mode=json_mode),
        spawner=spawner,
        probe=spawner.probe,
        timers=timers,
        deadline=deadline,
        verify=verify,
        json_mode=json_mode,
        out=out,
        err=err,
        exit_now=_exit_now,
    )
    result = await launch.run(signals)
    launch.out_text = out.getvalue()  # type: ignore[attr-defined]
    launch.err_text = err.getvalue()  # type: ignore[attr-defined]
    return result, spawner, launch, frm


class TestInsideFormation:
    def test_formation_id_refused(self) -> None:
        """A process carrying MURMUR_FORMATION_ID refuses --roster with E-RUN-046."""
        with pytest.raises(DiagnosticError) as exc:
            refuse_inside_formation({"MURMUR_FORMATION_ID": ids.new_id("frm")})
        assert exc.value.code == "E-RUN-046"

    def test_peers_variable_refused(self) -> None:
        """MURMUR_FORMATION_PEERS in the launcher's environment is E-RUN-046."""
        with pytest.raises(DiagnosticError) as exc:
            refuse_inside_formation({"MURMUR_FORMATION_PEERS": "a=http://a.formation.invalid"})
        assert exc.value.code == "E-RUN-046"

    def test_blank_id_is_absent(self) -> None:
        """A blank MURMUR_FORMATION_ID is not a formation."""
        refuse_inside_formation({"MURMUR_FORMATION_ID": "  "})


class TestEntryEnds:
    async def test_entry_done_ends_formation(self, autojump_clock: trio.testing.MockClock) -> None:
        """The entry member's exit closes every peer's lifeline; the launcher exits with its 0."""
        result, sp, _, _ = await _launch({"lead": Script(exit_after=5.0)})
        assert result.reason is EndReason.ENTRY_ENDED
        assert result.exit_status == 0
        lead, worker, helper = (sp.started[n] for n in ("lead", "worker", "helper"))
        for peer in (worker, helper):
            assert peer.lifeline_closed_at is not None
            assert peer.lifeline_closed_at >= lead.exited_at
            assert peer.killed_at is None and peer.returncode == 0
            assert peer.closed

    async def test_entry_started_last(self, autojump_clock: trio.testing.MockClock) -> None:
        """Peers start at once; the entry member starts only after every door answered."""
        result, sp, _, _ = await _launch(
            {"worker": Script(report_after=3.0), "helper": Script(report_after=0.1),
             "lead": Script(exit_after=1.0)}
        )
        assert sp.order[-1] == "lead"
        worker, helper, lead = sp.started["worker"], sp.started["helper"], sp.started["lead"]
        assert worker.started_at == helper.started_at
        assert lead.started_at >= worker.reported_at + worker.script.door_after
        assert result.exit_status == 0

    @pytest.mark.parametrize(("code", "want"), [(3, 3), (-9, 137), (143, 143)])
    async def test_entry_status_is_launcher_status(
        self, autojump_clock: trio.testing.MockClock, code: int, want: int
    ) -> None:
        """The launcher exits with the entry member's status (128+sig when it was killed)."""
        result, _, _, _ = await _launch({"lead": Script(exit_after=2.0, exit_code=code)})
        assert result.exit_status == want
        assert result.entry_code == code

    async def test_channels(self, autojump_clock: trio.testing.MockClock) -> None:
        """Peers get addresses after readiness; the entry's channel holds creds, addresses, role."""
        _result, sp, _, frm = await _launch({"lead": Script(exit_after=1.0)})
        lead, worker, helper = (sp.started[n] for n in ("lead", "worker", "helper"))
        lines = bytes(lead.channel).splitlines(keepends=True)
        creds = channel.decode_credentials(lines[0], formation_id=frm)
        assert creds.member == "lead" and creds.callees == ("worker", "helper")
        assert isinstance(channel.decode_later(lines[1]), channel.Callees)  # its callees' ceilings
        addrs = channel.decode_later(lines[2])
        assert isinstance(addrs, channel.Addresses)
        assert addrs.known(["worker", "helper"]) == {"worker": worker.url, "helper": helper.url}
        assert isinstance(channel.decode_later(lines[3]), channel.EntryRole)
        assert len(lines) == 4
        # worker may call helper: one addresses line, sent before the entry started
        assert len(worker.later_lines) == 1
        w_addrs = channel.decode_later(worker.later_lines[0])
        assert isinstance(w_addrs, channel.Addresses)
        assert w_addrs.known(["helper"]) == {"helper": helper.url}
        assert helper.later_lines == []  # helper calls nobody
        w_first, w_callees = bytes(worker.channel).splitlines(keepends=True)
        assert channel.decode_later(w_callees) == channel.Callees((channel.CalleeFacts("helper", "helper", False),))
        w_creds = channel.decode_credentials(w_first, formation_id=frm)
        assert w_creds.callees == ("helper",)

    async def test_formation_line(self, autojump_clock: trio.testing.MockClock) -> None:
        """--json prints exactly one formation line naming each peer, without tokens."""
        _, sp, launch, frm = await _launch({"lead": Script(exit_after=1.0)})
        out = launch.out_text.splitlines()  # type: ignore[attr-defined]
        assert len(out) == 1
        line = json.loads(out[0])
        assert list(line) == ["entry", "formation_id", "peers"]
        assert line["entry"] == "lead" and line["formation_id"] == frm
        worker = sp.started["worker"]
        assert line["peers"][0] == {
            "name": "worker", "pid": worker.pid, "session_id": worker.session_id,
            "url": worker.url, "workdir": "/f/worker",
        }
        assert [p["name"] for p in line["peers"]] == ["worker", "helper"]
        assert "mft1" not in out[0]

    async def test_human_block_on_stderr(self, autojump_clock: trio.testing.MockClock) -> None:
        """Without --json the formation is described on stderr and stdout stays empty."""
        _, _, launch, frm = await _launch({"lead": Script(exit_after=1.0)}, json_mode=False)
        assert launch.out_text == ""  # type: ignore[attr-defined]
        assert f"formation: {frm}" in launch.err_text  # type: ignore[attr-defined]

    async def test_no_peers(self, autojump_clock: trio.testing.MockClock) -> None:
        """A roster with no peers starts the entry member at once."""
        solo = roster(member("only", entry=True))
        result, sp, _, _ = await _launch({"only": Script(exit_after=1.0)}, admitted=solo)
        assert sp.order == ["only"]
        assert sp.started["only"].started_at == 0.0
        assert result.exit_status == 0

    async def test_peer_exit_mid_formation(self, autojump_clock: trio.testing.MockClock) -> None:
        """A peer ending on its own is reported; the formation goes on until the entry ends."""
        result, sp, launch, _ = await _launch(
            {"helper": Script(exit_after=2.0, exit_code=1), "lead": Script(exit_after=10.0)}
        )
        assert "member 'helper' exited with status 1" in launch.err_text  # type: ignore[attr-defined]
        assert sp.started["worker"].lifeline_closed_at >= 10.0
        assert result.exit_status == 0


class TestSignals:
    async def test_sigterm_closes_every_lifeline(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """SIGTERM closes every lifeline, the entry member's included; exit 143."""
        send, recv = trio.open_memory_channel[int](4)

        async def later() -> None:
            await trio.sleep(30.0)
            await send.send(signal.SIGTERM)

        async with trio.open_nursery() as n:
            n.start_soon(later)
            result, sp, _, _ = await _launch({}, signals=recv)
        assert result.reason is EndReason.SIGNAL and result.exit_status == 143
        for m in sp.started.values():
            assert m.lifeline_closed_at == pytest.approx(30.0, abs=0.01)
            assert m.killed_at is None

    async def test_signal_during_startup(self, autojump_clock: trio.testing.MockClock) -> None:
        """A signal while peers start stops them and never starts the entry member."""
        send, recv = trio.open_memory_channel[int](4)
        send.send_nowait(signal.SIGINT)
        result, sp, _, _ = await _launch({"worker": Script(report_after=50.0)}, signals=recv)
        assert "lead" not in sp.started
        assert result.exit_status == 130
        assert result.diagnostics == ()

    async def test_second_signal_kills_all_at_once(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A second signal SIGKILLs every live member synchronously and exits at once."""
        send, recv = trio.open_memory_channel[int](4)
        stubborn = Script(on_lifeline="ignore")

        async def signals() -> None:
            await trio.sleep(5.0)
            await send.send(signal.SIGTERM)
            await trio.sleep(1.0)
            await send.send(signal.SIGTERM)

        frm = ids.new_id("frm")
        spawner = FakeSpawner({"worker": stubborn, "helper": stubborn, "lead": stubborn}, frm)
        launch = FormationLaunch(
            plan_for(ROSTER, frm), spawner=spawner, probe=spawner.probe,
            out=io.StringIO(), err=io.StringIO(), exit_now=_exit_now,
        )
        statuses: list[int] = []
        try:
            async with trio.open_nursery() as n:
                n.start_soon(signals)
                await launch.run(recv)
        except* _Exited as group:
            statuses = [e.status for e in _leaves(group)]
        assert statuses == [143]
        for m in spawner.started.values():
            assert m.killed_at == pytest.approx(6.0, abs=0.01)


class TestTeardownTimers:
    async def test_stubborn_member_killed_at_25s(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A member that ignores its lifeline is SIGKILLed 25 s after it closed, then reaped."""
        result, sp, _, _ = await _launch(
            {"worker": Script(on_lifeline="ignore"), "lead": Script(exit_after=3.0)}
        )
        worker = sp.started["worker"]
        assert worker.killed_at - worker.lifeline_closed_at == pytest.approx(25.0)
        assert result.stopped["worker"].killed and result.stopped["worker"].returncode == -9
        assert sp.started["helper"].killed_at is None
        assert result.exit_status == 0

    async def test_hanging_member_exits_143_before_kill(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A member whose teardown hangs exits 143 at 20 s and is never SIGKILLed."""
        result, sp, _, _ = await _launch(
            {"helper": Script(on_lifeline="hang"), "lead": Script(exit_after=3.0)}
        )
        helper = sp.started["helper"]
        assert helper.exited_at - helper.lifeline_closed_at == pytest.approx(20.0)
        assert helper.killed_at is None and result.stopped["helper"].returncode == 143

    async def test_custom_kill_after(self, autojump_clock: trio.testing.MockClock) -> None:
        """The kill bound is a parameter (tests may shorten it; production uses 25 s)."""
        _, sp, _, _ = await _launch(
            {"worker": Script(on_lifeline="ignore"), "lead": Script(exit_after=1.0)},
            timers=Timers(kill_after=4.0),
        )
        worker = sp.started["worker"]
        assert worker.killed_at - worker.lifeline_closed_at == pytest.approx(4.0)


class TestReadinessRefusals:
    @pytest.mark.parametrize(
        ("script", "reason"),
        [
            (Script(line="garbage"), "its first line was not a readiness line"),
            (Script(line="no_door"), "it reported no door"),
            (Script(line="no_formation"), "it reported no formation"),
            (Script(line="other_formation"), "it reported another formation"),
            (Script(report_after=None), "did not report within 180s"),
            (Script(door_after=None), "its door did not answer as its session within 180s"),
            (Script(door_after=5.0, exit_after=2.0, exit_code=1),
             "exited after reporting, before its door answered"),
        ],
    )
    async def test_reason(
        self, autojump_clock: trio.testing.MockClock, script: Script, reason: str
    ) -> None:
        """Each readiness refusal is E-RUN-045 naming the member, its reason and who was stopped."""
        result, sp, _, _ = await _launch({"helper": script})
        assert result.reason is EndReason.PEER_FAILED and result.exit_status == 1
        assert "lead" not in sp.started
        (diag,) = result.diagnostics
        assert diag.code == "E-RUN-045"
        lines = diag.message.splitlines()
        assert lines[0] == "the formation could not be launched"
        assert lines[1] == f"  'helper' (local/helper@0.1.0): {reason}"
        worker = sp.started["worker"]
        assert f"worker (pid {worker.pid})" in lines[2]
        assert worker.lifeline_closed_at is not None and worker.returncode == 0

    async def test_exit_before_report_quotes_stderr(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """A peer that exits before reporting is named with its status and last stderr lines."""
        result, _sp, _, _ = await _launch(
            {"helper": Script(exit_before_report=2, stderr=("boom", "error[E-RUN-008]: x"))}
        )
        (diag,) = result.diagnostics
        text = diag.message
        assert "'helper' (local/helper@0.1.0): exited with status 2 before reporting" in text
        assert "| error[E-RUN-008]: x" in text
        assert "stopped: worker (pid " in text
        assert "helper (pid" not in text  # it was not stopped: it had already exited

    async def test_readiness_bound_per_member(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """The 180 s bound runs from the member's own start and stops everyone at once."""
        result, sp, _, _ = await _launch({"worker": Script(report_after=None)})
        worker, helper = sp.started["worker"], sp.started["helper"]
        assert worker.lifeline_closed_at == pytest.approx(180.0)
        assert helper.lifeline_closed_at == pytest.approx(180.0)
        assert result.exit_status == 1

    async def test_spawn_failure(self, autojump_clock: trio.testing.MockClock) -> None:
        """A peer that cannot be started refuses the launch; started peers are stopped."""
        result, sp, _, _ = await _launch({"worker": Script(spawn_error=True)})
        (diag,) = result.diagnostics
        assert "'worker' (local/worker@0.1.0): could not be started (No such file" in diag.message
        assert sp.started["helper"].lifeline_closed_at is not None
        assert "lead" not in sp.started

    async def test_entry_spawn_failure(self, autojump_clock: trio.testing.MockClock) -> None:
        """An entry member that cannot be started stops every peer; exit 1."""
        result, sp, _, _ = await _launch({"lead": Script(spawn_error=True)})
        assert result.reason is EndReason.REFUSED and result.exit_status == 1
        (diag,) = result.diagnostics
        assert "'lead' (local/lead@0.1.0): could not be started" in diag.message
        assert all(sp.started[n].lifeline_closed_at is not None for n in ("worker", "helper"))

    async def test_first_failure_stops_without_waiting(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """One refusal ends the launch at once, even while other peers are still starting."""
        result, sp, _, _ = await _launch(
            {"worker": Script(report_after=100.0), "helper": Script(line="garbage")}
        )
        assert sp.started["worker"].lifeline_closed_at == pytest.approx(0.5)
        assert result.exit_status == 1


class TestArtifactChanged:
    async def test_peer_artifact_changed(self, autojump_clock: trio.testing.MockClock) -> None:
        """A peer whose artifact changed since admission is E-RUN-047; it is never started."""

        async def changed() -> str | None:
            await trio.lowlevel.checkpoint()
            return "its installed artifact /s/x.mur.zip changed since admission"

        result, sp, _, _ = await _launch({}, verify={"helper": changed})
        assert "helper" not in sp.started and "lead" not in sp.started
        assert [d.code for d in result.diagnostics] == ["E-RUN-047"]
        assert "member 'helper' (local/helper@0.1.0)" in result.diagnostics[0].message
        assert result.exit_status == 1

    async def test_entry_artifact_changed(self, autojump_clock: trio.testing.MockClock) -> None:
        """The entry member's artifact is re-hashed just before it would start."""
        calls: list[float] = []

        async def changed() -> str | None:
            await trio.lowlevel.checkpoint()
            calls.append(trio.current_time())
            return "changed"

        result, sp, _, _ = await _launch({}, verify={"lead": changed})
        assert "lead" not in sp.started
        assert calls and calls[0] >= sp.started["worker"].reported_at
        assert [d.code for d in result.diagnostics] == ["E-RUN-047"]
        assert result.exit_status == 1


class TestDeadline:
    async def test_before_entry_started(self, autojump_clock: trio.testing.MockClock) -> None:
        """A deadline that falls while peers start is E-RUN-053; the entry never starts."""
        result, sp, _, _ = await _launch({"worker": Script(report_after=60.0)}, deadline=10.0)
        assert result.reason is EndReason.DEADLINE and result.exit_status == 1
        assert "lead" not in sp.started
        (diag,) = result.diagnostics
        assert diag.code == "E-RUN-053"
        assert sp.started["worker"].lifeline_closed_at == pytest.approx(10.0)

    async def test_already_past(self, autojump_clock: trio.testing.MockClock) -> None:
        """A deadline already past starts nothing."""
        clock_now = trio.current_time()
        result, sp, _, _ = await _launch({}, deadline=clock_now - 1.0)
        assert sp.started == {}
        assert [d.code for d in result.diagnostics] == ["E-RUN-053"]
        assert result.exit_status == 1

    async def test_after_entry_started(self, autojump_clock: trio.testing.MockClock) -> None:
        """After the entry started, the deadline closes every lifeline; exit is the entry's."""
        result, sp, _, _ = await _launch(
            {"lead": Script(lifeline_code=1)}, deadline=30.0
        )
        assert result.reason is EndReason.DEADLINE
        assert result.exit_status == 1
        assert result.diagnostics == ()
        for m in sp.started.values():
            assert m.lifeline_closed_at == pytest.approx(30.0)

    async def test_deadline_is_the_members_scope(self, autojump_clock: trio.testing.MockClock) -> None:
        """The deadline is the members' cancel scope's: at that moment on the Trio clock the
        scope is cancelled, a SIGTERM during the teardown changes nothing (exit stays the
        entry's, not 143), and no peer's exit is reported as if it ended by itself."""
        send, recv = trio.open_memory_channel[int](4)
        seen: dict[str, object] = {}

        async def during_teardown(launch_box: list[FormationLaunch]) -> None:
            await trio.sleep(30.05)  # the entry's teardown takes 0.5 s after its lifeline closed
            seen["ended"] = launch_box[0].ended
            seen["reason"] = launch_box[0].reason
            await send.send(signal.SIGTERM)

        box: list[FormationLaunch] = []
        frm = ids.new_id("frm")
        spawner = FakeSpawner({"lead": Script(lifeline_code=3, teardown=0.5)}, frm)
        err = io.StringIO()
        launch = FormationLaunch(
            plan_for(ROSTER, frm), spawner=spawner, probe=spawner.probe, deadline=30.0,
            json_mode=True, out=io.StringIO(), err=err, exit_now=_exit_now,
        )
        box.append(launch)
        async with trio.open_nursery() as n:
            n.start_soon(during_teardown, box)
            result = await launch.run(recv)
        assert seen == {"ended": True, "reason": None}  # ending, by the scope's deadline alone
        assert result.reason is EndReason.DEADLINE and result.exit_status == 3
        assert "exited with" not in err.getvalue()
        for m in spawner.started.values():
            assert m.lifeline_closed_at == pytest.approx(30.0)

    async def test_deadline_bounds_readiness(
        self, autojump_clock: trio.testing.MockClock
    ) -> None:
        """The deadline cuts the readiness wait short of 180 s (E-RUN-053, not E-RUN-045)."""
        result, _, _, _ = await _launch({"worker": Script(report_after=None)}, deadline=20.0)
        assert [d.code for d in result.diagnostics] == ["E-RUN-053"]
