"""Under scoped and sealed, the tree's inference gateway port is granted into the namespace.

An agent CLI reaches its model at ``MURMUR_GATEWAY_ENDPOINT`` (spec/gateway.md "Addresses"),
a host loopback port; the egress proxy grants it (spec/containment.md) both as a direct
connect (the relay) and as a proxied request. Another loopback port stays refused (the
negative control inside), and under advisory both answer (the control outside).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trio
from tests.e2e.sandbox.conftest import backed

from murmur.assembly.sandboxing import granted_loopback_ports
from murmur.escape.runner import _stdlib
from murmur.manifest.model import Containment
from murmur.sandbox import compiled
from murmur.sandbox.installed import install, uninstall
from murmur.sandbox.policy import Policy
from murmur.shell import run_shell

pytestmark = pytest.mark.e2e

REACH = """
import socket, sys, urllib.request
for name, port in (("GATEWAY", int(sys.argv[1])), ("OTHER", int(sys.argv[2]))):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=3).close()
        print(name, "DIRECT-OK")
    except OSError as exc:
        print(name, "DIRECT-FAILED", exc)
    try:
        print(name, "GET", urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5).read().decode())
    except Exception as exc:
        print(name, "GET-FAILED", exc)
"""


def test_the_gateway_port_is_granted_beside_the_others() -> None:
    env = {"MURMUR_GATEWAY_ENDPOINT": "http://127.0.0.1:41000", "MURMUR_ROOST_URL": "http://127.0.0.1:7"}
    assert granted_loopback_ports(env) == (7, 41000)
    assert granted_loopback_ports({}) == ()


async def _server(body: bytes, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            try:
                await stream.receive_some(4096)
                await stream.send_all(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            except trio.BrokenResourceError:
                pass  # a bare connect closes at once

    await trio.serve_listeners(answer, listeners)


async def _reach(klass: Containment, tmp_path: Path, bin_dir: Path) -> tuple[str, list[str]]:
    work = tmp_path / f"work-{klass.value}"
    work.mkdir()
    refused: list[str] = []
    async with trio.open_nursery() as nursery:
        gateway = await nursery.start(_server, b"gateway")
        other = await nursery.start(_server, b"other")
        ports = granted_loopback_ports({"MURMUR_GATEWAY_ENDPOINT": f"http://127.0.0.1:{gateway}"})
        policy = Policy(klass=klass, workdir=str(work), allow=("python3",), search_path=str(bin_dir),
                        ro=_stdlib(str(bin_dir / "python3")), loopback_ports=ports)
        box = compiled.compile(policy)
        install(box)
        try:
            if box.confinement() is not None:
                nursery.start_soon(box.serve, lambda h, p, s: refused.append(f"{h}:{p}"))
            env = {"PATH": str(bin_dir), "HOME": str(work)}
            res = await run_shell(["python3", "-c", REACH, str(gateway), str(other)],
                                  allow=("python3",), cwd=work, env=env)
        finally:
            uninstall()
            nursery.cancel_scope.cancel()
    return res.stdout_text + res.stderr_text, refused


@pytest.mark.parametrize("klass", [Containment.SCOPED, Containment.SEALED], ids=lambda k: k.value)
async def test_the_gateway_port_is_reached_and_another_port_is_not(
    klass: Containment, tmp_path: Path, bin_dir: Path
) -> None:
    backed(klass)
    control, none = await _reach(Containment.ADVISORY, tmp_path, bin_dir)
    assert "GATEWAY DIRECT-OK" in control and "GATEWAY GET gateway" in control, control
    assert "OTHER DIRECT-OK" in control and "OTHER GET other" in control, control
    assert none == []
    out, refused = await _reach(klass, tmp_path, bin_dir)
    assert "GATEWAY DIRECT-OK" in out, out  # the relay inside the namespace
    assert "GATEWAY GET gateway" in out, out  # through HTTP_PROXY, granted by the proxy
    assert "OTHER DIRECT-FAILED" in out, out  # nothing listens there inside the namespace
    assert "OTHER GET-FAILED" in out and "403" in out, out  # the proxy refuses it
    assert len(refused) == 1 and refused[0].startswith("127.0.0.1:")
