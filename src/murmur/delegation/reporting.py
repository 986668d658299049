"""Exactly one report per delegation, from the launcher's side.

Specification: ``spec/delegation.md`` "Exactly one reporter". When the child leaves no completion of
its own, the launcher reports (:func:`murmur.delegation.watch_policy.launcher_report`): ``crashed``
for a child that exited without one, ``terminated`` when the watch expired (posted to this
session's own door) or when this session stopped the delegation (recorded in
``completion.json`` and posted to nobody). An undelivered completion the child wrote is
posted once more. Whoever claims ``completion.json`` first is the reporter
(:func:`murmur.delegation.completion.claim`).

:class:`Reporter` has two entry points: :meth:`Reporter.report` for a watched child's ending
(it exited, its watch expired, or the parent stopped it), and :meth:`Reporter.report_stopped`
for a delegation the parent ended before or while it was watched (a failed launch, the
delegating session ending).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from murmur.delegation import completion as comp
from murmur.delegation.book import DelegationBook
from murmur.delegation.child_process import Child
from murmur.delegation.spawner import SpawnerHandle
from murmur.delegation.watch_policy import Ending, LauncherReport, launcher_report


class Reporter:
    """Reports the endings of one delegating session's children.

    Args:
        session_id (str): the delegating session.
        book (DelegationBook): where a ``terminated`` delegation is closed.
        bound (int): the child watch bound in seconds (named in an expiry's detail).
        door_url (Callable[[], str | None]): this session's door (None once closed).
        closed (Callable[[], bool]): whether the launcher is closing (nothing is posted then).
        terminate (Callable[[Child], Awaitable[None]]): ends a child's process (bounded).
    """

    def __init__(
        self,
        *,
        session_id: str,
        book: DelegationBook,
        bound: int,
        door_url: Callable[[], str | None],
        closed: Callable[[], bool],
        terminate: Callable[[Child], Awaitable[None]],
    ) -> None:
        self.session_id = session_id
        self.book = book
        self.bound = bound
        self._door_url = door_url
        self._closed = closed
        self._terminate = terminate

    async def report(self, child: Child, ending: Ending) -> None:
        """Report a watched child's ``ending``; the child is terminated and reaped after.

        ``EXITED``: report ``crashed`` if it left no completion, or post its undelivered one
        again. ``EXPIRED``/``STOPPED``: claim a ``terminated`` report, terminate the child,
        then post it (expired) or close the delegation (stopped) — unless the child claimed
        first, when it is handled as an exit.
        """
        if ending is Ending.EXITED:
            await self._report_exit(child)
            return
        report = launcher_report(
            ending, returncode=child.returncode, stderr_tail=list(child.stderr), bound=self.bound,
            reason=child.stop_reason,
        )
        claimed = self._claim(child, report)
        await self._terminate(child)
        if not claimed:
            await self._report_exit(child)  # the child reported first
        elif report.post:
            await self._post(child, self._completion(child, report.status, report.detail), "launcher")
        else:
            self.book.close(child.entry.delegation_id, "terminated", report.detail)

    def report_stopped(self, child: Child, reason: str | None, *, close: bool = True) -> None:
        """Claim a ``terminated`` report, posted to nobody, for a delegation the parent ended.

        Args:
            child (Child): the delegation.
            reason (str | None): why (the report's detail).
            close (bool): also close it in the book when this claim made the report (False
                for a failed launch, whose call already recorded its end).
        """
        report = launcher_report(Ending.STOPPED, returncode=None, bound=self.bound, reason=reason)
        if self._claim(child, report) and close:
            self.book.close(child.entry.delegation_id, "terminated", report.detail)

    # -- pieces ---------------------------------------------------------------------------

    def _completion(self, child: Child, status: str, detail: str | None) -> comp.Completion:
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

    def _claim(self, child: Child, report: LauncherReport) -> bool:
        """Claim ``completion.json`` with ``report`` (not yet delivered); whether this claimed it."""
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

    async def _report_exit(self, child: Child) -> None:
        """The child has exited: report ``crashed`` if it left nothing; retry an undelivered one."""
        data = comp.read_completion(child.dir)
        record = comp.record_from_json(data) if data is not None else None
        if record is None:
            report = launcher_report(Ending.EXITED, returncode=child.returncode,
                                     stderr_tail=list(child.stderr), bound=self.bound)
            if self._claim(child, report):
                if child.ready is not None:  # its parent's launcher knows how it ended (spec/tree.md)
                    from murmur.tree import mark_ended_by_parent

                    mark_ended_by_parent(child.ready.session_id, report.status, child.returncode)
                await self._post(child, self._completion(child, report.status, report.detail), "launcher")
                return
            data = comp.read_completion(child.dir)
            record = comp.record_from_json(data) if data is not None else None
            if record is None:
                return
        if record.delivered or record.reported_by != "child" or child.entry.closed:
            return
        await self._post(child, record.completion, "child")  # the one retry

    async def _post(self, child: Child, completion: comp.Completion, reported_by: str) -> None:
        url = self._door_url()
        problem: str | None
        if url is None or self._closed():
            problem = "the delegating session's door is closed"
        else:
            handle = SpawnerHandle(url, self.session_id, child.entry.context_id, child.entry.trust,
                                   child.entry.delegation_id)
            problem = await comp.post(handle, completion)
        try:
            comp.rewrite(child.dir, comp.Record(completion, reported_by, problem is None, problem))
        except OSError:
            pass
