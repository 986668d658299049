"""One launcher for plan ``capsule`` steps and the ``delegate-task`` tool (seed 000).

A delegation, from the delegating session's side::

    POST /spawn (credential)              refused -> status "refused", the daemon's sentence
    resolve name@version locally          the artifact the referee judged (same sha256)
    mkdir <workdir>/.murmur/children/<capsule>-<16 hex>   (0700)
    start `mur run --capsule local/<name> --capsule-version V --json --workdir <dir>
           --no-env-file` in its own process group, cwd = <dir>, a cleared environment
           (murmur.delegation.environment), the approval written to its stdin and stdin
           closed, the read end of a spawner lifeline passed (the write end only here)
    first stdout line within 180 s        the readiness line: session id, door URL
    SendMessage(task) retried for 30 s    the child holds its task   -> "started"
    watch                                 until the child exits, the parent ends it, or
                                          the child watch (delegation_deadline_secs,
                                          counted from readiness) expires

Anything short of ``started`` stops and reaps the child and fails the call in the same turn
(``status: failed`` with a sentence in ``output``). A plan step (``wait=True``) then reads the
child's answer with ``GetTask`` once its task has ended (or, if the child has already gone,
from the result file in the child's records), and releases the child with SIGTERM so its
session ends and reports its own outcome. ``delegate-task`` (``wait=False``) returns at
``started``; the outcome arrives later as a ``completion`` task.

When the child leaves no completion of its own, the launcher reports (module
:mod:`murmur.delegation.watch`): ``crashed`` for a child that exited without one, and
``terminated`` when the watch expired (posted to this session's own door) or when this
session ended the delegation itself (recorded in ``completion.json`` and posted to nobody).
An undelivered completion the child wrote is posted once more by the launcher. Exactly one
report per delegation: see :func:`murmur.delegation.completion.claim`.

Neither the credential nor the approval ever reaches argv, the environment, a file, a trace
record, a log line, a result or an error message.
"""

from __future__ import annotations

import collections
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import httpx
import trio

from murmur import containment, paths, timing
from murmur.delegation import completion as comp
from murmur.delegation.book import DelegationBook, Emit, Entry
from murmur.delegation.environment import child_environment
from murmur.delegation.release import give_back
from murmur.delegation.spawner import SpawnerHandle
from murmur.delegation.watch import Ending, describe_exit, launcher_report
from murmur.errors import DiagnosticError
from murmur.ids import new_id
from murmur.lines import read_lines
from murmur.manifest.model import Manifest
from murmur.roost.client import RoostClient, RoostError, RoostRefused, SpawnApproval
from murmur.session.winddown import add_forced_exit_hook

MUR_BINARY_ENV = "MURMUR_MUR_BINARY"
CHILD_STOP_GRACE = 10.0  # seconds a child gets after SIGTERM before its group is killed
MAX_READY_LINE = 1 << 20
STDERR_TAIL = 20
_MAX_STDERR_LINE = 64 * 1024  # bytes of one unfinished stderr line held before it is relayed as is
POLL_FIRST = 0.05  # GetTask polling starts here and doubles up to timing.MEMBER_POLL
RETRY_EVERY = 0.1  # delivery retry interval while the child's door comes up


def mur_command(environ: Mapping[str, str]) -> list[str]:
    """The command that starts a child: ``$MURMUR_MUR_BINARY``, else the ``mur`` beside the
    running interpreter, else ``<python> -m murmur.cli.mur``."""
    explicit = environ.get(MUR_BINARY_ENV, "").strip()
    if explicit:
        return [explicit]
    beside = Path(sys.executable).parent / "mur"
    if beside.is_file() and os.access(beside, os.X_OK):
        return [str(beside)]
    return [sys.executable, "-m", "murmur.cli.mur"]


def child_dir_name(capsule: str) -> str:
    """``<capsule name>-<16 fresh hex>`` (the bare name of a scoped reference)."""
    return f"{capsule.rsplit('/', 1)[-1]}-{secrets.token_hex(8)}"


