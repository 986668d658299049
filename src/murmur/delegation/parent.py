"""One launcher for plan ``capsule`` steps and the ``delegate-task`` tool.

Specification: ``spec/delegation.md`` "The delegate service".

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

When the child leaves no completion of its own, the launcher reports it, exactly once
(:mod:`murmur.delegation.reporting`).

This module holds the call and the supervision of each child; the child's process is
:mod:`murmur.delegation.child_process` (which also fixes the words: *stop*, *release*,
*terminate*, *report*), the A2A delivery and answer :mod:`murmur.delegation.delivery`.

Neither the credential nor the approval ever reaches argv, the environment, a file, a trace
record, a log line, a result or an error message.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from murmur import exitstatus, paths, timing
from murmur.delegation import delivery
from murmur.delegation.book import DelegationBook, Emit, Entry
from murmur.delegation.child_process import (
    CHILD_STOP_GRACE,
    MUR_PREFIX,
    Child,
    LaunchFailed,
    Ready,
    child_argv,
    close_fd,
    drain,
    mur_command,
    parse_ready,
    read_first_line,
    start,
    terminate,
)
from murmur.delegation.environment import child_environment
from murmur.delegation.release import give_back
from murmur.delegation.reporting import Reporter
from murmur.delegation.spawner import SpawnerHandle
from murmur.delegation.watch_policy import Ending
from murmur.errors import DiagnosticError
from murmur.ids import new_id
from murmur.manifest import Manifest
from murmur.roost import RoostClient, RoostError, RoostRefused, SpawnApproval
from murmur.session import add_forced_exit_hook

if TYPE_CHECKING:
    from murmur.starter.client import Starter

__all__ = ["CHILD_STOP_GRACE", "ChildArtifact", "Launcher", "child_dir_name", "resolve_global"]


def child_dir_name(capsule: str) -> str:
    """``<capsule name>-<16 fresh hex>`` (the bare name of a scoped reference)."""
    return f"{capsule.rsplit('/', 1)[-1]}-{secrets.token_hex(8)}"


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
        self._starter: Starter | None = None  # the warm starter, while run() holds it
        from murmur.starter.client import Commands

        self.commands = Commands(lambda: self._starter)
        """Shell commands started by the warm starter (``TaskServices.starter``; falls back to
        exec while there is none)."""
        self._running = trio.Event()
        self._closed = False
        self._live: dict[str, Child] = {}
        self._reporter = Reporter(
            session_id=session_id,
            book=book,
            bound=bound,
            door_url=door_url,
            closed=lambda: self._closed,
            terminate=self._terminate,
        )
        self.child_env: Callable[[str], Mapping[str, str]] | None = None  # runtime-owned extras (lineage), by dlg id

    # -- lifetime -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery every child is supervised in, until cancelled.

        On cancellation every live child is ended (shielded, bounded) before this returns.
        """
        unregister = add_forced_exit_hook(self.kill_all)
        try:
            async with trio.open_nursery() as owner:
                starter = await self._own_starter(owner)
                try:
                    async with trio.open_nursery() as nursery:
                        self._nursery = nursery
                        self._running.set()
                        task_status.started()
                        await trio.sleep_forever()
                finally:  # every child has ended: the starter goes last, so it reports them
                    self._starter = None
                    if starter is not None:
                        starter.cancel()
        finally:
            self._closed = True
            unregister()

    async def _own_starter(self, owner: trio.Nursery) -> trio.CancelScope | None:
        """Start this session's warm starter (spec/delegation.md "The warm start path") and
        its owning task in ``owner``, shielded until the cancel scope returned is cancelled;
        None when children are to be exec'd (``MURMUR_STARTER=off``, another ``mur``, or it
        could not be started)."""
        from murmur import starter as warm
        from murmur.starter.client import Starter

        if not warm.wanted(self.environ) or self.mur != MUR_PREFIX:
            return None
        # its children are given no PYTHON* or locale variable: only PATH, as every child is
        got = Starter.launch(self.environ, env={"PATH": self.environ.get("PATH") or os.defpath})
        if got is None:
            return None
        scope = trio.CancelScope(shield=True)

        async def own(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            with scope:
                await got.run(task_status=task_status)

        await owner.start(own)
        self._starter = got
        return scope

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
            ``status`` and ``child_workdir``/``output`` (``spec/delegation.md`` "The call
            returns"). ``status`` is ``started`` | ``failed`` | ``refused``, and with ``wait`` the
            child task's end: ``completed`` | ``failed`` | ``canceled`` | ``rejected``
            (``output`` the answer or the reason). A launcher that is not running within
            :data:`murmur.timing.DELEGATION_LAUNCHER_START` seconds (or is closed) is ``failed``.

        Raises:
            trio.Cancelled: only the caller's own cancellation (bare or grouped), after the
                child is stopped and the call recorded: ``timed_out`` when a deadline of the
                caller's scope fell (a plan step's bound), else ``failed``. Nothing else: every
                refusal and failure is a result.
        """
        began = time.monotonic()
        base: dict[str, Any] = {"capsule": capsule, "version": version}
        with trio.move_on_after(timing.DELEGATION_LAUNCHER_START):
            await self._running.wait()
        if not self._running.is_set():
            return self._failed(
                base, f"this session's delegation launcher did not start within {timing.DELEGATION_LAUNCHER_START:g} s", began
            )
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
        child = Child(entry, self.workdir / rel, grant.name, grant.version, task)
        try:
            ready = await self._nursery.start(self._supervise, child, grant)
        except LaunchFailed as exc:
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

    def _launch_failed(self, base: dict[str, Any], child: Child, reason: str) -> dict[str, Any]:
        child.entry.closed = True  # a failed call has no outcome to wait for
        self.book.call_ended(base["capsule"], base["version"], "failed", entry=child.entry, reason=reason)
        out = {**base, "status": "failed", "output": reason}
        if child.ready is not None:
            out["session_id"] = child.ready.session_id
        return out

    async def _wait_for_answer(self, child: Child, ready: Ready, base: dict[str, Any]) -> dict[str, Any]:
        try:
            status, output = await self._answer(child, ready)
        except BaseException as exc:
            timed_out = cancelled_by_deadline(exc)  # the caller's scope says why, not the clock
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
        child.let_finish()
        return {**base, "status": status, "output": output}

    async def _answer(self, child: Child, ready: Ready) -> tuple[str, str]:
        """The child's answer: its task's end over A2A, or its result file once it exited."""
        ended = await delivery.read_answer(ready.url, ready.task_id, exited=child.exited)
        if ended is not None:
            return ended
        return delivery.answer_from_records(ready.records_dir, ready.task_id, child.returncode)

    # -- supervising one child ----------------------------------------------------------

    async def _supervise(
        self, child: Child, grant: SpawnApproval, *, task_status: trio.TaskStatus[Ready]
    ) -> None:
        """Launch, watch and report one child (runs in the launcher's nursery once started)."""
        self._live[child.entry.delegation_id] = child
        failure: str | None = None
        try:
            async with trio.open_nursery() as io:
                try:
                    ready = await self._launch(child, grant, io)
                except LaunchFailed as exc:
                    failure = str(exc)
                    child.stop_reason = child.stop_reason or "the launch failed"
                    self._reporter.report_stopped(child, f"the launch failed: {failure}", close=False)
                    await self._terminate(child)
                    child.reported = True
                    await give_back(self.roost_url, grant)  # its mur-roost slot, at once
                else:
                    task_status.started(ready)
                    ending = await self._watch(child)
                    try:
                        await self._reporter.report(child, ending)
                    finally:
                        child.reported = child.exited.is_set()
                io.cancel_scope.cancel()
        finally:
            if not child.reported:  # cancelled part-way: the parent ended this delegation
                with trio.CancelScope(shield=True, deadline=trio.current_time() + self.stop_grace + 5.0):
                    if child.stop_reason is None:
                        child.stop("the delegating session ended")
                    self._reporter.report_stopped(child, child.stop_reason)
                    await self._terminate(child)
                    if child.ready is None:  # cancelled before the child held its task
                        await give_back(self.roost_url, grant)
            with trio.CancelScope(shield=True):
                await self._cleanup(child)
        if failure is not None:
            raise LaunchFailed(failure)

    async def _cleanup(self, child: Child) -> None:
        if child.unit is not None:
            await child.unit.release()  # the child and whatever it left running
        if child.life_w is not None:
            close_fd(child.life_w)
            child.life_w = None
        self._live.pop(child.entry.delegation_id, None)
        child.finished.set()

    async def _launch(self, child: Child, grant: SpawnApproval, io: trio.Nursery) -> Ready:
        artifact = await trio.to_thread.run_sync(self._resolve, grant.name, grant.version)
        if artifact is None:
            raise LaunchFailed(
                f"{grant.name}@{grant.version} is not installed in this host's global store, "
                "so the artifact mur-roost approved cannot be launched"
            )
        if artifact.sha256 != grant.sha256:
            raise LaunchFailed(
                f"the installed {grant.name}@{grant.version} is not the artifact mur-roost approved "
                "(its content hash differs)"
            )
        try:
            child.dir.mkdir(mode=0o700, parents=True, exist_ok=False)
            os.chmod(child.dir, 0o700)
        except OSError as exc:
            raise LaunchFailed(f"the child's directory could not be made: {exc.strerror or exc}") from None
        life_r, life_w = os.pipe()
        child.life_w = life_w  # closed by _cleanup, on every path
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
        argv = child_argv(self.mur, grant.name, grant.version, child.dir)
        proc = await start(child, argv, env, lifeline_r=life_r, io=io, relay=self._relay, starter=self._starter)
        assert proc.stdout is not None and proc.stdin is not None
        try:
            await proc.stdin.send_all(grant.approval.encode("ascii"))
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the child is already gone; the readiness read says how
        finally:
            await proc.stdin.aclose()
        line = await read_first_line(child, proc.stdout, self.launch_bound)
        io.start_soon(drain, proc.stdout)
        ready_line = parse_ready(line)
        child.ready_at = trio.current_time()
        assert ready_line.url is not None
        task_id = await self._deliver(child, ready_line.url)
        child.ready = Ready(ready_line.session_id, ready_line.url, ready_line.records_dir, task_id)
        return child.ready

    async def _deliver(self, child: Child, url: str) -> str:
        """The child's task id once its door took the task (see :func:`delivery.deliver`)."""
        try:
            task_id = await delivery.deliver(url, child.task, bound=self.delivery_bound, exited=child.exited)
        except delivery.Refused as exc:
            raise LaunchFailed(str(exc)) from None
        if task_id is not None:
            return task_id
        if child.exited.is_set():
            raise LaunchFailed(child.tail(f"the child exited with {exitstatus.describe(child.returncode)} before taking its task"))
        raise LaunchFailed(f"the child did not accept its task within {self.delivery_bound:g} s")

    # -- watching and ending ------------------------------------------------------------------

    async def _watch(self, child: Child) -> Ending:
        """Until the child exits, is stopped, or its watch (``bound`` from readiness) expires.

        A child left to finish is terminated (SIGTERM, then its unit killed after the stop grace) and
        reports for itself."""
        assert child.ready_at is not None
        with trio.move_on_at(child.ready_at + self.bound):
            while True:
                if child.exited.is_set():
                    return Ending.EXITED
                if child.stop_reason is not None:
                    return Ending.STOPPED
                if child.left_to_finish:
                    await self._terminate(child)  # SIGTERM: its session ends and reports
                    return Ending.EXITED
                child.wake = trio.Event()
                if child.exited.is_set() or child.stop_reason is not None or child.left_to_finish:
                    continue
                await child.wake.wait()
        return Ending.EXITED if child.exited.is_set() else Ending.EXPIRED

    async def _terminate(self, child: Child) -> None:
        await terminate(child, self.stop_grace)


def cancelled_by_deadline(exc: BaseException) -> bool:
    """Whether ``exc`` is a cancellation a scope's deadline caused (Trio's cancel reason).

    Args:
        exc (BaseException): what ended a wait: a ``trio.Cancelled``, a group of them (a
            nursery's), or anything else.

    Returns:
        bool: True when ``exc`` is only cancellations and one came from a deadline
        (``Cancelled.source == "deadline"``); False for an explicit or a nursery's cancel,
        KeyboardInterrupt, or any other exception.
    """
    if isinstance(exc, trio.Cancelled):
        return exc.source == "deadline"
    if isinstance(exc, BaseExceptionGroup):
        rest = exc.split(trio.Cancelled)[1]
        return rest is None and any(cancelled_by_deadline(e) for e in exc.exceptions)
    return False


def _ms(began: float) -> int:
    return int((time.monotonic() - began) * 1000)
