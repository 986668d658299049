"""A test stand-in for the launcher's side of a member: its key, channel and lifeline pipes.

The test process plays the launcher: it mints the formation id and key, writes each member's
credentials (and later lines) on a pipe whose read end the member reads, and holds the write
end of each member's lifeline. Members here are in-process sessions prepared by the real
``murmur.assembly.prepare`` (so the ``murmur.formation.member.member`` contributor runs), or
real ``mur run`` processes that inherit the read ends.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from murmur.assembly import RunOptions, prepare
from murmur.formation.wire import channel
from murmur.formation.wire.edge_tokens import FormationKey
from murmur.ids import new_id
from murmur.session.session import Session
from murmur.session.setup import SessionSetup, SessionSummary
from murmur.session.winddown import signal_wind_down

WORKER_YAML = """\
name: {name}
version: 0.1.0
plan: plan.yaml
lifecycle:
  task_acceptance: queue
  queue_depth: {depth}
  after_task: sleep
capabilities:
  shell:
    allow: [echo, sleep]
exports:
  peer_tasks:
    accept: true
network:
  authentication:
    scheme: bearer
"""
WORKER_PLAN = 'steps:\n  - id: answer\n    shell: [echo, "{name} heard: {{{{ task }}}}"]\noutput: "{{{{ steps.answer.stdout }}}}"\n'
SLEEPER_PLAN = 'steps:\n  - id: nap\n    shell: [sleep, "60"]\noutput: "woke"\n'
LEAD_YAML = """\
name: {name}
version: 0.1.0
plan: plan.yaml
lifecycle:
  task_acceptance: single
  after_task: exit
capabilities:
  network:
    allow: [{allow}]
network:
  authentication:
    scheme: bearer
"""
LEAD_PLAN = 'steps:\n  - id: ask\n    member: {callee}\n    task: "{{{{ task }}}}"\noutput: "{{{{ steps.ask.output }}}}"\n'


def write_capsule(root: Path, name: str, manifest: str, plan: str) -> Path:
    """Write ``root/name/{murmur.yaml,plan.yaml}``; the manifest path."""
    d = root / name
    d.mkdir(parents=True)
    (d / "murmur.yaml").write_text(manifest)
    (d / "plan.yaml").write_text(plan)
    return d / "murmur.yaml"


def worker_capsule(root: Path, name: str = "worker", *, depth: int = 1, sleeper: bool = False) -> Path:
    """A peer plan capsule that echoes (or sleeps 60 s), serves peers, authenticated."""
    plan = SLEEPER_PLAN if sleeper else WORKER_PLAN.format(name=name)
    return write_capsule(root, name, WORKER_YAML.format(name=name, depth=depth), plan)


def lead_capsule(root: Path, name: str = "lead", *, callee: str = "worker", allow: str = "localhost") -> Path:
    """An entry plan capsule whose one step calls ``callee``."""
    return write_capsule(root, name, LEAD_YAML.format(name=name, allow=allow), LEAD_PLAN.format(callee=callee))


@attrs.define
class Pipes:
    """One member's pipes: the read ends it inherits, the write ends the launcher keeps."""

    channel_r: int
    channel_w: int
    lifeline_r: int
    lifeline_w: int

    def close_lifeline(self) -> None:
        """The launcher closes the lifeline (the formation ended)."""
        _close(self.lifeline_w)
        self.lifeline_w = -1


def _close(fd: int) -> None:
    if fd >= 0:
        try:
            os.close(fd)
        except OSError:
            pass


