"""The member side: joining (membership, the first channel line), the door's mft1 verifier, install."""

from __future__ import annotations

import base64
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from murmur import lifeline
from murmur.errors import DiagnosticError
from murmur.formation.member import member
from murmur.formation.member.calls import CallEngine
from murmur.formation.member.firstline import ChannelReadError, read_first_line
from murmur.formation.member.member import install
from murmur.formation.member.membership import (
    Membership,
    channel_fd_problem,
    formation_id_problem,
    join,
)
from murmur.formation.member.verifier import FORMATION_SCOPES, FormationVerifier
from murmur.formation.wire.edge_tokens import FormationKey
from murmur.session.auth import AuthRefusal, BearerDoor, Principal
from murmur.workload import TaskServices

from ._launcher_double import LauncherDouble, lead_capsule, prepare_member, worker_capsule


@pytest.fixture(autouse=True)
def fresh_claims(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lifeline claims are per process; each test starts with none (fd numbers are reused)."""
    monkeypatch.setattr(lifeline, "_claimed", set())


@pytest.fixture
def launcher() -> Iterator[LauncherDouble]:
    """A launcher double whose pipes are closed after the test."""
    ld = LauncherDouble()
    yield ld
    ld.close()


class TestFormationId:
    @pytest.mark.parametrize(
        ("value", "reason"),
        [
            ("frm_0199c4e2f1b7712a9d3e4f5061728394", None),
            ("ses_0199c4e2f1b7712a9d3e4f5061728394", "it does not start with frm_"),
            ("frm_0199c4e2f1b7712a9d3e4f506172839", "it has 31 characters after frm_, not 32"),
            ("frm_0199C4E2F1B7712A9D3E4F5061728394", "it has a character that is not a lowercase hex digit"),
            ("frm_0199c4e2f1b7712a9d3e4f506172839g", "it has a character that is not a lowercase hex digit"),
        ],
    )
    def test_reasons(self, value: str, reason: str | None) -> None:
        """E-RUN-044 reasons: prefix, digit count, non-hex character."""
        assert formation_id_problem(value) == reason


class TestChannelFd:
    def test_pipe_and_file_are_usable(self, tmp_path: Path) -> None:
        """A pipe's read end and a regular file opened for reading are channels."""
        r, w = os.pipe()
        f = os.open(tmp_path / "f", os.O_RDONLY | os.O_CREAT)
        try:
            assert channel_fd_problem(str(r)) is None
            assert channel_fd_problem(str(f)) is None
            assert channel_fd_problem(str(w)) == "it is not open for reading"
        finally:
            for fd in (r, w, f):
                os.close(fd)

    def test_not_usable(self, tmp_path: Path) -> None:
        """Not decimal, too large, a standard stream, closed, a directory, a socket, a device."""
        assert channel_fd_problem("x3") == "it is not a decimal file descriptor number"
        assert channel_fd_problem("99999999") == "the number is too large"
        assert channel_fd_problem("1") == "it names a standard stream (0-2)"
        r, w = os.pipe()
        os.close(r)
        os.close(w)
        assert channel_fd_problem(str(r)) == "the file descriptor is not open"
        d = os.open(tmp_path, os.O_RDONLY)
        a, b = socket.socketpair()
        null = os.open(os.devnull, os.O_RDONLY)
        try:
            assert channel_fd_problem(str(d)) == "it is a directory, not a pipe or a file"
            assert channel_fd_problem(str(a.fileno())) == "it is a socket, not a pipe or a file"
            assert channel_fd_problem(str(null)) == "it is a character device, not a pipe or a file"
        finally:
            os.close(d)
            os.close(null)
            a.close()
            b.close()


class TestReadFirstLine:
    def test_first_and_later_lines(self, launcher: LauncherDouble) -> None:
        """The first line and whatever already follows it (addresses, role) are read at once."""
        later = b'{"addresses":[{"name":"worker","url":"http://127.0.0.1:4000"}]}\n{"role":"ent'
        p = launcher.member("lead", ["worker"], later=later)
        got = read_first_line(p.channel_r, 1.0)
        assert got.first == launcher.credentials("lead", ["worker"]).rstrip(b"\n")
        assert len(got.later) == 1 and not got.finished
        assert got.splitter.feed(b'ry"}\n') == [b'{"role":"entry"}']

    def test_waits_for_a_slow_first_line(self, launcher: LauncherDouble) -> None:
        """A first line written after a pause (within the bound) is read."""
        p = launcher.member("lead", first=b"")
        line = launcher.credentials("lead", [])
        t = threading.Timer(0.2, os.write, args=(p.channel_w, line))
        t.start()
        try:
            assert read_first_line(p.channel_r, 5.0).first == line.rstrip(b"\n")
        finally:
            t.join()

    def test_no_first_line_in_time(self, launcher: LauncherDouble) -> None:
        """Nothing within the bound: refused, after the bound."""
        p = launcher.member("lead", first=b'{"partial":')
        t0 = time.monotonic()
        with pytest.raises(ChannelReadError, match=r"no first line arrived within 0.3 seconds"):
            read_first_line(p.channel_r, 0.3)
        assert time.monotonic() - t0 >= 0.3

    def test_channel_ends_first(self, launcher: LauncherDouble) -> None:
        """EOF before a line: refused."""
        p = launcher.member("lead", first=b"")
        os.close(p.channel_w)
        p.channel_w = -1
        with pytest.raises(ChannelReadError, match="ended before its first line"):
            read_first_line(p.channel_r, 1.0)

    def test_regular_file(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """A regular file is read whole; an unterminated last line counts; it is finished."""
        path = tmp_path / "chan"
        path.write_bytes(launcher.credentials("lead", []) + b'{"role":"entry"}')
        fd = os.open(path, os.O_RDONLY)
        try:
            got = read_first_line(fd, 1.0)
        finally:
            os.close(fd)
        assert got.finished and got.later == (b'{"role":"entry"}',)


class TestJoin:
    def test_no_formation(self) -> None:
        """No formation variable: not a member."""
        assert join({"PATH": "/bin"}) is None

    def test_peers_variable_refused(self, launcher: LauncherDouble) -> None:
        """MURMUR_FORMATION_PEERS in mur run's own environment: E-RUN-046, even alone."""
        with pytest.raises(DiagnosticError, match=r"MURMUR_FORMATION_PEERS is set") as exc:
            join({"MURMUR_FORMATION_PEERS": "coder=http://coder.formation.invalid"})
        assert exc.value.code == "E-RUN-046"

    @pytest.mark.parametrize("var", ["MURMUR_FORMATION_CHANNEL", "MURMUR_FORMATION_LIFELINE"])
    def test_channel_or_lifeline_without_id(self, var: str) -> None:
        """A channel or lifeline without MURMUR_FORMATION_ID: E-RUN-046 naming it."""
        with pytest.raises(DiagnosticError, match=f"{var} is set without MURMUR_FORMATION_ID") as exc:
            join({var: "7"})
        assert exc.value.code == "E-RUN-046"

    def test_bad_id(self) -> None:
        """A malformed MURMUR_FORMATION_ID: E-RUN-044 with its reason."""
        with pytest.raises(DiagnosticError, match="does not start with frm_") as exc:
            join({"MURMUR_FORMATION_ID": "formation-1"})
        assert exc.value.code == "E-RUN-044"

    def test_bad_lifeline(self, launcher: LauncherDouble) -> None:
        """A lifeline that is the write end of a pipe: E-RUN-046 with the reason."""
        p = launcher.member("lead")
        env = launcher.env(p)
        env["MURMUR_FORMATION_LIFELINE"] = str(p.lifeline_w)
        with pytest.raises(DiagnosticError, match="open for writing") as exc:
            join(env)
        assert exc.value.code == "E-RUN-046"

    def test_channel_not_open(self, launcher: LauncherDouble) -> None:
        """A channel descriptor that is not open: E-RUN-046."""
        env = launcher.env(None, MURMUR_FORMATION_CHANNEL="1000")
        with pytest.raises(DiagnosticError, match=r"MURMUR_FORMATION_CHANNEL\) cannot be used: the file descriptor is not open"):
            join(env)

    def test_no_first_line(self, launcher: LauncherDouble) -> None:
        """No first line within the bound: E-RUN-046."""
        p = launcher.member("lead", first=b"")
        with pytest.raises(DiagnosticError, match=r"no first line arrived within 0\.2 seconds") as exc:
            join(launcher.env(p), first_line_timeout=0.2)
        assert exc.value.code == "E-RUN-046"

    def test_other_formation(self, launcher: LauncherDouble) -> None:
        """A first line naming another formation: E-RUN-046."""
        other = launcher.credentials("lead", [], formation_id="frm_0199c4e2f1b7712a9d3e4f5061728395")
        p = launcher.member("lead", first=other)
        with pytest.raises(DiagnosticError, match="names another formation") as exc:
            join(launcher.env(p))
        assert exc.value.code == "E-RUN-046"

    def test_token_not_issued_to_this_member(self, launcher: LauncherDouble) -> None:
        """A first line whose token is for another edge: E-RUN-046; the token is never shown."""
        token = launcher.token("scout", "worker")
        line = (
            b'{"formation_id":"' + launcher.formation_id.encode() + b'","member":"lead","verify_key":"'
            + launcher.key.verify_key().to_b64().encode() + b'","calls":[{"name":"worker","token":"'
            + token.encode() + b'"}]}\n'
        )
        p = launcher.member("lead", first=line)
        with pytest.raises(DiagnosticError, match="not issued to this member") as exc:
            join(launcher.env(p))
        assert token not in str(exc.value)

    def test_not_credentials(self, launcher: LauncherDouble) -> None:
        """A first line that is not a credentials bundle: E-RUN-046."""
        p = launcher.member("lead", first=b'{"addresses":[]}\n')
        with pytest.raises(DiagnosticError, match="is not a member's credentials"):
            join(launcher.env(p))

    def test_member(self, launcher: LauncherDouble) -> None:
        """A launcher-made member: credentials, addresses, role; fds close-on-exec; no W-RUN-007."""
        later = b'{"addresses":[{"name":"worker","url":"http://127.0.0.1:4000"},{"name":"x","url":"http://127.0.0.1:1"}]}\n'
        p = launcher.member("lead", ["worker"], entry=True, later=later)
        m = join(launcher.env(p))
        assert m is not None
        assert (m.formation_id, m.member, m.callees, m.entry) == (launcher.formation_id, "lead", ("worker",), True)
        assert m.addresses.urls() == {"worker": "http://127.0.0.1:4000"}
        assert m.lifeline_fd == p.lifeline_r and m.channel_fd == p.channel_r
        assert not os.get_inheritable(p.channel_r) and not os.get_inheritable(p.lifeline_r)
        assert m.warnings == []

    def test_the_callees_line_is_read_at_launch(self, launcher: LauncherDouble) -> None:
        """What the launcher read of each callee's manifest is known before the session is
        staged (a `call-member` to a callee not running yet is judged by it)."""
        from murmur.formation.wire import channel

        facts = [channel.CalleeFacts("worker", "app-worker", True, 4, None), channel.CalleeFacts("x", "app-x", False)]
        p = launcher.member("lead", ["worker"], later=channel.encode_callees(facts))
        m = join(launcher.env(p))
        assert m is not None and m.callee_facts == {"worker": facts[0]}  # `x` is not its callee

    def test_bad_later_line_is_noted(self, launcher: LauncherDouble) -> None:
        """A bad later line is ignored with a note; the next good one still counts."""
        p = launcher.member("lead", ["worker"], later=b"nonsense\n" + b'{"role":"entry"}\n')
        notes: list[str] = []
        m = join(launcher.env(p))
        assert m is not None and m.entry  # read at launch, the bad line noted on stderr
        m.take_line(b"{}", note=notes.append)
        assert notes == ["ignored a formation channel line: the line is neither an addresses, a callees nor a role line"]

    def test_hand_started_member_warns(self, launcher: LauncherDouble) -> None:
        """MURMUR_FORMATION_ID without a lifeline: W-RUN-007; a delegated child prints nothing."""
        m = join({"MURMUR_FORMATION_ID": launcher.formation_id})
        assert m is not None and m.credentials is None
        assert [w.code for w in m.warnings] == ["W-RUN-007"]
        child = join({"MURMUR_FORMATION_ID": launcher.formation_id, "MURMUR_SPAWNER": "{}"})
        assert child is not None and child.warnings == []


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TestVerifier:
    FRM = "frm_0199c4e2f1b7712a9d3e4f5061728394"
    KEY = FormationKey.generate()

    def verifier(self, member: str = "worker") -> FormationVerifier:
        return FormationVerifier(self.KEY.verify_key(), self.FRM, member, "demo-worker")

    def good(self, caller: str = "lead", callee: str = "worker") -> str:
        return self.KEY.mint(formation=self.FRM, caller=caller, callee=callee)

    def bad_tokens(self) -> dict[str, str]:
        good = self.good()
        tag, payload, sig = good.split(".")
        other_frm = "frm_0199c4e2f1b7712a9d3e4f5061728395"
        raw_payload = base64.urlsafe_b64decode(payload + "==")
        altered = _b64(raw_payload.replace(b'"lead"', b'"boss"'))
        return {
            "forged": FormationKey.generate().mint(formation=self.FRM, caller="lead", callee="worker"),
            "altered": f"{tag}.{altered}.{sig}",
            "cross-formation": FormationKey.generate().mint(formation=other_frm, caller="lead", callee="worker"),
            "same key, other formation": self.KEY.mint(formation=other_frm, caller="lead", callee="worker"),
            "re-encoded (padding)": f"{tag}.{payload}==.{sig}",
            "re-encoded (standard alphabet)": good.replace("-", "+").replace("_", "/") if ("-" in good or "_" in good) else good + "=",
            "truncated": good[:-2],
            "not mft1 at all": "mft1.",
        }

    def test_valid(self) -> None:
        """A token for this door: member:<from> with exactly the five scopes."""
        got = self.verifier().verify(self.good())
        assert got == Principal("member:lead", FORMATION_SCOPES, member="lead")

    def test_other_kinds_are_not_mine(self) -> None:
        """Tokens that are not mft1. are left to the door's own check."""
        assert self.verifier().verify("mdt1.abc.def") is None

    def test_invalid_tokens_identical(self) -> None:
        """Forged, altered, cross-formation, re-encoded: 401 invalid_token, byte-identical."""
        answers = {name: self.verifier().verify(tok) for name, tok in self.bad_tokens().items()}
        first = next(iter(answers.values()))
        assert isinstance(first, AuthRefusal) and (first.status, first.error) == (401, "invalid_token")
        for name, got in answers.items():
            assert got == first, name
            assert isinstance(got, AuthRefusal) and got.body() == first.body()

    def test_other_door(self) -> None:
        """A valid token for another member's door: 403 not_permitted naming only its holder."""
        got = self.verifier("critic").verify(self.good())
        assert isinstance(got, AuthRefusal) and (got.status, got.error) == (403, "not_permitted")
        assert "lead" in got.message and "worker" not in got.message

    def test_door_order(self) -> None:
        """Through the door: no header 401, invalid 401 like any bad token, scope 403 naming member:lead."""
        door = BearerDoor("demo-worker", (), verifiers=[self.verifier()])
        assert isinstance(none := door.authenticate([]), AuthRefusal) and none.error == "unauthenticated"
        bad = door.authenticate([f"Bearer {self.bad_tokens()['forged']}"])
        junk = door.authenticate(["Bearer not-a-token-at-all"])
        assert bad == junk
        principal = door.authenticate([f"Bearer {self.good()}"])
        assert isinstance(principal, Principal)
        assert door.authorize(principal, "GetTask") is None
        refusal = door.authorize(principal, "SendStreamingMessage")
        assert refusal is not None and refusal.error == "insufficient_scope" and "'member:lead'" in refusal.message

    def test_door_in_no_formation(self) -> None:
        """A formation token at a door in no formation: the same 401 as any invalid token."""
        door = BearerDoor("solo", ())
        assert door.authenticate([f"Bearer {self.good()}"]) == door.authenticate(["Bearer nope"])


class TestInstall:
    def test_fields_verifier_and_services(self, tmp_path: Path, launcher: LauncherDouble,
                                          capsys: pytest.CaptureFixture[str]) -> None:
        """prepare() runs the contributor: formation fields, verifier, services, watchers."""
        p = launcher.member("lead", ["worker"], entry=True)
        launcher.handed.update({p.channel_r, p.lifeline_r})
        setup = prepare_member(lead_capsule(tmp_path / "src"), launcher.env(p), tmp_path / "wd")
        try:
            assert setup.formation_id == launcher.formation_id
            assert setup.trace_start_fields == {
                "formation_id": launcher.formation_id, "formation_member": "lead", "formation_callees": ["worker"],
                "formation_entry": True,  # the entry member's lineage says so (spec/tree.md)
            }
            assert [type(v) for v in setup.token_verifiers] == [FormationVerifier]
            assert isinstance(setup.workload, member.CallsEndWithTask)
            assert setup.services is not None
            assert "W-RUN-" not in capsys.readouterr().err
        finally:
            os.close(p.channel_r)
            os.close(p.lifeline_r)

    def test_w_run_008(self, tmp_path: Path, launcher: LauncherDouble, capsys: pytest.CaptureFixture[str]) -> None:
        """A member with callees whose network.allow reaches no door: W-RUN-008 at launch."""
        p = launcher.member("lead", ["worker"])
        launcher.handed.update({p.channel_r, p.lifeline_r})
        prepare_member(lead_capsule(tmp_path / "src", allow="api.example.com"), launcher.env(p), tmp_path / "wd")
        os.close(p.channel_r)
        os.close(p.lifeline_r)
        err = capsys.readouterr().err
        assert "warning[W-RUN-008]: this member may call worker" in err and "localhost" in err

    def test_w_run_007(self, tmp_path: Path, launcher: LauncherDouble, capsys: pytest.CaptureFixture[str]) -> None:
        """A hand-started member prints W-RUN-007 once and gets formation_id but no member name."""
        setup = prepare_member(worker_capsule(tmp_path / "src"), launcher.env(None), tmp_path / "wd")
        assert capsys.readouterr().err.count("warning[W-RUN-007]") == 1
        assert setup.trace_start_fields == {"formation_id": launcher.formation_id}
        assert setup.token_verifiers == [] and setup.services is None

    def test_keeps_earlier_services(self, tmp_path: Path, launcher: LauncherDouble) -> None:
        """Services another contributor set are kept; call-member fields are added."""
        p = launcher.member("lead", ["worker"])
        launcher.handed.update({p.channel_r, p.lifeline_r})
        setup = prepare_member(lead_capsule(tmp_path / "src"), {"PATH": os.environ["PATH"], "MURMUR_HOME": os.environ["MURMUR_HOME"]}, tmp_path / "wd")

        async def delegate(*_: object) -> dict[str, object]:
            return {}

        setup.services = lambda task: TaskServices(delegate=delegate)
        m = join(launcher.env(p))
        assert m is not None
        engine = install(setup, m)
        assert isinstance(engine, CallEngine)
        assert setup.services is not None
        svc = setup.services(_task("tsk_1"))
        assert svc.delegate is delegate and svc.call_member is not None and svc.callees == ("worker",)
        os.close(p.channel_r)
        os.close(p.lifeline_r)


def _task(tid: str) -> object:
    from murmur.session.tasks.book import Task

    return Task(id=tid, context_id="ctx_1", text="x", origin="user", trust="trusted", lane="user",
                source="task_md", message={})


class _DeadlineSession:
    """The two things a ``WindDownControl`` reads of its session, for the lifeline watcher."""

    def __init__(self, deadline_at: float | None) -> None:
        self.deadline_at = deadline_at
        self.wind_down_reason = None
        self.triggered: list[object] = []

    def wind_down(self, reason: object) -> None:
        self.triggered.append(reason)


class TestLifelineWatcher:
    @pytest.mark.parametrize(
        ("close_after", "cause"),
        [(10.0, "lifeline"), (58.9, "lifeline"), (59.1, "deadline"), (59.9, "deadline"), (61.0, "deadline")],
    )
    async def test_deadline_told_by_the_trio_clock(
        self, autojump_clock: trio.testing.MockClock, close_after: float, cause: str
    ) -> None:
        """A lifeline that closes before the member's deadline (on the Trio clock) ends the
        formation; one that closes after it, or less than DEADLINE_EOF_SLACK (1 s) before it —
        the launcher's conversion of the moment may land that much earlier than the member's —
        is the deadline (deadline_reached, E-RUN-053)."""
        from types import SimpleNamespace

        from murmur.session.setup import WindDownControl

        r, w = os.pipe()
        try:
            m = Membership("frm_0199c4e2f1b7712a9d3e4f5061728394", lifeline_fd=r)
            setup = SimpleNamespace(deadline=time.time() + 60)
            session = _DeadlineSession(trio.current_time() + 60)
            watch = member._lifeline_watcher(setup, m)  # type: ignore[arg-type]
            async with trio.open_nursery() as n:
                n.start_soon(watch, WindDownControl(session))  # type: ignore[arg-type]
                await trio.sleep(close_after)
                os.close(w)
                w = -1
            (reason,) = session.triggered
            assert reason.cause == cause  # type: ignore[attr-defined]
            if cause == "deadline":
                assert reason.status == "deadline_reached"  # type: ignore[attr-defined]
            else:
                assert reason.trace_event == "formation_ended"  # type: ignore[attr-defined]
        finally:
            if w >= 0:
                os.close(w)
