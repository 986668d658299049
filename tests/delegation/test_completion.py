"""completion.json (one reporter) and the completion post (seed 000, "The completion path")."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import attrs
import httpx
import pytest
import trio

from murmur.delegation import completion as comp
from murmur.delegation.spawner import SpawnerHandle

HANDLE = SpawnerHandle("http://127.0.0.1:9", "ses_" + "1" * 32, "ctx_1", "untrusted", "dlg_" + "2" * 32)


def completion(status: str = "ok", **kw: object) -> comp.Completion:
    base: dict[str, object] = {
        "delegation_id": HANDLE.delegation_id,
        "capsule_name": "worker",
        "capsule_version": "0.1.0",
        "session_id": "ses_" + "3" * 32,
        "status": status,
        "workdir": "/w/.murmur/children/worker-0123456789abcdef",
        "duration_ms": 12,
    }
    base.update(kw)
    return comp.Completion(**base)  # type: ignore[arg-type]


class TestFields:
    def test_optional_fields_are_omitted(self) -> None:
        """result_path and detail are absent when there is none; the output never travels."""
        assert set(completion().fields()) == {
            "delegation_id", "capsule_name", "capsule_version", "session_id", "status", "workdir", "duration_ms"}
        full = completion("crashed", result_path=".murmur/x/out/result.txt", detail="exit status 3").fields()
        assert full["result_path"] == ".murmur/x/out/result.txt" and full["detail"] == "exit status 3"

    def test_text_is_compact_json_of_the_fields(self) -> None:
        """The message text is the fields as compact JSON."""
        c = completion()
        assert json.loads(c.text()) == c.fields() and ", " not in c.text()


class TestFile:
    def test_first_claim_wins(self, tmp_path: Path) -> None:
        """Only the first reporter creates completion.json; the second is told no."""
        first = comp.Record(completion("ok"), "child")
        assert comp.claim(tmp_path, first)
        assert not comp.claim(tmp_path, comp.Record(completion("crashed"), "launcher"))
        data = comp.read_completion(tmp_path)
        assert data is not None and (data["status"], data["reported_by"]) == ("ok", "child")
        assert (data["delivered"], data["delivery_error"]) == (False, None)
        assert stat.S_IMODE(os.stat(tmp_path / comp.COMPLETION_FILE).st_mode) == 0o600
        assert sorted(p.name for p in tmp_path.iterdir()) == [comp.COMPLETION_FILE]

    def test_rewrite_records_the_delivery(self, tmp_path: Path) -> None:
        """The second write says what the posting did; the record rebuilds from the file."""
        c = completion()
        comp.claim(tmp_path, comp.Record(c, "child"))
        comp.rewrite(tmp_path, comp.Record(c, "child", False, "the parent's door refused it"))
        data = comp.read_completion(tmp_path)
        assert data is not None
        record = comp.record_from_json(data)
        assert record == comp.Record(c, "child", False, "the parent's door refused it")

    def test_unreadable_record(self, tmp_path: Path) -> None:
        """A missing or broken file reads as None."""
        assert comp.read_completion(tmp_path) is None
        (tmp_path / comp.COMPLETION_FILE).write_text("{")
        assert comp.read_completion(tmp_path) is None
        assert comp.record_from_json({"status": "ok"}) is None


class TestDelivery:
    @pytest.mark.parametrize(
        ("code", "body", "problem"),
        [
            (200, {"jsonrpc": "2.0", "id": 1, "result": {"message": {"parts": []}}}, None),
            (200, {"jsonrpc": "2.0", "id": 1, "error": {"code": -31001, "message": "completion is addressed to session ses_x, which is not the session running here"}},
             "refused it: completion is addressed to session ses_x, which is not the session running here (-31001)"),
            (200, {"result": {"task": {"status": {"state": "TASK_STATE_REJECTED", "message": {"parts": [{"text": "task rejected: capsule is busy"}]}}}}},
             "did not take it (TASK_STATE_REJECTED: task rejected: capsule is busy)"),
            (401, {"error": "unauthenticated"}, "answered HTTP 401"),
            (200, {"result": 5}, "without an acknowledgement"),
            (500, None, "without a JSON-RPC body"),
        ],
    )
    def test_what_counts_as_delivered(self, code: int, body: object, problem: str | None) -> None:
        """Only an acknowledged message is a delivery; anything else names what came back."""
        got = comp.delivery_problem(code, body)
        assert got == problem if problem is None else (got is not None and problem in got)

    async def test_post_shape(self) -> None:
        """One SendMessage to POST / with the four x-murmur headers and the fields as text."""
        seen: list[httpx.Request] = []

        def reply(request: httpx.Request) -> httpx.Response:
            seen.append(request)
            return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {"message": {"parts": []}}})

        assert await comp.post(HANDLE, completion(), transport=httpx.MockTransport(reply)) is None
        (req,) = seen
        assert (req.method, str(req.url)) == ("POST", "http://127.0.0.1:9/")
        assert req.headers["x-murmur-task-origin"] == "completion"
        assert req.headers["x-murmur-task-trust"] == "untrusted"
        assert req.headers["x-murmur-delegation-id"] == HANDLE.delegation_id
        assert req.headers["x-murmur-completion-session"] == HANDLE.session_id
        assert req.headers["a2a-version"] == "1.0"
        body = json.loads(req.content)
        assert body["method"] == "SendMessage"
        msg = body["params"]["message"]
        assert msg["contextId"] == "ctx_1" and json.loads(msg["parts"][0]["text"]) == completion().fields()

    async def test_nobody_listening(self) -> None:
        """A door that does not answer is an undelivered completion with a reason."""
        with trio.socket.socket() as s:
            await s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        handle = attrs.evolve(HANDLE, url=f"http://127.0.0.1:{port}")
        problem = await comp.post(handle, completion(), timeout=5)
        assert problem is not None and "did not answer" in problem
