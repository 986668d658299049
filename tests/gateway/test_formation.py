"""A formation launcher runs its tree's gateway (real launcher, fake members; spec/gateway.md)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from e2e._formation import Spec, launched, make_project, wait_for

pytestmark = pytest.mark.e2e

# Runs outside the formation's tree: a child of the test, not of the launcher.
OUTSIDE = """
import sys, httpx
got = httpx.post(sys.argv[1] + "/up/https/api.anthropic.com/v1/messages", json={}, trust_env=False)
print(got.status_code, got.json()["error"]["type"], got.json()["error"]["message"][:9])
"""


def test_members_are_handed_the_gateway_and_outsiders_are_refused(tmp_path: Path, murmur_home: Path) -> None:
    proj = make_project(tmp_path, [Spec("lead", entry=True)])
    with launched(proj, tmp_path, {"lead": {"task_seconds": 30}}, ["--task", "hi", "--budget-tokens", "50"]) as run:
        wait_for(lambda: bool(run.events(event="start")), 20)
        (start,) = run.events(event="start")
        url = start["env"]["MURMUR_GATEWAY_ENDPOINT"]
        assert url.startswith("http://127.0.0.1:")
        assert "--budget-tokens" not in start["argv"]  # the budget stays with the launcher
        out = subprocess.run([sys.executable, "-c", OUTSIDE, url], capture_output=True, text=True, timeout=30)
        assert out.stdout.split() == ["403", "permission_error", "E-GWY-001"], out.stderr
        run.kill_everything()
    with pytest.raises(httpx.ConnectError):  # nothing of the gateway outlives the launcher
        httpx.post(url + "/up/https/api.anthropic.com/v1/messages", json={}, trust_env=False, timeout=5)
    records = list(murmur_home.rglob("gateway.jsonl"))
    refused = [json.loads(line) for p in records for line in p.read_text().splitlines()]
    assert [r["code"] for r in refused if r["type"] == "gateway_refused"] == ["E-GWY-001"]


def test_the_roster_s_budget_key_is_the_tree_budget_and_the_flag_only_tightens(
    tmp_path: Path, murmur_home: Path
) -> None:
    """`budget_tokens` in roster.yaml runs the gateway with that budget, as `--budget-tokens`
    does; given both, the smaller holds (spec/roster.md "Tree budget")."""
    proj = make_project(tmp_path, [Spec("lead", entry=True)])
    roster = proj / "roster.yaml"
    roster.write_text(roster.read_text() + "budget_tokens: 50\n")
    with launched(proj, tmp_path, {"lead": {"task_seconds": 30}}, ["--task", "hi", "--budget-tokens", "80"]) as run:
        wait_for(lambda: bool(run.events(event="start")), 20)
        (start,) = run.events(event="start")
        assert start["env"]["MURMUR_GATEWAY_ENDPOINT"].startswith("http://127.0.0.1:")
        spend = list((murmur_home / "tree" / "spend").glob("frm_*/frm_*.json"))
        assert len(spend) == 1, spend
        record = json.loads(spend[0].read_text())
        assert record["budget_tokens"] == 50 and record["node"] == record["root"] == spend[0].parent.name
        run.kill_everything()
