"""An agent member's `call-member` to an agent member without a spending ceiling is refused
with the rule's sentence and the routing line; to one with a ceiling it proceeds (the
negative control). The callee is judged by its running record's manifest (spec/routing.md
"Spending ceilings")."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from murmur import procstat
from murmur.formation.member.calls import CallRefused
from murmur.formation.member.member import _with_ceiling
from murmur.ids import new_id
from murmur.manifest.load import parse_manifest
from murmur.routing import member_call_refusal
from murmur.session.running_record import RunningRecord, write_running
from murmur.workload import TaskServices

FRM = "frm_" + "b" * 32
SEED = "an agent-triggered run without a spending ceiling is refused"
AGENT = """\
name: {name}
version: 0.1.0
artifacts:
  - name: d
    version: 0.2.0
    runtime: driver
inference:
  driver:
    artifact: d
  endpoint: http://127.0.0.1:9/v1
  model: m
  api_key: ${{K}}
  max_turns: 4
{budget}exports:
  peer_tasks:
    accept: true
"""


def _member(tmp: Path, member: str, budget: int | None) -> Path:
    d = tmp / member
    d.mkdir()
    path = d / "murmur.yaml"
    path.write_text(AGENT.format(name=f"app-{member}", budget=f"  budget_tokens: {budget}\n" if budget else ""))
    write_running(RunningRecord(
        session_id=new_id("ses"), url="http://127.0.0.1:1", pid=os.getpid(),
        start_time=procstat.start_time(os.getpid()) or 0, name=f"app-{member}", version="0.1.0",
        workdir="/tmp", records_dir="/tmp", started_at="2026-01-01T00:00:00Z",
        formation_id=FRM, member=member, callees=[], manifest_path=str(path)))
    return path


@pytest.fixture
def lead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    monkeypatch.setenv("MURMUR_HOME", str(tmp_path / "home"))
    _member(tmp_path, "capped", 20000)
    _member(tmp_path, "bare", None)
    return parse_manifest(AGENT.format(name="app-lead", budget=""), path="murmur.yaml")


def test_the_callee_is_judged_by_its_running_manifest(lead: object) -> None:
    why = member_call_refusal(FRM, lead, "bare")  # type: ignore[arg-type]
    assert why is not None and why.startswith(f"call refused: {SEED}. route: call-member bare — ")
    assert "relaunch the formation" in why
    assert member_call_refusal(FRM, lead, "capped") is None  # type: ignore[arg-type]
    assert member_call_refusal(FRM, lead, "nobody") is None  # type: ignore[arg-type]


async def test_the_call_is_refused_before_anything_is_sent(lead: object) -> None:
    sent: list[str] = []

    async def inner(member: str, text: str) -> Mapping[str, object]:
        sent.append(member)
        return {"status": "started", "member": member}

    layer = _with_ceiling(lambda task, base: TaskServices(call_member=inner, callees=("capped", "bare")), FRM, lead)
    assert layer is not None
    services = layer(object(), TaskServices())  # type: ignore[arg-type]
    assert services.call_member is not None
    with pytest.raises(CallRefused) as refused:
        await services.call_member("bare", "review this")
    assert SEED in str(refused.value) and sent == []
    got = await services.call_member("capped", "review this")  # the control: it proceeds
    assert got["status"] == "started" and sent == ["capped"]
