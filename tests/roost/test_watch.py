"""A registered session's process that ends without deregistering gives its slots back.

spec/roost.md, "When a session's process ends" (issue 11, item 5). An in-process daemon with a
running :class:`ProcessWatch`; the sessions are registered by real child processes
(tests/roost/peer_client.py), which the tests SIGKILL. Every wait is bounded and waits on an
event: a line from the client process, its exit, the daemon's notice.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import attrs
import pytest
import trio
import trio.testing

from murmur import procstat
from murmur.roost.peer import Peer
from murmur.roost.watch import ProcessWatch, _Ended, open_pidfd

from .conftest import Roost, StartRoost

CLIENT = Path(__file__).with_name("peer_client.py")


@attrs.define
class Notices:
    """The daemon's notice lines, with an event per arrival."""

    lines: list[str] = attrs.field(factory=list)
    arrived: trio.Event = attrs.field(factory=trio.Event)
    taken: int = 0

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        self.arrived.set()

    async def next(self) -> str:
        """The next notice not yet taken, waiting for it (bounded)."""
        with trio.fail_after(10):
            while len(self.lines) == self.taken:
                self.arrived = trio.Event()
                await self.arrived.wait()
        self.taken += 1
        return self.lines[self.taken - 1]


@attrs.define
class Client:
    """One registering process (tests/roost/peer_client.py)."""

    proc: trio.Process
    lines: trio.abc.ReceiveStream

    async def line(self) -> str:
        """Its next stdout line (bounded)."""
        buf = b""
        with trio.fail_after(30):
            while not buf.endswith(b"\n"):
                chunk = await self.lines.receive_some(1)
                if not chunk:
                    raise EOFError("the client closed its output")
                buf += chunk
        return buf.decode().strip()

    async def kill(self) -> None:
        """SIGKILL it and reap it."""
        self.proc.send_signal(signal.SIGKILL)
        with trio.fail_after(10):
            await self.proc.wait()


async def close_pipes(proc: trio.Process) -> None:
    """Close whichever of its pipes the test opened."""
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            await stream.aclose()


StartClient = Callable[..., Awaitable[Client]]


