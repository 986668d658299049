"""Hostile request bodies and connection reuse (issue 16): every one is a 400 or the
ordinary refusal, never a 500 and never a traceback."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from murmur.jsonbody import MAX_DEPTH, BodyError, decode_object, loggable
from murmur.roost.app import CREDENTIAL_HEADER

from .conftest import StartRoost


def every_field(value: bytes) -> bytes:
    """A body with ``value`` (raw JSON text) as every field any endpoint reads."""
    fields = ("name", "version", "session_id", "outcome")
    return b"{" + b",".join(b'"%s":%s' % (f.encode(), value) for f in fields) + b"}"


DEEP = b'{"name":' + b"[" * 10_000 + b"]" * 10_000 + b"}"  # 20 KB, under the 64 KiB cap
NAN = every_field(b"NaN")
INF = every_field(b"-Infinity")
SURROGATE = every_field(b'"\\ud800"')
BIG_INT = every_field(b"7" * 4301)


@pytest.fixture
def no_tracebacks(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """Records every log line the daemon writes; a test asserts none carries a traceback."""
    caplog.set_level(logging.DEBUG)
    return caplog


def assert_no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    tracebacks = [r for r in caplog.records if r.exc_info is not None]
    assert tracebacks == [], [r.getMessage() for r in tracebacks]


@pytest.mark.parametrize("path", ["/register", "/spawn", "/deregister"])
@pytest.mark.parametrize("content", [DEEP, NAN, INF, SURROGATE, BIG_INT], ids=["deep", "nan", "inf", "surrogate", "bigint"])
async def test_hostile_body_is_400(
    start_roost: StartRoost, no_tracebacks: pytest.LogCaptureFixture, path: str, content: bytes
) -> None:
    """10,000-deep nesting, NaN/Infinity, a lone surrogate, a 4,301-digit integer: 400 JSON."""
    roost = await start_roost()
    _, cred = await roost.root()
    r = await roost.client.post(path, content=content, headers={CREDENTIAL_HEADER: cred})
    assert r.status_code == 400, r.text
    assert set(r.json()) == {"error"}
    assert_no_traceback(no_tracebacks)


async def test_big_integer_is_a_non_string_field(start_roost: StartRoost) -> None:
    """A 4,301-digit integer is JSON: it is refused as any number in a string field is."""
    roost = await start_roost()
    r = await roost.client.post("/register", content=b'{"name":"orch","version":"0.1.0","session_id":' + b"7" * 4301 + b"}")
    assert (r.status_code, r.json()) == (400, {"error": "`session_id` is required and must be a string"})


async def test_surrogate_pair_is_a_name(start_roost: StartRoost) -> None:
    """A correctly paired surrogate escape is an ordinary character: the ordinary refusal."""
    roost = await start_roost(spawn_allow=["orch"])
    r = await roost.client.post("/register", content=b'{"name":"\\ud83d\\ude00","version":"0.1.0","session_id":"ses_y"}')
    assert r.status_code == 403
    assert r.json() == {"error": "capsule '\U0001f600' is not in --spawn-allow"}


async def test_413_says_connection_close(start_roost: StartRoost) -> None:
    """After a 413 the daemon says it closes, so a pooled client's next request succeeds."""
    roost = await start_roost()
    async with httpx.AsyncClient(base_url=roost.url, timeout=30.0) as pooled:
        assert (await pooled.get("/health")).status_code == 200
        r = await pooled.post("/register", content=b"{" + b" " * 70_000 + b"}")
        assert r.status_code == 413
        assert r.headers["connection"] == "close"
        assert r.json() == {"error": "request body too large"}
        assert (await pooled.get("/health")).status_code == 200


