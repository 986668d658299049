"""One real task against a real OpenAI-compatible endpoint (skipped unless configured).

Set ``MURMUR_LIVE_OPENAI_BASE_URL`` (e.g. ``https://api.openai.com/v1`` or
``http://127.0.0.1:11434/v1``), ``MURMUR_LIVE_OPENAI_MODEL`` and, when the server needs
one, ``MURMUR_LIVE_OPENAI_API_KEY``; see spec/agent.md, "Live test".
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from murmur.agent import AgentWorkload
from murmur.manifest.model import Capabilities, DriverRef, Inference, Manifest, ShellCaps

from .scripted import FakeTrace, files_under, task_context

BASE_URL = os.environ.get("MURMUR_LIVE_OPENAI_BASE_URL", "")
MODEL = os.environ.get("MURMUR_LIVE_OPENAI_MODEL", "")
KEY = os.environ.get("MURMUR_LIVE_OPENAI_API_KEY", "")

pytestmark = pytest.mark.skipif(
    not (BASE_URL and MODEL),
    reason="set MURMUR_LIVE_OPENAI_BASE_URL and MURMUR_LIVE_OPENAI_MODEL to run the live test",
)


class TestLiveOpenAI:
    async def test_one_real_task_with_a_shell_tool(self, tmp_path: Path) -> None:
        """A real model reads a file through the cat tool and reports the word in it."""
        manifest = Manifest(
            name="live-agent",
            version="0.1.0",
            capabilities=Capabilities(shell=ShellCaps(allow=("cat", "ls"))),
            inference=Inference(
                endpoint=BASE_URL,
                model=MODEL,
                api_key="${MURMUR_LIVE_OPENAI_API_KEY}" if KEY else None,
                driver=DriverRef("murmur-driver-openai"),
                max_turns=6,
                max_tokens=512,
                system_prompt="You are a careful assistant. Use the tools to look at files.",
            ),
        )
        trace_path = tmp_path / "trace.jsonl"
        ctx = task_context(
            manifest, tmp_path, FakeTrace(trace_path),
            text="Read the file secret-word.txt in the current directory with the cat tool "
                 "and answer with the single word it contains.",
        )
        (ctx.workdir / "secret-word.txt").write_text("marmalade\n")
        work = AgentWorkload(manifest, tmp_path, environ=dict(os.environ))
        outcome = await work.run_task(ctx)
        assert outcome.status == "ok", outcome.answer
        assert "marmalade" in outcome.answer.lower()
        assert ctx.trace.of("tool_call"), "the model never used a tool"
        if KEY:
            for path in files_under(tmp_path):
                assert KEY not in path.read_text(errors="replace")
