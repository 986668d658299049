"""Tests of lifeline validation and the EOF watcher (contract sheet section 9)."""

from __future__ import annotations

import os
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing

from murmur.errors import DiagnosticError
from murmur.lifeline import claim_lifeline, lifeline_problem, wait_for_eof


@pytest.fixture
def fds() -> Iterator[list[int]]:
    """File descriptors a test opened; closed at the end."""
    opened: list[int] = []
    yield opened
    for fd in opened:
        try:
            os.close(fd)
        except OSError:
            pass


def refuse(value: str) -> str:
    with pytest.raises(DiagnosticError) as info:
        claim_lifeline(value, var="MURMUR_FORMATION_LIFELINE", code="E-RUN-046")
    assert info.value.code == "E-RUN-046"
    assert str(info.value).startswith("error[E-RUN-046]: MURMUR_FORMATION_LIFELINE is not a usable lifeline: ")
    return str(info.value)


class TestClaim:
    @pytest.mark.parametrize("value", [None, "", "   "])
    def test_absent(self, value: str | None) -> None:
        """Unset or blank means no lifeline."""
        assert claim_lifeline(value, var="V", code="E-RUN-020") is None

    @pytest.mark.parametrize(
        ("value", "reason"),
        [
            ("abc", "not a decimal"),
            ("-3", "not a decimal"),
            ("3.0", "not a decimal"),
            ("٣", "not a decimal"),
            ("99999999999", "too large"),
            ("0", "standard stream"),
            ("2", "standard stream"),
        ],
    )
    def test_bad_values(self, value: str, reason: str) -> None:
        """Values that cannot name a lifeline are refused with the reason."""
        assert reason in refuse(value)

    def test_kinds_refused(self, fds: list[int], tmp_path: Path) -> None:
        """Closed fds, files, directories, devices, sockets and write ends are refused."""
        r, w = os.pipe()
        fds += [r, w]
        f = os.open(tmp_path / "f", os.O_CREAT | os.O_RDONLY)
        d = os.open(tmp_path, os.O_RDONLY)
        null = os.open(os.devnull, os.O_RDONLY)
        s1, s2 = socket.socketpair()
        fds += [f, d, null]
        try:
            assert "not open" in refuse("1000")
            assert "regular file" in refuse(str(f))
            assert "directory" in refuse(str(d))
            assert "character device" in refuse(str(null))
            assert "socket" in refuse(str(s1.fileno()))
            assert "open for writing" in refuse(str(w))
        finally:
            s1.close()
            s2.close()

    def test_claim_once_and_cloexec(self, fds: list[int]) -> None:
        """A pipe read end is claimed once, marked close-on-exec; a second claim is refused."""
        r, w = os.pipe()
        fds += [r, w]
        os.set_inheritable(r, True)
        assert claim_lifeline(f" {r} ", var="V", code="E-RUN-020") == r
        assert os.get_inheritable(r) is False
        assert lifeline_problem(str(r)) == "it was already read"
        with pytest.raises(DiagnosticError, match="already read"):
            claim_lifeline(str(r), var="V", code="E-RUN-020")


class TestWatch:
    async def test_eof_on_close(self, fds: list[int]) -> None:
        """Closing the only write end is EOF; bytes written before are ignored."""
        r, w = os.pipe()
        fds.append(w)
        seen: list[str] = []

        async def watch() -> None:
            await wait_for_eof(r)
            seen.append("eof")

        async with trio.open_nursery() as n:
            n.start_soon(watch)
            os.write(w, b"ignored")
            await trio.testing.wait_all_tasks_blocked()
            assert seen == []
            os.close(w)
        assert seen == ["eof"]

    async def test_eof_when_holder_is_killed(self) -> None:
        """A holder killed with SIGKILL closes the lifeline: EOF arrives."""
        r, w = os.pipe()
        proc = await trio.lowlevel.open_process(["sleep", "60"], pass_fds=(w,))
        os.close(w)
        try:
            with trio.fail_after(10):
                async with trio.open_nursery() as n:
                    n.start_soon(wait_for_eof, r)
                    await trio.testing.wait_all_tasks_blocked()
                    proc.kill()
        finally:
            proc.kill()
            await proc.wait()
