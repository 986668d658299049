"""Network under scoped and sealed: the egress proxy is the only way out (issue 25).

Real commands through :func:`murmur.shell.run_shell` with a compiled sandbox installed: an
allowed loopback server named by ``network.allow`` answers through ``HTTP_PROXY``; a direct
connect to an ungranted loopback port and a request for an ungranted host name are refused,
the latter reported (the session turns it into a ``sandbox_refused`` record naming the host).
Each refusal beside its advisory control.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from tests.e2e.sandbox.conftest import backed

from murmur.escape.runner import _stdlib
from murmur.manifest.model import Containment
from murmur.sandbox import compiled
from murmur.sandbox.installed import install, uninstall
from murmur.sandbox.policy import Policy
from murmur.shell import run_shell

pytestmark = pytest.mark.e2e

FETCH = """
import os, sys, urllib.request, socket
url, port = sys.argv[1], int(sys.argv[2])
try:
    print("GET", urllib.request.urlopen(url, timeout=5).read().decode())
except Exception as exc:
    print("GET-FAILED", exc)
try:
    socket.create_connection(("127.0.0.1", port), timeout=3).close()
    print("DIRECT-OK")
except OSError as exc:
    print("DIRECT-FAILED", exc)
try:
    urllib.request.urlopen("http://ungranted.invalid/", timeout=5)
    print("NAME-OK")
except Exception as exc:
    print("NAME-FAILED", exc)
"""


async def _server(body: bytes, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            await stream.receive_some(4096)
            await stream.send_all(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    await trio.serve_listeners(answer, listeners)


async def _scoped_server(body: bytes, scope: trio.CancelScope,
                         task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """:func:`_server` inside ``scope`` (cancelled to drop a port that will not do)."""
    with scope:
        await _server(body, task_status=task_status)


async def _fetch(klass: Containment, tmp_path: Path, bin_dir: Path) -> tuple[str, list[str]]:
    work = tmp_path / f"work-{klass.value}"
    work.mkdir()
    refused: list[str] = []
    async with trio.open_nursery() as nursery:
        allowed = await nursery.start(_server, b"allowed")
        policy = Policy(klass=klass, workdir=str(work), allow=("python3",), search_path=str(bin_dir),
                        ro=_stdlib(str(bin_dir / "python3")),
                        network_allow=(f"http://127.0.0.1:{allowed}",))
        box = compiled.compile(policy)
        # The ungranted port is a host port the namespace does not hold. The namespace's own
        # proxy listens on a port the kernel picked inside it, from the same range as the host's
        # (bind(0) with SO_REUSEADDR: odd ports in the lower half, about 7,000), so a host port
        # can carry its number by chance -- then the direct connect would reach the proxy, not
        # the host. One loaded run met that; the server is restarted until the numbers differ.
        inside = box.proxy_url
        while True:
            scope = trio.CancelScope()
            ungranted = await nursery.start(_scoped_server, b"ungranted", scope)
            if inside is None or not inside.endswith(f":{ungranted}"):
                break
            scope.cancel()
        install(box)
        try:
            if box.confinement() is not None:
                nursery.start_soon(box.serve, lambda h, p, s: refused.append(h))
            env = {"PATH": str(bin_dir), "HOME": str(work)}
            res = await run_shell(["python3", "-c", FETCH, f"http://127.0.0.1:{allowed}/", str(ungranted)],
                                  allow=("python3",), cwd=work, env=env)
        finally:
            uninstall()
            nursery.cancel_scope.cancel()
    return res.stdout_text + res.stderr_text, refused


@pytest.mark.parametrize("klass", [Containment.SCOPED, Containment.SEALED], ids=lambda k: k.value)
async def test_only_the_proxy_leads_out(klass: Containment, tmp_path: Path, bin_dir: Path) -> None:
    backed(klass)
    control, none = await _fetch(Containment.ADVISORY, tmp_path, bin_dir)
    assert "GET allowed" in control and "DIRECT-OK" in control and none == []
    out, refused = await _fetch(klass, tmp_path, bin_dir)
    assert "GET allowed" in out, out  # the loopback server network.allow names, through the proxy
    assert "DIRECT-FAILED" in out, out  # an ungranted loopback port: nothing there in the namespace
    assert "NAME-FAILED" in out and "403" in out, out  # an ungranted host name: the proxy refuses
    assert refused == ["ungranted.invalid"]
