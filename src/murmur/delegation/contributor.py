"""The session contributor for delegation (called for every ``mur run``).

:func:`contribute` reads the environment a delegating parent leaves on its child —
``MURMUR_SPAWNER``, ``MURMUR_SPAWNER_LIFELINE``, ``MURMUR_ROOST_URL`` — and the approval on
stdin, and wires a :class:`~murmur.delegation.runtime.DelegationRuntime` into the session:

* a capsule declaring ``capabilities.spawn.allow`` registers at launch (``E-RUN-019`` when
  ``MURMUR_ROOST_URL`` is unset or blank, or the registration fails), gets the
  ``delegate`` service, a completion handler, and ``W-SEC-020`` when its lifecycle cannot
  receive a completion (not ``queue`` + ``sleep`` with a queue depth of at least 1);
* a delegated child (``MURMUR_SPAWNER`` set) reads its approval from stdin, registers with
  it, keeps its records in its own directory (``<workdir>/.murmur/<ses_id>/``, so its
  trace and result are where its parent's ``child_workdir`` points), watches its spawner
  lifeline, and reports its completion at the end of its session.

A capsule that is neither contacts nobody and needs no daemon. An unreadable
``MURMUR_SPAWNER`` or ``MURMUR_SPAWNER_LIFELINE`` refuses the launch with ``E-RUN-020``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from murmur.delegation.approval import read_approval
from murmur.delegation.runtime import DelegationRuntime, roost_url_unset
from murmur.delegation.spawner import SPAWNER_ENV, SPAWNER_LIFELINE_ENV, parse_spawner
from murmur.diagnostics import Diagnostic, error
from murmur.errors import DiagnosticError
from murmur.jsonbody import loggable
from murmur.lifeline import claim_lifeline
from murmur.manifest import AfterTask, TaskAcceptance
from murmur.roost import roost_url_fault, roost_url_from_env
from murmur.session import Contribution, add_contributions, create_records
from murmur.stderr import say
from murmur.workload import TaskContext, TaskOutcome, Workload

if TYPE_CHECKING:
    from murmur.session import Policy, SessionSetup

W_SEC_020_LINK = "https://docs.murmur.nexus/reference/diagnostics/#w-sec-020"
_LIFELINE_HINT = "MURMUR_SPAWNER_LIFELINE is set by a delegating capsule's runtime; unset it to run on your own"


def contribute(setup: SessionSetup, environ: Mapping[str, str]) -> tuple[Contribution, DelegationRuntime] | None:
    """What delegation adds to the session (see the module docstring).

    Returns:
        tuple[Contribution, DelegationRuntime] | None: the contribution (merged once by
        :mod:`murmur.assembly.contributors`) and the runtime it wires in (the capsule links
        serve through it, :func:`murmur.assembly.contributors.delegated_child`), or None when
        the session neither delegates nor was delegated.

    Raises:
        DiagnosticError: ``E-RUN-020`` (spawner handle or lifeline unreadable), ``E-RUN-019``
            (a session that must register and ``MURMUR_ROOST_URL`` is unset or blank).
    """
    return contribution(setup, environ)


def install(
    setup: SessionSetup, environ: Mapping[str, str], *, stdin_fd: int = 0, relay_stderr: bool = True
) -> DelegationRuntime | None:
    """:func:`contribution` merged on its own (tests pass another ``stdin_fd``).

    Returns:
        DelegationRuntime | None: the runtime wired in, or None when the session neither
        delegates nor was delegated.
    """
    got = contribution(setup, environ, stdin_fd=stdin_fd, relay_stderr=relay_stderr)
    if got is None:
        return None
    add_contributions(setup, [got[0]])
    return got[1]


def contribution(
    setup: SessionSetup, environ: Mapping[str, str], *, stdin_fd: int = 0, relay_stderr: bool = True
) -> tuple[Contribution, DelegationRuntime] | None:
    """:func:`contribute` with its inputs explicit.

    The facts are written on ``setup`` as data (the records directory of a delegated child, its
    ``session_start`` fields); the runtime's hooks, watchers, services layer, completion handler
    and the plan's completion wrapper are returned.
    """
    spawner = parse_spawner(environ.get(SPAWNER_ENV))
    lifeline_fd = claim_lifeline(
        environ.get(SPAWNER_LIFELINE_ENV), var=SPAWNER_LIFELINE_ENV, code="E-RUN-020", hint=_LIFELINE_HINT
    )
    can_delegate = bool(setup.manifest.spawn_allow)
    if spawner is None and lifeline_fd is None and not can_delegate:
        return None
    approval = read_approval(stdin_fd) if spawner is not None else None
    roost_url = roost_url_from_env(environ)
    if (can_delegate or approval is not None) and roost_url is None:
        raise DiagnosticError(roost_url_unset())
    fault = roost_url_fault(roost_url) if roost_url is not None and (can_delegate or approval is not None) else None
    if fault is not None:
        raise DiagnosticError(error(
            "E-RUN-019", f"this session can delegate but could not register with mur-roost: "
            f"MURMUR_ROOST_URL is \"{loggable(roost_url or '')}\", and {fault}",
            hint="set MURMUR_ROOST_URL to the base URL mur-roost printed when it started, e.g. http://127.0.0.1:7700"))
    runtime = DelegationRuntime(
        setup,
        environ,
        roost_url=roost_url,
        spawner=spawner,
        approval=approval,
        lifeline_fd=lifeline_fd,
        relay_stderr=relay_stderr,
    )
    if spawner is not None:
        relocate_records(setup)
        setup.trace_start_fields["spawned_by"] = spawner.session_id
        setup.trace_start_fields["delegation_id"] = spawner.delegation_id
    given = Contribution(
        start_hooks_first=(runtime.start,),  # registers before anything reports the session
        watchers=(runtime.supervise, runtime.watch_spawner),
        end_hooks=(runtime.end,),
    )
    if can_delegate:
        warning = completion_warning(setup.manifest.name, setup.policy)
        if warning is not None:
            say(f"[capsule-runtime] {warning.render()} ({W_SEC_020_LINK})")
        given = attrs.evolve(
            given,
            services=runtime.services_for,
            completion_handler=runtime.completion,
            wrap_workload=PlanCompletions if setup.workload_kind == "plan" else None,
        )
    return given, runtime


def completion_warning(name: str, policy: Policy) -> Diagnostic | None:
    """``W-SEC-020`` when a delegating capsule's lifecycle cannot receive a completion.

    Receiving one needs ``task_acceptance: queue``, ``queue_depth`` of at least 1 and
    ``after_task: sleep`` (the effective values, command-line overrides included).
    """
    missing: list[str] = []
    if policy.acceptance is not TaskAcceptance.QUEUE:
        missing.append(f"lifecycle.task_acceptance is {policy.acceptance.value}, not queue")
    elif policy.queue_depth < 1:
        missing.append("lifecycle.queue_depth is 0")
    if policy.after_task is not AfterTask.SLEEP:
        missing.append(f"lifecycle.after_task is {policy.after_task.value}, not sleep")
    if not missing:
        return None
    return error(
        "W-SEC-020",
        f"capsule {name} declares capabilities.spawn.allow but its lifecycle cannot receive a "
        f"delegation's completion ({'; '.join(missing)}), so every outcome is posted to a session "
        "that is already gone; declare task_acceptance: queue, a queue_depth of at least the "
        "delegations one turn issues, and after_task: sleep to receive them",
    )


def relocate_records(setup: SessionSetup) -> None:
    """Keep a delegated child's records in its own directory: ``<workdir>/.murmur/<ses_id>/``.

    The directory the session layer made under ``$MURMUR_HOME/records`` (still empty) is
    removed; its ancestors are left, since a sibling child may be creating its own beside it.

    Raises:
        DiagnosticError: ``E-IO-003`` when the directory cannot be made.
    """
    old = setup.records.root
    try:
        setup.records = create_records(setup.workdir / ".murmur" / setup.session_id)
    except OSError as exc:
        raise DiagnosticError(
            error("E-IO-003", f"the records directory cannot be made: {exc.strerror or exc}")
        ) from None
    for sub in ("out", "logs", "home", "tmp"):
        _rmdir(old / sub)
    _rmdir(old)  # its (possibly shared) ancestors stay: a sibling may be creating its own now


def _rmdir(path: Path) -> bool:
    try:
        os.rmdir(path)
    except OSError:
        return False
    return True


class PlanCompletions:
    """A plan workload that takes a ``completion``-origin task as a record, not a plan run.

    A plan is a fixed DAG: running it again for each delegation outcome would delegate again.
    The outcome task completes at once with a one-line summary (``delegation dlg_… (name@v)
    ended ok``); every other task runs the plan.
    """

    def __init__(self, inner: Workload) -> None:
        self.inner = inner

    async def run_task(self, ctx: TaskContext) -> TaskOutcome:
        """Summarise a completion; run the plan for anything else."""
        if ctx.origin != "completion":
            return await self.inner.run_task(ctx)
        return TaskOutcome("ok", completion_summary(ctx.text))


def completion_summary(text: str) -> str:
    """``delegation <id> (<name>@<version>) ended <status>`` from a completion's text."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return "a delegation ended (its completion could not be read)"
    line = (
        f"delegation {data.get('delegation_id', '?')} ({data.get('capsule_name', '?')}"
        f"@{data.get('capsule_version', '?')}) ended {data.get('status', 'unknown')}"
    )
    detail = data.get("detail")
    return line + (f": {detail}" if isinstance(detail, str) and detail else "")
