"""The capability socket a session serves to its links (spec/links.md).

:func:`install_links` is called by the assembly (``capsule_links``) for a session whose manifest names
``capabilities.spawn.allow`` — also when its effective spawn set is empty (``--no-spawn``): the
socket and the links stay, and every name answers 126 (spec/links.md). It writes the links
directory (:mod:`murmur.links.stub`), records its ``bin/`` (first on the ``PATH`` of every
command, ``SessionSetup.links_bin``) and the ``mur context`` file on the setup as data, and returns
a :class:`~murmur.session.Contribution` holding the watcher :meth:`LinkService.serve`, which
listens on ``links/cap.sock`` for the session's life.

One connection = one request. The peer is checked first (:mod:`murmur.links.peer`); then the
request line is read (bounded) and answered. A ``link`` request delegates exactly as
``delegate-task`` does (``DelegationRuntime.delegate_call``, waiting for the child's answer);
closing the connection before the answer cancels the call, which ends the child's subtree in
one grace. A link's call takes the context and trust class of the session's task running now,
or else of the last one that ran (``SessionHandle.latest_task``, read from the session the watcher
is given). Every request writes one ``link_request`` trace record: who asked, which name, the
outcome. At most :data:`CONNECTIONS` connections are open at once; an excess one reads
:data:`murmur.links.protocol.TOO_MANY` and is closed.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from murmur import containment, paths, procstat, tracectx
from murmur.delegation import read_completion
from murmur.ids import new_id
from murmur.links import protocol as p
from murmur.links.context import CONTEXT_FILE, ContextFacts, context_text
from murmur.links.peer import Peer, check, peer_of
from murmur.links.stub import command_name, write_links
from murmur.links.terminal import terminal_on, tty_refusal
from murmur.session import Contribution, TraceWriteError
from murmur.tree import cut_caller, refusal_sentence, session_lineage

if TYPE_CHECKING:
    from murmur.delegation import DelegationRuntime
    from murmur.session import SessionHandle, SessionSetup, Task, WindDownControl

ROOST_DEFAULT_CONCURRENT = 4  # mur-roost's default --max-concurrent
CONNECTIONS = ROOST_DEFAULT_CONCURRENT + 4
READ_BOUND = 30.0  # seconds the request line may take to arrive
REFUSED_READ_BOUND = 2.0  # seconds a refused caller's request line is waited for before the refusal


def install_links(setup: SessionSetup, runtime: DelegationRuntime) -> Contribution | None:
    """Write ``setup``'s links and return the watcher that serves them.

    The links' ``bin/`` and the ``mur context`` file are written on ``setup`` as data
    (``links_bin``, ``links_context``; the sandbox contributor reads the first).

    Returns:
        Contribution | None: the :meth:`LinkService.serve` watcher, or None when the capsule
        names no capability to delegate (no ``capabilities.spawn.allow``).

    Raises:
        OSError: the links directory cannot be written.
    """
    spawn = tuple(session_lineage(setup).spawn)
    if runtime.launcher is None:
        return None
    service = LinkService(setup, runtime, spawn)
    setup.links_bin = write_links(service.links, setup.manifest.spawn_allow)
    context_file = service.links / CONTEXT_FILE
    context_file.write_text(service.context(), encoding="utf-8")
    os.chmod(context_file, 0o600)
    setup.links_context = context_file
    return Contribution(watchers=(service.serve,))


def installed_versions(name: str) -> list[str]:
    """Versions of ``name`` in the global store, sorted (any scope; a scoped ``local/kid`` in its own)."""
    store = paths.global_store()
    found: set[str] = set()
    try:
        for scope in [store / name.split("/", 1)[0]] if "/" in name else list(store.iterdir()):
            d = scope / name.rsplit("/", 1)[-1]
            if d.is_dir():
                found.update(v.name for v in d.iterdir() if v.is_dir() and not v.name.startswith("."))
    except OSError:
        pass
    return sorted(found)


def _cmdline(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [a.decode("utf-8", "replace") for a in raw.split(b"\0") if a]


def caller_args(pid: int) -> list[str]:
    """The link's calling command: 16 words, each cut to 200 characters (spec/links.md "Lineage").

    ``pid`` is the peer (the stub). The calling command is the stub's parent — the shell or
    program that ran the link — read from ``/proc/<ppid>/cmdline``; when that parent is this
    runtime itself (the stub was the command) or is gone, the peer's own command line
    (``/proc/<pid>/cmdline``). Empty when neither can be read.
    """
    ppid = procstat.parent_pid(pid)
    args = _cmdline(ppid) if ppid is not None and ppid not in (os.getpid(), 0, 1) else None
    if not args:
        args = _cmdline(pid) or []
    return cut_caller(args)


class LinkService:
    """The capability socket of one session (see the module docstring)."""

    def __init__(self, setup: SessionSetup, runtime: DelegationRuntime, spawn: tuple[str, ...]) -> None:
        self.setup = setup
        self.runtime = runtime
        self.spawn = spawn
        self.links = setup.records.root / "links"
        self.open = 0

    # -- text -------------------------------------------------------------------------------

    def context(self) -> str:
        """This session's ``mur context`` text."""
        lineage = session_lineage(self.setup)
        launcher = self.runtime.launcher
        facts = ContextFacts(
            name=self.setup.manifest.name,
            spawn=[(n, _description(n)) for n in self.spawn],
            depth=lineage.depth,
            watch_secs=launcher.bound if launcher is not None else 0,
            connections=CONNECTIONS,
            tree_total=self.runtime.caps.total,
            same_chain=self.runtime.caps.same_chain,
        )
        return context_text(facts)

    # -- serving ----------------------------------------------------------------------------

    async def serve(self, ctl: WindDownControl) -> None:
        """Watcher: listen on ``links/cap.sock`` until cancelled; the socket is removed after.

        Each request is answered for ``ctl.session`` (a link's call takes its latest task's
        context and trust)."""
        path = self.links / p.SOCKET_NAME
        sock = trio.socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        dirfd = os.open(self.links, os.O_RDONLY | os.O_DIRECTORY)
        try:
            path.unlink(missing_ok=True)
            await sock.bind(f"/proc/self/fd/{dirfd}/{p.SOCKET_NAME}")  # any records-path length
        finally:
            os.close(dirfd)
        os.chmod(path, 0o600)
        sock.listen(CONNECTIONS + 4)
        listener = trio.SocketListener(sock)
        try:
            async with trio.open_nursery() as nursery:
                while True:
                    stream = await listener.accept()
                    if self.open >= CONNECTIONS:
                        nursery.start_soon(_refuse_excess, stream)
                        continue
                    self.open += 1
                    nursery.start_soon(self._connection, stream, ctl.session)
        finally:
            path.unlink(missing_ok=True)
            sock.close()

    async def _connection(self, stream: trio.SocketStream, session: SessionHandle) -> None:
        try:
            peer = peer_of(stream.socket)  # type: ignore[arg-type]
            answer = await self._serve(stream, peer, session)
            if answer is not None:
                with trio.move_on_after(5.0):
                    await stream.send_all(answer.line())
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self.open -= 1
            with trio.CancelScope(shield=True):
                await stream.aclose()

    async def _serve(self, stream: trio.SocketStream, peer: Peer, session: SessionHandle) -> p.Answer | None:
        args = caller_args(peer.pid)
        verdict = check(peer, containment.here(), session_id=self.setup.session_id)
        if not verdict.allowed:
            self._trace(session, peer, args, None, p.EXIT_OUTSIDE, "caller_refused", verdict.why)
            await _drain_request(stream)
            return p.Answer(p.EXIT_OUTSIDE, stderr=f"murmur: link refused: {verdict.why}\n")
        try:
            with trio.fail_after(READ_BOUND):
                raw = await _read_line(stream)
            req = p.parse_request(raw)
        except (trio.TooSlowError, p.BadRequest) as exc:
            why = str(exc) or "the request did not arrive in time"
            hint = exc.hint if isinstance(exc, p.BadRequest) else None
            self._trace(session, peer, args, None, p.EXIT_USAGE, "bad_request", why)
            shown = f"murmur: {why}\n" + (f"  hint: {hint}\n" if hint else "")
            return p.Answer(p.EXIT_USAGE, stderr=shown)
        if req.op == "context":
            return p.Answer(p.EXIT_OK, stdout=self.context())
        if req.op == "ps":
            return p.Answer(p.EXIT_OK, stdout=await trio.to_thread.run_sync(self._tree_text, req.json))
        if req.op == "who":
            code, text = await trio.to_thread.run_sync(self._who, req.name or None, req.json)
            return p.Answer(code, stdout=text)
        outcome: list[p.Answer] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_cancel_on_eof, stream, nursery.cancel_scope)
            outcome.append(await self._link(req, args, peer.pid, session.latest_task))
            nursery.cancel_scope.cancel()
        if not outcome:  # the caller went away: the call was cancelled, its child ended
            self._trace(session, peer, args, req.name, p.EXIT_INTERRUPTED, "interrupted", "the link was interrupted")
            return None
        answer = outcome[0]
        self._trace(session, peer, args, req.name, answer.exit, answer.outcome or p.status_word(answer.exit, None),
                    answer.stderr.strip())
        return answer

    async def _link(self, req: p.LinkRequest, caller: list[str], peer_pid: int, task: Task | None) -> p.Answer:
        """One ``link`` request, delegated under ``task``'s context and trust (a new context,
        trusted, before the session's first task)."""
        name = req.name
        if name not in self.spawn:
            self.runtime.refuse(name, req.version or "", refusal_sentence(name))
            return p.Answer(p.EXIT_OUTSIDE, stderr=f"{name}: murmur: {refusal_sentence(name)}\n")
        terminal = terminal_on(peer_pid)
        if terminal is not None:
            sentence = tty_refusal(command_name(name))
            self.runtime.refuse(name, req.version or "", sentence)
            return p.Answer(p.EXIT_REFUSED, stderr=f"{command_name(name)}: murmur: {sentence}\n")
        version, refusal = p.pick_version(name, req.version, installed_versions(name))
        if refusal is not None or version is None:
            return p.Answer(p.EXIT_REFUSED, stderr=f"{name}: refused: {refusal}\n")
        context_id = task.context_id if task is not None else new_id("ctx")
        trust = task.trust if task is not None else "trusted"
        began = time.monotonic()
        token = tracectx.CURRENT.set(tracectx.parse(req.traceparent) or tracectx.CURRENT.get())
        try:  # the child and its first task name the calling command's span as their parent
            result = await self.runtime.delegate_call(name, version, req.task, True, context_id=context_id,
                                                      trust=trust, caller=caller)
        finally:
            tracectx.CURRENT.reset(token)
        launcher = self.runtime.launcher
        settled = req.json or result.get("status") != "completed"  # crashed / terminated need the record
        if settled and isinstance(result.get("delegation_id"), str) and launcher is not None:
            with trio.move_on_after(launcher.stop_grace + 5.0):  # the child's (or launcher's) completion record
                await launcher.wait_finished(result["delegation_id"])
        record = self._record(result)
        record_status = str(record["status"]) if record is not None and "status" in record else None
        code = p.exit_for(result, record_status)
        word = p.status_word(code, record_status)
        output = str(result.get("output") or "")
        took = f"{time.monotonic() - began:.1f}s"
        dlg = result.get("delegation_id")
        where = f" ({dlg}, {took})" if dlg else ""
        if req.json:
            doc = record if record is not None else dict(result)
            stdout = json.dumps(doc, sort_keys=True) + "\n"
        else:
            stdout = output + ("\n" if output and not output.endswith("\n") else "") if code == p.EXIT_OK else ""
        stderr = f"{name}: {word}{where}\n" if code == p.EXIT_OK else f"{name}: {word}{where}: {output}\n"
        return p.Answer(code, stdout=stdout, stderr=stderr, outcome=word)

    def _record(self, result: dict[str, Any]) -> dict[str, Any] | None:
        dlg = result.get("delegation_id")
        entry = self.runtime.book.get(dlg) if isinstance(dlg, str) else None
        if entry is None:
            return None
        return read_completion(self.setup.workdir / entry.child_workdir)

    def _tree_text(self, as_json: bool = False) -> str:
        """This session's subtree: the ``mur ps --tree`` text, or its ``--json`` document."""
        from murmur.tree import Scoped, find, load_forest, render_text, to_json

        node = find(load_forest(), self.setup.session_id)
        nodes = (node,) if node is not None else ()
        if as_json:
            return json.dumps(to_json(nodes)) + "\n"
        now = int(time.time() * 1000)
        return render_text(Scoped(nodes, 0), now) + "\n"

    def _who(self, can: str | None, as_json: bool) -> tuple[int, str]:
        """``mur agent who`` asked from inside: this session's own routes, ready ones only
        (a capsule is never shown a blocked route; spec/routing.md), under its effective spawn set."""
        from murmur.links.who import session_who

        return session_who(self.setup.manifest.name, self.spawn, can, as_json, project_dir=self.setup.workdir)

    def _trace(self, session: SessionHandle, peer: Peer, args: list[str], name: str | None, code: int,
               outcome: str, detail: str) -> None:
        try:
            session.trace.emit("link_request", parent_id=session.session_event_id, pid=peer.pid,
                               caller=args, capsule=name, exit=code, outcome=outcome, detail=detail or None)
        except TraceWriteError:
            pass