class TestDecodeObject:
    def test_depth_limit_is_exact(self) -> None:
        """MAX_DEPTH levels decode; one more is refused; brackets inside strings do not count."""
        inner = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
        assert decode_object(f'{{"a":{inner}}}'.encode())["a"] == json.loads(inner)
        with pytest.raises(BodyError, match="nested deeper"):
            decode_object(f'{{"a":[{inner}]}}'.encode())
        assert decode_object(b'{"a":"' + b"[" * 100 + b'\\"{"}') == {"a": "[" * 100 + '"{'}

    def test_not_utf8(self) -> None:
        with pytest.raises(BodyError, match="not UTF-8"):
            decode_object(b'{"a":"\xff"}')

    def test_not_object(self) -> None:
        with pytest.raises(BodyError, match="must be a JSON object"):
            decode_object(b"[1]")

    @pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
    def test_non_finite_literals_are_not_json(self, literal: str) -> None:
        with pytest.raises(BodyError, match=f"`{literal}` is not a JSON number"):
            decode_object(f'{{"a":{literal}}}'.encode())

    def test_long_integer_decodes(self) -> None:
        assert str(decode_object(b'{"a":' + b"9" * 5000 + b"}")["a"]) == "9" * 5000


async def test_echoed_name_is_cut(start_roost: StartRoost) -> None:
    """A 60,000-character name (under the 64 KiB cap) comes back cut at 200 characters with `…`."""
    roost = await start_roost(spawn_allow=["orch"])
    name = "n" * 60_000
    body = json.dumps({"name": name, "version": "0.1.0", "session_id": "ses_y"}).encode()
    r = await roost.client.post("/register", content=body)
    assert r.status_code == 403
    assert r.json() == {"error": "capsule '" + "n" * 199 + "…' is not in --spawn-allow"}


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("ses_01", "ses_01"),
        ("a/b\n../c", "a/b\\n../c"),  # a newline cannot forge a second log line
        ("x\x1b[31my", "x\\u001b[31my"),  # nor an escape sequence colour the terminal
    ],
)
def test_a_session_id_in_a_log_line_is_one_line(value: str, shown: str) -> None:
    """What mur-roost writes about a session id stays on one line, escaped and cut."""
    assert loggable(value) == shown
    long = loggable("s" * 60_000)
    assert len(long) == 200 and long.endswith("…") and "\n" not in loggable("\n" * 500)


def test_the_shortcuts_refuse_what_the_scans_refuse() -> None:
    """The nesting scan runs only past ``max_depth`` brackets and the surrogate walk only where
    one can hide: exactly at the bound passes, one past is refused, brackets inside strings
    do not count, and a str (not UTF-8 bytes) holding a lone surrogate is still refused."""
    at_bound = "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)
    assert decode_object('{"a":' + at_bound + "}")["a"]
    with pytest.raises(BodyError, match="nested deeper"):
        decode_object(('{"a":[' + at_bound + "]}").encode())
    assert decode_object(b'{"a":"' + b"[" * (2 * MAX_DEPTH) + b'"}')["a"] == "[" * (2 * MAX_DEPTH)
    with pytest.raises(BodyError, match="surrogate"):
        decode_object('{"a":"\ud800"}')
    with pytest.raises(BodyError, match="surrogate"):
        decode_object(b'{"a":"\\ud800"}')
    assert decode_object(b'{"a":"\\u00e9"}') == {"a": "\u00e9"}


async def test_a_body_sent_in_pieces_is_read_whole(start_roost: StartRoost) -> None:
    """A body still arriving when the handler runs is awaited, not taken half-read: the
    request answers as if it came in one piece (and an oversized one is still a 413)."""
    import trio
    import trio.testing

    roost = await start_roost()
    body = json.dumps({"session_id": roost.fresh_id(), "name": "orch", "version": "0.1.0"}).encode()
    head = (f"POST /register HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n\r\n").encode()
    async with await trio.open_tcp_stream("127.0.0.1", roost.port) as stream:
        await stream.send_all(head + body[:10])
        await trio.testing.wait_all_tasks_blocked()  # the handler waits for the rest
        await stream.send_all(body[10:])
        answer = b""
        with trio.fail_after(30):
            while b"credential" not in answer:
                chunk = await stream.receive_some(65536)
                assert chunk, answer
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 200"), answer
