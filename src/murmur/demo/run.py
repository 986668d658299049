"""One demo run: start everything in order, follow it, stop everything, report.

:func:`demo` is the whole run as an async function (tests call it); :func:`run_demo` wraps it
for the command line with signal handling.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TextIO

import trio

from murmur import procs, tracectx
from murmur.demo.commands import (
    child_environment,
    desk_command,
    formation_command,
    install_command,
    mur_binary,
    parse_roost_port,
    rerun_script,
    roost_binary,
    roost_command,
)
from murmur.demo.layout import (
    CAPSULE_DIRS,
    CHILD,
    DESK,
    DESK_URL_ENV,
    ENTRY,
    DemoOptions,
    DemoOutcome,
    Layout,
    copy_example,
    prepare_layout,
    resolve_target,
    task_text,
)
from murmur.demo.processes import Child, LineReader, drain, relay
from murmur.demo.progress import Say, TraceFollower, signal_name
from murmur.demo.sweep import kill_tree, process_table, session_pids
from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.exitstatus import shell_status
from murmur.stderr import say

_INSTALL_OUTPUT = 1 << 20  # bytes of an install's output kept (its stderr is the failure's text)


class _StartFailed(Exception):
    def __init__(self, what: str, detail: str) -> None:
        super().__init__(what)
        self.what = what
        self.detail = detail


async def _why_not_ready(child: Child, otherwise: str) -> str:
    """Why a child did not report: its exit status when it ends within a moment, else ``otherwise``."""
    with trio.move_on_after(2.0):
        return f"it exited with status {await child.process.wait()}"
    return otherwise


class DemoRun:
    """The state of one demo run (processes, ids, progress); made by :func:`demo`."""

    def __init__(self, options: DemoOptions, layout: Layout, target: Path, environ: Mapping[str, str],
                 out: TextIO, err: TextIO) -> None:
        self.options = options
        self.timers = options.timers
        self.layout = layout
        self.target = target
        self.out = out
        self.err = err
        self.say = Say(err)
        self.env = child_environment(environ, layout, Path(sys.executable).parent)
        # one trace for the whole run: the check desk, the formation and the child join it
        joined = tracectx.from_env(environ)
        self.trace = tracectx.SpanContext(joined.trace_id if joined else tracectx.new_trace_id(), tracectx.new_span_id())
        self.env[tracectx.ENV] = self.trace.traceparent
        self.mur = mur_binary()
        self.children: list[Child] = []
        self.outcome = DemoOutcome(status=1, layout=layout)
        self.traces = TraceFollower(self.say, self._on_record)
        self.watchdog: procs.OwnedProcess | None = None
        self.watch_fd: int | None = None
        self.launcher: Child | None = None
        self.work_scope = trio.CancelScope()
        self.signum: int | None = None
        self.failure: _StartFailed | None = None
        self.keep = options.keep or options.home is not None

    # -- bookkeeping

    def _on_record(self, label: str, record: dict[str, Any]) -> None:
        if record.get("event_type") == "delegation_start" and label == DESK:
            child_sid = record.get("child_session_id")
            rel = record.get("child_workdir")
            if isinstance(child_sid, str) and isinstance(rel, str):
                child_dir = (self.layout.desk_workdir / rel).resolve()
                self.outcome.sessions[CHILD] = child_sid
                self.outcome.child_dir = child_dir
                self.traces.follow(child_dir / ".murmur" / child_sid / "trace.jsonl", f"{CHILD} (child)")

    def _tell_watchdog(self, line: str) -> None:
        if self.watch_fd is None:
            return
        try:
            os.write(self.watch_fd, line.encode() + b"\n")
        except OSError:
            pass

    async def _spawn(self, label: str, argv: list[str], env: Mapping[str, str], *,
                     stderr_prefix: str, nursery: trio.Nursery) -> Child:
        """Start ``argv`` in a new session (its own process group), stdout piped to us and
        stderr relayed behind ``stderr_prefix``; tell the watchdog its group."""
        proc = await procs.open_process(argv, label=label, env=env, contained=False)
        child = Child(label, proc)
        self.children.append(child)
        self.outcome.pids[label] = proc.pid
        self._tell_watchdog(f"+{proc.pid}")
        nursery.start_soon(relay, proc.stderr, stderr_prefix, self.err)
        return child

    async def start_watchdog(self) -> None:
        """Start the watchdog process (see :func:`murmur.demo.watchdog.watchdog_main`)."""
        read_fd, write_fd = os.pipe()
        try:
            remove = None if self.keep else str(self.layout.base)
            code = ("import sys; from murmur.demo.watchdog import watchdog_main; "
                    f"sys.exit(watchdog_main({read_fd}, {self.timers.watchdog_grace!r}, "
                    f"{str(self.layout.home)!r}, {remove!r}))")
            self.watchdog = await procs.open_process(
                [sys.executable, "-c", code], label="watchdog", env=self.env, pass_fds=(read_fd,),
                stdout=None, stderr=None, contained=False)
        except BaseException:
            os.close(write_fd)
            raise
        finally:
            os.close(read_fd)
        self.watch_fd = write_fd

    async def stop_watchdog(self) -> None:
        """Tell the watchdog the demo ended in order, and reap it."""
        if self.watch_fd is not None:
            self._tell_watchdog("done")
            os.close(self.watch_fd)
            self.watch_fd = None
        if self.watchdog is not None:
            with trio.move_on_after(5):
                await self.watchdog.wait()
            if self.watchdog.returncode is None:
                self.watchdog.kill()
                await self.watchdog.wait()

    # -- phases

    async def install(self) -> None:
        """Build and install every example capsule into the private home (concurrently)."""
        t0 = time.monotonic()
        failures: list[str] = []

        async def one(name: str) -> None:
            cmd = install_command(self.mur, self.layout.project / name)
            result = await procs.run_process(cmd, env=self.env, cap=_INSTALL_OUTPUT, contained=False)
            if result.returncode != 0:
                failures.append(result.stderr.decode("utf-8", "replace").strip() or f"`{shlex.join(cmd)}` failed")

        async with trio.open_nursery() as n:
            for name in CAPSULE_DIRS:
                n.start_soon(one, name)
        if failures:
            raise DiagnosticError(error("E-DMO-002", "the example capsules could not be installed:\n" + "\n".join(failures)))
        names = ", ".join(f"local/audit-{d}" for d in CAPSULE_DIRS)
        self.say(f"built and installed {len(CAPSULE_DIRS)} capsules ({names}) in {time.monotonic() - t0:.1f}s")

    async def start_roost(self, nursery: trio.Nursery) -> str:
        """Start mur-roost on a free port; return its base URL."""
        child = await self._spawn("mur-roost", roost_command(roost_binary(), self.layout), self.env,
                                  stderr_prefix="[mur-roost] ", nursery=nursery)
        assert child.process.stdout is not None
        reader = LineReader(child.process.stdout)
        port: int | None = None
        with trio.move_on_after(self.timers.startup):
            while (raw := await reader.line()) is not None:
                port = parse_roost_port(raw)
                if port is not None:
                    break
        if port is None:
            raise _StartFailed("mur-roost", await _why_not_ready(child, "it printed no `listening on` line"))
        nursery.start_soon(drain, reader)
        self.say(f"mur-roost listening on 127.0.0.1:{port} (pid {child.pid}), admitting one top-level "
                 f"capsule: --spawn-allow {DESK}")
        return f"http://127.0.0.1:{port}"

    async def start_desk(self, nursery: trio.Nursery, roost_url: str) -> str:
        """Start the check desk; return its door's URL."""
        env = {**self.env, "MURMUR_ROOST_URL": roost_url}
        child = await self._spawn(DESK, desk_command(self.mur, self.layout), env,
                                  stderr_prefix=f"[{DESK}] ", nursery=nursery)
        assert child.process.stdout is not None
        reader = LineReader(child.process.stdout)
        ready: dict[str, Any] | None = None
        with trio.move_on_after(self.timers.startup):
            raw = await reader.line()
            if raw is not None:
                try:
                    parsed = json.loads(raw)
                except ValueError:
                    parsed = None
                ready = parsed if isinstance(parsed, dict) else None
        if ready is None or not isinstance(ready.get("url"), str):
            raise _StartFailed("the check desk", await _why_not_ready(child, "its first line was not a readiness line"))
        nursery.start_soon(drain, reader)
        sid = str(ready.get("session_id"))
        self.outcome.sessions[DESK] = sid
        records = ready.get("records_dir")
        if isinstance(records, str):
            self.traces.follow(Path(records) / "trace.jsonl", DESK)
        self.say(f"check desk {DESK} up outside the formation: session {sid} at {ready['url']} "
                 "(public loopback door; it may delegate)")
        return str(ready["url"])

    async def run_formation(self, nursery: trio.Nursery, desk_url: str) -> int:
        """Run the formation to its end; return the launcher's exit status (shell form)."""
        env = {**self.env, DESK_URL_ENV: desk_url}
        cmd = formation_command(self.mur, self.layout, self.target)
        self.say(f"launching the formation: mur run --roster {self.layout.project} --task {shlex.quote(task_text(self.target))}")
        child = await self._spawn("launcher", cmd, env, stderr_prefix="", nursery=nursery)
        self.launcher = child
        self.say(f"formation launcher: pid {child.pid}")
        assert child.process.stdout is not None
        reader = LineReader(child.process.stdout)
        while (raw := await reader.line()) is not None:
            try:
                line = json.loads(raw)
            except ValueError:
                continue
            if isinstance(line, dict):
                self._formation_line(line)
        code = await child.process.wait()
        self._tell_watchdog(f"-{child.pid}")
        if code < 0:
            self.say(f"the formation launcher was killed by {signal_name(-code)}")
        return shell_status(code)

    def _formation_line(self, line: dict[str, Any]) -> None:
        if "formation_id" in line and "peers" in line:
            self.outcome.formation_id = str(line["formation_id"])
            self.say(f"formation {line['formation_id']} launched; entry member {line.get('entry')} starts last")
            for peer in line.get("peers") or []:
                if not isinstance(peer, dict):
                    continue
                name, sid = str(peer.get("name")), str(peer.get("session_id"))
                self.outcome.sessions[name] = sid
                self.say(f"member {name} up: session {sid}, pid {peer.get('pid')}, door {peer.get('url')}")
                workdir = peer.get("workdir")
                if isinstance(workdir, str):
                    self.traces.follow(self.layout.records_dir(Path(workdir), sid) / "trace.jsonl", name)
        elif "session_id" in line:
            sid = str(line["session_id"])
            self.outcome.sessions[ENTRY] = sid
            self.say(f"entry member {ENTRY} up: session {sid}, task {task_text(self.target)!r}")
            records = line.get("records_dir")
            if isinstance(records, str):
                self.outcome.report_path = Path(records) / "out" / "result.txt"
                self.traces.follow(Path(records) / "trace.jsonl", ENTRY)

    async def follow_traces(self) -> None:
        """Poll the followed traces for progress lines until cancelled."""
        while True:
            self.traces.poll()
            await trio.sleep(self.timers.poll)

    async def stop_all(self) -> None:
        """Stop every child still running, in order: the launcher, then the desk and mur-roost."""
        grace = {"launcher": self.timers.launcher_stop, DESK: self.timers.desk_stop,
                 "mur-roost": self.timers.roost_stop}
        launcher = [c for c in self.children if c.label == "launcher"]
        others = [c for c in self.children if c.label != "launcher"]
        for c in launcher:
            if c.running:
                self.say("stopping the formation (SIGTERM to its launcher)")
            await c.stop(grace["launcher"])
            self._tell_watchdog(f"-{c.pid}")

        async def stop(c: Child) -> None:
            await c.stop(grace.get(c.label, 10.0))
            self._tell_watchdog(f"-{c.pid}")

        if any(c.running for c in others):
            self.say("stopping the check desk and mur-roost")
        async with trio.open_nursery() as n:
            for c in others:
                n.start_soon(stop, c)

    def kill_all_now(self) -> set[int]:
        """SIGKILL, at once, every process the demo started and every process those started.

        The seeds are the demo's own children (mur-roost, the desk, the launcher, an install
        still running; not the watchdog) and the sessions named by running records under the
        private home (the formation's members and the delegated child lead groups of their
        own); :func:`murmur.demo.sweep.kill_tree` freezes the whole tree before killing it, so
        nothing forks or writes in between. Returns the pids killed.
        """
        me = os.getpid()
        watchdog = self.watchdog.pid if self.watchdog is not None else -1
        seeds = {c.pid for c in self.children if c.running}
        seeds |= {pid for pid, info in process_table().items() if info.ppid == me and pid != watchdog}
        seeds |= session_pids(self.layout.home)
        return kill_tree(seeds, exclude={watchdog})

    def interrupt(self, signum: int) -> bool:
        """Stop the run in order because of ``signum``; False when it was already stopping."""
        if self.signum is not None:
            return False
        self.signum = signum
        self.work_scope.cancel()
        return True

    def abandon(self) -> None:
        """The second signal: SIGKILL every process now, end the watchdog, then drop a
        temporary directory (last, so that nothing is left to write into it again)."""
        killed = self.kill_all_now()
        if self.watch_fd is not None:
            self._tell_watchdog("done")
        if self.watchdog is not None:
            try:
                self.watchdog.kill()
            except OSError:
                pass
        n = len(killed)
        self.say(f"second signal: killed every process the demo started ({n} process{'' if n == 1 else 'es'} still ran)")
        if not self.keep:
            shutil.rmtree(self.layout.base, ignore_errors=True)

    async def launch_all(self) -> None:
        """mur-roost, then the desk, then the formation; everything is stopped on the way out."""
        async with trio.open_nursery() as relays:
            try:
                roost_url = await self.start_roost(relays)
                desk_url = await self.start_desk(relays, roost_url)
                async with trio.open_nursery() as watching:
                    watching.start_soon(self.follow_traces)
                    self.outcome.status = await self.run_formation(relays, desk_url)
                    watching.cancel_scope.cancel()
            except _StartFailed as exc:
                self.failure = exc
            finally:
                with trio.CancelScope(shield=True):
                    await self.stop_all()
                    self.traces.poll()
                # Let the relays print the last lines of processes that are gone, briefly.
                relays.cancel_scope.deadline = trio.current_time() + 1.0


