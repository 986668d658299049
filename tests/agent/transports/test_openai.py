"""Chat Completions translation (pure)."""

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
from murmur.agent.transports.openai import completions_url, parse_reply, request_body

SPEC = ToolSpec("ls", "list", {"type": "object"})


class TestUrl:
    def test_forms(self) -> None:
        """A base URL gets /chat/completions; a full URL is kept."""
        assert completions_url("http://127.0.0.1:1/v1/") == "http://127.0.0.1:1/v1/chat/completions"
        assert completions_url("https://x/v1/chat/completions") == "https://x/v1/chat/completions"


class TestRequestBody:
    def test_conversation(self) -> None:
        """System, user, assistant tool calls and tool results map to Chat Completions messages."""
        call = ToolCall("c1", "ls", {"args": []}, '{"args":[]}')
        req = InferenceRequest(
            "sys",
            (UserText("task"), AssistantTurn("", (call,)),
             ToolResults((ToolResult("c1", "ls", "out", True),)), AssistantTurn("")),
            (SPEC,),
        )
        body = request_body(req, model="m", max_tokens=99)
        assert body["model"] == "m" and body["max_tokens"] == 99
        assert body["messages"] == [
            {"role": "system", "content": "sys"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": '{"args":[]}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "out"},
            {"role": "assistant", "content": ""},
        ]
        assert body["tools"] == [{"type": "function", "function": {
            "name": "ls", "description": "list", "parameters": {"type": "object"}}}]

    def test_token_field_and_no_tools(self) -> None:
        """The token limit field is configurable; no tools means no tools key."""
        body = request_body(InferenceRequest(None, (UserText("t"),)), model="m", max_tokens=5,
                            token_field="max_completion_tokens")
        assert body["max_completion_tokens"] == 5 and "max_tokens" not in body and "tools" not in body
        assert body["messages"] == [{"role": "user", "content": "t"}]


class TestParseReply:
    def test_text(self) -> None:
        """Text, finish reason and usage are read."""
        r = parse_reply({"choices": [{"message": {"content": "hi"}, "finish_reason": "length"}],
                         "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
        assert (r.text, r.stop_reason, r.input_tokens, r.output_tokens, r.truncated) == ("hi", "length", 3, 4, True)

    def test_tool_calls(self) -> None:
        """Arguments as JSON text, as an object (Ollama), empty, or broken."""
        r = parse_reply({"choices": [{"message": {"content": None, "tool_calls": [
            {"id": "a", "function": {"name": "ls", "arguments": '{"args":["-l"]}'}},
            {"id": "b", "function": {"name": "ls", "arguments": {"args": []}}},
            {"function": {"name": "ls", "arguments": ""}},
            {"id": "d", "function": {"name": "ls", "arguments": "[1]"}},
        ]}, "finish_reason": "tool_calls"}]})
        assert [c.arguments for c in r.tool_calls] == [{"args": ["-l"]}, {"args": []}, {}, None]
        assert [c.id for c in r.tool_calls] == ["a", "b", "call_3", "d"]
        assert r.text == "" and r.input_tokens == 0

    def test_content_parts(self) -> None:
        """Content given as a list of text parts is joined."""
        r = parse_reply({"choices": [{"message": {"content": [{"type": "text", "text": "a"},
                                                               {"type": "text", "text": "b"}]}}]})
        assert r.text == "ab"

    @pytest.mark.parametrize("data", [
        {}, {"choices": []}, {"choices": [{}]}, {"choices": [{"message": {"content": 5}}]},
        {"choices": [{"message": {"tool_calls": [{"function": {}}]}}]},
        {"choices": [{"message": {"tool_calls": "x"}}]},
    ])
    def test_malformed(self, data: dict[str, object]) -> None:
        """Replies without a usable message are malformed_response."""
        with pytest.raises(InferenceError) as info:
            parse_reply(data)
        assert info.value.cause == "malformed_response"