def _description(name: str) -> str:
    from murmur.delegation import resolve_global

    versions = installed_versions(name)
    if len(versions) != 1:
        return ""
    found = resolve_global(name, versions[0])
    return (found.manifest.description or "") if found is not None else ""


async def _read_line(stream: trio.SocketStream) -> bytes:
    data = bytearray()
    while b"\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            break
        data += chunk
        if len(data) > p.REQUEST_LIMIT:
            raise p.BadRequest(
                "the request is longer than 1 MiB; nothing was started",
                hint="write the long text to a file in the workdir and name the file in a short task",
            )
    return bytes(data).split(b"\n", 1)[0]


async def _drain_request(stream: trio.SocketStream) -> None:
    """Read (and drop) a refused caller's request line, bounded, so the refusal is answered to
    a caller that has finished writing: closing with its request unread would break its write."""
    with trio.move_on_after(REFUSED_READ_BOUND):
        try:
            await _read_line(stream)
        except (p.BadRequest, trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass


async def _cancel_on_eof(stream: trio.SocketStream, scope: trio.CancelScope) -> None:
    """The caller closed its end (interrupted): cancel the request."""
    try:
        while await stream.receive_some(4096):
            pass
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    scope.cancel()


async def _refuse_excess(stream: trio.SocketStream) -> None:
    await _drain_request(stream)
    with trio.move_on_after(2.0):
        try:
            await stream.send_all((p.TOO_MANY + "\n").encode())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
    with trio.CancelScope(shield=True):
        await stream.aclose()