async def demo(options: DemoOptions, *, out: TextIO, err: TextIO,
               environ: Mapping[str, str] | None = None,
               started: Callable[[DemoRun], None] | None = None) -> DemoOutcome:
    """Run the demo once (see the module docstring); returns with every process reaped.

    Args:
        options (DemoOptions): what to do.
        out (TextIO): where the report (or the ``--json`` line) goes.
        err (TextIO): where progress goes.
        environ (Mapping[str, str] | None): the environment to start from (default ``os.environ``).
        started (Callable | None): called with the run's state as soon as it exists; its
            :meth:`DemoRun.interrupt` stops the run in order (signal handlers use it).

    Returns:
        DemoOutcome: status, report, ids and paths. An interrupted run has status
        ``128 + signal``.

    Raises:
        DiagnosticError: ``E-IO-001`` (no such directory to audit), ``E-DMO-001`` (``--home``
        holds something else), ``E-DMO-002`` (installs, mur-roost or the desk failed).
    """
    target = resolve_target(options.target)
    layout, _ = prepare_layout(options.home)
    keep = options.keep or options.home is not None
    run = DemoRun(options, layout, target, os.environ if environ is None else environ, out, err)
    try:
        if started is not None:
            started(run)
        run.say(f"auditing {target}")
        run.say(f"demo directory: {layout.base} ({'kept' if keep else 'removed at the end; --keep leaves it'})")
        t0 = time.monotonic()
        with run.work_scope:
            try:
                copy_example(layout)
                await run.start_watchdog()
                await run.install()
                await run.launch_all()
            finally:
                with trio.CancelScope(shield=True):
                    await run.stop_all()
                    await run.stop_watchdog()
        if run.failure is not None:
            raise DiagnosticError(error(
                "E-DMO-002", f"{run.failure.what} did not come up: {run.failure.detail}",
                hint="its own lines above say why"))
        if run.signum is not None:
            run.outcome.status = 128 + run.signum
        run.outcome.kept = keep
        if keep:
            _write_page(run)
        _finish(run, time.monotonic() - t0)
        if keep and not options.json:
            run.say(f"kept {layout.base}; to run it again by hand:")
            for line in rerun_script(layout, target):
                run.say(f"  {line}")
        if options.json:
            _emit(json.dumps(run.outcome.summary()), out)
        return run.outcome
    finally:
        if not keep:
            shutil.rmtree(layout.base, ignore_errors=True)


