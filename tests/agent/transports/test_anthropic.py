"""Messages API translation (pure)."""

from __future__ import annotations

import pytest

from murmur.agent.transports import (
    AssistantTurn,
    InferenceError,
    InferenceRequest,
    ToolCall,
    ToolResult,
    ToolResults,
    ToolSpec,
    UserText,
)
from murmur.agent.transports.anthropic import messages_url, parse_reply, request_body


class TestUrl:
    def test_forms(self) -> None:
        """Host, /v1 and full forms all reach /v1/messages."""
        assert messages_url("https://api.anthropic.com") == "https://api.anthropic.com/v1/messages"
        assert messages_url("http://127.0.0.1:9/v1/") == "http://127.0.0.1:9/v1/messages"
        assert messages_url("https://x/v1/messages") == "https://x/v1/messages"


class TestRequestBody:
    def test_roles_alternate(self) -> None:
        """Tool results and a following user text merge into one user message."""
        call = ToolCall("t1", "ls", {"args": []})
        req = InferenceRequest(
            "sys",
            (UserText("task"), AssistantTurn("thinking", (call,)),
             ToolResults((ToolResult("t1", "ls", "out", True),)), UserText("continue"),
             AssistantTurn("")),
            (ToolSpec("ls", "d", {"type": "object"}),),
        )
        body = request_body(req, model="m", max_tokens=7)
        assert body["system"] == "sys" and body["max_tokens"] == 7
        assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user", "assistant"]
        assert body["messages"][1]["content"] == [
            {"type": "text", "text": "thinking"},
            {"type": "tool_use", "id": "t1", "name": "ls", "input": {"args": []}}]
        assert body["messages"][2]["content"] == [
            {"type": "tool_result", "tool_use_id": "t1", "content": "out", "is_error": True},
            {"type": "text", "text": "continue"}]
        assert body["messages"][3]["content"] == [{"type": "text", "text": "(no text)"}]
        assert body["tools"] == [{"name": "ls", "description": "d", "input_schema": {"type": "object"}}]

    def test_no_system_no_tools(self) -> None:
        """Absent system prompt and tools are omitted."""
        body = request_body(InferenceRequest(None, (UserText("t"),)), model="m", max_tokens=1)
        assert "system" not in body and "tools" not in body


class TestParseReply:
    def test_blocks(self) -> None:
        """Text blocks join; tool_use blocks become calls; other blocks are skipped."""
        r = parse_reply({"content": [{"type": "thinking", "thinking": "..."}, {"type": "text", "text": "a"},
                                     {"type": "tool_use", "id": "t", "name": "ls", "input": {"args": ["x"]}},
                                     {"type": "text", "text": "b"}],
                         "stop_reason": "tool_use", "usage": {"input_tokens": 5, "output_tokens": 6}})
        assert r.text == "ab" and r.stop_reason == "tool_use" and (r.input_tokens, r.output_tokens) == (5, 6)
        assert [(c.id, c.name, c.arguments) for c in r.tool_calls] == [("t", "ls", {"args": ["x"]})]

    def test_max_tokens_is_truncated(self) -> None:
        """stop_reason max_tokens marks the reply truncated."""
        assert parse_reply({"content": [], "stop_reason": "max_tokens"}).truncated

    @pytest.mark.parametrize("data", [{}, {"content": "x"}, {"content": [1]},
                                      {"content": [{"type": "tool_use", "name": "ls"}]}])
    def test_malformed(self, data: dict[str, object]) -> None:
        """Replies without a content list or with broken tool_use are malformed."""
        with pytest.raises(InferenceError) as info:
            parse_reply(data)
        assert info.value.cause == "malformed_response"
