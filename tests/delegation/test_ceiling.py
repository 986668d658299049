"""`delegate-task` and capsule links (both `DelegationRuntime.delegate_call`) refuse an agent
capsule without a spending ceiling before mur-roost is asked (spec/routing.md "Spending
ceilings"); with a ceiling the same call reaches the launcher (the negative control)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from murmur.delegation import parent
from murmur.delegation.parent import ChildArtifact
from murmur.delegation.runtime import DelegationRuntime
from murmur.manifest.model import Inference, Manifest, Transport
from session.helpers import EchoWorkload, make_setup

SEED = "an agent-triggered run without a spending ceiling is refused"


def agent(name: str, budget: int | None = None) -> Manifest:
    return Manifest(name, "0.1.0", inference=Inference(transport=Transport.PROCESS, command="agent",
                                                       budget_tokens=budget))


class FakeLauncher:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def delegate(self, capsule: str, version: str, text: str, wait: bool, **kw: Any) -> dict[str, Any]:
        self.calls.append(capsule)
        return {"capsule": capsule, "version": version, "status": "started", "delegation_id": "dlg_x"}


def runtime(tmp_path: Path, asker: Manifest, target: Manifest, monkeypatch: pytest.MonkeyPatch) -> tuple[
        DelegationRuntime, FakeLauncher]:
    setup = make_setup(tmp_path, asker, EchoWorkload())
    rt = DelegationRuntime(setup, {}, roost_url=None, spawner=None, approval=None, lifeline_fd=None)
    rt.book._emit = lambda event, **fields: None
    fake = FakeLauncher()
    rt.launcher = fake  # type: ignore[assignment]
    monkeypatch.setattr(parent, "resolve_global",
                        lambda name, version: ChildArtifact("0" * 64, target) if name == target.name else None)
    return rt, fake


@pytest.mark.parametrize("budget", [None, 20000], ids=["no-ceiling", "ceiling"])
async def test_an_agent_delegating_to_an_agent_needs_a_ceiling(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, budget: int | None
) -> None:
    rt, fake = runtime(tmp_path, agent("lead"), agent("fixer", budget), monkeypatch)
    got = await rt.delegate_call("fixer", "0.1.0", "fix it", False, context_id="ctx", trust="trusted")
    if budget is None:
        assert got["status"] == "refused" and fake.calls == []
        assert got["output"].startswith(f"spawn refused: {SEED}. route: delegate-task fixer — ")
        assert "authorize: set `inference.budget_tokens" in got["output"]
        assert rt.setup.delegation_counts.get("refused") == 1
    else:
        assert got["status"] == "started" and fake.calls == ["fixer"]


async def test_a_plan_session_delegating_to_an_uncapped_agent_is_not_agent_triggered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rt, fake = runtime(tmp_path, Manifest("boss", "0.1.0", plan="plan.yaml"), agent("fixer"), monkeypatch)
    got = await rt.delegate_call("fixer", "0.1.0", "fix it", True, context_id="ctx", trust="trusted")
    assert got["status"] == "started" and fake.calls == ["fixer"]
