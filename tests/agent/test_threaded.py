"""Threaded conversations in the agent loop: history loaded from the durable record, and recorded.

A scripted provider records what each task sent; the record lives under a temporary
``conversations/`` root (spec/conversations.md).
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from murmur.agent import AgentWorkload
from murmur.agent.thread import Conversations
from murmur.conversation.record import RecordStore
from murmur.manifest.model import Conversation, Lifecycle, Manifest

from .scripted import (
    FakeTrace,
    Reply,
    ScriptedServer,
    agent_manifest,
    an_text,
    oa_text,
    oa_tools,
    task_context,
)

KEY = "sk-test-SECRET-threaded-0123456789"


def _workload(manifest: Manifest, store: RecordStore, *, threaded: bool, load: str | None = None) -> AgentWorkload:
    w = AgentWorkload(manifest, Path("."), environ={"API_KEY": KEY, "PATH": "/usr/bin:/bin"})
    w.use_conversations(Conversations(store=store, threaded=threaded, load_context=load))
    return w


def _store(tmp_path: Path, notes: list[str]) -> RecordStore:
    return RecordStore(tmp_path / "conversations", "agent", "agent", notes.append)


def _threaded(manifest: Manifest) -> Manifest:
    return attrs.evolve(manifest, lifecycle=Lifecycle(conversation=Conversation.THREADED))


class TestThreaded:
    async def test_second_task_of_a_context_sends_the_first_exchange(
        self, provider: ScriptedServer, tmp_path: Path
    ) -> None:
        """OpenAI driver: task 2 in the same context starts from task 1's messages, tool calls included."""
        manifest = _threaded(agent_manifest(provider.url + "/v1", shell=("echo",), system_prompt="Be brief."))
        notes: list[str] = []
        store = _store(tmp_path, notes)
        w = _workload(manifest, store, threaded=True)
        first = task_context(manifest, tmp_path, FakeTrace(), text="remember the word lilac")
        provider.add(
            Reply(oa_tools(("c1", "echo", {"args": ["lilac"]}))),
            Reply(oa_text("I will remember lilac.")),
            Reply(oa_text("The word was lilac.")),
        )
        assert (await w.run_task(first)).answer == "I will remember lilac."
        second = task_context(manifest, tmp_path, FakeTrace(), text="what was the word?")
        second.context_id = first.context_id
        assert (await w.run_task(second)).answer == "The word was lilac."
        sent = provider.requests[2].body["messages"]
        assert [m["role"] for m in sent] == ["system", "user", "assistant", "tool", "assistant", "user"]
        assert sent[1]["content"] == "remember the word lilac"
        assert sent[2]["tool_calls"][0]["id"] == "c1"
        assert sent[3]["tool_call_id"] == "c1" and "lilac" in sent[3]["content"]
        assert sent[4]["content"] == "I will remember lilac."
        assert sent[5]["content"] == "what was the word?"
        assert notes == []
        path = tmp_path / "conversations" / "agent" / first.context_id / "conversation.jsonl"
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert lines[0]["type"] == "murmur.record" and lines[0]["capsule"] == "agent"
        assert [x["role"] for x in lines[1:]] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
        assert all(x["id"].startswith("msg_") for x in lines[1:])
        assert lines[-1]["task_id"] == second.task_id

    async def test_another_context_starts_empty(self, provider: ScriptedServer, tmp_path: Path) -> None:
        """A task in a different context sends only its own message."""
        manifest = _threaded(agent_manifest(provider.url + "/v1"))
        w = _workload(manifest, _store(tmp_path, []), threaded=True)
        provider.add(Reply(oa_text("one")), Reply(oa_text("two")))
        await w.run_task(task_context(manifest, tmp_path, FakeTrace(), text="first"))
        await w.run_task(task_context(manifest, tmp_path, FakeTrace(), text="second"))
        assert [m["role"] for m in provider.requests[1].body["messages"]] == ["user"]

    async def test_stateless_records_but_does_not_load(self, provider: ScriptedServer, tmp_path: Path) -> None:
        """stateless: the second task sends only itself, yet both tasks are in the record."""
        manifest = agent_manifest(provider.url + "/v1")
        store = _store(tmp_path, [])
        w = _workload(manifest, store, threaded=False)
        provider.add(Reply(oa_text("one")), Reply(oa_text("two")))
        a = task_context(manifest, tmp_path, FakeTrace(), text="first")
        await w.run_task(a)
        b = task_context(manifest, tmp_path, FakeTrace(), text="second")
        b.context_id = a.context_id
        await w.run_task(b)
        assert [m["content"] for m in provider.requests[1].body["messages"]] == ["second"]
        assert [m["content"] for m in store.load(a.context_id)] == ["first", "one", "second", "two"]

    async def test_resumed_context_loads_under_stateless(self, provider: ScriptedServer, tmp_path: Path) -> None:
        """The context --resume names is loaded even though the capsule is stateless."""
        manifest = agent_manifest(provider.url + "/v1")
        store = _store(tmp_path, [])
        store.append("ctx_resumed", {"role": "user", "content": "earlier"})
        store.append("ctx_resumed", {"role": "assistant", "content": "earlier answer"})
        w = _workload(manifest, store, threaded=False, load="ctx_resumed")
        provider.add(Reply(oa_text("now")))
        ctx = task_context(manifest, tmp_path, FakeTrace(), text="again")
        ctx.context_id = "ctx_resumed"
        await w.run_task(ctx)
        assert [m["content"] for m in provider.requests[0].body["messages"]] == ["earlier", "earlier answer", "again"]

    async def test_anthropic_driver_carries_history(self, provider: ScriptedServer, tmp_path: Path) -> None:
        """Anthropic driver: the second task's messages hold the first exchange."""
        manifest = _threaded(agent_manifest(provider.url, driver="murmur-driver-anthropic"))
        w = _workload(manifest, _store(tmp_path, []), threaded=True)
        provider.add(Reply(an_text("noted: 7")), Reply(an_text("it was 7")))
        a = task_context(manifest, tmp_path, FakeTrace(), text="the number is 7")
        await w.run_task(a)
        b = task_context(manifest, tmp_path, FakeTrace(), text="which number?")
        b.context_id = a.context_id
        await w.run_task(b)
        sent = provider.requests[1].body["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "user"]
        assert "the number is 7" in json.dumps(sent[0]) and "noted: 7" in json.dumps(sent[1])

    async def test_an_unwritable_record_is_reported_once_and_the_task_runs(
        self, provider: ScriptedServer, tmp_path: Path
    ) -> None:
        """The record root is a file: the task still completes; one warning for the whole task."""
        manifest = _threaded(agent_manifest(provider.url + "/v1"))
        (tmp_path / "conversations").write_text("not a directory")
        notes: list[str] = []
        w = _workload(manifest, _store(tmp_path, notes), threaded=True)
        provider.add(Reply(oa_text("fine")), Reply(oa_text("still fine")))
        outcome = await w.run_task(task_context(manifest, tmp_path, FakeTrace(), text="go"))
        await w.run_task(task_context(manifest, tmp_path, FakeTrace(), text="go again"))
        assert outcome.status == "ok"
        assert len(notes) == 1 and notes[0].startswith("warning: the conversation record")
