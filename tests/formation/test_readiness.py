"""Tests of judging a peer's readiness line and its door's card."""

from __future__ import annotations

import json
from functools import partial

import hypercorn.config
import hypercorn.trio
import pytest
import trio
import trio.testing

from murmur import ids
from murmur.formation.launch import readiness
from murmur.formation.launch.readiness import (
    NO_DOOR,
    NO_FORMATION,
    NOT_A_READINESS_LINE,
    OTHER_FORMATION,
    HttpProbe,
    Report,
    card_session_id,
    parse_readiness_line,
)

FRM = ids.new_id("frm")
SES = ids.new_id("ses")


def line(**over: object) -> bytes:
    body: dict[str, object] = {"name": "w", "version": "1", "pid": 12, "session_id": SES,
                               "url": "127.0.0.1:4000", "workdir": "/w", "formation_id": FRM}
    for k, v in over.items():
        if v is None:
            body.pop(k)
        else:
            body[k] = v
    return json.dumps(body).encode()


class TestParse:
    def test_ok(self) -> None:
        """A readiness line gives the session, a normalised URL and the pid."""
        rep = parse_readiness_line(line(), FRM)
        assert rep == Report(SES, "http://127.0.0.1:4000", 12, FRM)

    def test_operator_token_kept_out_of_repr(self) -> None:
        """An authenticated door's operator token is kept for probing, never shown."""
        rep = parse_readiness_line(line(tokens={"operator": "mdt1.secret"}), FRM)
        assert isinstance(rep, Report) and rep.operator_token == "mdt1.secret"
        assert "secret" not in repr(rep)

    @pytest.mark.parametrize(
        ("raw", "reason"),
        [
            (b"hello", NOT_A_READINESS_LINE),
            (b"[1,2]", NOT_A_READINESS_LINE),
            (b"\xff\xfe", NOT_A_READINESS_LINE),
            (line(session_id=None), NOT_A_READINESS_LINE),
            (line(session_id="ses_nothex"), NOT_A_READINESS_LINE),
            (line(url=None), NO_DOOR),
            (line(url="  "), NO_DOOR),
            (line(formation_id=None), NO_FORMATION),
            (line(formation_id=ids.new_id("frm")), OTHER_FORMATION),
            (b"x" * (readiness.MAX_READINESS_LINE + 1), NOT_A_READINESS_LINE),
        ],
    )
    def test_refusals(self, raw: bytes, reason: str) -> None:
        """Each Readiness-list fault maps to its E-RUN-045 reason."""
        assert parse_readiness_line(raw, FRM) == reason

    @pytest.mark.parametrize(
        ("url", "want"),
        [("localhost:1", "http://localhost:1"), ("http://127.0.0.1:2/", "http://127.0.0.1:2")],
    )
    def test_normalise(self, url: str, want: str) -> None:
        """Bare host:port gains http://; a trailing slash goes."""
        assert readiness.normalise_url(url) == want


class TestCard:
    def test_capsule_extension(self) -> None:
        """The capsule extension's params.sessionId names the session."""
        card = {"capabilities": {"extensions": [
            {"uri": "https://d/#murmur-door-v1", "params": {"methods": []}},
            {"uri": "https://d/#murmur-capsule-v1", "params": {"sessionId": SES}}]}}
        assert card_session_id(card) == SES

    @pytest.mark.parametrize("card", [None, [], {}, {"capabilities": {}},
                                      {"capabilities": {"extensions": [{"params": {}}]}}])
    def test_no_session(self, card: object) -> None:
        """Anything else names no session."""
        assert card_session_id(card) is None


class TestWaitForDoor:
    async def test_probes_every_interval(self, autojump_clock: trio.testing.MockClock) -> None:
        """The door is probed every 100 ms until it answers as the reported session."""
        times: list[float] = []

        async def probe(rep: Report) -> str | None:
            await trio.lowlevel.checkpoint()
            times.append(trio.current_time())
            return SES if len(times) >= 5 else "ses_" + "0" * 32

        await readiness.wait_for_door(Report(SES, "http://x:1"), probe, interval=0.1)
        assert times == pytest.approx([0.0, 0.1, 0.2, 0.3, 0.4])


class TestHttpProbe:
    async def test_live_card(self) -> None:
        """A live door's card is read over HTTP; a closed port answers nothing."""

        async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
            if scope["type"] == "lifespan":
                while True:
                    msg = await receive()
                    await send({"type": msg["type"] + ".complete"})
                    if msg["type"] == "lifespan.shutdown":
                        return
            body = json.dumps({"capabilities": {"extensions": [
                {"uri": "x#murmur-capsule-v1", "params": {"sessionId": SES}}]}}).encode()
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": body})

        cfg = hypercorn.config.Config()
        cfg.bind = ["127.0.0.1:0"]
        cfg.accesslog = None
        stop = trio.Event()
        async with trio.open_nursery() as n:
            binds = await n.start(partial(hypercorn.trio.serve, app, cfg, shutdown_trigger=stop.wait,
                                          mode="asgi"))
            async with HttpProbe() as probe:
                assert await probe(Report(SES, binds[0])) == SES
                assert await probe(Report(SES, "http://127.0.0.1:1")) is None
            stop.set()
