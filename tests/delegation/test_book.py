"""The delegating session's book and its door's completion rule."""

from __future__ import annotations

import json
from typing import Any

from murmur.delegation.book import DelegationBook, Entry, outcome_of
from murmur.session import wire
from murmur.session.completion_hook import CompletionRequest
from murmur.session.wire import InboundMessage

DLG = "dlg_" + "a" * 32


def message(text: str) -> InboundMessage:
    return InboundMessage(message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": text}]}, text=text,
                          task_id=None, context_id="ctx_other", parts_bytes=len(text))


def book_with_entry() -> tuple[DelegationBook, list[tuple[str, dict[str, Any]]]]:
    records: list[tuple[str, dict[str, Any]]] = []
    book = DelegationBook(lambda event, **fields: records.append((event, fields)))
    book.open(Entry(DLG, "worker", "0.1.0", "ctx_parent", "trusted", ".murmur/children/worker-0011223344556677"))
    return book, records


class TestDecide:
    def test_first_completion_becomes_a_task_under_the_delegating_context(self) -> None:
        """An open delegation's completion runs as a task in the delegating context, once."""
        book, records = book_with_entry()
        text = json.dumps({"delegation_id": DLG, "status": "crashed", "detail": "exit status 3"})
        verdict = book.decide(CompletionRequest(DLG, "trusted", message(text)))
        assert (verdict.accept, verdict.run_as_task, verdict.context_id) == (True, True, "ctx_parent")
        (event, fields), = records
        assert event == "delegation"
        assert (fields["delegation_id"], fields["outcome"], fields["reason"]) == (DLG, "crashed", "exit status 3")
        again = book.decide(CompletionRequest(DLG, "trusted", message(text)))
        assert not again.accept and again.error is not None
        assert again.error.code == wire.COMPLETION_NOT_AWAITED and "already reported" in again.error.message
        assert len(records) == 1

    def test_unknown_delegation_is_refused(self) -> None:
        """A completion for a delegation this session never made is refused (-31002)."""
        book, records = book_with_entry()
        for dlg in ("dlg_" + "f" * 32, None):
            verdict = book.decide(CompletionRequest(dlg, "trusted", message("{}")))
            assert not verdict.accept and verdict.error is not None
            assert verdict.error.code == wire.COMPLETION_NOT_AWAITED
        assert records == []

    def test_ok_outcome_has_no_reason(self) -> None:
        """ok / error close with a null reason."""
        book, records = book_with_entry()
        book.decide(CompletionRequest(DLG, "trusted", message(json.dumps({"status": "ok", "detail": "x"}))))
        assert records[0][1]["outcome"] == "ok" and records[0][1]["reason"] is None


class TestRecords:
    def test_call_record_without_launch(self) -> None:
        """A refused call writes one delegation record with a null delegation id."""
        book, records = book_with_entry()
        book.call_ended("other", "0.1.0", "refused", reason="capsule 'other' is not in parent's spawn_allow", duration_ms=4)
        (_, fields), = records
        assert fields == {"capsule": "other", "version": "0.1.0", "delegation_id": None, "child_session_id": None,
                          "duration_ms": 4, "outcome": "refused", "reason": "capsule 'other' is not in parent's spawn_allow"}

    def test_close_once(self) -> None:
        """Closing is exactly once, whoever gets there first."""
        book, records = book_with_entry()
        assert book.close(DLG, "terminated", "ended by the parent")
        assert not book.close(DLG, "ok")
        assert [f["outcome"] for _, f in records] == ["terminated"]

    def test_outcome_words(self) -> None:
        """Only the child's four words are read from a completion; anything else is unknown."""
        assert [outcome_of(json.dumps({"status": s})) for s in ("ok", "error", "crashed", "terminated", "completed")] == [
            "ok", "error", "crashed", "terminated", "unknown"]
        assert outcome_of("not json") == "unknown"
