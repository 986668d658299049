"""An agent member's `call-member` to an agent member without a spending ceiling is refused
with the rule's sentence and the routing line; to one with a ceiling it proceeds (the
negative control). The callee is judged by its running record's manifest, or, not running
yet, by what the launcher read from its admitted manifest (the channel's callees line;
spec/routing.md "Spending ceilings")."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from murmur import procstat
from murmur.formation.member.calls import CallRefused
from murmur.formation.member.member import _known_ceilings, _with_ceiling
from murmur.formation.member.membership import Membership
from murmur.formation.wire import channel
from murmur.formation.wire.edge_tokens import FormationKey
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


# --- a callee not running yet: judged by what the launcher read from its manifest -----------


def _facts(name: str, budget: int | None) -> channel.CalleeFacts:
    return channel.CalleeFacts(name, f"app-{name}", True, 4, budget)


def test_a_callee_not_running_yet_is_judged_by_its_admitted_manifest(lead: object, tmp_path: Path) -> None:
    """No running record for `later`: the callees line's facts judge it, with the same
    sentence and routing line as a running callee of the same manifest gets."""
    m = Membership(FRM, credentials=None)
    m.callee_facts = {"later": _facts("later", None), "later-capped": _facts("later-capped", 20000)}
    known = _known_ceilings(m)
    why = member_call_refusal(FRM, lead, "later", known)  # type: ignore[arg-type]
    assert why is not None and why.startswith(f"call refused: {SEED}. route: call-member later — ")
    assert "in app-later's murmur.yaml" in why and "relaunch the formation" in why
    assert member_call_refusal(FRM, lead, "later-capped", known) is None  # type: ignore[arg-type]  # the control
    assert member_call_refusal(FRM, lead, "later") is None  # type: ignore[arg-type]  # (what was: not judged)
    # the same words as for the running `bare` (the same manifest but its name)
    running = member_call_refusal(FRM, lead, "bare")  # type: ignore[arg-type]
    assert running is not None and why == running.replace("bare", "later")


async def test_the_call_to_a_callee_not_running_yet_is_refused_before_the_offer(lead: object) -> None:
    sent: list[str] = []

    async def inner(member: str, text: str) -> Mapping[str, object]:
        sent.append(member)
        return {"status": "started", "member": member}

    m = Membership(FRM)
    m.take_line(channel.encode_callees([_facts("later", None), _facts("later-capped", 20000),
                                        channel.CalleeFacts("planner", "app-plan", False)])[:-1])
    assert m.callee_facts == {}  # names this member may not call are ignored
    m.credentials = channel.Credentials(FRM, "lead", FormationKey.generate().verify_key(),
                                        (channel.Call("later", "t"), channel.Call("later-capped", "t"),
                                         channel.Call("planner", "t")))
    m.take_line(channel.encode_callees([_facts("later", None), _facts("later-capped", 20000),
                                        channel.CalleeFacts("planner", "app-plan", False)])[:-1])
    assert set(m.callee_facts) == {"later", "later-capped", "planner"}
    layer = _with_ceiling(lambda task, base: TaskServices(call_member=inner, callees=m.callees), FRM, lead, m)
    assert layer is not None
    services = layer(object(), TaskServices())  # type: ignore[arg-type]
    assert services.call_member is not None
    with pytest.raises(CallRefused) as refused:
        await services.call_member("later", "review this")
    assert SEED in str(refused.value) and "call-member later" in str(refused.value) and sent == []
    assert (await services.call_member("later-capped", "review this"))["status"] == "started"  # the control
    assert (await services.call_member("planner", "plan this"))["status"] == "started"  # no agent: no ceiling
    assert sent == ["later-capped", "planner"]


def test_the_callees_line_round_trips_and_rejects_bad_shapes() -> None:
    facts = [_facts("a", 5), _facts("b", None), channel.CalleeFacts("c", "app-c", False)]
    line = channel.encode_callees(facts)
    assert channel.decode_later(line) == channel.Callees(tuple(facts))
    for bad in (b'{"callees": 3}', b'{"callees": [{"name": "a"}]}',
                b'{"callees": [{"name": "a", "capsule": "x", "ceiling": {"max_turns": -1, "budget_tokens": 1}}]}',
                b'{"callees": [{"name": "a", "capsule": "x", "ceiling": {"max_turns": 1, "budget_tokens": true}}]}'):
        with pytest.raises(channel.ChannelLineError):
            channel.decode_later(bad)
