"""A session's delegation runtime: registration, the launcher, the child's own report.

One :class:`DelegationRuntime` per session that delegates, was delegated, or both. It is
wired into the session by :func:`murmur.delegation.contributor.contribute` through the
:class:`~murmur.session.session.SessionSetup` extension points:

==================  ===========================================================================
start hook          ``POST /register`` at ``MURMUR_ROOST_URL`` (manifest declares
                    ``capabilities.spawn.allow``, or the session was launched under an
                    approval); any failure refuses the launch with ``E-RUN-019``. The
                    credential is kept in this object's memory only; the approval is dropped
                    once presented.
watchers            the launcher's supervisor nursery (children live there); the spawner
                    lifeline (EOF → ``spawner_ended``, then the wind-down of a first SIGTERM)
services            ``TaskServices.delegate`` for each task (delegating capsules)
completion handler  :meth:`DelegationRuntime.completion`: the book decides
                    (:meth:`murmur.delegation.book.DelegationBook.decide`); once the session
                    is closing, an awaited completion is taken without a task
end hook            in order: end every live child (``terminated``, posted to nobody),
                    ``POST /deregister`` with the outcome (best effort), and — for a delegated
                    child — write ``completion.json`` and post the completion to the parent
==================  ===========================================================================
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs
import trio

from murmur.delegation import completion as comp
from murmur.delegation.book import DelegationBook
from murmur.delegation.parent import Launcher
from murmur.delegation.spawner import SpawnerHandle
from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.lifeline import wait_for_eof
from murmur.roost import IDENTITY_MESSAGE, RoostClient, RoostError, RoostRefused
from murmur.session import CompletionRequest, CompletionVerdict, TraceWriteError, lifeline_wind_down
from murmur.stderr import say
from murmur.tree import (
    CAPS_ENV,
    LINEAGE_ENV,
    asked_label,
    cap_refusal,
    mark_not_started,
    parse_caps,
    refusal_sentence,
    session_lineage,
    take_one,
)
from murmur.workload import TaskServices

if TYPE_CHECKING:
    from murmur.session import SessionHandle, SessionSetup, SessionSummary, Task, WindDownControl

DEREGISTER_BOUND = 5.0  # seconds the best-effort deregistration may take
REGISTER_TIMEOUT = 10.0  # seconds a registration request may take
OK_STATUSES = frozenset({"ok", "formation_ended"})
RESTART_REASON = "mur-roost restarted while this session ran (it no longer knows its credential)"
RESTART_REFUSAL = (
    "spawn refused: mur-roost restarted while this session ran, so it delegates nothing more; "
    "run the task again in a new session"
)


class DelegationRuntime:
    """Delegation for one session (see the module docstring).

    Args:
        setup (SessionSetup): the session being prepared.
        environ (Mapping[str, str]): the session's environment.
        roost_url (str | None): ``MURMUR_ROOST_URL`` (None when unset or blank).
        spawner (SpawnerHandle | None): ``MURMUR_SPAWNER`` of a delegated child.
        approval (str | None): the approval read from stdin (delegated child).
        lifeline_fd (int | None): the claimed spawner lifeline.
        relay_stderr (bool): relay children's stderr lines to this process's stderr.
    """

    def __init__(
        self,
        setup: SessionSetup,
        environ: Mapping[str, str],
        *,
        roost_url: str | None,
        spawner: SpawnerHandle | None,
        approval: str | None,
        lifeline_fd: int | None,
        relay_stderr: bool = True,
    ) -> None:
        self.setup = setup
        self.manifest = setup.manifest
        self.environ = dict(environ)
        self.roost_url = roost_url
        self.spawner = spawner
        self._approval = approval
        self.lifeline_fd = lifeline_fd
        self._credential: str | None = None
        self._session: SessionHandle | None = None
        self.book = DelegationBook(self._emit)
        self.launcher: Launcher | None = None
        self._started_ids: set[str] = set()
        self.restart_noticed = False  # mur-roost answered the identity refusal (spec/tree.md)
        self.caps = parse_caps(environ)  # the tree caps (spec/tree.md "Caps"); E-TRE-004 refuses the launch
        if self.can_delegate:
            assert roost_url is not None
            self.launcher = Launcher(
                manifest=self.manifest,
                workdir=setup.workdir,
                session_id=setup.session_id,
                environ=environ,
                roost_url=roost_url,
                credential=lambda: self._credential,
                door_url=lambda: self._session.url if self._session is not None else None,
                book=self.book,
                emit=self._emit,
                bound=setup.delegation_bound_secs,
                relay=say if relay_stderr else None,
            )
            self.launcher.child_env = self._tree_env

    def __repr__(self) -> str:  # never show the credential or the approval
        return f"DelegationRuntime(session_id={self.setup.session_id!r}, delegates={self.can_delegate})"

    @property
    def can_delegate(self) -> bool:
        """The manifest names at least one capsule in ``capabilities.spawn.allow``."""
        return bool(self.manifest.spawn_allow)

    @property
    def registers(self) -> bool:
        """Whether this session registers with mur-roost."""
        return self.can_delegate or self._approval is not None

    @property
    def registered(self) -> bool:
        """Whether a credential is held."""
        return self._credential is not None

    # -- trace ----------------------------------------------------------------------------

    def _emit(self, event_type: str, **fields: Any) -> None:
        if event_type == "delegation_start" and isinstance(fields.get("delegation_id"), str):
            self._started_ids.add(fields["delegation_id"])
            self._count("started")
        session = self._session
        if session is None:
            return
        try:
            session.trace.emit(event_type, parent_id=session.session_event_id, **fields)
        except TraceWriteError:
            pass  # the session is already winding down for it

    # -- hooks ----------------------------------------------------------------------------

    async def start(self, session: SessionHandle) -> None:
        """Start hook: remember the session; register with mur-roost when required.

        Raises:
            DiagnosticError: ``E-RUN-019`` when the registration fails for any reason.
        """
        self._session = session
        if not self.registers:
            return
        if self.roost_url is None:
            raise DiagnosticError(roost_url_unset())
        approval, self._approval = self._approval, None  # presented once, then forgotten
        try:
            async with RoostClient(self.roost_url, timeout=REGISTER_TIMEOUT) as roost:
                self._credential = await roost.register(
                    session.session_id, self.manifest.name, self.manifest.version, approval=approval
                )
        except RoostRefused as exc:
            raise DiagnosticError(
                error(
                    "E-RUN-019",
                    f"this session could not register with mur-roost at {self.roost_url}: {exc.message}",
                    hint=_register_hint(approval is not None, unresolved=exc.status == 500),
                )
            ) from None
        except RoostError as exc:
            raise DiagnosticError(
                error(
                    "E-RUN-019",
                    f"this session could not register with mur-roost at {self.roost_url}: {exc}",
                    hint="start mur-roost (e.g. `mur-roost --port 7700 --spawn-allow <this capsule's name>`; see spec/roost.md) and point MURMUR_ROOST_URL at it",
                )
            ) from None

    async def supervise(self, ctl: WindDownControl) -> None:
        """Watcher: hold the launcher's nursery for the session's life."""
        if self.launcher is not None:
            await self.launcher.run()

    async def watch_spawner(self, ctl: WindDownControl) -> None:
        """Watcher: the spawner lifeline's EOF winds the session down (``spawner_ended``)."""
        if self.lifeline_fd is None:
            return
        await wait_for_eof(self.lifeline_fd)
        fields: dict[str, Any] = {}
        if self.spawner is not None:
            fields = {"spawned_by": self.spawner.session_id, "delegation_id": self.spawner.delegation_id}
        ctl.trigger(
            lifeline_wind_down(
                trace_event="spawner_ended",
                detail="the delegating session ended",
                trace_fields=fields,
            )
        )

    async def end(self, summary: SessionSummary) -> None:
        """End hook: stop children, deregister (best effort), report to the parent."""
        if self.launcher is not None:
            await self.launcher.stop_all("the delegating session ended")
        await self._deregister(summary)
        if self.spawner is not None:
            await self.report(summary)

    async def _deregister(self, summary: SessionSummary) -> None:
        credential, self._credential = self._credential, None
        if credential is None or self.roost_url is None:
            return
        outcome = "complete" if summary.status in OK_STATUSES and summary.diagnostic is None else "failed"
        with trio.move_on_after(DEREGISTER_BOUND):
            try:
                async with RoostClient(self.roost_url, timeout=DEREGISTER_BOUND) as roost:
                    await roost.deregister(credential, outcome)
            except RoostError:
                pass  # best effort: a finished session is not failed by a gone daemon

    async def report(self, summary: SessionSummary) -> None:
        """The child's own completion: claim ``completion.json``, post once, rewrite.

        A failed delivery never fails the session; one line goes to stderr.
        """
        handle = self.spawner
        assert handle is not None
        workdir = self.setup.workdir
        completion = comp.Completion(
            delegation_id=handle.delegation_id,
            capsule_name=self.manifest.name,
            capsule_version=self.manifest.version,
            session_id=self.setup.session_id,
            status="ok" if summary.status in OK_STATUSES and summary.diagnostic is None else "error",
            workdir=str(workdir),
            duration_ms=summary.duration_ms,
            result_path=_relative(summary.result_path, workdir),
        )
        try:
            if not comp.claim(workdir, comp.Record(completion, "child")):
                return  # the parent's launcher reported this delegation first
        except OSError as exc:
            say(f"[capsule-runtime] completion.json could not be written: {exc.strerror or exc}")
            return
        problem = await comp.post(handle, completion)
        try:
            comp.rewrite(workdir, comp.Record(completion, "child", problem is None, problem))
        except OSError:
            pass
        if problem is not None:
            say(f"[capsule-runtime] the completion of {handle.delegation_id} was not delivered: {problem}")

    # -- the door's completions -------------------------------------------------------------

    def completion(self, req: CompletionRequest) -> CompletionVerdict:
        """The session's completion handler.

        The book decides (a completion for an open delegation of this session is accepted and
        closes it; any other is refused with ``-31002``). A session that is closing — its last
        task has ended, or it is winding down — queues no task, yet its end hook is still
        waiting for the children it left to finish; so an accepted completion is then taken without
        a task: the ``delegation`` record is written and the child is told it was delivered.

        Args:
            req (CompletionRequest): a completion addressed to this session.

        Returns:
            CompletionVerdict: the book's verdict; ``run_as_task`` false while closing.
        """
        verdict = self.book.decide(req)
        session = self._session
        if verdict.accept and verdict.run_as_task and session is not None and session.closing:
            return attrs.evolve(verdict, run_as_task=False)
        return verdict

    # -- services -------------------------------------------------------------------------

    def services_for(self, task: Task, base: TaskServices) -> TaskServices:
        """A copy of ``base`` with ``delegate`` bound to ``task``'s context and trust, and
        ``starter`` the launcher's warm starter for shell commands (a services layer,
        :class:`murmur.session.Contribution`)."""
        if self.launcher is None:
            return base

        async def guarded(capsule: str, version: str, text: str, wait: bool) -> Mapping[str, object]:
            return await self.delegate_call(capsule, version, text, wait, context_id=task.context_id, trust=task.trust)

        return attrs.evolve(base, delegate=guarded, spawn=tuple(session_lineage(self.setup).spawn),
                            starter=self.launcher.commands)

    @property
    def session(self) -> SessionHandle | None:
        """The session, once started."""
        return self._session

    async def delegate_call(
        self, capsule: str, version: str, text: str, wait: bool, *, context_id: str, trust: str,
        caller: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        """One delegation as ``delegate-task`` makes it (the runtime's refusals, then the launcher).

        Used by the task services and by the capability socket (``murmur.links.service``),
        which passes ``caller``, the link's calling command, for the child's lineage
        (``via: "link"``, spec/links.md).

        Returns:
            dict[str, Any]: the call's result (``spec/delegation.md`` "The call returns"); a
            refusal of the runtime's own is ``refused`` before mur-roost is asked, a launcher
            that did not start is ``failed`` (see :meth:`Launcher.delegate`).

        Raises:
            trio.Cancelled: only the caller's own cancellation (see :meth:`Launcher.delegate`).
        """
        launcher = self.launcher
        assert launcher is not None
        spawn_set = tuple(session_lineage(self.setup).spawn)
        refusal = self._cap_refusal(capsule, version) or self._refusal(capsule, spawn_set)
        if refusal is None and self.manifest.inference is not None:
            refusal = await self._ceiling_refusal(capsule, version)
        if refusal is not None:
            return self.refuse(capsule, version, refusal)
        result = await launcher.delegate(capsule, version, text, wait, context_id=context_id, trust=trust,
                                         caller=caller)
        if result.get("delegation_id") not in self._started_ids and result.get("status") in ("refused", "failed"):
            self._count("refused")
            mark_not_started(self.setup, result.get("delegation_id"), asked_label(capsule, version), str(result["status"]),
                             str(result.get("output") or result.get("reason") or result["status"]))
            if result.get("status") == "refused" and result.get("output") == IDENTITY_MESSAGE:
                self._restarted()
        return result

    def refuse(self, capsule: str, version: str, reason: str) -> dict[str, Any]:
        """The one place a delegation refused before mur-roost is asked is recorded: a
        ``delegation`` trace record (``outcome: refused``, ``reason``) and the session's
        ``refused`` count (running record, ``session_end``, ``mur ps --tree``; spec/tree.md
        "Counts"). The spawn set, a winding-down session, a restart, a terminal on a link and
        the tree caps all refuse through it, from ``delegate-task`` or a capsule link.

        Returns:
            dict[str, Any]: the call's ``refused`` result (``output`` is ``reason``).
        """
        self.book.call_ended(capsule, version, "refused", reason=reason, duration_ms=0)
        self._count("refused")
        mark_not_started(self.setup, None, asked_label(capsule, version), "refused", reason)
        return {"capsule": capsule, "version": version, "status": "refused", "output": reason}

    # -- the process tree (spec/tree.md) ------------------------------------------------------

    def _tree_env(self, delegation_id: str) -> dict[str, str]:
        """The runtime-owned variables a child gets beside ``MURMUR_SPAWNER``: its lineage, and
        the class this session runs at (``MURMUR_SANDBOX_FLOOR``: the child runs no lower;
        spec/containment.md)."""
        entry = self.book.get(delegation_id)
        caller = entry.caller if entry is not None else None
        env = {LINEAGE_ENV: session_lineage(self.setup).hand_down(self.setup.session_id, delegation_id, caller=caller)}
        same = entry is not None and self._same_identity(entry.capsule, entry.version)
        env[CAPS_ENV] = self.caps.hand_down(same)
        if self.setup.containment.rank > 0:
            env["MURMUR_SANDBOX_FLOOR"] = self.setup.containment.value
        gateway = self.setup.parent_env.get("MURMUR_GATEWAY_ENDPOINT")
        if gateway:  # the tree's inference gateway (spec/gateway.md); it carries no key
            env["MURMUR_GATEWAY_ENDPOINT"] = gateway
        return env

    def _same_identity(self, capsule: str, version: str) -> bool:
        """Whether ``capsule@version`` as a child resolves it (the global store) is this
        session's own capsule: the same name and the same installed bytes (archive sha256)."""
        from murmur.delegation.parent import resolve_global

        own = self.setup.running_fields.get("artifact_sha256")
        if capsule != self.manifest.name or not own:
            return False
        found = resolve_global(capsule, version)
        return found is not None and found.sha256 == own

    def _cap_refusal(self, capsule: str, version: str) -> str | None:
        """The tree caps, before anything else: every attempt counts toward the tree's total
        (refused ones included, spec/tree.md "Caps"), then the same-capsule chain."""
        caps = self.caps
        taken = None
        if caps.total is not None:
            try:
                taken = take_one(session_lineage(self.setup).root)
            except OSError as exc:
                return f"spawn refused: the tree's delegation count cannot be kept ({exc}); a cap it cannot keep is no cap"
        same = caps.same_chain is not None and self._same_identity(capsule, version)
        return cap_refusal(caps, capsule, taken=taken, same_identity=same)

    async def _ceiling_refusal(self, capsule: str, version: str) -> str | None:
        """An agent session delegates to an agent capsule only under a spending ceiling
        (spec/routing.md "Spending ceilings"): the target as a child resolves it (the global
        store) is judged; one that is not installed is left to mur-roost and the launcher."""
        from murmur.delegation.parent import resolve_global
        from murmur.routing import ceiling_refusal

        found = await trio.to_thread.run_sync(resolve_global, capsule, version)
        if found is None:
            return None
        return ceiling_refusal("delegate-task", self.manifest, found.manifest, capsule, "restart the session")

    def _refusal(self, capsule: str, spawn_set: tuple[str, ...]) -> str | None:
        """Why the runtime refuses ``capsule`` before mur-roost is asked, or None."""
        if self.restart_noticed:
            return RESTART_REFUSAL
        if self._session is not None and self._session.wind_down_reason is not None:
            return "spawn refused: this session is winding down and starts no delegation"
        if capsule in self.manifest.spawn_allow and capsule not in spawn_set:
            return refusal_sentence(capsule)
        return None

    def _count(self, key: str) -> None:
        counts = self.setup.delegation_counts
        counts[key] = counts.get(key, 0) + 1
        if self._session is not None:
            self._session.note_delegations()

    def _restarted(self) -> None:
        """mur-roost no longer knows this session: it restarted. Delegate nothing more."""
        if self.restart_noticed:
            return
        self.restart_noticed = True
        say(f"[capsule-runtime] {RESTART_REFUSAL}")
        from murmur.tree import mark_uncertain

        mark_uncertain(self.setup.session_id, RESTART_REASON)


def roost_url_unset() -> Diagnostic:
    """The ``E-RUN-019`` diagnostic for an unset or blank ``MURMUR_ROOST_URL``."""
    return error(
        "E-RUN-019",
        "this session can delegate but could not register with mur-roost: MURMUR_ROOST_URL is not set",
        hint=("start mur-roost (`mur-roost --port 7700 --spawn-allow <this capsule's name>`; see spec/roost.md) "
              "and set MURMUR_ROOST_URL to its base URL, e.g. http://127.0.0.1:7700"),
    )


def _register_hint(with_approval: bool, *, unresolved: bool = False) -> str:
    """What to change after mur-roost refused ``/register``: a 500 means the daemon's registry
    does not hold this capsule's artifact (spec/roost.md "/register")."""
    if unresolved:
        return (
            "install this capsule where mur-roost reads artifacts (`mur install -g <capsule dir>`, "
            "or start mur-roost with `--registry-path` at the store that holds it)"
        )
    if with_approval:
        return "the approval this child was launched with was refused; its parent asks POST /spawn again"
    return "start mur-roost with `--spawn-allow <this capsule's name>` and its artifact in the daemon's registry"


def _relative(path: Path | None, root: Path) -> str | None:
    if path is None:
        return None
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