def capsule_ref(name: str) -> str:
    """The ``--capsule`` value: ``local/<name>`` for a bare name."""
    return name if "/" in name else f"local/{name}"


@attrs.frozen
class ChildArtifact:
    """The artifact the launcher starts (resolved from this host's global store).

    Attributes:
        sha256 (str): its content hash (must equal the approval's).
        manifest (Manifest): its manifest (for ``capabilities.env.allow``).
    """

    sha256: str
    manifest: Manifest


def resolve_global(name: str, version: str) -> ChildArtifact | None:
    """``name@version`` from the global store (``$MURMUR_HOME/artifacts``), or None."""
    from murmur.registry import resolve_in_store

    try:
        found = resolve_in_store(paths.global_store(), name, version)
    except DiagnosticError:
        return None
    return ChildArtifact(found.sha256, found.manifest) if found is not None else None


@attrs.frozen
class _Ready:
    session_id: str
    url: str
    records_dir: str | None
    task_id: str


class _LaunchFailed(Exception):
    """The child did not get as far as holding its task (the sentence is the call's output)."""


@attrs.define(eq=False)
class _Child:
    """One live delegation (its process and what the launcher knows about it)."""

    entry: Entry
    dir: Path
    name: str
    version: str
    task: str
    proc: trio.Process | None = None
    unit: containment.Unit | None = None
    life_w: int | None = None
    ready: _Ready | None = None
    ready_at: float | None = None
    started_wall: float = attrs.field(factory=time.monotonic)
    stderr: collections.deque[str] = attrs.field(factory=lambda: collections.deque(maxlen=STDERR_TAIL))
    exited: trio.Event = attrs.field(factory=trio.Event)
    wake: trio.Event = attrs.field(factory=trio.Event)
    finished: trio.Event = attrs.field(factory=trio.Event)
    stop_reason: str | None = None
    released: bool = False
    reported: bool = False  # the launcher is done with this delegation's outcome

    def stop(self, reason: str) -> None:
        """The parent ends this delegation (reported ``terminated``, posted to nobody)."""
        if self.stop_reason is None and not self.released:
            self.stop_reason = reason
        self.wake.set()

    def release(self) -> None:
        """The parent has what it needed: let the child end and report for itself."""
        if self.stop_reason is None:
            self.released = True
        self.wake.set()


