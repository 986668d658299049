"""Which task a capsule link's call is made under (spec/links.md "Calling a link").

The capability socket is handed the session; a ``link`` request delegates under the context id
and trust class of the session's latest task (``SessionHandle.latest_task``), not a trusted
default, and under a new context, trusted, only before the session's first task.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio

from murmur.links import protocol as p
from murmur.links import service


class FakeRuntime:
    launcher = None
    book: dict[str, object] = {}

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def refuse(self, *args: object) -> None:
        raise AssertionError(f"refused: {args}")

    async def delegate_call(self, name: str, version: str, text: str, wait: bool, **kw: Any) -> dict[str, Any]:
        self.calls.append({"name": name, "version": version, "text": text, **kw})
        return {"status": "completed", "output": "done"}


def link(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, task: object) -> dict[str, Any]:
    monkeypatch.setattr(service, "terminal_on", lambda pid: None)
    monkeypatch.setattr(service, "installed_versions", lambda name: ["1.0.0"])
    runtime = FakeRuntime()
    setup = SimpleNamespace(records=SimpleNamespace(root=tmp_path), session_id="ses_x", workdir=tmp_path)
    svc = service.LinkService(setup, runtime, ("kid",))  # type: ignore[arg-type]
    req = p.LinkRequest(op="link", name="kid", task="count the files")
    answer = trio.run(svc._link, req, ["sh", "-c", "kid"], 1, task)
    assert answer.exit == p.EXIT_OK, answer
    assert len(runtime.calls) == 1
    return runtime.calls[0]


def test_a_link_takes_the_latest_task_s_context_and_trust(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    call = link(monkeypatch, tmp_path, SimpleNamespace(context_id="ctx_task", trust="untrusted"))
    assert (call["context_id"], call["trust"]) == ("ctx_task", "untrusted")
    assert call["caller"] == ["sh", "-c", "kid"]


def test_before_any_task_a_link_is_trusted_under_a_new_context(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    call = link(monkeypatch, tmp_path, None)
    assert call["trust"] == "trusted"
    assert call["context_id"].startswith("ctx_")
