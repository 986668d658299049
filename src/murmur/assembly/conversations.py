"""The conversation side of ``mur run``: ``--context``, ``--resume``, ``--resume-mode`` and the
record store a session writes to (spec/conversations.md).

:func:`check_flags` runs first (before the capsule is resolved); :func:`stage` runs once the
manifest is known and before the records directory exists, so each refusal below leaves
nothing behind:

| code | when |
|---|---|
| ``E-RUN-015`` | ``--resume`` with ``--context`` |
| ``E-RUN-039`` | ``--forget-session`` under a transport other than ``process`` |
| ``E-RUN-037`` | ``--resume-mode compact`` under ``transport: process`` |
| ``E-CNV-001`` | ``--resume`` names no session (or several) |
| ``E-RUN-016`` | the named session ran no task with a context id |
| ``E-RUN-018`` | ``--resume-mode compact``: no hook can receive ``on-compaction`` (none has that binding or none) |
| ``E-RUN-017`` | the context has no record (record off, no inference block, no harness entry, no file) |

The resume refusals come in upstream's order: the session is resolved (``E-CNV-001``,
``E-RUN-016``), then ``compact`` is checked (``E-RUN-037``, ``E-RUN-018``), then the record
(``E-RUN-017``).
| ``E-RUN-036`` | (process) the agent CLI no longer holds the session the map names (the map is kept) |
| ``E-CAP-011`` | ``--context`` or ``context.record_store`` is not one path segment |
| ``E-CNV-002`` | ``--forget-session`` with ``--resume``, or without ``--context`` |
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from murmur.conversation.record import RecordStore, check_segment, conversations_root
from murmur.conversation.resume import first_context, resolve_session_dir
from murmur.diagnostics import error
from murmur.errors import DiagnosticError, UsageError
from murmur.manifest import Manifest
from murmur.manifest.model import Conversation, RecordMode, Transport
from murmur.session import Contribution, SessionSetup
from murmur.stderr import say

if TYPE_CHECKING:
    from murmur.agent.harness.sessions import HarnessMap

__all__ = ["Staged", "check_flags", "make_reporter", "stage"]


@attrs.frozen
class Staged:
    """What the conversation flags decided.

    Attributes:
        context_id (str | None): the launch task's context (``--context`` or resolved).
        resumed_from (str | None): the records directory ``--resume`` resolved to.
        store (RecordStore | None): where messages are recorded (None: not recorded).
        threaded (bool): ``lifecycle.conversation: threaded``.
        forget (bool): ``--forget-session`` (process transport).
        harness (HarnessMap | None): the context → CLI session map (process transport).
        forgotten (str | None): the CLI session ``--forget-session`` dropped.
        compact (bool): ``--resume-mode compact`` of a resumed context.
    """

    context_id: str | None = None
    resumed_from: str | None = None
    store: RecordStore | None = None
    threaded: bool = False
    forget: bool = False
    harness: HarnessMap | None = None
    forgotten: str | None = None
    compact: bool = False


def check_flags(context: str | None, resume: str | None, forget: bool) -> None:
    """Refuse flag combinations before anything is resolved.

    Raises:
        UsageError: ``E-RUN-015`` (``--resume`` with ``--context``), ``E-CNV-002``
            (``--forget-session`` with ``--resume`` or without ``--context``).
    """
    if resume is not None and context is not None:
        raise UsageError(error("E-RUN-015", "--resume and --context cannot be combined: --resume finds its own context",
                               hint="give --resume SESSION to continue a session, or --context ID to name a context"))
    if forget and (resume is not None or context is None):
        raise UsageError(error("E-CNV-002", "--forget-session needs --context and cannot be combined with --resume",
                               hint="run `mur run --context ID --forget-session` to start that context afresh"))


def make_reporter(bootstrap_log: Callable[[], Path | None]) -> Callable[[str], None]:
    """A ``report`` for :class:`RecordStore`: the line on stderr and in ``logs/bootstrap.log``."""

    def report(line: str) -> None:
        say(line)
        path = bootstrap_log()
        if path is not None:
            try:
                with path.open("a", encoding="utf-8") as fh:
                    fh.write(line + "\n")
            except OSError:
                pass

    return report


def _record_name(manifest: Manifest) -> str:
    block = manifest.context
    if block is not None and block.record_store is not None:
        return check_segment(block.record_store, "context.record_store")
    return manifest.name


def _no_record(ctx: str, why: str) -> DiagnosticError:
    return DiagnosticError(error("E-RUN-017", f"context {ctx} has no conversation record to resume: {why}",
                                 hint="resume a session whose capsule records its conversation, or start anew"))


def stage(
    manifest: Manifest,
    *,
    context: str | None,
    resume: str | None,
    resume_mode: str,
    forget: bool,
    workdir_records: Path,
    records_root: Path,
    cwd: Path,
    report: Callable[[str], None],
    home: Path | None = None,
    compaction_hook: bool = False,
) -> Staged:
    """Check the conversation flags against the manifest and build the record store.

    Args:
        manifest (Manifest): the capsule.
        context (str | None): ``--context``.
        resume (str | None): ``--resume`` (``@1`` when given bare).
        resume_mode (str): ``full`` | ``compact``.
        forget (bool): ``--forget-session``.
        workdir_records (Path): this work folder's records (``records/<work folder>``).
        records_root (Path): ``$MURMUR_HOME/records``.
        cwd (Path): for a relative ``--resume`` path.
        report (Callable[[str], None]): where record failures are told (once).
        home (Path | None): ``$MURMUR_HOME`` (default: the environment's).
        compaction_hook (bool): a hook can receive ``on-compaction`` (``compact`` needs one).

    Raises:
        DiagnosticError: the codes in the module table.
    """
    inf = manifest.inference
    process = inf is not None and inf.transport is Transport.PROCESS
    if forget and not process:
        raise DiagnosticError(error("E-RUN-039", "--forget-session applies only to transport: process (an agent CLI's own session)",
                                    hint="drop --forget-session; to start a context afresh, give a new --context"))
    if context is not None:
        check_segment(context, "--context")
    block = manifest.context
    recording = inf is not None and not process and not (block is not None and block.record is RecordMode.OFF)
    record = _record_name(manifest)
    store = RecordStore(conversations_root(home), record, manifest.name, report) if recording else None
    threaded = manifest.lifecycle.conversation is Conversation.THREADED
    harness: HarnessMap | None = None
    if process and inf is not None:  # the agent side is imported only for an agent CLI capsule
        import shlex

        from murmur.agent.harness.choose import STDIO, protocol_name
        from murmur.agent.harness.sessions import HarnessMap

        proto = protocol_name(shlex.split(inf.command or "") or [""], inf.protocol)
        if proto != STDIO and (threaded or resume is not None or forget):
            harness = HarnessMap(conversations_root(home), record, proto, report)
    resumed_from: str | None = None
    if resume is not None:
        session_dir = resolve_session_dir(resume, folder=workdir_records, records_root=records_root, cwd=cwd)
        found = first_context(session_dir)
        if found is None:
            raise DiagnosticError(error("E-RUN-016", f"session {session_dir.name} ran no task with a context id, so there is nothing to resume",
                                        hint="resume a session that ran at least one task"))
        context, resumed_from = found, str(session_dir)
        if resume_mode == "compact" and process:
            raise DiagnosticError(error("E-RUN-037", "--resume-mode compact does not apply to transport: process: the agent CLI keeps its own history",
                                        hint="drop --resume-mode compact (the CLI resumes its session in full)"))
        if resume_mode == "compact" and not compaction_hook:
            raise DiagnosticError(error("E-RUN-018", "--resume-mode compact needs a hook bound to on-compaction; this capsule declares none",
                                        hint="resume with --resume-mode full (the default), or declare a hook artifact that receives on-compaction"))
        if inf is None:
            raise _no_record(found, "the capsule has no inference: block (plans keep no conversation)")
        if process:
            entry = harness.entry(found) if harness is not None else None
            if harness is None or entry is None:
                raise _no_record(found, "transport: process keeps no record, and no agent CLI session is mapped to it")
            if not harness.holds(found):
                raise DiagnosticError(error(
                    "E-RUN-036", f"the agent CLI no longer holds the session context {found} maps to ({entry['session_id']})",
                    hint=f"start the context afresh: `mur run --context {found} --forget-session`"))
            return Staged(context_id=found, resumed_from=str(session_dir), threaded=threaded, harness=harness)
        if block is not None and block.record is RecordMode.OFF:
            raise _no_record(found, "context.record is off")
        assert store is not None
        if not store.exists(found):
            raise _no_record(found, f"{store.directory / found} holds no conversation.jsonl")
    keep = block.retain.max_messages if block is not None and block.retain is not None else None
    if store is not None and context is not None and keep is not None:
        store.keep_newest(context, keep)
    forgotten = harness.forget(context) if forget and harness is not None and context is not None else None
    return Staged(context_id=context, resumed_from=resumed_from, store=store, threaded=threaded, forget=forget,
                  harness=harness, forgotten=forgotten, compact=resumed_from is not None and resume_mode == "compact")


def expire(store: RecordStore | None, manifest: Manifest, keep: str | None) -> list[str]:
    """``context.retain.max_age``: remove this capsule's stale records (at launch)."""
    block = manifest.context
    if store is None or block is None or block.retain is None or block.retain.max_age is None:
        return []
    return store.expire(block.retain.max_age, keep=keep)


def apply(setup: SessionSetup, workload: object, staged: Staged) -> Contribution | None:
    """Hand the staged conversation to the workload and the session.

    ``session_start``'s ``resumed_from`` / ``context_id`` are written on ``setup`` as data.

    Returns:
        Contribution | None: the start hooks writing ``harness_session_forgotten`` and
        ``retention`` (in that order), or None when neither has anything to write.
    """
    use = getattr(workload, "use_conversations", None)
    if use is not None:
        from murmur.agent.thread import Conversations

        load = staged.context_id if staged.resumed_from is not None else None
        use(Conversations(store=staged.store, threaded=staged.threaded, load_context=load, harness=staged.harness,
                          compact=staged.compact))
    if staged.resumed_from is not None:
        setup.trace_start_fields["resumed_from"] = staged.resumed_from
        setup.trace_start_fields["context_id"] = staged.context_id
    hooks: list[Callable[[object], Awaitable[None]]] = []
    if staged.forget:
        async def trace_forgotten(session: object) -> None:
            trace = getattr(session, "trace", None)
            if trace is not None:
                trace.emit("harness_session_forgotten", parent_id=getattr(session, "session_event_id", None),
                           context=staged.context_id, dropped=staged.forgotten, requested_by="cli")

        hooks.append(trace_forgotten)
    removed = expire(staged.store, setup.manifest, staged.context_id)
    if removed:
        async def trace_retention(session: object) -> None:
            trace = getattr(session, "trace", None)
            if trace is not None:
                trace.emit("retention", parent_id=getattr(session, "session_event_id", None),
                           store="records", removed=len(removed))

        hooks.append(trace_retention)
    return Contribution(start_hooks=tuple(hooks)) if hooks else None