class LauncherDouble:
    """Mints a formation and hands members their pipes; closes every write end at :meth:`close`.

    Read ends handed to an in-process session are closed by that session; the others are
    closed here (``handed`` says which).
    """

    def __init__(self) -> None:
        self.key = FormationKey.generate()
        self.formation_id = new_id("frm")
        self.pipes: list[Pipes] = []
        self.handed: set[int] = set()

    def credentials(self, member: str, callees: Sequence[str], *, key: FormationKey | None = None,
                    formation_id: str | None = None) -> bytes:
        """A first line for ``member`` (another key or formation when given)."""
        k = key or self.key
        fid = formation_id or self.formation_id
        calls = tuple(channel.Call(c, k.mint(formation=fid, caller=member, callee=c)) for c in callees)
        return channel.encode_credentials(channel.Credentials(fid, member, k.verify_key(), calls))

    def token(self, caller: str, callee: str) -> str:
        """A valid token of this formation for the edge ``caller -> callee``."""
        return self.key.mint(formation=self.formation_id, caller=caller, callee=callee)

    def member(self, member: str, callees: Sequence[str] = (), *, entry: bool = False,
               first: bytes | None = None, later: bytes = b"") -> Pipes:
        """Make a member's pipes with its first line (and ``later`` bytes) already written."""
        cr, cw = os.pipe()
        lr, lw = os.pipe()
        pipes = Pipes(cr, cw, lr, lw)
        self.pipes.append(pipes)
        data = (self.credentials(member, callees) if first is None else first) + later
        if entry:
            data += channel.encode_entry_role()
        os.write(cw, data)
        return pipes

    def env(self, pipes: Pipes | None, *, lifeline: bool = True, **extra: str) -> dict[str, str]:
        """A member's environment (PATH and HOME kept)."""
        env = {k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ}
        env["MURMUR_HOME"] = os.environ["MURMUR_HOME"]
        env["MURMUR_FORMATION_ID"] = self.formation_id
        if pipes is not None:
            env["MURMUR_FORMATION_CHANNEL"] = str(pipes.channel_r)
            if lifeline:
                env["MURMUR_FORMATION_LIFELINE"] = str(pipes.lifeline_r)
        env.update(extra)
        return env

    def close(self) -> None:
        """Close every write end, and every read end no session took."""
        for p in self.pipes:
            _close(p.channel_w)
            p.close_lifeline()
            for fd in (p.channel_r, p.lifeline_r):
                if fd not in self.handed:
                    _close(fd)


def prepare_member(manifest: Path, env: dict[str, str], workdir: Path, *, task: str | None = None,
                   first_line_timeout: float | None = None) -> SessionSetup:
    """The real ``mur run`` preparation of an in-process member (no 20 s guard)."""
    opts = RunOptions(manifest=str(manifest), task=task, workdir=str(workdir), json=True, no_env_file=True)
    setup = prepare(opts, environ=env, cwd=workdir.parent)
    setup.guard = None
    return setup


class TraceEvents:
    """Wraps a session's trace so a test can wait for a record type (no polling)."""

    def __init__(self, session: Session) -> None:
        self.seen: list[str] = []
        self._events: dict[str, trio.Event] = {}
        emit = session.trace.emit

        def watched(event_type: str, /, *, parent_id: str | None, **fields: object) -> str:
            out = emit(event_type, parent_id=parent_id, **fields)
            self.seen.append(event_type)
            self._event(event_type).set()
            return out

        session.trace.emit = watched  # type: ignore[method-assign]

    def _event(self, event_type: str) -> trio.Event:
        return self._events.setdefault(event_type, trio.Event())

    async def wait_for(self, event_type: str, timeout: float = 15.0) -> None:
        """Return once a record of ``event_type`` has been written."""
        with trio.fail_after(timeout):
            await self._event(event_type).wait()


@attrs.define
class Running:
    """An in-process member session."""

    session: Session
    ready: dict[str, Any]
    done: trio.Event
    box: dict[str, SessionSummary]
    events: TraceEvents

    @property
    def url(self) -> str:
        return str(self.ready["url"])

    async def wait(self, timeout: float = 20.0) -> SessionSummary:
        with trio.fail_after(timeout):
            await self.done.wait()
        return self.box["summary"]


@asynccontextmanager
async def run_member(setup: SessionSetup) -> AsyncIterator[Running]:
    """Run a prepared member until the block ends (then SIGTERM-like wind-down)."""
    session = Session(setup)
    events = TraceEvents(session)
    ready: dict[str, Any] = {}
    up, done = trio.Event(), trio.Event()
    box: dict[str, SessionSummary] = {}

    async def go() -> None:
        try:
            box["summary"] = await session.run(lambda r: (ready.update(r), up.set()))
        finally:
            done.set()
            up.set()

    async with trio.open_nursery() as n:
        n.start_soon(go)
        await up.wait()
        handle = Running(session, ready, done, box, events)
        try:
            yield handle
        finally:
            if not done.is_set():
                session.wind_down(signal_wind_down("SIGTERM"))
            with trio.fail_after(20):
                await done.wait()
