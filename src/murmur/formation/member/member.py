"""The member side of a formation session: what ``mur run`` adds when it has joined one.

:func:`contribute` is a session contributor (:mod:`murmur.assembly.contributors`): it runs
:func:`murmur.formation.member.membership.join` while a ``mur run`` in a formation is prepared, then
:func:`contribution` says what the member adds to the session (merged once with the other
contributors' by :mod:`murmur.assembly.contributors`; :func:`install` merges it alone):

* ``formation_id``; ``session_start`` gets ``formation_id``, and with credentials
  ``formation_member`` and ``formation_callees`` (roster order);
* the door recognises ``mft1.`` formation tokens (:class:`~murmur.formation.member.verifier.FormationVerifier`);
* a watcher reads later channel lines (callees' door URLs, the entry role);
* a watcher waits for the lifeline's EOF, then winds the session down: ``formation_ended``
  first, then as a first SIGTERM (the session's 20 s guard exits 143 wherever teardown is);
  an EOF after the session's deadline (on the Trio clock) is the deadline instead;
* with callees: the ``call-member`` services (:mod:`murmur.formation.member.calls`), and
  ``W-RUN-008`` when ``capabilities.network.allow`` reaches no member door.

Spec: spec/formation.md "How a formation ends", "How reachability is enforced".
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import trio

from murmur import timing
from murmur.diagnostics import Diagnostic, error
from murmur.formation.member.calls import CallEngine, CallRefused
from murmur.formation.member.membership import Membership, join
from murmur.formation.member.reach import reaches_member_doors
from murmur.formation.member.verifier import FormationVerifier
from murmur.lifeline import wait_for_eof
from murmur.routing import Ceiling, member_call_refusal, member_refusal
from murmur.session import (
    Contribution,
    ServicesLayer,
    add_contributions,
    deadline_wind_down,
    lifeline_wind_down,
)
from murmur.stderr import say
from murmur.workload import TaskContext, TaskOutcome, TaskServices, Workload

if TYPE_CHECKING:
    from murmur.session import SessionHandle, SessionSetup, SessionSummary, Task, WindDownControl


class CallsEndWithTask:
    """Wraps a workload so its task's member calls are settled when the task ends.

    Args:
        inner (Workload): the plan executor or agent loop.
        engine (CallEngine): the member's calls.
    """

    def __init__(self, inner: Workload, engine: CallEngine) -> None:
        self.inner = inner
        self.engine = engine

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Run the task; however it ends, abandon its open calls (``CallEngine.task_ended``)."""
        try:
            return await self.inner.run_task(ctx)
        finally:
            self.engine.task_ended(ctx.task_id)


def _print_warning(diag: Diagnostic) -> None:
    say(diag.render())


def install(setup: SessionSetup, membership: Membership, *, engine: CallEngine | None = None) -> CallEngine | None:
    """Extend ``setup`` for ``membership`` now: :func:`contribution`, merged on its own
    (:func:`murmur.session.add_contributions`; tests and doubles that prepare a member alone).

    Returns:
        CallEngine | None: the member's call engine (None when it may call nobody).
    """
    given, engine = contribution(setup, membership, engine=engine)
    add_contributions(setup, [given])
    return engine


def contribution(
    setup: SessionSetup, membership: Membership, *, engine: CallEngine | None = None
) -> tuple[Contribution, CallEngine | None]:
    """What ``membership`` adds to the session (see the module docstring).

    The member's facts are written on ``setup`` as data (``formation_id``, the ``session_start``
    and running-record fields); its watchers, hooks, verifier, services layer and workload
    wrapper are returned, for the one merge (:mod:`murmur.assembly.contributors`).

    Args:
        setup (SessionSetup): the session being prepared.
        membership (Membership): from :func:`join`.
        engine (CallEngine | None): the call engine to use (tests inject one); by default one
            is made when the member has callees.

    Returns:
        tuple[Contribution, CallEngine | None]: the contribution and the member's call engine
        (None when it may call nobody).
    """
    m = membership
    setup.formation_id = m.formation_id
    setup.trace_start_fields["formation_id"] = m.formation_id
    creds = m.credentials
    verifiers: list[FormationVerifier] = []
    if creds is not None:
        setup.trace_start_fields["formation_member"] = creds.member
        setup.trace_start_fields["formation_callees"] = list(creds.callees)
        if m.entry:  # the lineage says so, and `mur ps --tree` marks the row `(entry)` (spec/tree.md)
            setup.trace_start_fields["formation_entry"] = True
        setup.running_fields.update(member=creds.member, callees=list(creds.callees))
        verifiers.append(FormationVerifier(creds.verify_key, m.formation_id, creds.member, setup.manifest.name))
        if creds.callees and not reaches_member_doors(setup.manifest.network_allow):
            m.warnings.append(
                error(
                    "W-RUN-008",
                    f"this member may call {', '.join(creds.callees)}, but its "
                    "capabilities.network.allow reaches no member door, so every call it makes "
                    "will fail",
                    hint="member doors listen on loopback http at a port chosen at launch; add "
                    "the bare host `localhost` to capabilities.network.allow",
                )
            )
    watchers: list[Any] = []
    if m.lifeline_fd is not None:
        watchers.append(_lifeline_watcher(setup, m))
    if m.channel_fd is not None:
        watchers.append(_channel_watcher(m))
    if creds is not None and creds.callees and engine is None:
        engine = CallEngine(
            member=creds.member,
            tokens={c.name: c.token for c in creds.calls},
            addresses=m.addresses,
            network_allow=setup.manifest.network_allow,
            deadline_secs=float(setup.delegation_bound_secs),
        )
    given = Contribution(watchers=tuple(watchers), token_verifiers=tuple(verifiers))
    if engine is not None:
        given = _with_engine(given, m, engine)
    elif creds is not None:
        given = attrs.evolve(given, services=_member_layer(lambda task: TaskServices(entry_member=m.entry)))
    if engine is not None and setup.manifest.inference is not None:
        given = attrs.evolve(given, services=_with_ceiling(given.services, m.formation_id, setup.manifest, m))
    if creds is not None and given.services is not None:
        given = attrs.evolve(given, services=_with_routes(
            given.services, member_refusal(creds.member, creds.callees, m.formation_id, setup.manifest)))
    return given, engine


