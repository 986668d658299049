"""Fake members for launcher tests under MockClock: scripted behaviour, recorded events."""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from pathlib import Path

import attrs
import trio

from murmur import ids
from murmur.formation.launch import launchplan
from murmur.formation.launch.supervise import MemberSpec
from murmur.formation.roster.admission import AdmittedMember, AdmittedRoster, Edge
from murmur.formation.roster.schema import ReachabilityKind
from murmur.formation.wire.edge_tokens import FormationKey
from murmur.manifest.model import Manifest

_pids = itertools.count(40000)


@attrs.frozen
class Script:
    """How a fake member behaves.

    Attributes:
        report_after (float | None): seconds from start to its first stdout line (None: never).
        line (str): ``ok`` | ``garbage`` | ``no_door`` | ``no_formation`` | ``other_formation``.
        exit_before_report (int | None): exit with this status at ``report_after`` instead.
        door_after (float | None): seconds after reporting until its door answers (None: never).
        exit_after (float | None): exits by itself this long after start (code ``exit_code``).
        exit_code (int): its status when it exits by itself.
        on_lifeline (str): ``exit`` (after ``teardown`` s, status ``lifeline_code``),
            ``hang`` (exits 143 twenty seconds after the lifeline closed), ``ignore``.
        teardown (float): seconds from lifeline close to exit under ``exit``.
        lifeline_code (int): status under ``exit``.
        spawn_error (bool): spawning raises OSError.
        stderr (tuple[str, ...]): its last stderr lines.
    """

    report_after: float | None = 0.5
    line: str = "ok"
    exit_before_report: int | None = None
    door_after: float | None = 0.3
    exit_after: float | None = None
    exit_code: int = 0
    on_lifeline: str = "exit"
    teardown: float = 0.1
    lifeline_code: int = 0
    spawn_error: bool = False
    stderr: tuple[str, ...] = ()


class FakeMember:
    """A scripted member implementing ``MemberHandle``."""

    def __init__(self, spec: MemberSpec, script: Script, formation_id: str) -> None:
        self.spec = spec
        self.name = spec.name
        self.script = script
        self.formation_id = formation_id
        self.pid = next(_pids)
        self.session_id = ids.new_id("ses")
        self.url = f"http://127.0.0.1:{self.pid}"
        self.returncode: int | None = None
        self.started_at = trio.current_time()
        self.reported_at: float | None = None
        self.lifeline_closed_at: float | None = None
        self.killed_at: float | None = None
        self.exited_at: float | None = None
        self.channel = bytearray(spec.channel)
        self.later_lines: list[bytes] = []
        self.closed = False
        self._exited = trio.Event()
        self._first = trio.Event()
        self._line: bytes | None = None
        self._nursery: trio.Nursery | None = None

    # -- MemberHandle -----------------------------------------------------------------

    async def first_line(self) -> bytes | None:
        await self._first.wait()
        return self._line

    async def send_line(self, line: bytes) -> None:
        await trio.lowlevel.checkpoint()
        self.later_lines.append(line)

    def close_lifeline(self) -> None:
        if self.lifeline_closed_at is not None:
            return
        self.lifeline_closed_at = trio.current_time()
        if self.returncode is not None or self._nursery is None:
            return
        if self.script.on_lifeline == "exit":
            self._nursery.start_soon(self._exit_in, self.script.teardown, self.script.lifeline_code)
        elif self.script.on_lifeline == "hang":
            self._nursery.start_soon(self._exit_in, 20.0, 143)

    def kill(self) -> None:
        if self.returncode is None:
            self.killed_at = trio.current_time()
            self._finish(-9)

    async def wait(self) -> int:
        await self._exited.wait()
        assert self.returncode is not None
        return self.returncode

    def last_stderr(self) -> Sequence[str]:
        return list(self.script.stderr)

    async def aclose(self) -> None:
        await trio.lowlevel.checkpoint()
        self.closed = True

    # -- life ---------------------------------------------------------------------------

    def door_session(self) -> str | None:
        """What its door answers now (None: no answer)."""
        if self.reported_at is None or self.returncode is not None:
            return None
        if self.script.door_after is None:
            return None
        if trio.current_time() - self.reported_at < self.script.door_after:
            return None
        return self.session_id

    def _finish(self, code: int) -> None:
        if self.returncode is None:
            self.returncode = code
            self.exited_at = trio.current_time()
            self._exited.set()
            if not self._first.is_set():
                self._first.set()

    async def _exit_in(self, delay: float, code: int) -> None:
        await trio.sleep(delay)
        self._finish(code)

    def _readiness_line(self) -> bytes:
        body: dict[str, object] = {
            "name": self.name,
            "version": "0.1.0",
            "pid": self.pid,
            "session_id": self.session_id,
            "url": self.url.removeprefix("http://"),
            "workdir": "/w",
            "formation_id": self.formation_id,
        }
        kind = self.script.line
        if kind == "garbage":
            return b"hello, world"
        if kind == "no_door":
            del body["url"]
        elif kind == "no_formation":
            del body["formation_id"]
        elif kind == "other_formation":
            body["formation_id"] = ids.new_id("frm")
        return json.dumps(body).encode()

    async def life(self) -> None:
        async with trio.open_nursery() as n:
            self._nursery = n
            if self.script.exit_after is not None:
                n.start_soon(self._exit_in, self.script.exit_after, self.script.exit_code)
            if self.spec.peer and self.script.report_after is not None:
                n.start_soon(self._report)
            await self._exited.wait()
            n.cancel_scope.cancel()

    async def _report(self) -> None:
        await trio.sleep(self.script.report_after or 0.0)
        if self.script.exit_before_report is not None:
            self._finish(self.script.exit_before_report)
            return
        self._line = self._readiness_line()
        self.reported_at = trio.current_time()
        self._first.set()