def _emit(text: str, stream: TextIO) -> None:
    """One block on stdout; a reader that went away (``mur demo | head``) is not an error."""
    say(text, stream)


def _finish(run: DemoRun, elapsed: float) -> None:
    outcome, say = run.outcome, run.say
    path = outcome.report_path
    if path is not None:
        try:
            outcome.report = path.read_text(encoding="utf-8")
        except OSError:
            outcome.report = None
    if run.signum is not None:
        say(f"interrupted by {signal_name(run.signum)}; every process the demo started is stopped")
    if outcome.report is not None and not run.options.json:
        _emit(outcome.report.rstrip("\n"), run.out)
    if path is not None and outcome.report is not None:
        say(f"report: {path}" + ("" if outcome.kept else " (removed with the demo directory; --keep leaves it)"))
    elif run.signum is None:
        say("no report was written")
    if outcome.page is not None:
        say(f"trace page: {outcome.page.resolve().as_uri()} (the tree, its timeline and a summary)")
    elif not outcome.kept:
        say("trace page: --keep writes one (mur trace view)")
    say(f"status {outcome.status} after {elapsed:.1f}s")


def _write_page(run: DemoRun) -> None:
    """The run's trace page in the kept demo directory (spec/trace.md "The page"); a page that
    cannot be made is one line, never a failed demo."""
    frm = run.outcome.formation_id
    if frm is None:
        return
    from murmur.observe import views

    try:
        run.outcome.page = views.write_page(frm, run.layout.home / "tree" / "journal.jsonl",
                                            run.layout.base / "trace.html")
    except (DiagnosticError, OSError) as exc:
        run.say(f"no trace page: {exc}")