def _with_routes(layer: ServicesLayer, refuse: Any) -> ServicesLayer:
    """``layer``, then every task's denied-binary message names this member's ready routes."""

    def services(task: Task, base: TaskServices) -> TaskServices:
        return attrs.evolve(layer(task, base), denied_binary=refuse)

    return services


def _with_ceiling(
    layer: ServicesLayer | None, formation_id: str, manifest: Any, membership: Membership | None = None
) -> ServicesLayer | None:
    """``layer``, then an agent member's ``call-member`` to an agent member without a spending
    ceiling is refused (``CallRefused``: a tool error) with the rule's sentence and the
    routing line (spec/routing.md "Spending ceilings"), before the offer is sent: the callee
    judged by its running record's manifest, else (not running yet) by what the launcher read
    from its admitted manifest (``membership.callee_facts``, the channel's callees line)."""
    if layer is None:
        return None

    def services(task: Task, base: TaskServices) -> TaskServices:
        given = layer(task, base)
        inner = given.call_member
        if inner is None:
            return given

        async def call_member(member: str, text: str) -> Mapping[str, object]:
            known = _known_ceilings(membership) if membership is not None else None
            why = await trio.to_thread.run_sync(member_call_refusal, formation_id, manifest, member, known)
            if why is not None:
                raise CallRefused(why)
            return await inner(member, text)

        return attrs.evolve(given, call_member=call_member)

    return services


def _known_ceilings(membership: Membership) -> dict[str, tuple[str, Ceiling | None]]:
    """Member -> (capsule name, ceiling; None for no agent), from the callees line."""
    return {
        name: (f.capsule, Ceiling(f.max_turns, f.budget_tokens) if f.agent else None)
        for name, f in membership.callee_facts.items()
    }


def _member_layer(make: Any) -> ServicesLayer:
    """A services layer that sets this member's call services over what it is given."""

    def services(task: Task, base: TaskServices) -> TaskServices:
        mine: TaskServices = make(task)
        return attrs.evolve(
            base,
            call_member=mine.call_member,
            member_answer=mine.member_answer,
            peer_route=mine.peer_route,
            callees=mine.callees,
            entry_member=mine.entry_member,
        )

    return services


def _with_engine(given: Contribution, m: Membership, engine: CallEngine) -> Contribution:
    async def run_engine(ctl: WindDownControl) -> None:
        await engine.run()

    async def bind(session: SessionHandle) -> None:
        engine.bind(session.trace, session.trace.session_event_id)

    async def drain(summary: SessionSummary) -> None:
        await engine.drain()

    return attrs.evolve(
        given,
        watchers=(*given.watchers, run_engine),
        start_hooks=(bind,),
        end_hooks=(drain,),
        wrap_workload=lambda inner: CallsEndWithTask(inner, engine),
        services=_member_layer(lambda task: engine.services(task.id, task.trust, entry_member=m.entry)),
    )


def _lifeline_watcher(setup: SessionSetup, m: Membership) -> Any:
    fd = m.lifeline_fd
    assert fd is not None

    async def watch(ctl: WindDownControl) -> None:
        await wait_for_eof(fd)
        if setup.deadline is not None and ctl.deadline_within(timing.DEADLINE_EOF_SLACK):
            # the formation's deadline closed the lifeline: the launcher converted the same
            # moment to its own clock, so this member's reading may land a little later
            ctl.trigger(deadline_wind_down(setup.deadline, formation_id=m.formation_id))
            return
        ctl.trigger(
            lifeline_wind_down(
                trace_event="formation_ended",
                detail="the formation ended",
                busy_status="formation_ended",
                trace_fields={"formation_id": m.formation_id},
            )
        )

    return watch


def _channel_watcher(m: Membership) -> Any:
    fd = m.channel_fd
    assert fd is not None

    async def read(ctl: WindDownControl) -> None:
        splitter = m.splitter
        stream = trio.lowlevel.FdStream(fd)
        try:
            while True:
                try:
                    data = await stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    return
                for line in splitter.feed(data):
                    m.take_line(line)
        finally:
            m.channel_fd = None
            with trio.CancelScope(shield=True):
                await stream.aclose()

    return read


def contribute(setup: SessionSetup, environ: Mapping[str, str]) -> Contribution | None:
    """The session contributor: join the formation the environment names, if any.

    Returns:
        Contribution | None: what the member adds (None outside a formation).

    Raises:
        DiagnosticError: ``E-RUN-044`` / ``E-RUN-046`` (see :func:`join`).
    """
    membership = join(environ)
    if membership is None:
        return None
    given, _ = contribution(setup, membership)
    for diag in membership.warnings:
        _print_warning(diag)
    return given
