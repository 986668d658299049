"""A session's own hook events: ``on-stage``, ``on-session-start``, ``on-session-end``, and
the session failure a failed ``on-compaction`` causes (spec/components.md "Hooks").

:class:`SessionHooks` belongs to an agent workload with hook artifacts. The composition root
calls :meth:`SessionHooks.start` once the door serves (before readiness; the hooks are made
then, one host per hook for the whole session) and :meth:`SessionHooks.end` after the last
task (before ``session_end``); it winds the session down ``failed`` once :attr:`failed` is set.

* ``on-stage`` (blocking hooks only) gets ``shell-allow``; its ``write-manifests`` arm writes
  ``<records>/tools/<binary-name>/murmur.yaml`` (a name that is not one path segment is logged
  to the hook's log and skipped). The inventory does not read these files here.
* An ``async`` hook's events are queued (:meth:`HookHost.queue`) and taken by its worker
  (:meth:`SessionHooks.serve`, a session watcher); at the end the queues are closed and drained
  within :data:`DRAIN_BUDGET` (:data:`END_BUDGET` in a wind-down), as upstream.
* ``on-session-start`` gets the session context (``capabilities``: ``network``, ``filesystem``,
  ``shell`` as granted, upstream's names); ``on-session-end`` the launch totals (turns, tokens,
  tool and shell calls of every task), ``duration-ms`` and ``exit-status`` (the
  ``session_end.exit_status``). Neither commits an arm; an ``err`` goes to the hook's log and the
  session goes on. ``on-session-end`` is bounded by :data:`END_BUDGET` during a wind-down, so a
  hook never holds up the 20 s wind-down.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import trio

from murmur.agent.hooked import fire
from murmur.workload import TaskContext, Usage

__all__ = ["END_BUDGET", "SessionHooks", "capability_names"]

END_BUDGET = 5.0
"""Seconds ``on-session-end`` (and the async hooks' drain) may take when the session is winding down."""
DRAIN_BUDGET = 15.0
"""Seconds the async hooks' queues have, together, to finish at the session's end (upstream's)."""


def capability_names(ctx: TaskContext) -> list[str]:
    """``session-context.capabilities``: ``network``, ``filesystem``, ``shell`` when granted."""
    m = ctx.manifest
    fs = m.capabilities.filesystem if m.capabilities else None
    names = ["network"] if m.network_allow else []
    if fs is not None and getattr(fs, "scope", None):
        names.append("filesystem")
    if m.shell_allow:
        names.append("shell")
    return names


class HookedWorkload(Protocol):
    """What the session-level events need of the agent workload
    (:class:`murmur.agent.agent_workload.AgentWorkload` is one): its hook hosts for a context."""

    def hooks_for(self, ctx: TaskContext) -> list[object]: ...


class SessionHooks:
    """The session-level side of an agent workload's hooks (see the module docstring).

    Attributes:
        totals (Usage): every task's counters, added as each task ends.
        failed (trio.Event): set when ``on-compaction`` failed: the session must end ``failed``.
        failure (str | None): why.
    """

    def __init__(self, workload: HookedWorkload) -> None:
        self.workload = workload
        self.ctx: TaskContext | None = None
        self.totals = Usage()
        self.failed = trio.Event()
        self.failure: str | None = None
        self._started = time.monotonic()
        self._queued: list[Any] = []
        self._ready = trio.Event()

    def add(self, usage: Usage) -> None:
        """Add one task's counters to the launch totals."""
        for name in ("turns", "input_tokens", "output_tokens", "tool_calls", "shell_calls"):
            setattr(self.totals, name, getattr(self.totals, name) + getattr(usage, name))

    def fail(self, reason: str) -> None:
        """The session must end ``failed`` (a failed ``on-compaction``)."""
        if self.failure is None:
            self.failure = reason
        self.failed.set()

    async def start(self, ctx: TaskContext) -> None:
        """Make the hooks and fire ``on-stage`` then ``on-session-start`` (``ctx``: the session's
        own context, an empty ``task_id``, records parented on ``session_start``)."""
        self.ctx = ctx
        self._started = time.monotonic()
        hosts: list[Any] = self.workload.hooks_for(ctx)
        self._queued = [h for h in hosts if h.queue()]
        self._ready.set()
        for answer in await fire(hosts, ctx, "on-stage", {"shell-allow": list(ctx.manifest.shell_allow)}):
            if answer.committed and answer.arm == "write-manifests":
                _write_manifests(ctx, answer, hosts)
        m = ctx.manifest
        await fire(hosts, ctx, "on-session-start", {
            "capsule-name": m.name, "capsule-version": m.version, "session-id": ctx.session_id,
            "model": (m.inference.model if m.inference else None) or "", "capabilities": capability_names(ctx)})

    async def end(self, exit_status: str, *, winding_down: bool) -> None:
        """Fire ``on-session-end`` with the launch totals (bounded during a wind-down)."""
        if self.ctx is None:
            return
        t = self.totals
        fields = {"total-turns": t.turns, "total-input-tokens": t.input_tokens,
                  "total-output-tokens": t.output_tokens, "total-tool-calls": t.tool_calls,
                  "total-shell-calls": t.shell_calls, "duration-ms": int((time.monotonic() - self._started) * 1000),
                  "exit-status": exit_status}
        drain_by = trio.current_time() + (END_BUDGET if winding_down else DRAIN_BUDGET)
        with trio.move_on_after(END_BUDGET if winding_down else float("inf")):
            await fire(self.workload.hooks_for(self.ctx), self.ctx, "on-session-end", fields)
        for host in self._queued:
            host.close()
        with trio.move_on_at(drain_by):
            for host in self._queued:
                await host.drained.wait()
        for host in self._queued:
            if not host.drained.is_set():
                host.note(f"hook `{host.component.name}` did not finish its queued lifecycle calls within the "
                          "session-end drain budget; the remaining calls were abandoned")

    async def serve(self) -> None:
        """Run the async hooks' workers for the session's life (a session watcher)."""
        await self._ready.wait()
        async with trio.open_nursery() as nursery:
            for host in self._queued:
                nursery.start_soon(host.serve)


def _write_manifests(ctx: TaskContext, answer: Any, hosts: list[Any]) -> None:
    host = next((h for h in hosts if h.component.name == answer.hook), None)
    for manifest in answer.value or []:
        name = str(manifest.get("binary-name", ""))
        if not name or "/" in name or name in (".", "..") or name.startswith("."):
            if host is not None:
                host.note(f"on-stage: write-manifests names `{name}`, which is not one path segment; skipped")
            continue
        target = ctx.records_dir / "tools" / name / "murmur.yaml"
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(str(manifest.get("content", "")), encoding="utf-8")
        except OSError as exc:
            if host is not None:
                host.note(f"on-stage: failed to write the manifest for {name}: {exc}")