def run_demo(options: DemoOptions, *, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``mur demo`` from the command line: run :func:`demo` under signal handling.

    The first SIGINT, SIGTERM or SIGHUP stops the run in order (the formation first, then the
    desk and mur-roost); a second one SIGKILLs every process group the demo started and exits
    ``128 + signal`` at once.

    Returns:
        int: the formation's exit status (``128 + signal`` when interrupted).

    Raises:
        DiagnosticError: as :func:`demo`.
    """
    out_stream = out or sys.stdout
    err_stream = err or sys.stderr

    async def main() -> int:
        runs: list[DemoRun] = []
        pending: list[int] = []

        def started(run: DemoRun) -> None:
            runs.append(run)
            for signum in pending:
                run.interrupt(signum)

        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async with trio.open_nursery() as n:

                async def watch() -> None:
                    async for signum in signals:
                        if not runs:
                            pending.append(int(signum))
                        elif not runs[0].interrupt(int(signum)):
                            runs[0].abandon()
                            os._exit(128 + int(signum))

                n.start_soon(watch)
                try:
                    outcome = await demo(options, out=out_stream, err=err_stream, started=started)
                finally:
                    n.cancel_scope.cancel()
        return outcome.status

    try:
        return trio.run(main)
    except BaseExceptionGroup as group:
        diagnostic = _lone_diagnostic(group)
        if diagnostic is None:
            raise
        raise diagnostic from None


def _lone_diagnostic(group: BaseExceptionGroup[BaseException]) -> DiagnosticError | None:
    """The one :class:`DiagnosticError` a nursery wrapped in exception groups, or None."""
    leaves: list[BaseException] = []

    def walk(exc: BaseException) -> None:
        if isinstance(exc, BaseExceptionGroup):
            for e in exc.exceptions:
                walk(e)
        elif not isinstance(exc, trio.Cancelled):
            leaves.append(exc)

    walk(group)
    if len(leaves) == 1 and isinstance(leaves[0], DiagnosticError):
        return leaves[0]
    return None
