"""Table tests of the pure A2A wire shapes."""

from __future__ import annotations

import pytest

from murmur.session.states import TaskEvent
from murmur.session.tasks.book import TaskBook
from murmur.session.wire import (
    RpcError,
    agent_card,
    door_methods,
    parse_request,
    parse_send_params,
    task_json,
    version_ok,
)


class TestVersion:
    @pytest.mark.parametrize(
        ("values", "ok"),
        [(["1.0"], True), (["1.0.7"], True), ([" 1.0 "], True), ([], False), (["0.3"], False),
         (["1.1"], False), (["2.0"], False), (["1.0", "1.0"], False), (["1.0.x"], False)],
    )
    def test_table(self, values: list[str], ok: bool) -> None:
        """Exactly one 1.0 or 1.0.<n> header selects protocol 1.0."""
        assert version_ok(values) is ok


class TestEnvelope:
    @pytest.mark.parametrize(
        "body",
        [[], "x", {"jsonrpc": "2.0", "method": "m"}, {"jsonrpc": "2.0", "id": True, "method": "m"},
         {"jsonrpc": "2.0", "id": 1.5, "method": "m"}, {"jsonrpc": "2.0", "id": 1, "method": ""}, {"id": 1, "method": "m"}],
    )
    def test_invalid(self, body: object) -> None:
        """Non-objects, notifications, bad ids, empty methods and missing jsonrpc are -32600."""
        with pytest.raises(RpcError) as info:
            parse_request(body)
        assert info.value.code == -32600

    def test_valid(self) -> None:
        """String and integer ids both work; params default to an empty object."""
        assert parse_request({"jsonrpc": "2.0", "id": "a", "method": "GetTask"}).params == {}
        assert parse_request({"jsonrpc": "2.0", "id": 0, "method": "GetTask", "params": [1]}).params == [1]


class TestMessage:
    def test_text_and_data_parts(self) -> None:
        """Text parts join with newlines; data parts become compact JSON; sizes add up."""
        msg, config = parse_send_params(
            {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}, {"data": {"k": [1, 2]}}]},
             "configuration": {"returnImmediately": True}}
        )
        assert msg.text == 'a\n{"k":[1,2]}' and msg.parts_bytes == len(msg.text) - 1
        assert config == {"returnImmediately": True}


class TestTaskJson:
    def test_history_length(self) -> None:
        """historyLength: None whole, 0 none, n the last n; artifacts on request."""
        book = TaskBook(now=lambda: "2026-01-01T00:00:00.000000Z")
        t = book.new(text="x", message={"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "x"}]},
                     origin="event", trust="untrusted", lane="bg", source="a2a")
        book.apply(t, TaskEvent.START)
        book.apply(t, TaskEvent.COMPLETE, answer="done")
        full = task_json(t)
        assert [m["role"] for m in full["history"]] == ["ROLE_USER", "ROLE_AGENT"]
        assert full["status"] == {
            "state": "TASK_STATE_COMPLETED",
            "timestamp": "2026-01-01T00:00:00.000000Z",
            "message": full["history"][1],
        }
        assert "history" not in task_json(t, history_length=0)
        assert [m["role"] for m in task_json(t, history_length=1)["history"]] == ["ROLE_AGENT"]
        assert "artifacts" not in task_json(t, include_artifacts=False)
        assert full["metadata"]["murmur"] == {"origin": "event", "lane": "bg"}


class TestCard:
    def test_methods(self) -> None:
        """none serves no send methods; authenticated doors add the extended card."""
        assert door_methods(serves_tasks=False, authenticated=False) == ["GetTask", "ListTasks", "CancelTask", "SubscribeToTask"]
        assert door_methods(serves_tasks=True, authenticated=True)[-1] == "GetExtendedAgentCard"

    def test_public_vs_authenticated(self) -> None:
        """Public cards carry the grants; authenticated ones only the session id and bearer scheme."""
        kw = {"name": "n", "version": "1", "url": "http://127.0.0.1:1/", "session_id": "ses_x", "serves_tasks": True,
              "peer_tasks": False, "capsule_params": {"shell": ["ls"]}}
        public = agent_card(authenticated=False, **kw)  # type: ignore[arg-type]
        locked = agent_card(authenticated=True, **kw)  # type: ignore[arg-type]
        extended = agent_card(authenticated=True, extended=True, **kw)  # type: ignore[arg-type]

        def capsule(card: dict[str, object]) -> object:
            exts = card["capabilities"]["extensions"]  # type: ignore[index]
            return next(e["params"] for e in exts if e["uri"].endswith("murmur-capsule-v1"))

        assert capsule(public) == {"sessionId": "ses_x", "shell": ["ls"]}
        assert capsule(locked) == {"sessionId": "ses_x"}
        assert capsule(extended) == {"sessionId": "ses_x", "shell": ["ls"]}
        assert "securitySchemes" not in public and locked["securityRequirements"] == [{"schemes": {"bearer": {"list": []}}}]
