"""What a session is built from, and what its extension points may do (spec/session.md
"Extension points").

:class:`SessionSetup` is filled before :meth:`murmur.session.session.Session.run` (by
:func:`murmur.assembly.prepare` and the session contributors). The extension points:

* ``watchers``: coroutine functions ``f(ctl: WindDownControl)`` run for the session's life;
  call ``ctl.trigger(WindDown(...))`` to wind the session down (lifelines, spawner handles).
* ``start_hooks``: ``await f(session)`` once the door serves, before readiness is reported; a
  ``DiagnosticError`` refuses the launch (e.g. registering with mur-roost).
* ``end_hooks``: ``await f(summary)`` after every task has ended, before the door closes and
  ``session_end`` is written (e.g. posting a delegated child's completion).
* ``token_verifiers``: extra bearer-token kinds for an authenticated door (``mft1.``).
* ``completion_handler``: decides completion-origin requests (delegation).
* ``services``: builds each task's :class:`TaskServices` (delegate-task, call-member).
* ``trace_start_fields`` / ``readiness_fields``: extra ``session_start`` fields and readiness
  line keys (``formation_id`` …).
* ``lineage``: the session's place in the process tree (spec/tree.md), written into
  ``session_start``, the readiness line and the running record; ``delegation_counts``
  (``started``/``refused``) go into ``session_end`` and the running record.
* ``wind_down_hooks``: ``f(reason)`` called synchronously when the wind-down begins (the
  cascade); ``after_end``: ``f(summary)`` called synchronously once ``session_end`` is written.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from murmur import timing
from murmur.diagnostics import Diagnostic
from murmur.manifest import Containment, Manifest
from murmur.session.auth import TokenVerifier
from murmur.session.completion_hook import CompletionHandler
from murmur.session.lifecycle import Policy
from murmur.session.records import Records
from murmur.session.tasks.book import Task
from murmur.session.winddown import WindDown, forced_exit
from murmur.workload import TaskServices, Workload

if TYPE_CHECKING:
    from murmur.session.trace import TraceWriter


@attrs.frozen
class SessionSummary:
    """How a session ended (given to end hooks and returned by :meth:`Session.run`).

    Attributes:
        session_id (str): ``ses_…``.
        status (str): ``session_end.exit_status`` (``ok``, ``failed``, ``canceled``,
            ``formation_ended``, ``deadline_reached`` …).
        exit_code (int): the process exit status (0 for ``ok``/``formation_ended``, else 1).
        diagnostic (Diagnostic | None): printed at exit (``E-RUN-040``, ``E-RUN-053``,
            ``E-RUN-007``); None when the session ended ok.
        records_dir (Path): the records directory.
        result_path (Path | None): ``out/result.txt`` when written.
        duration_ms (int): session duration.
        wind_down (WindDown | None): the trigger, when one fired.
        reason (str | None): the deciding task's failure text (its ``out/result.txt`` message)
            when ``diagnostic`` is ``E-RUN-040`` and the workload gave one; else None.
        answer (str | None): the launch task's answer when it completed (printed even when
            ``out/result.txt`` could not be written).
    """

    session_id: str
    status: str
    exit_code: int
    diagnostic: Diagnostic | None
    records_dir: Path
    result_path: Path | None
    duration_ms: int
    wind_down: WindDown | None = None
    reason: str | None = None
    answer: str | None = None


class SessionHandle(Protocol):
    """The narrow face of a running session that its hooks and watchers see (a
    :class:`murmur.session.session.Session` is one; spec/session.md "Extension points")."""

    @property
    def session_id(self) -> str: ...

    @property
    def trace(self) -> TraceWriter: ...

    @property
    def url(self) -> str | None: ...

    @property
    def session_event_id(self) -> str | None: ...

    @property
    def wind_down_reason(self) -> WindDown | None: ...

    @property
    def closing(self) -> bool: ...

    @property
    def deadline_at(self) -> float | None: ...

    @property
    def latest_task(self) -> Task | None: ...

    def wind_down(self, reason: WindDown) -> None: ...

    def note_delegations(self) -> None: ...


class WindDownControl:
    """What a watcher may do: start the wind-down (first trigger wins)."""

    def __init__(self, session: SessionHandle) -> None:
        self._session = session

    def trigger(self, reason: WindDown) -> None:
        """Wind the session down for ``reason`` (ignored when already winding down)."""
        self._session.wind_down(reason)

    @property
    def winding_down(self) -> bool:
        """Whether a wind-down has started."""
        return self._session.wind_down_reason is not None

    def deadline_within(self, slack: float) -> bool:
        """Whether the session's ``--deadline`` has fallen, or falls within ``slack`` seconds.

        Read on the Trio clock against the moment the session converted once at start; False
        without a deadline. A formation member asks it with :data:`murmur.timing.DEADLINE_EOF_SLACK`
        when its lifeline closes (spec/formation.md "What the session gets").
        """
        at = self._session.deadline_at
        return at is not None and trio.current_time() >= at - slack

    @property
    def session(self) -> SessionHandle:
        """The session (read its ``session_id``, ``url``, ``trace``)."""
        return self._session


Watcher = Callable[[WindDownControl], Awaitable[None]]
StartHook = Callable[[SessionHandle], Awaitable[None]]
EndHook = Callable[[SessionSummary], Awaitable[None]]
ServicesFactory = Callable[[Task], TaskServices]


@attrs.define
class SessionSetup:
    """Everything a session needs, gathered before it starts (see the module docstring).

    Attributes:
        manifest (Manifest): the capsule's manifest.
        capsule_root (Path): directory holding the capsule's files.
        workdir (Path): the work folder (shell cwd), absolute.
        session_id (str): ``ses_…``.
        records (Records): the records directory (already created).
        policy (Policy): the effective lifecycle.
        workload (Workload): the plan executor or agent loop.
        task_text (str | None): the ``--task`` text (the launch task).
        deadline (float | None): the ``--deadline`` moment, Unix seconds.
        formation_id (str | None): ``frm_…`` when a formation member.
        parent_env (Mapping[str, str]): the process environment (shell baseline source).
        guard (float | None): seconds from a wind-down trigger to the forced 143 exit;
            None disables the guard (in-process tests).
        exit_fn (Callable[[int], None]): the forced exit (tests replace it).
        bind (str): the door's bind address.
        keepalive (float): seconds of stream silence before a ``: keepalive`` comment.
        containment (Containment): the class the session's commands run at
            (spec/containment.md); advisory unless a floor, flag or parent raised it.
        running_fields (dict[str, Any]): extra fields of the running record (what the
            session started from, ``murmur.routing.profile``; the formation member).
        delegation_bound_secs (int): the delegation bound, resolved once by the composition
            root (:func:`murmur.timing.delegation_bound`); by default the manifest's
            ``lifecycle.delegation_deadline_secs``. It bounds a child's watch, a plan's
            ``capsule``/``member`` step and a member's call (spec/architecture.md "Deadlines").
    """

    manifest: Manifest
    capsule_root: Path
    workdir: Path
    session_id: str
    records: Records
    policy: Policy
    workload: Workload
    task_text: str | None = None
    deadline: float | None = None
    formation_id: str | None = None
    parent_env: Mapping[str, str] = attrs.field(factory=lambda: dict(os.environ))
    guard: float | None = timing.WIND_DOWN_GUARD
    exit_fn: Callable[[int], None] = forced_exit
    bind: str = "127.0.0.1:0"
    keepalive: float = timing.SSE_KEEPALIVE
    watchers: list[Watcher] = attrs.field(factory=list)
    start_hooks: list[StartHook] = attrs.field(factory=list)
    end_hooks: list[EndHook] = attrs.field(factory=list)
    token_verifiers: list[TokenVerifier] = attrs.field(factory=list)
    completion_handler: CompletionHandler | None = None
    services: ServicesFactory | None = None
    trace_start_fields: dict[str, Any] = attrs.field(factory=dict)
    containment: Containment = Containment.ADVISORY
    readiness_fields: dict[str, Any] = attrs.field(factory=dict)
    workload_kind: str = "plan"
    running_fields: dict[str, Any] = attrs.field(factory=dict)
    lineage: dict[str, Any] | None = None
    spawn_narrowings: tuple[Any, ...] = ()
    delegation_counts: dict[str, int] = attrs.field(factory=lambda: {"started": 0, "refused": 0})
    delegation_bound_secs: int = attrs.field(
        default=attrs.Factory(lambda self: int(self.manifest.lifecycle.delegation_deadline_secs), takes_self=True))
    wind_down_hooks: list[Callable[[WindDown], None]] = attrs.field(factory=list)
    after_end: list[Callable[[SessionSummary], None]] = attrs.field(factory=list)
    links_bin: Path | None = None  # capsule links, first on every command's PATH (spec/links.md)
    links_context: Path | None = None  # the `mur context` file an agent reads (spec/links.md)
    launch_context_id: str | None = None  # the local task's context (`--context`/`--resume`; spec/conversations.md)
