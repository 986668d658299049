"""inference.budget_tokens: a scripted model whose reported usage crosses the ceiling ends
the task spend_ceiling_reached (E-RUN-040 from `mur run`), and `who` blocks an agent route
to an agent without one."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest
import trio

from agent.scripted import (
    FakeTrace,
    Reply,
    ScriptedServer,
    agent_manifest,
    oa_text,
    oa_tools,
    task_context,
)
from agent.test_e2e_run import MANIFEST, Mur, capsule, mur_runner, start_mur, trace_records  # noqa: F401
from murmur.agent import AgentWorkload
from murmur.routing.catalog import Catalog, Formation
from murmur.routing.index import answer
from routing.fixtures import capsule as cap
from routing.fixtures import member


def _budgeted(url: str, budget: int) -> object:
    m = agent_manifest(url, shell=("ls",))
    assert m.inference is not None
    return attrs.evolve(m, inference=attrs.evolve(m.inference, budget_tokens=budget))


async def test_turn_passing_the_ceiling_ends_the_task_without_running_its_tools(
    provider: ScriptedServer, tmp_path: Path
) -> None:
    manifest = _budgeted(provider.url, 100)
    ctx = task_context(manifest, tmp_path, FakeTrace())  # type: ignore[arg-type]
    provider.add(Reply(oa_tools(("c1", "ls", {"args": []}), prompt=40, completion=10)),
                 Reply(oa_tools(("c2", "ls", {"args": []}), prompt=50, completion=10)),
                 Reply(oa_text("never asked")))
    wl = AgentWorkload(manifest, Path("."), environ={"API_KEY": "k", "PATH": "/usr/bin:/bin"})  # type: ignore[arg-type]
    with trio.fail_after(30):
        outcome = await wl.run_task(ctx)
    assert outcome.status == "spend_ceiling_reached"
    assert outcome.answer == "the task used 110 tokens (input + output) against its ceiling of 100 (inference.budget_tokens)"
    assert len(provider.requests) == 2
    assert len(ctx.trace.of("shell")) == 1  # the first turn's ls ran; the second turn's did not


async def test_ceiling_reached_exactly_stops_before_the_next_turn(provider: ScriptedServer, tmp_path: Path) -> None:
    manifest = _budgeted(provider.url, 50)
    ctx = task_context(manifest, tmp_path, FakeTrace())  # type: ignore[arg-type]
    provider.add(Reply(oa_tools(("c1", "ls", {"args": []}), prompt=40, completion=10)), Reply(oa_text("x")))
    wl = AgentWorkload(manifest, Path("."), environ={"API_KEY": "k", "PATH": "/usr/bin:/bin"})  # type: ignore[arg-type]
    with trio.fail_after(30):
        outcome = await wl.run_task(ctx)
    assert outcome.status == "spend_ceiling_reached" and len(provider.requests) == 1


async def test_under_the_ceiling_is_untouched(provider: ScriptedServer, tmp_path: Path) -> None:
    manifest = _budgeted(provider.url, 10_000)
    ctx = task_context(manifest, tmp_path, FakeTrace())  # type: ignore[arg-type]
    provider.add(Reply(oa_text("done")))
    wl = AgentWorkload(manifest, Path("."), environ={"API_KEY": "k", "PATH": "/usr/bin:/bin"})  # type: ignore[arg-type]
    with trio.fail_after(30):
        assert (await wl.run_task(ctx)).status == "ok"


@pytest.mark.e2e
async def test_mur_run_ends_spend_ceiling_reached_with_e_run_040(
    provider: ScriptedServer, tmp_path: Path, nursery: trio.Nursery, mur_runner: list[Mur]  # noqa: F811
) -> None:
    capdir, work, env = capsule(tmp_path, provider.url)
    text = (capdir / "murmur.yaml").read_text().replace("  max_turns: 4\n", "  max_turns: 4\n  budget_tokens: 30\n")
    (capdir / "murmur.yaml").write_text(text)
    provider.add(Reply(oa_tools(("c1", "ls", {"args": []}), prompt=25, completion=10)), Reply(oa_text("x")))
    m = await start_mur(nursery, mur_runner, ["--manifest", str(capdir), "--workdir", str(work),
                                              "--no-env-file", "--task", "list"], cwd=tmp_path, env=env)
    with trio.fail_after(60):
        code = await m.proc.wait()
        await m.drained.wait()
    assert code == 1, m.stderr_text
    assert "E-RUN-040" in m.stderr_text and "spend_ceiling_reached" in m.stderr_text
    (task_end,) = [r for r in trace_records(tmp_path / "home") if r["event_type"] == "task_end"]
    assert task_end["exit_status"] == "spend_ceiling_reached"


def test_who_blocks_an_agent_route_to_an_agent_without_a_ceiling() -> None:
    lead = cap("lead", agent=True, budget=1000, serves=False)
    f = Formation("roster.yaml", (member("lead", lead, "helper", entry=True),
                                  member("helper", cap("helper", agent=True, shell=("cargo",)))))
    ans = answer(Catalog(tuple(m.capsule for m in f.members), f), can="cargo", asking="lead")
    assert ans.ready == ()
    (route,) = [r for r in ans.blocked if r.kind.value == "call-member"]
    assert route.authorize is not None and "inference.budget_tokens" in route.authorize
