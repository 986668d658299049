"""The A2A client's pure pieces against the wire facts (spec/door.md, the a2a-sdk captures)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from murmur.a2a import replies, requests
from murmur.a2a.replies import Fault, Reply, TaskView

# A captured SendMessage answer of the a2a-sdk reference server (ids shortened).
CAPTURED_SEND = (
    b'{"result":{"task":{"id":"b7eee7df","contextId":"f1c1a057",'
    b'"status":{"state":"TASK_STATE_COMPLETED","timestamp":"2026-11-29T23:13:08.416074Z"},'
    b'"artifacts":[{"artifactId":"8198729c","name":"echo","parts":[{"text":"echo: hello"}]}]}},'
    b'"id":"4aa92210","jsonrpc":"2.0"}'
)
CAPTURED_NOT_FOUND = (
    b'{"error":{"code":-32001,"message":"Task not found","data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo",'
    b'"reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org","metadata":{}}]},"id":"ba89c771","jsonrpc":"2.0"}'
)


class TestRequests:
    def test_send_message_is_the_1_0_shape(self) -> None:
        """SendMessage: 1.0 name, ROLE_USER, one text part, returnImmediately by default."""
        body = requests.send_message("hello", message_id="m1", rpc_id="r1")
        assert body == {
            "jsonrpc": "2.0",
            "id": "r1",
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hello"}]},
                "configuration": {"returnImmediately": True},
            },
        }

    def test_send_message_blocking_and_context(self) -> None:
        """Blocking is ``"configuration": {}``; a context id rides inside the message."""
        body = requests.send_message("x", message_id="m", context_id="ctx_1", return_immediately=False)
        assert body["params"]["configuration"] == {}
        assert body["params"]["message"]["contextId"] == "ctx_1"

    @pytest.mark.parametrize(
        ("body", "method", "params"),
        [
            (requests.get_task("t1"), "GetTask", {"id": "t1"}),
            (requests.get_task("t1", history_length=0), "GetTask", {"id": "t1", "historyLength": 0}),
            (requests.cancel_task("t2"), "CancelTask", {"id": "t2"}),
            (requests.get_extended_card(), "GetExtendedAgentCard", {}),
        ],
    )
    def test_task_methods(self, body: dict[str, Any], method: str, params: dict[str, Any]) -> None:
        """GetTask / CancelTask / GetExtendedAgentCard: 1.0 names, never the 0.3 ones."""
        assert (body["jsonrpc"], body["method"], body["params"]) == ("2.0", method, params)

    def test_headers(self) -> None:
        """Every request says A2A-Version 1.0 and JSON; a bearer token only when given."""
        assert requests.headers() == {"content-type": "application/json", "A2A-Version": "1.0"}
        got = requests.headers(bearer="tok", extra={"x-murmur-task-origin": "peer"})
        assert got["Authorization"] == "Bearer tok" and got["x-murmur-task-origin"] == "peer"

    def test_encode_is_compact_utf8(self) -> None:
        """The body is compact JSON, non-ASCII kept as UTF-8."""
        raw = requests.encode(requests.send_message("é", message_id="m"))
        assert b" " not in raw and "é".encode() in raw and json.loads(raw)["params"]["message"]["parts"][0]["text"] == "é"

    @pytest.mark.parametrize(("url", "want"), [("http://h:1", "http://h:1/"), ("http://h:1/", "http://h:1/"), ("http://h:1//", "http://h:1/")])
    def test_rpc_url(self, url: str, want: str) -> None:
        assert requests.rpc_url(url) == want


class TestReplies:
    def test_captured_send_answer(self) -> None:
        """SendMessage wraps the task as result.task; its state and ids are read."""
        obj = Reply(200, CAPTURED_SEND).object()
        assert obj is not None
        task = replies.sent_task(obj)
        assert task is not None
        assert (task.id, task.context_id, task.state, task.end_word) == ("b7eee7df", "f1c1a057", replies.COMPLETED, "completed")
        assert task.answer is None  # the reference server's artifact is not murmur's `response`
        assert replies.got_task(obj) is not None and replies.got_task(obj).id is None  # type: ignore[union-attr]

    def test_captured_error_keeps_http_200(self) -> None:
        """A JSON-RPC error: HTTP 200, error{code, message}, no result."""
        obj = Reply(200, CAPTURED_NOT_FOUND).object()
        assert obj is not None
        assert replies.fault(obj) == Fault(-32001, "Task not found")
        assert replies.result(obj) is None and replies.sent_task(obj) is None

    def test_get_task_is_bare(self) -> None:
        """GetTask returns the bare Task as result (no ``task`` wrapper)."""
        obj = {"result": {"id": "t", "status": {"state": replies.WORKING}}}
        view = replies.got_task(obj)
        assert view is not None and (view.id, view.state, view.end_word) == ("t", replies.WORKING, None)
        assert replies.sent_task(obj) is None

    def test_message_only_send_answer(self) -> None:
        """A message-only SendMessage answer is result.message."""
        obj = {"result": {"message": {"parts": [{"text": "ack"}]}}}
        assert replies.sent_message(obj) == {"parts": [{"text": "ack"}]}
        assert replies.sent_message({"result": {"task": {}}}) is None

    @pytest.mark.parametrize(
        ("state", "word"),
        [
            (replies.COMPLETED, "completed"),
            (replies.FAILED, "failed"),
            (replies.CANCELED, "canceled"),
            (replies.REJECTED, "rejected"),
            (replies.SUBMITTED, None),
            (replies.WORKING, None),
            (replies.INPUT_REQUIRED, None),
            (replies.AUTH_REQUIRED, None),
            ("completed", None),  # a 0.3 lowercase state is not a 1.0 one
            (None, None),
        ],
    )
    def test_terminal_states(self, state: str | None, word: str | None) -> None:
        """Terminal: COMPLETED, FAILED, CANCELED, REJECTED; everything else is not an end."""
        view = replies.task_view({"status": {"state": state}})
        assert view is not None and view.end_word == word

    def test_task_fields(self) -> None:
        """Status message text, the `response` artifact and murmur's noAnswer mark."""
        task = {
            "id": "t",
            "contextId": "c",
            "status": {"state": replies.FAILED, "message": {"parts": [{"text": "a"}, {"data": 1}, {"text": "b"}]}},
            "artifacts": [{"artifactId": "other", "parts": [{"text": "no"}]}, {"artifactId": "response", "parts": [{"text": "42"}]}],
            "metadata": {"murmur": {"noAnswer": True}},
        }
        assert replies.task_view(task) == TaskView("t", "c", replies.FAILED, "ab", "42", True)

    @pytest.mark.parametrize("bad", [None, [], "x", 3])
    def test_not_a_task(self, bad: object) -> None:
        assert replies.task_view(bad) is None

    @pytest.mark.parametrize(
        "task",
        [
            {"status": "x", "artifacts": "y", "metadata": []},
            {"status": {"message": {"parts": "nope"}}, "artifacts": [None, {"artifactId": "response"}]},
            {"id": 3, "contextId": ["c"], "status": {"state": 7}},
        ],
    )
    def test_malformed_tasks_read_as_empty(self, task: dict[str, Any]) -> None:
        """Malformed fields never raise: they read as absent."""
        view = replies.task_view(task)
        assert view is not None and view.id is None and view.state is None and view.message_text == ""

    @pytest.mark.parametrize(("body", "obj"), [(b"{}", {}), (b"[1]", None), (b"nope", None), (b"\xff", None), (b"[" * 100000, None)])
    def test_json_object(self, body: bytes, obj: object) -> None:
        assert Reply(200, body).object() == obj

    def test_json_raises_value_error_only(self) -> None:
        assert Reply(200, b"[1]").json() == [1]
        for bad in (b"nope", b"\xff\xfe"):
            with pytest.raises(ValueError):
                Reply(200, bad).json()

    def test_fault_message_not_a_string(self) -> None:
        assert replies.fault({"error": {"code": 5, "message": 7}}) == Fault(5, None)
        assert replies.fault({"error": "unauthenticated"}) is None