class Launcher:
    """Launches, watches and reports the children of one delegating session.

    Args:
        manifest (Manifest): the delegating capsule's manifest (``env.allow``).
        workdir (Path): the delegating session's accessible workdir (absolute).
        session_id (str): the delegating session's id.
        environ (Mapping[str, str]): the delegating process's environment.
        roost_url (str): ``MURMUR_ROOST_URL``.
        credential (Callable[[], str | None]): the session's roost credential, when registered.
        door_url (Callable[[], str | None]): this session's door URL (for spawner handles).
        book (DelegationBook): where delegations are recorded.
        emit (Emit): writes one trace record, ``emit(event_type, **fields)``.
        bound (int): the child watch bound in seconds (``delegation_deadline_secs``).
        mur (Sequence[str] | None): the command starting a child (default :func:`mur_command`).
        resolve (Callable[[str, str], ChildArtifact | None]): local artifact lookup.
        launch_bound (float): seconds to the readiness line (180 in production).
        delivery_bound (float): seconds the task delivery is retried (30 in production).
        stop_grace (float): seconds between SIGTERM and SIGKILL when ending a child.
        relay (Callable[[str], None] | None): receives each child stderr line (prefixed).
    """

    def __init__(
        self,
        *,
        manifest: Manifest,
        workdir: Path,
        session_id: str,
        environ: Mapping[str, str],
        roost_url: str,
        credential: Callable[[], str | None],
        door_url: Callable[[], str | None],
        book: DelegationBook,
        emit: Emit,
        bound: int,
        mur: Sequence[str] | None = None,
        resolve: Callable[[str, str], ChildArtifact | None] = resolve_global,
        launch_bound: float = timing.DELEGATION_LAUNCH,
        delivery_bound: float = timing.DELEGATION_DELIVERY,
        stop_grace: float = CHILD_STOP_GRACE,
        relay: Callable[[str], None] | None = None,
    ) -> None:
        self.manifest = manifest
        self.workdir = workdir
        self.session_id = session_id
        self.environ = dict(environ)
        self.roost_url = roost_url
        self._credential = credential
        self._door_url = door_url
        self.book = book
        self._emit = emit
        self.bound = bound
        self.mur = list(mur) if mur is not None else mur_command(environ)
        self._resolve = resolve
        self.launch_bound = launch_bound
        self.delivery_bound = delivery_bound
        self.stop_grace = stop_grace
        self._relay = relay
        self._nursery: trio.Nursery | None = None
        self._running = trio.Event()
        self._closed = False
        self._live: dict[str, _Child] = {}
        self.child_env: Callable[[str], Mapping[str, str]] | None = None  # runtime-owned extras (lineage), by dlg id

    # -- lifetime -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery every child is supervised in, until cancelled.

        On cancellation every live child is ended (shielded, bounded) before this returns.
        """
        unregister = add_forced_exit_hook(self.kill_all)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._running.set()
                task_status.started()
                await trio.sleep_forever()
        finally:
            self._closed = True
            unregister()

    @property
    def live(self) -> int:
        """Children being supervised now."""
        return len(self._live)

    async def wait_finished(self, delegation_id: str) -> None:
        """Return once the child of ``delegation_id`` is no longer supervised (bound it)."""
        child = self._live.get(delegation_id)
        if child is not None:
            await child.finished.wait()

    def kill_all(self) -> None:
        """SIGKILL every live child's unit (synchronous; the forced-exit hook)."""
        for child in list(self._live.values()):
            if child.unit is not None:
                child.unit.kill()

    async def stop_all(self, reason: str) -> None:
        """End every live delegation (``terminated``, posted to nobody) and wait for them.

        Bounded by ``stop_grace`` plus a few seconds; children still alive then are killed.
        """
        children = list(self._live.values())
        for child in children:
            child.stop(reason)
        with trio.move_on_after(self.stop_grace + 5.0):
            for child in children:
                await child.finished.wait()
        self.kill_all()

    # -- the call -------------------------------------------------------------------------

    async def delegate(
        self, capsule: str, version: str, task: str, wait: bool, *, context_id: str, trust: str,
        caller: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """Delegate ``task`` to ``capsule@version``.

        Args:
            capsule (str): the capsule name (one of ``capabilities.spawn.allow``).
            version (str): its exact version.
            task (str): the child's first user message.
            wait (bool): False returns at ``started`` (``delegate-task``); True waits for the
                child's answer (plan ``capsule`` step).
            context_id (str): the delegating task's context.
            trust (str): the delegating task's trust class.
            caller (Sequence[str] | None): a capsule link's calling command (kept on the
                book entry for the child's lineage, spec/links.md); None otherwise.

        Returns:
            dict[str, Any]: ``delegation_id``, ``session_id``, ``capsule``, ``version``,
            ``status`` and ``child_workdir``/``output`` as seed 000's "What the call returns"
            says. ``status`` is ``started`` | ``failed`` | ``refused``, and with ``wait`` the
            child task's end: ``completed`` | ``failed`` | ``canceled`` | ``rejected``
            (``output`` the answer or the reason).
        """
        began = time.monotonic()
        base: dict[str, Any] = {"capsule": capsule, "version": version}
        with trio.fail_after(5.0):
            await self._running.wait()
        if self._closed or self._nursery is None:
            return self._failed(base, "this session is ending and starts no delegation", began)
        credential = self._credential()
        if credential is None:
            return self._failed(base, "this session is not registered with mur-roost", began)
        try:
            async with RoostClient(self.roost_url) as roost:
                grant = await roost.spawn(credential, capsule, version)
        except RoostRefused as exc:
            self.book.call_ended(capsule, version, "refused", reason=exc.message, duration_ms=_ms(began))
            return {**base, "status": "refused", "output": exc.message}
        except RoostError as exc:
            return self._failed(base, str(exc), began)
        dlg = new_id("dlg")
        rel = Path(".murmur") / "children" / child_dir_name(grant.name)
        entry = self.book.open(
            Entry(dlg, capsule, version, context_id, trust, rel.as_posix(), opened_at=began,
                  caller=tuple(caller) if caller is not None else None)
        )
        base["delegation_id"] = dlg
        child = _Child(entry, self.workdir / rel, grant.name, grant.version, task)
        try:
            ready = await self._nursery.start(self._supervise, child, grant)
        except _LaunchFailed as exc:
            return self._launch_failed(base, child, str(exc))
        except BaseException:
            child.stop("the delegating task ended while the child was starting")
            entry.closed = True
            raise
        entry.child_session_id = ready.session_id
        base["session_id"] = ready.session_id
        self._emit(
            "delegation_start",
            delegation_id=dlg,
            capsule=capsule,
            version=version,
            child_session_id=ready.session_id,
            child_workdir=entry.child_workdir,
        )
        started = {**base, "status": "started", "child_workdir": entry.child_workdir}
        if not wait:
            return started
        return await self._wait_for_answer(child, ready, base)

    def _failed(self, base: dict[str, Any], reason: str, began: float) -> dict[str, Any]:
        self.book.call_ended(base["capsule"], base["version"], "failed", reason=reason, duration_ms=_ms(began))
        return {**base, "status": "failed", "output": reason}

    def _launch_failed(self, base: dict[str, Any], child: _Child, reason: str) -> dict[str, Any]:
        child.entry.closed = True  # a failed call has no outcome to wait for
        self.book.call_ended(base["capsule"], base["version"], "failed", entry=child.entry, reason=reason)
        out = {**base, "status": "failed", "output": reason}
        if child.ready is not None:
            out["session_id"] = child.ready.session_id
        return out

    async def _wait_for_answer(self, child: _Child, ready: _Ready, base: dict[str, Any]) -> dict[str, Any]:
        deadline = trio.current_effective_deadline()
        try:
            status, output = await self._answer(child, ready)
        except BaseException:
            timed_out = trio.current_time() >= deadline
            child.stop("the capsule step timed out" if timed_out else "the delegating task ended")
            self.book.call_ended(
                base["capsule"],
                base["version"],
                "timed_out" if timed_out else "failed",
                entry=child.entry,
                reason="the capsule step's bound passed before the child answered"
                if timed_out
                else "the delegating task ended before the child answered",
            )
            raise
        self.book.call_ended(
            base["capsule"],
            base["version"],
            "completed" if status == "completed" else "failed",
            entry=child.entry,
            reason=output,
        )
        child.release()
        return {**base, "status": status, "output": output}

    async def _answer(self, child: _Child, ready: _Ready) -> tuple[str, str]:
        """Poll ``GetTask`` until the child's task has ended; (status, output)."""
        interval = POLL_FIRST
        body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": ready.task_id}}
        headers = {"content-type": "application/json", "A2A-Version": "1.0"}
        async with httpx.AsyncClient(timeout=10.0) as client:
            while True:
                if child.exited.is_set():
                    return _answer_from_records(child, ready)
                try:
                    r = await client.post(ready.url.rstrip("/") + "/", json=body, headers=headers)
                    ended = _task_end(r.json())
                except (httpx.HTTPError, ValueError):
                    ended = None
                if ended is not None:
                    return ended
                with trio.move_on_after(interval):
                    await child.exited.wait()
                interval = min(interval * 2, timing.MEMBER_POLL)

    # -- the child's process ----------------------------------------------------------------

    async def _supervise(
        self, child: _Child, grant: SpawnApproval, *, task_status: trio.TaskStatus[_Ready]
    ) -> None:
        """Launch, watch and report one child (runs in the launcher's nursery once started)."""
        self._live[child.entry.delegation_id] = child
        failure: str | None = None
        try:
            async with trio.open_nursery() as io:
                try:
                    ready = await self._launch(child, grant, io)
                except _LaunchFailed as exc:
                    failure = str(exc)
                    await self._abandon(child, failure)
                    await give_back(self.roost_url, grant)  # its mur-roost slot, at once (issue 11)
                else:
                    task_status.started(ready)
                    ending = await self._watch(child)
                    await self._finish(child, ending)
                io.cancel_scope.cancel()
        finally:
            if not child.reported:  # cancelled part-way: the parent ended this delegation
                with trio.CancelScope(shield=True, deadline=trio.current_time() + self.stop_grace + 5.0):
                    if child.stop_reason is None:
                        child.stop("the delegating session ended")
                    await self._record_stop(child)
                    await self._end(child)
                    if child.ready is None:  # cancelled before the child held its task
                        await give_back(self.roost_url, grant)
            self._cleanup(child)
        if failure is not None:
            raise _LaunchFailed(failure)

    def _cleanup(self, child: _Child) -> None:
        if child.unit is not None:
            child.unit.release()  # the child and whatever it left running
        if child.life_w is not None:
            _close(child.life_w)
            child.life_w = None
        self._live.pop(child.entry.delegation_id, None)
        child.finished.set()

    async def _launch(self, child: _Child, grant: SpawnApproval, io: trio.Nursery) -> _Ready:
        artifact = await trio.to_thread.run_sync(self._resolve, grant.name, grant.version)
        if artifact is None:
            raise _LaunchFailed(
                f"{grant.name}@{grant.version} is not installed in this host's global store, "
                "so the artifact mur-roost approved cannot be launched"
            )
        if artifact.sha256 != grant.sha256:
            raise _LaunchFailed(
                f"the installed {grant.name}@{grant.version} is not the artifact mur-roost approved "
                "(its content hash differs)"
            )
        try:
            child.dir.mkdir(mode=0o700, parents=True, exist_ok=False)
            os.chmod(child.dir, 0o700)
        except OSError as exc:
            raise _LaunchFailed(f"the child's directory could not be made: {exc.strerror or exc}") from None
        life_r, life_w = os.pipe()
        handle = SpawnerHandle(
            url=self._door_url() or "",
            session_id=self.session_id,
            context_id=child.entry.context_id,
            trust=child.entry.trust,
            delegation_id=child.entry.delegation_id,
        )
        env = child_environment(
            self.environ,
            parent_allow=self.manifest.env_allow,
            child_allow=artifact.manifest.env_allow,
            roost_url=self.roost_url,
            spawner=handle.encode(),
            lifeline_fd=life_r,
            home_fallback=str(Path.home()),
        )
        if self.child_env is not None:  # applied last: the runtime's own names (spec/tree.md)
            env.update(self.child_env(child.entry.delegation_id))
        argv = [
            *self.mur,
            "run",
            "--capsule",
            capsule_ref(grant.name),
            "--capsule-version",
            grant.version,
            "--json",
            "--workdir",
            str(child.dir),
            "--no-env-file",
        ]
        child.unit = unit = containment.here().new_unit(child.entry.delegation_id)
        env.update(unit.env())
        try:
            child.proc = await trio.lowlevel.open_process(
                unit.command(argv, env),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=str(child.dir),
                pass_fds=(life_r,),
                start_new_session=True,
            )
        except OSError as exc:
            _close(life_w)
            raise _LaunchFailed(f"the child could not be started: {exc.strerror or exc}") from None
        finally:
            _close(life_r)
        child.life_w = life_w
        proc = child.proc
        unit.started(proc.pid, winds_down=True)
        io.start_soon(self._wait_exit, child)
        assert proc.stderr is not None and proc.stdout is not None and proc.stdin is not None
        io.start_soon(self._drain_stderr, child, proc.stderr)
        try:
            await proc.stdin.send_all(grant.approval.encode("ascii"))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the child is already gone; the readiness read says how
        finally:
            await proc.stdin.aclose()
        line = await self._first_line(child, proc.stdout)
        io.start_soon(_drain, proc.stdout)
        ready_obj = _parse_ready(line)
        child.ready_at = trio.current_time()
        task_id = await self._deliver(child, ready_obj["url"])
        child.ready = _Ready(
            ready_obj["session_id"],
            ready_obj["url"],
            ready_obj.get("records_dir") if isinstance(ready_obj.get("records_dir"), str) else None,
            task_id,
        )
        return child.ready

    async def _first_line(self, child: _Child, stdout: trio.abc.ReceiveStream) -> bytes:
        buf = bytearray()
        with trio.move_on_after(self.launch_bound) as scope:
            while b"\n" not in buf:
                chunk = await stdout.receive_some(65536)
                if not chunk:
                    break
                buf += chunk
                if len(buf) > MAX_READY_LINE:
                    raise _LaunchFailed("the child's first line is not a readiness line (it is too long)")
        if scope.cancelled_caught:
            raise _LaunchFailed(f"the child did not report ready within {self.launch_bound:g} s")
        if b"\n" not in buf:
            with trio.move_on_after(5.0):
                await child.exited.wait()
            assert child.proc is not None
            if child.proc.returncode is None:
                raise _LaunchFailed(self._tail("the child closed its output before reporting ready", child))
            raise _LaunchFailed(self._tail(f"the child exited with {describe_exit(child.proc.returncode)} before reporting ready", child))
        return bytes(buf.split(b"\n", 1)[0])

    async def _deliver(self, child: _Child, url: str) -> str:
        """SendMessage the task; retried while the door comes up; the child's task id."""
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": {"messageId": new_id("msg"), "role": "ROLE_USER", "parts": [{"text": child.task}]},
                "configuration": {"returnImmediately": True},
            },
        }
        headers = {"content-type": "application/json", "A2A-Version": "1.0"}
        with trio.move_on_after(self.delivery_bound):
            async with httpx.AsyncClient(timeout=10.0) as client:
                while True:
                    if child.exited.is_set():
                        assert child.proc is not None
                        raise _LaunchFailed(self._tail(
                            f"the child exited with {describe_exit(child.proc.returncode)} before taking its task", child))
                    try:
                        r = await client.post(url.rstrip("/") + "/", json=body, headers=headers)
                        answer = r.json()
                    except (httpx.HTTPError, ValueError):
                        with trio.move_on_after(RETRY_EVERY):
                            await child.exited.wait()
                        continue
                    return _taken(answer)
        raise _LaunchFailed(f"the child did not accept its task within {self.delivery_bound:g} s")

    async def _wait_exit(self, child: _Child) -> None:
        assert child.proc is not None
        await child.proc.wait()
        child.exited.set()
        child.wake.set()

    async def _drain_stderr(self, child: _Child, stream: trio.abc.ReceiveStream) -> None:
        prefix = f"[delegation {child.name}] "
        await read_lines(stream, lambda raw: self._stderr_line(child, prefix, raw), lambda: _MAX_STDERR_LINE)

    def _stderr_line(self, child: _Child, prefix: str, raw: bytes) -> None:
        text = raw.decode("utf-8", errors="replace")
        child.stderr.append(text)
        if self._relay is not None:
            self._relay(prefix + text)

    def _tail(self, head: str, child: _Child) -> str:
        lines = [line for line in child.stderr if line.strip()][-4:]
        return head + (": " + " | ".join(lines) if lines else "")

    # -- watching and ending ------------------------------------------------------------------

    async def _watch(self, child: _Child) -> Ending:
        assert child.ready_at is not None
        with trio.move_on_at(child.ready_at + self.bound):
            while True:
                if child.exited.is_set():
                    return Ending.EXITED
                if child.stop_reason is not None:
                    return Ending.STOPPED
                if child.released:
                    await self._signal(child, signal.SIGTERM)
                    with trio.move_on_after(self.stop_grace):
                        await child.exited.wait()
                    if not child.exited.is_set() and child.unit is not None:
                        child.unit.kill()
                    await child.exited.wait()
                    return Ending.EXITED
                child.wake = trio.Event()
                if child.exited.is_set() or child.stop_reason is not None or child.released:
                    continue
                await child.wake.wait()
        return Ending.EXITED if child.exited.is_set() else Ending.EXPIRED

    async def _signal(self, child: _Child, sig: signal.Signals) -> None:
        if child.proc is not None and child.proc.returncode is None:
            try:
                child.proc.send_signal(sig)
            except ProcessLookupError:
                pass

    async def _end(self, child: _Child) -> None:
        """SIGTERM, ``stop_grace`` seconds, SIGKILL to the group; always reaped."""
        proc = child.proc
        if proc is None:
            return
        if proc.returncode is None:
            await self._signal(child, signal.SIGTERM)
            with trio.move_on_after(self.stop_grace):
                await proc.wait()
            if proc.returncode is None and child.unit is not None:
                child.unit.kill()
            await proc.wait()
        if child.unit is not None:
            child.unit.kill()  # sweep anything the child left in its unit
        child.exited.set()

    async def _abandon(self, child: _Child, reason: str) -> None:
        """A launch that fell short: record it as ended by the parent, stop and reap the child."""
        child.stop_reason = child.stop_reason or "the launch failed"
        self._claim_quietly(child, launcher_report(Ending.STOPPED, returncode=None, bound=self.bound,
                                                   reason=f"the launch failed: {reason}"))
        await self._end(child)
        child.reported = True

    async def _record_stop(self, child: _Child) -> None:
        report = launcher_report(Ending.STOPPED, returncode=None, bound=self.bound, reason=child.stop_reason)
        if self._claim_quietly(child, report):
            self.book.close(child.entry.delegation_id, "terminated", report.detail)

    def _completion(self, child: _Child, status: str, detail: str | None) -> comp.Completion:
        ready = child.ready
        return comp.Completion(
            delegation_id=child.entry.delegation_id,
            capsule_name=child.name,
            capsule_version=child.version,
            session_id=ready.session_id if ready else None,
            status=status,
            workdir=str(child.dir),
            duration_ms=int((time.monotonic() - child.started_wall) * 1000),
            detail=detail,
        )

    def _claim_quietly(self, child: _Child, report: Any) -> bool:
        record = comp.Record(
            self._completion(child, report.status, report.detail),
            "launcher",
            delivered=False,
            delivery_error=None if report.post else "not posted: the delegating capsule ended the delegation itself",
        )
        try:
            return comp.claim(child.dir, record)
        except OSError:
            return False

    async def _finish(self, child: _Child, ending: Ending) -> None:
        try:
            await self._report(child, ending)
        finally:
            child.reported = child.exited.is_set()

    async def _report(self, child: _Child, ending: Ending) -> None:
        if ending is Ending.EXITED:
            await self._after_exit(child)
            return
        assert child.proc is not None
        report = launcher_report(
            ending, returncode=child.proc.returncode, stderr_tail=list(child.stderr), bound=self.bound,
            reason=child.stop_reason,
        )
        claimed = self._claim_quietly(child, report)
        await self._end(child)
        if not claimed:
            await self._after_exit(child)  # the child reported first
        elif report.post:
            await self._post(child, self._completion(child, report.status, report.detail), "launcher")
        else:
            self.book.close(child.entry.delegation_id, "terminated", report.detail)

    async def _after_exit(self, child: _Child) -> None:
        """The child has exited: report ``crashed`` if it left nothing; retry an undelivered one."""
        data = comp.read_record(child.dir)
        record = comp.record_from_json(data) if data is not None else None
        if record is None:
            assert child.proc is not None
            report = launcher_report(Ending.EXITED, returncode=child.proc.returncode,
                                     stderr_tail=list(child.stderr), bound=self.bound)
            if self._claim_quietly(child, report):
                await self._post(child, self._completion(child, report.status, report.detail), "launcher")
                return
            data = comp.read_record(child.dir)
            record = comp.record_from_json(data) if data is not None else None
            if record is None:
                return
        if record.delivered or record.reported_by != "child" or child.entry.closed:
            return
        await self._post(child, record.completion, "child")  # the one retry

    async def _post(self, child: _Child, completion: comp.Completion, reported_by: str) -> None:
        url = self._door_url()
        problem: str | None
        if url is None or self._closed:
            problem = "the delegating session's door is closed"
        else:
            handle = SpawnerHandle(url, self.session_id, child.entry.context_id, child.entry.trust,
                                   child.entry.delegation_id)
            problem = await comp.post(handle, completion)
        try:
            comp.rewrite(child.dir, comp.Record(completion, reported_by, problem is None, problem))
        except OSError:
            pass


