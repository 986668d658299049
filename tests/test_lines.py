"""Tests of the one line reader launchers use on a child's stdout and stderr."""

from __future__ import annotations

import trio
import trio.testing

from murmur.lines import read_lines


class TestReadLines:
    async def test_split_across_chunks(self) -> None:
        """Lines are split on newlines wherever the chunks happen to break."""
        send, receive = trio.testing.memory_stream_one_way_pair()
        out: list[bytes] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_lines, receive, out.append, lambda: 100)
            for chunk in (b"al", b"pha\nbe", b"ta\n\ngam", b"ma"):
                await send.send_all(chunk)
                await trio.testing.wait_all_tasks_blocked()
            await send.aclose()
        assert out == [b"alpha", b"beta", b"", b"gamma"]

    async def test_long_unfinished_line_is_handed_on(self) -> None:
        """An unfinished line over the limit is handed on as it stands; the rest starts anew."""
        send, receive = trio.testing.memory_stream_one_way_pair()
        out: list[bytes] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_lines, receive, out.append, lambda: 4)
            await send.send_all(b"abcdef")
            await trio.testing.wait_all_tasks_blocked()
            await send.send_all(b"gh\nij")
            await trio.testing.wait_all_tasks_blocked()
            await send.aclose()
        assert out == [b"abcdef", b"gh", b"ij"]

    async def test_limit_is_asked_each_time(self) -> None:
        """The bound may change once a first line is taken (the readiness-line case)."""
        send, receive = trio.testing.memory_stream_one_way_pair()
        out: list[bytes] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read_lines, receive, out.append, lambda: 100 if not out else 2)
            await send.send_all(b"first-line-longer-than-two\n")
            await trio.testing.wait_all_tasks_blocked()
            await send.send_all(b"xyz")
            await trio.testing.wait_all_tasks_blocked()
            await send.aclose()
        assert out == [b"first-line-longer-than-two", b"xyz"]

    async def test_closed_stream_ends_quietly(self) -> None:
        """A stream closed under the reader ends it without an error."""
        send, receive = trio.testing.memory_stream_one_way_pair()
        out: list[bytes] = []
        await send.send_all(b"partial")
        await receive.aclose()
        await read_lines(receive, out.append, lambda: 100)
        assert out == []
