"""Wiring an agent workload's session-level hook events into the session (spec/components.md
"Hooks"): ``on-stage`` and ``on-session-start`` as a start hook (the door serves, readiness
not yet reported), ``on-session-end`` as an end hook (every task ended, ``session_end`` not yet
written), and a watcher that winds the session down ``failed`` once a failed ``on-compaction``
says so (:class:`murmur.agent.lifecycle.SessionHooks`), returned as one
:class:`~murmur.session.Contribution` (:func:`session_hooks`). Nothing for a workload without
hook artifacts.
"""

from __future__ import annotations

from typing import Any

from murmur.errors import DiagnosticError
from murmur.session import Contribution, SessionSetup, WindDown
from murmur.workload import TaskContext, TaskServices

__all__ = ["session_hooks"]


def session_context(setup: SessionSetup, session: Any) -> TaskContext:
    """The session's own context for its hook events: no task, records parented on
    ``session_start``, and the formation callees the member may call (its components'
    ``MURMUR_FORMATION_PEERS``)."""
    trace = session.trace
    return TaskContext(
        session_id=setup.session_id, task_id="", context_id="", text="", origin="system", trust="trusted",
        manifest=setup.manifest, capsule_root=setup.capsule_root, workdir=setup.workdir,
        records_dir=setup.records.root, trace=trace, task_event_id=getattr(trace, "session_event_id", None) or "",
        shell_env={}, services=TaskServices(callees=tuple(setup.running_fields.get("callees") or ())),
        formation_id=setup.formation_id)


def session_hooks(setup: SessionSetup, workload: object) -> Contribution | None:
    """The start hook, end hook, failure watcher and hook workers of ``workload.session_hooks``
    (None when the workload has none)."""
    hooks = getattr(workload, "session_hooks", None)
    if hooks is None:
        return None

    async def start(session: Any) -> None:
        try:
            await hooks.start(session_context(setup, session))
        except Exception as exc:  # a hook this host cannot make (ComponentFault): the launch is refused
            diagnostic = getattr(exc, "diagnostic", None)
            if diagnostic is None:
                raise
            raise DiagnosticError(diagnostic) from None

    async def end(summary: Any) -> None:
        await hooks.end(summary.status, winding_down=summary.wind_down is not None)

    async def workers(ctl: Any) -> None:
        await hooks.serve()

    async def watch(ctl: Any) -> None:
        await hooks.failed.wait()
        reason = hooks.failure or "the compaction hook failed"
        ctl.trigger(WindDown("compaction", reason, reason, busy_status="failed", status="failed"))

    return Contribution(start_hooks=(start,), end_hooks=(end,), watchers=(watch, workers))
