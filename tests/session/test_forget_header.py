"""`x-murmur-forget-session: true` on a SendMessage (spec/conversations.md "Agent CLIs")."""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import httpx

from murmur.manifest.model import Inference, Transport

from .helpers import EchoWorkload, error_code, make_setup, manifest, result, running, send_params

HEADER = {"x-murmur-forget-session": "true"}


class ForgettingWorkload(EchoWorkload):
    """Echoes, and records which contexts it was told to forget."""

    def __init__(self) -> None:
        self.forgotten: list[str] = []

    def forget_session(self, context_id: str) -> str | None:
        self.forgotten.append(context_id)
        return "old-cli-session"


async def test_the_header_on_a_non_process_capsule_is_e_run_039(tmp_path: Path) -> None:
    async with running(make_setup(tmp_path, manifest(), ForgettingWorkload())) as h, \
            httpx.AsyncClient(base_url=h.url) as c:
        r = await c.post("/", json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": send_params("x")},
                         headers={"A2A-Version": "1.0", **HEADER})
        err = r.json()["error"]
        assert err["code"] == -32602 and err["message"].startswith("E-RUN-039")
        assert await error_code(c, "SendMessage", send_params("x"), headers=HEADER) == -32602


async def test_the_header_forgets_the_context_under_process(tmp_path: Path) -> None:
    w = ForgettingWorkload()
    m = attrs.evolve(manifest(), inference=Inference(transport=Transport.PROCESS, command="sh"))
    async with running(make_setup(tmp_path, m, w)) as h, httpx.AsyncClient(base_url=h.url) as c:
        p = send_params("hello")
        p["message"]["contextId"] = "ctx_cli"
        task = (await result(c, "SendMessage", p, headers=HEADER))["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        await result(c, "SendMessage", send_params("no header"))
    assert w.forgotten == ["ctx_cli"]
    records = [json.loads(x) for x in h.session.setup.records.trace.read_text().splitlines()]
    (forgot,) = [r for r in records if r["event_type"] == "harness_session_forgotten"]
    assert (forgot["context"], forgot["dropped"], forgot["requested_by"]) == ("ctx_cli", "old-cli-session", "header")