class FakeSpawner:
    """Starts :class:`FakeMember` s by name; records what it started, in order."""

    def __init__(self, scripts: dict[str, Script], formation_id: str) -> None:
        self.scripts = scripts
        self.formation_id = formation_id
        self.started: dict[str, FakeMember] = {}
        self.order: list[str] = []

    async def spawn(self, spec: MemberSpec, relays: trio.Nursery) -> FakeMember:
        await trio.lowlevel.checkpoint()
        script = self.scripts.get(spec.name, Script())
        if script.spawn_error:
            raise FileNotFoundError(2, "No such file or directory")
        member = FakeMember(spec, script, self.formation_id)
        self.started[spec.name] = member
        self.order.append(spec.name)
        relays.start_soon(member.life)
        return member

    async def probe(self, report: object) -> str | None:
        """A probe that asks the fake member whose URL the report names."""
        await trio.lowlevel.checkpoint()
        url = getattr(report, "url", "")
        for m in self.started.values():
            if m.url == url:
                return m.door_session()
        return None


def member(name: str, *, entry: bool = False, callees: tuple[str, ...] = ()) -> AdmittedMember:
    """An admitted member with a minimal manifest."""
    return AdmittedMember(
        name=name,
        capsule=f"local/{name}",
        version="0.1.0",
        sha256="0" * 64,
        manifest=Manifest(name=name, version="0.1.0"),
        entry=entry,
        callees=callees,
    )


def roster(*members: AdmittedMember) -> AdmittedRoster:
    """An admitted roster of ``members`` with the edges their callees imply."""
    edges = tuple(Edge(m.name, c) for m in members for c in m.callees)
    return AdmittedRoster(
        source="roster.yaml",
        project_dir=Path("/p"),
        members=members,
        edges=edges,
        reachability=ReachabilityKind.RULES if edges else ReachabilityKind.NONE,
    )


def plan_for(
    admitted: AdmittedRoster,
    formation_id: str,
    *,
    task: str | None = "do it",
    json_mode: bool = False,
) -> launchplan.LaunchPlan:
    """A launch plan as ``run_roster`` would build it (fake ``mur``)."""
    return launchplan.build_launch_plan(
        admitted,
        formation_id=formation_id,
        key=FormationKey.generate(),
        project_dir=Path("/p"),
        peer_dirs={m.name: Path("/f") / m.name for m in admitted.peers},
        options=launchplan.RosterOptions(task=task, json=json_mode),
        mur=("mur",),
        base_env={"PATH": "/bin"},
        cwd="/cwd",
        deadline=None,
    )
