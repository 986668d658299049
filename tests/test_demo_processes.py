"""The demo's line reader: whole lines, the last partial one, and a bound on unfinished lines."""

from __future__ import annotations

import trio
import trio.testing

from murmur.demo.processes import LineReader


async def _lines(chunks: list[bytes], limit: int) -> list[bytes]:
    send, receive = trio.testing.memory_stream_one_way_pair()
    out: list[bytes] = []
    reader = LineReader(receive, limit=limit)
    async with trio.open_nursery() as nursery:

        async def feed() -> None:
            for chunk in chunks:
                await send.send_all(chunk)
            await send.aclose()

        nursery.start_soon(feed)
        with trio.fail_after(5):
            while (line := await reader.line()) is not None:
                out.append(line)
    return out


async def test_lines_and_the_partial_last_one() -> None:
    assert await _lines([b"a\nb", b"c\n", b"tail"], limit=100) == [b"a", b"bc", b"tail"]


async def test_an_unfinished_line_comes_in_pieces_of_the_limit() -> None:
    """A child that never writes a newline is read in bounded pieces, not held whole."""
    assert await _lines([b"x" * 25, b"\nok\n"], limit=10) == [b"x" * 10, b"x" * 10, b"xxxxx", b"ok"]
