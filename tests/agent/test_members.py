"""call-member bookkeeping, results and the continuation message (pure)."""

from __future__ import annotations

from murmur.agent.members import MemberCalls, call_result, continuation_text


class TestMemberCalls:
    def test_refusals(self) -> None:
        """Non-callees and members with an undelivered call are refused; others allowed."""
        calls = MemberCalls()
        assert calls.refusal("a", ("a", "b")) is None
        calls.add("mcl_1", "a")
        assert "unanswered" in calls.refusal("a", ("a", "b"))
        assert calls.refusal("b", ("a", "b")) is None
        assert "callees: a, b" in calls.refusal("c", ("a", "b"))
        assert calls.take() == [("mcl_1", "a")] and not calls


class TestCallResult:
    def test_started_and_busy_are_outstanding(self) -> None:
        """started/busy pass and stay outstanding; rejected/failed fail and do not."""
        for status, ok in (("started", True), ("busy", True), ("rejected", False), ("failed", False)):
            text, is_error, outstanding = call_result({"call_id": "mcl_1", "member": "w", "status": status})
            assert text.startswith(("passed" if ok else "failed") + f": Called w: {status}")
            assert (is_error, outstanding) == (not ok, ok)
            assert "<untrusted-content source=tool:call-member>" in text
            assert text.split("</untrusted-content>")[1].startswith("\n[runtime] ")


class TestContinuation:
    def test_blocks_in_call_order(self) -> None:
        """One fenced block per call in call order; silent members listed; closing line."""
        text = continuation_text(
            [("mcl_1", "a"), ("mcl_2", "b")],
            {"mcl_2": {"status": "completed", "output": "B says hi"},
             "mcl_1": {"status": "abandoned", "output": ""}},
        )
        assert text.index("call mcl_1 to a ended abandoned, with no answer from a:") < text.index(
            "call mcl_2 to b ended completed:")
        assert "<untrusted-content source=member:b>\nB says hi\n</untrusted-content>" in text
        assert "No answer from: a." in text
        assert text.splitlines()[-1].startswith("[runtime] 2 member call(s)")

    def test_missing_answer_is_unreachable(self) -> None:
        """A call the service never answered is reported unreachable."""
        text = continuation_text([("mcl_9", "z")], {})
        assert "ended unreachable, with no answer from z" in text
