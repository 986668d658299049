"""Forged tokens always get the identity refusal, byte-identical on the wire (seed 000, Refusals).

The daemon runs in a thread (its own ``trio.run``) so hypothesis can drive many examples
against one server; each request goes over a raw socket so the comparison covers the status
line, every header and the body exactly as sent.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import socket
import threading
from collections.abc import Iterator
from functools import partial

import attrs
import httpx
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from murmur.roost.app import create_app, hypercorn_config, serve
from murmur.roost.ledger import Bounds
from murmur.tokens import ApprovalClaims, Keyring

from .conftest import IDENTITY, fake_registry

TOKEN_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."


@attrs.define
class Daemon:
    """A daemon in a background thread, with a running and a retired session."""

    port: int
    keys: Keyring
    running_cred: str = ""
    retired_cred: str = ""
    approval: str = ""
    counter: int = 0

    def raw(self, path: str, body: dict[str, object], header: tuple[str, str] | None) -> bytes:
        """Send one request on a fresh connection and return every byte of the response."""
        data = json.dumps(body).encode()
        head = [
            f"POST {path} HTTP/1.1",
            f"Host: 127.0.0.1:{self.port}",
            "Content-Type: application/json",
            f"Content-Length: {len(data)}",
            "Connection: close",
        ]
        if header is not None:
            head.append(f"{header[0]}: {header[1]}")
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + data)
            chunks = []
            while chunk := s.recv(65536):
                chunks.append(chunk)
        return b"".join(chunks)

    def spawn_with(self, credential: str | None) -> bytes:
        """POST /spawn presenting ``credential``."""
        h = ("x-murmur-spawn-credential", credential) if credential is not None else None
        return self.raw("/spawn", {"name": "worker-a", "version": "0.1.0"}, h)

    def deregister_with(self, credential: str | None) -> bytes:
        """POST /deregister presenting ``credential``."""
        h = ("x-murmur-spawn-credential", credential) if credential is not None else None
        return self.raw("/deregister", {"outcome": "complete"}, h)

    def register_with(self, approval: str) -> bytes:
        """POST /register presenting ``approval`` for a resolvable artifact."""
        self.counter += 1
        body = {"session_id": f"ses_forger_{self.counter}", "name": "worker-a", "version": "0.1.0"}
        return self.raw("/register", body, ("x-murmur-spawn-approval", approval))


@pytest.fixture(scope="module")
def daemon() -> Iterator[Daemon]:
    """One daemon for the module, stopped (and its thread joined) at the end."""
    keys = Keyring.generate()
    ready = threading.Event()
    box: dict[str, object] = {}

    async def main() -> None:
        app = create_app(bounds=Bounds(), spawn_allow=("orch",), registry=fake_registry(), keyring=keys)
        stop = trio.Event()
        box["token"], box["stop"] = trio.lowlevel.current_trio_token(), stop
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(partial(serve, app, hypercorn_config(0), stop.wait))
            box["port"] = int(binds[0].rsplit(":", 1)[1])
            ready.set()

    thread = threading.Thread(target=trio.run, args=(main,), daemon=True)
    thread.start()
    assert ready.wait(20)
    d = Daemon(int(str(box["port"])), keys)
    with httpx.Client(base_url=f"http://127.0.0.1:{d.port}") as c:
        for sid in ("ses_running", "ses_retired"):
            r = c.post("/register", json={"session_id": sid, "name": "orch", "version": "0.1.0"})
            assert r.status_code == 200
            setattr(d, sid.removeprefix("ses_") + "_cred", r.json()["credential"])
        h = {"x-murmur-spawn-credential": d.retired_cred}
        assert c.post("/deregister", json={"outcome": "complete"}, headers=h).status_code == 200
        h = {"x-murmur-spawn-credential": d.running_cred}
        r = c.post("/spawn", json={"name": "worker-a", "version": "0.1.0"}, headers=h)
        d.approval = r.json()["approval"]
    try:
        yield d
    finally:
        trio.from_thread.run_sync(box["stop"].set, trio_token=box["token"])  # type: ignore[attr-defined, arg-type]
        thread.join(20)


@pytest.fixture(scope="module")
def reference(daemon: Daemon) -> bytes:
    """The identity refusal exactly as the daemon sends it (no credential at all)."""
    return daemon.spawn_with(None)


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def seal(key: bytes, kind: str, payload: dict[str, object]) -> str:
    """A token in the daemon's format MAC'd under ``key``."""
    body = b64(json.dumps(payload, separators=(",", ":")).encode())
    return f"{kind}.{body}.{b64(hmac.new(key, f'{kind}.{body}'.encode(), hashlib.sha256).digest())}"


class TestReference:
    def test_reference_is_the_identity_refusal(self, reference: bytes) -> None:
        """The reference is a 403 with exactly content-type, content-length and the one body."""
        head, _, body = reference.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        assert lines[0].startswith(b"HTTP/1.1 403")
        names = sorted(line.split(b":")[0].lower() for line in lines[1:])
        assert names == [b"connection", b"content-length", b"content-type"]
        assert json.loads(body) == IDENTITY

    def test_existence_of_named_session_is_invisible(self, daemon: Daemon, reference: bytes) -> None:
        """A credential naming a retired session, one naming no session, and none at all: same bytes."""
        never = daemon.keys.mint_credential("ses_never_registered")
        for cred in (daemon.retired_cred, never, None, "", "msc1.x.y"):
            assert daemon.spawn_with(cred) == reference
            assert daemon.deregister_with(cred) == reference

    def test_register_identity_bytes(self, daemon: Daemon, reference: bytes) -> None:
        """Identity refusals at /register are the same bytes as at /spawn."""
        assert daemon.register_with(daemon.running_cred) == reference  # a credential as an approval
        foreign = Keyring.generate().mint_approval(
            ApprovalClaims("apr_1", "ses_running", "worker-a", "0.1.0", "00", 2, 2**62)
        )
        assert daemon.register_with(foreign) == reference


def mutations(daemon_keys: Keyring) -> st.SearchStrategy[tuple[str, str]]:
    """(endpoint, forged token) pairs: truncated, re-signed, kind-swapped, foreign-key, edited."""
    other = Keyring.generate()

    @st.composite
    def forged(draw: st.DrawFn) -> tuple[str, str]:
        cred = daemon_keys.mint_credential("ses_running")
        kind = draw(st.sampled_from(["truncate", "flip", "resign", "swap", "foreign", "edit", "junk"]))
        target = draw(st.sampled_from(["spawn", "deregister", "register"]))
        if kind == "truncate":
            token = cred[: draw(st.integers(0, len(cred) - 1))]
        elif kind == "flip":
            i = draw(st.integers(0, len(cred) - 1))
            ch = draw(st.sampled_from(TOKEN_CHARS).filter(lambda c, i=i: c != cred[i]))
            token = cred[:i] + ch + cred[i + 1 :]
        elif kind == "resign":
            key = draw(st.binary(min_size=1, max_size=64))
            token = seal(key, draw(st.sampled_from(["msc1", "msa1"])), {"v": 1, "s": "ses_running"})
        elif kind == "swap":  # the payload and MAC of one kind under the other kind's prefix
            token = ("msa1" if target != "register" else "msc1") + cred[4:]
            if target == "register":
                token = "msc1" + daemon_keys.mint_approval(
                    ApprovalClaims("apr_x", "ses_running", "worker-a", "0.1.0", "00", 1, 2**62)
                )[4:]
        elif kind == "foreign":
            token = other.mint_credential("ses_running") if target != "register" else other.mint_approval(
                ApprovalClaims("apr_1", "ses_running", "worker-a", "0.1.0", "00", 9, 2**62)
            )
        elif kind == "edit":  # a valid token whose payload was edited and re-encoded, MAC kept
            _, _, mac = cred.split(".")
            sid = draw(st.text(alphabet=TOKEN_CHARS[:62], min_size=1, max_size=40))
            token = f"msc1.{b64(json.dumps({'v': 1, 's': sid}, separators=(',', ':')).encode())}.{mac}"
            if target == "register":
                token = "msa1" + token[4:]
        else:
            token = draw(st.text(alphabet=TOKEN_CHARS, max_size=200))
        return target, token

    return forged()


class TestForgeryFuzz:
    @settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def test_forged_tokens_get_identical_identity_refusal(
        self, daemon: Daemon, reference: bytes, data: st.DataObject
    ) -> None:
        """Every forged token, on every endpoint, gets the reference bytes exactly."""
        target, token = data.draw(mutations(daemon.keys))
        if target == "spawn":
            got = daemon.spawn_with(token)
        elif target == "deregister":
            got = daemon.deregister_with(token)
        else:
            got = daemon.register_with(token)
        assert got == reference

    def test_genuine_tokens_still_work(self, daemon: Daemon) -> None:
        """Control: the running session's genuine credential is answered (not refused)."""
        got = daemon.spawn_with(daemon.running_cred)
        assert got.startswith(b"HTTP/1.1 200")