@pytest.fixture
async def clients() -> AsyncIterator[StartClient]:
    """``await clients(url, name, sid, mode, approval="")`` starts a registering process."""
    started: list[trio.Process] = []

    async def start(url: str, name: str, sid: str, mode: str = "hold", approval: str = "") -> Client:
        proc = await trio.lowlevel.open_process(
            [sys.executable, str(CLIENT), url, name, sid, mode],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        started.append(proc)
        assert proc.stdin is not None and proc.stdout is not None
        await proc.stdin.send_all(approval.encode() + b"\n")
        return Client(proc, proc.stdout)

    try:
        yield start
    finally:
        with trio.CancelScope(shield=True):
            for proc in started:
                if proc.returncode is None:
                    proc.kill()
                with trio.fail_after(10):
                    await proc.wait()
                await close_pipes(proc)


async def watched_roost(start_roost: StartRoost, **kw: object) -> tuple[Roost, ProcessWatch, Notices]:
    """A daemon whose registering processes are watched."""
    watch, notices = ProcessWatch(), Notices()
    roost = await start_roost(watch=watch, notice=notices, **kw)
    return roost, watch, notices


class TestSessionProcessEnds:
    async def test_sigkilled_root_is_failed_and_released(self, start_roost: StartRoost, clients: StartClient) -> None:
        """A root SIGKILLed while running: failed, its census slot back, a notice naming it."""
        roost, watch, notices = await watched_roost(start_roost)
        sid = roost.fresh_id()
        client = await clients(roost.url, "orch", sid)
        assert await client.line() == "registered 200"
        assert watch.watched == 1
        assert await roost.status(sid) == {"status": "running", "depth_remaining": 3,
                                           "live_children": 0, "live_capsules": 1}
        await client.kill()
        line = await notices.next()
        assert line == (f"mur-roost: session {sid} ended without deregistering (process "
                        f"{client.proc.pid} exited); marked failed and its slots released")
        assert await roost.status(sid) == {"status": "failed", "depth_remaining": 3,
                                           "live_children": 0, "live_capsules": 0}
        assert watch.watched == 0

    async def test_sigkilled_child_gives_its_parents_slot_back(
        self, start_roost: StartRoost, clients: StartClient
    ) -> None:
        """--max-concurrent 1: the child's SIGKILL frees the parent's one slot for a new spawn."""
        roost, _watch, notices = await watched_roost(start_roost, max_concurrent=1, max_live_capsules=2)
        parent, cred = await roost.root()  # registered in-process: not watched (the seed's way)
        grant = await roost.spawn(cred, "worker-a")
        assert grant.status_code == 200
        child_sid = roost.fresh_id()
        child = await clients(roost.url, "worker-a", child_sid, approval=grant.json()["approval"])
        assert await child.line() == "registered 200"
        assert (await roost.status(parent))["live_children"] == 1
        refused = await roost.spawn(cred, "worker-a")
        assert refused.status_code == 403 and "already holding 2" in refused.json()["error"]
        await child.kill()
        assert child_sid in await notices.next()
        assert (await roost.status(child_sid))["status"] == "failed"
        assert await roost.status(parent) == {"status": "running", "depth_remaining": 3,
                                              "live_children": 0, "live_capsules": 1}
        again = await roost.spawn(cred, "worker-a")
        assert again.status_code == 200, again.text

    async def test_sigkilled_parent_releases_its_reservations(
        self, start_roost: StartRoost, clients: StartClient
    ) -> None:
        """A parent SIGKILLed holding an unredeemed approval: its reservation goes with it."""
        roost, _watch, notices = await watched_roost(start_roost)
        observer, _ = await roost.root()
        sid = roost.fresh_id()
        parent = await clients(roost.url, "orch", sid, mode="spawn")
        assert await parent.line() == "registered 200"
        assert await parent.line() == "spawned 200"
        assert await roost.status(sid) == {"status": "running", "depth_remaining": 3,
                                           "live_children": 1, "live_capsules": 3}
        await parent.kill()
        assert sid in await notices.next()
        assert await roost.status(sid) == {"status": "failed", "depth_remaining": 3,
                                           "live_children": 0, "live_capsules": 1}
        assert (await roost.status(observer))["live_capsules"] == 1

    async def test_deregistered_session_is_forgotten(self, start_roost: StartRoost, clients: StartClient) -> None:
        """A session that deregistered keeps its own outcome when its process then ends."""
        roost, watch, notices = await watched_roost(start_roost)
        sid = roost.fresh_id()
        client = await clients(roost.url, "orch", sid, mode="deregister")
        assert await client.line() == "registered 200"
        assert await client.line() == "deregistered 200"
        assert watch.watched == 0  # its pidfd is closed at the deregistration
        await client.kill()
        witness = roost.fresh_id()
        last = await clients(roost.url, "orch", witness)
        assert await last.line() == "registered 200"
        await last.kill()
        assert witness in await notices.next()  # the later process's notice, and only that one
        assert notices.lines == [notices.lines[-1]]
        assert (await roost.status(sid))["status"] == "complete"

    async def test_refused_registration_is_not_watched(self, start_roost: StartRoost, clients: StartClient) -> None:
        """Nothing is watched for a registration the daemon refused."""
        roost, watch, _ = await watched_roost(start_roost)
        client = await clients(roost.url, "worker-b", roost.fresh_id())
        assert await client.line() == "registered 403"
        assert watch.watched == 0

    async def test_in_process_registration_keeps_the_seed_behaviour(self, start_roost: StartRoost) -> None:
        """A registrant the daemon cannot place (here: itself) is not watched; it stays running."""
        roost, watch, _ = await watched_roost(start_roost)
        sid, _ = await roost.root()
        assert watch.watched == 0
        assert (await roost.status(sid))["status"] == "running"


class TestPidReuse:
    def test_a_reused_pid_is_not_the_process(self) -> None:
        """A peer whose recorded start time is not the pid's own has ended: never watched as alive."""
        me = Peer(os.getpid(), procstat.start_time(os.getpid()) or -1)
        fd = open_pidfd(me)
        os.close(fd)
        with pytest.raises(_Ended):
            open_pidfd(attrs.evolve(me, start_ticks=me.start_ticks + 1))

    def test_a_gone_pid_has_ended(self) -> None:
        """A pid with no process: ended."""
        proc = subprocess.Popen([sys.executable, "-c", "pass"])
        proc.wait()
        with pytest.raises(_Ended):
            open_pidfd(Peer(proc.pid, 1))

    async def test_an_ended_peer_ends_its_session_at_once(self, nursery: trio.Nursery) -> None:
        """A lookup naming a process that has since ended calls on_end straight away."""
        gone = await trio.lowlevel.open_process([sys.executable, "-c", "pass"])
        with trio.fail_after(30):
            await gone.wait()
        watch = ProcessWatch(find=lambda client, server, hint: Peer(gone.pid, 1))
        await nursery.start(watch.run)
        ended = trio.Event()
        peer = await watch.watch("ses_x", ("127.0.0.1", 1), ("127.0.0.1", 2), lambda p: ended.set())
        assert peer == Peer(gone.pid, 1)
        with trio.fail_after(5):
            await ended.wait()
        assert watch.watched == 0

    async def test_forget_cancels_without_calling(self, nursery: trio.Nursery) -> None:
        """forget() closes the watch: on_end never runs, even when the process then ends."""
        holder = await trio.lowlevel.open_process([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                                  stdin=subprocess.PIPE)
        try:
            ticks = procstat.start_time(holder.pid)
            assert ticks is not None
            me = Peer(holder.pid, ticks)
            watch = ProcessWatch(find=lambda client, server, hint: me)
            await nursery.start(watch.run)
            called: list[Peer] = []
            assert await watch.watch("ses_y", ("127.0.0.1", 1), ("127.0.0.1", 2), called.append) == me
            assert watch.watched == 1
            watch.forget("ses_y")
            assert watch.watched == 0
            holder.kill()
            with trio.fail_after(10):
                await holder.wait()
        finally:
            holder.kill()
            with trio.fail_after(10), trio.CancelScope(shield=True):
                await holder.wait()
            await close_pipes(holder)
        await trio.testing.wait_all_tasks_blocked()
        assert called == []

    async def test_sessions_of_one_process_share_its_watch(self, nursery: trio.Nursery) -> None:
        """Two sessions of one process: one pidfd; forgetting one keeps the other watched, and
        the process's end retires the one left; the last forgotten closes the pidfd."""
        holder = await trio.lowlevel.open_process([sys.executable, "-c", "import sys; sys.stdin.read()"],
                                                  stdin=subprocess.PIPE)
        try:
            ticks = procstat.start_time(holder.pid)
            assert ticks is not None
            me = Peer(holder.pid, ticks)
            watch = ProcessWatch(find=lambda client, server, hint: me)
            await nursery.start(watch.run)
            ended: list[str] = []
            done = trio.Event()

            def on_end(sid: str) -> Callable[[Peer], None]:
                return lambda peer: (ended.append(sid), done.set())

            for sid in ("ses_a", "ses_b", "ses_c"):
                assert await watch.watch(sid, ("127.0.0.1", 1), ("127.0.0.1", 2), on_end(sid)) == me
            assert (watch.watched, watch.processes) == (3, 1)
            assert watch.living(holder.pid) == me
            watch.forget("ses_a")
            assert (watch.watched, watch.processes) == (2, 1)
            holder.kill()
            with trio.fail_after(10):
                await holder.wait()
                await done.wait()
            assert sorted(ended) == ["ses_b", "ses_c"]
            assert (watch.watched, watch.processes) == (0, 0)
            assert watch.living(holder.pid) is None
        finally:
            holder.kill()
            with trio.fail_after(10), trio.CancelScope(shield=True):
                await holder.wait()
            await close_pipes(holder)

    async def test_the_last_forgotten_session_closes_the_pidfd(self, nursery: trio.Nursery) -> None:
        """Forgetting every session of a process ends its watch: a later session opens anew."""
        ticks = procstat.start_time(os.getppid())
        assert ticks is not None
        parent = Peer(os.getppid(), ticks)
        watch = ProcessWatch(find=lambda client, server, hint: parent)
        await nursery.start(watch.run)
        await watch.watch("ses_a", ("127.0.0.1", 1), ("127.0.0.1", 2), print)
        watch.forget("ses_a")
        assert (watch.watched, watch.processes) == (0, 0)
        assert watch.living(parent.pid) is None
        await watch.watch("ses_b", ("127.0.0.1", 1), ("127.0.0.1", 2), print)
        assert (watch.watched, watch.processes) == (1, 1)
        watch.forget("ses_b")

    async def test_a_reused_pid_never_joins_the_earlier_process(self, nursery: trio.Nursery) -> None:
        """A peer with the watched pid but another start time is not that process: it is
        judged on its own (here it has ended at once) and the watched process stays watched."""
        ticks = procstat.start_time(os.getppid())
        assert ticks is not None
        real = Peer(os.getppid(), ticks)
        peers = iter([real, attrs.evolve(real, start_ticks=ticks + 1)])
        watch = ProcessWatch(find=lambda client, server, hint: next(peers))
        await nursery.start(watch.run)
        ended = trio.Event()
        await watch.watch("ses_real", ("127.0.0.1", 1), ("127.0.0.1", 2), print)
        await watch.watch("ses_reused", ("127.0.0.1", 1), ("127.0.0.1", 2), lambda p: ended.set())
        with trio.fail_after(5):
            await ended.wait()
        assert (watch.watched, watch.processes) == (1, 1)
        assert watch.living(real.pid) == real
        watch.forget("ses_real")

    async def test_unplaceable_or_stopped_watch_watches_nothing(self, nursery: trio.Nursery) -> None:
        """No peer found, unusable endpoints, or a watch not running: None, nothing watched."""
        watch = ProcessWatch(find=lambda client, server, hint: None)
        assert await watch.watch("ses_z", ("127.0.0.1", 1), ("127.0.0.1", 2), print) is None  # not running
        await nursery.start(watch.run)
        assert await watch.watch("ses_z", ("127.0.0.1", 1), ("127.0.0.1", 2), print) is None
        assert await watch.watch("ses_z", None, ("127.0.0.1", 2), print) is None
        assert watch.watched == 0
