"""`mur run --task` of an upstream-style agent manifest against a local provider (real processes).

The provider (a scripted OpenAI-compatible server) runs in the test's Trio loop on loopback;
`mur run` runs as a child process in its own process group, killed at the end whatever happens.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path

import attrs
import pytest
import trio

from .scripted import Reply, ScriptedServer, files_under, group_gone, oa_text, oa_tools

pytestmark = pytest.mark.e2e

KEY = "sk-e2e-SECRET-9f8e7d6c5b4a39281706"

MANIFEST = """\
name: notes-agent
version: 0.1.0
artifacts:
  - name: murmur-driver-openai
    version: 0.2.0
    runtime: driver
capabilities:
  shell:
    allow: [ls, cat]
inference:
  driver:
    artifact: murmur-driver-openai
  endpoint: {endpoint}
  model: local-model
  api_key: ${{API_KEY}}
  max_tokens: 512
  max_turns: 4
  system_prompt: Answer from the files in your workdir.
"""


@attrs.define
class Mur:
    """A running `mur run` with its output collected."""

    proc: trio.Process
    stdout: bytearray = attrs.field(factory=bytearray)
    stderr: bytearray = attrs.field(factory=bytearray)
    open_streams: int = 2
    drained: trio.Event = attrs.field(factory=trio.Event)  # both pipes reached EOF

    @property
    def stderr_text(self) -> str:
        return self.stderr.decode(errors="replace")


async def _drain(m: Mur, stream: trio.abc.ReceiveStream, into: bytearray) -> None:
    while chunk := await stream.receive_some(65536):
        into += chunk
    m.open_streams -= 1
    if not m.open_streams:
        m.drained.set()


@pytest.fixture
async def mur_runner(nursery: trio.Nursery) -> AsyncIterator[list[Mur]]:
    """Starts `mur run` processes via the returned list's owner; kills every group at the end."""
    started: list[Mur] = []
    yield started
    for m in started:
        try:
            os.killpg(m.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        with trio.CancelScope(shield=True):
            await m.proc.wait()


async def start_mur(
    nursery: trio.Nursery, started: list[Mur], args: list[str], *, cwd: Path, env: Mapping[str, str]
) -> Mur:
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "murmur.cli.mur", "run", *args],
        cwd=str(cwd), env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True,
    )
    m = Mur(proc)
    started.append(m)
    assert proc.stdout is not None and proc.stderr is not None
    nursery.start_soon(_drain, m, proc.stdout, m.stdout)
    nursery.start_soon(_drain, m, proc.stderr, m.stderr)
    return m


def capsule(tmp_path: Path, endpoint: str) -> tuple[Path, Path, dict[str, str]]:
    """(capsule dir, work folder, environment) for one run."""
    cap = tmp_path / "capsule"
    cap.mkdir()
    (cap / "murmur.yaml").write_text(MANIFEST.format(endpoint=endpoint))
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("The launch code word is heliotrope.\n")
    env = dict(os.environ)
    env.update({"MURMUR_HOME": str(tmp_path / "home"), "API_KEY": KEY})
    return cap, work, env


def trace_records(home: Path) -> list[dict[str, object]]:
    (path,) = [p for p in files_under(home) if p.name == "trace.jsonl"]
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class TestMurRunAgent:
    async def test_agent_task_with_tools_end_to_end(
        self, provider: ScriptedServer, tmp_path: Path, nursery: trio.Nursery, mur_runner: list[Mur]
    ) -> None:
        """An upstream-style manifest runs a shell-using task; answer, trace, totals, no key on disk."""
        cap, work, env = capsule(tmp_path, provider.url + "/v1")
        provider.add(
            Reply(oa_tools(("c1", "ls", {"args": []}), prompt=50, completion=8)),
            Reply(oa_tools(("c2", "cat", {"args": ["notes.txt"]}), prompt=80, completion=9)),
            Reply(oa_text("The code word is heliotrope.", prompt=120, completion=7)),
        )
        m = await start_mur(nursery, mur_runner,
                            ["--manifest", str(cap), "--workdir", str(work), "--no-env-file",
                             "--task", "What is the launch code word?"], cwd=tmp_path, env=env)
        with trio.fail_after(60):
            code = await m.proc.wait()
            await m.drained.wait()
        assert code == 0, m.stderr_text
        assert m.stderr_text.rstrip().endswith("status: ok")
        assert m.stdout.decode() == "The code word is heliotrope.\n"
        assert len(provider.requests) == 3
        assert provider.requests[0].headers["authorization"] == f"Bearer {KEY}"
        assert provider.requests[0].body["messages"][0]["content"] == "Answer from the files in your workdir."
        assert "heliotrope" in provider.requests[2].body["messages"][-1]["content"]
        records = trace_records(tmp_path / "home")
        kinds = [r["event_type"] for r in records]
        assert kinds.count("inference") == 3 and kinds.count("tool_call") == 2 and kinds.count("shell") == 2
        (task_end,) = [r for r in records if r["event_type"] == "task_end"]
        assert (task_end["exit_status"], task_end["turns"], task_end["tool_calls"], task_end["shell_calls"]) == (
            "ok", 3, 2, 2)
        (end,) = [r for r in records if r["event_type"] == "session_end"]
        assert (end["exit_status"], end["total_turns"], end["total_input_tokens"], end["total_output_tokens"]) == (
            "ok", 3, 250, 24)
        (start,) = [r for r in records if r["event_type"] == "session_start"]
        assert start["model"] == "local-model"
        written = files_under(tmp_path / "home") + files_under(work)
        assert any(p.name == "result.txt" for p in written)
        for path in written:
            assert KEY not in path.read_text(errors="replace"), path
        assert KEY not in m.stderr_text and KEY not in m.stdout.decode()

    async def test_sigterm_during_inference_ends_canceled(
        self, provider: ScriptedServer, tmp_path: Path, nursery: trio.Nursery, mur_runner: list[Mur]
    ) -> None:
        """SIGTERM while a request is in flight: the request is abandoned, the task ends canceled."""
        cap, work, env = capsule(tmp_path, provider.url)
        provider.add(Reply(hold=True))
        m = await start_mur(nursery, mur_runner,
                            ["--manifest", str(cap), "--workdir", str(work), "--no-env-file",
                             "--task", "think hard"], cwd=tmp_path, env=env)
        with trio.fail_after(60):
            await provider.holding.wait()
        m.proc.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            code = await m.proc.wait()
            await provider.abandoned.wait()
            await m.drained.wait()
        assert code == 1, m.stderr_text
        assert "status: canceled" in m.stderr_text and "E-RUN-040" in m.stderr_text
        assert await group_gone(m.proc.pid)
        records = trace_records(tmp_path / "home")
        (task_end,) = [r for r in records if r["event_type"] == "task_end"]
        assert task_end["exit_status"] == "canceled" and task_end["turns"] == 1
        (end,) = [r for r in records if r["event_type"] == "session_end"]
        assert end["exit_status"] == "canceled"
        assert [r for r in records if r["event_type"] == "inference"] == []
        for path in files_under(tmp_path / "home"):
            assert KEY not in path.read_text(errors="replace"), path