# -- helpers ----------------------------------------------------------------------------------


def _ms(began: float) -> int:
    return int((time.monotonic() - began) * 1000)


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


async def _drain(stream: trio.abc.ReceiveStream) -> None:
    try:
        while await stream.receive_some(65536):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass


def _parse_ready(line: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError:
        raise _LaunchFailed("the child's first line is not a readiness line") from None
    if not isinstance(obj, dict):
        raise _LaunchFailed("the child's first line is not a readiness line")
    url = obj.get("url")
    if not isinstance(url, str) or not url.startswith("http://"):
        raise _LaunchFailed("the child reported no door")
    sid = obj.get("session_id")
    if not isinstance(sid, str) or not sid.startswith("ses_"):
        raise _LaunchFailed("the child's readiness line names no session")
    return obj


def _taken(answer: object) -> str:
    """The task id from a SendMessage answer, or :class:`_LaunchFailed` saying why not."""
    if not isinstance(answer, dict):
        raise _LaunchFailed("the child answered its task delivery without a JSON-RPC body")
    err = answer.get("error")
    if isinstance(err, dict):
        raise _LaunchFailed(f"the child refused its task: {err.get('message', '(no message)')}")
    task = answer.get("result", {}).get("task") if isinstance(answer.get("result"), dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("id"), str):
        raise _LaunchFailed("the child answered its task delivery without a task")
    status = task.get("status") or {}
    if status.get("state") in ("TASK_STATE_REJECTED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"):
        raise _LaunchFailed(f"the child did not take its task ({_status_text(status) or status.get('state')})")
    return str(task["id"])


_END_WORDS = {
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_REJECTED": "rejected",
}


def _task_end(answer: object) -> tuple[str, str] | None:
    """(status, output) of an ended task from a GetTask answer; None while it runs."""
    if not isinstance(answer, dict):
        return None
    err = answer.get("error")
    if isinstance(err, dict):
        return "failed", f"the child's task could not be read: {err.get('message', '(no message)')}"
    task = answer.get("result")
    if not isinstance(task, dict):
        return None
    status = task.get("status") or {}
    word = _END_WORDS.get(str(status.get("state")))
    if word is None:
        return None
    if word == "completed":
        for art in task.get("artifacts") or []:
            if isinstance(art, dict) and art.get("artifactId") == "response":
                parts = art.get("parts") or []
                return word, "".join(str(p.get("text", "")) for p in parts if isinstance(p, dict))
    return word, _status_text(status)


def _answer_from_records(child: _Child, ready: _Ready) -> tuple[str, str]:
    """(status, output) from the child's ``out/result_<task>.txt`` once it has exited."""
    how = describe_exit(child.proc.returncode if child.proc else None)
    if ready.records_dir is None:
        return "failed", f"the child ended ({how}) before its answer could be read"
    path = Path(ready.records_dir) / "out" / f"result_{ready.task_id}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return "failed", f"the child ended ({how}) before its answer could be read"
    text = text[:-1] if text.endswith("\n") else text
    for prefix, word in (("error: ", "failed"), ("canceled: ", "canceled")):
        if text.startswith(prefix):
            return word, text[len(prefix):]
    return "completed", text


def _status_text(status: Mapping[str, Any]) -> str:
    msg = status.get("message")
    if not isinstance(msg, dict):
        return ""
    return " ".join(str(p.get("text", "")) for p in msg.get("parts", []) if isinstance(p, dict)).strip()
