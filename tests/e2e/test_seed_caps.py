"""Tree caps end to end (issue 30 item 3): a self-naming capsule under a real mur-roost is
stopped by `--max-same-capsule-chain` and by `--max-tree-total` before mur-roost is asked;
without them it runs to mur-roost's depth bound (seed 000), the negative control.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest

from murmur.registry import install

from ._delegation import MUR, Procs, plan_capsule, send_task, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CHAIN = ('steps:\n  - id: down\n    capsule: chain\n    version: 0.1.0\n    task: "{{ task }}"\n'
         '    on_error: continue\n  - id: nap\n    shell: [echo, "{{ task }}"]\n'
         'output: "{{ steps.nap.stdout }}"\n')


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("caps-home")
    src = tmp_path_factory.mktemp("caps-src")
    with mock.patch.dict(os.environ, {"MURMUR_HOME": str(home)}):
        install(plan_capsule(src, "chain", plan=CHAIN, shell=["echo"], spawn=["chain"]), global_=True)
    yield home


@pytest.fixture
def procs(tmp_path: Path, home: Path) -> Iterator[Procs]:
    env = dict(os.environ)
    env["MURMUR_HOME"] = str(home)
    for name in ("MURMUR_ROOST_URL", "MURMUR_SPAWNER", "MURMUR_SPAWNER_LIFELINE", "MURMUR_LINEAGE", "MURMUR_SPAWN",
                 "MURMUR_TREE_CAPS"):
        env.pop(name, None)
    p = Procs(tmp_path, env)
    try:
        yield p
    finally:
        p.close()


def _tree(procs: Procs, root: str) -> dict[str, Any]:
    r = subprocess.run([*MUR, "ps", "--tree", "--json"], env=procs.env, capture_output=True, text=True, timeout=60)
    node: dict[str, Any] = next(n for n in json.loads(r.stdout)["roots"] if n["id"] == root)
    return node


def _levels(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The chain of sessions from ``node`` down (a never-started delegation is not a level)."""
    out = [node]
    while any(c["node"] == "session" for c in node["children"]):
        node = next(c for c in node["children"] if c["node"] == "session")
        out.append(node)
    return out


def _not_started(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in node["children"] if c["node"] == "delegation"]


def _run(procs: Procs, tmp_path: Path, *flags: str) -> list[dict[str, Any]]:
    _roost, url = procs.roost("--spawn-allow", "chain", "--max-depth", "3")
    a = procs.mur_run("chain", tmp_path / "work", url, *flags)
    task = send_task(a.ready["url"], "x")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED", task

    def settled() -> list[dict[str, Any]] | None:
        levels = _levels(_tree(procs, a.ready["session_id"]))
        return levels if all(n["state"] == "ended" for n in levels[1:]) else None

    return wait_until(settled, timeout=60, what="every child ended")


def test_without_caps_a_self_naming_capsule_runs_to_roost_depth(procs: Procs, tmp_path: Path) -> None:
    levels = _run(procs, tmp_path)
    assert len(levels) == 4, levels  # four levels under --max-depth 3 (seed 000)
    assert [n["refused"] for n in levels] == [0, 0, 0, 1]  # the fourth is refused by mur-roost
    assert all("caps" not in n for n in levels)  # unbounded and off: nothing to show
    # issue 30 item 5: the delegation mur-roost refused never started a session, and shows as a
    # delegation node under the fourth level, with mur-roost's reason
    [refused] = _not_started(levels[3])
    assert (refused["state"], refused["status"], refused["capsule"]) == ("not-started", "refused", "chain@0.1.0")
    assert refused["id"].startswith("dlg_") and "depth" in refused["reason"], refused
    assert all(not _not_started(n) for n in levels[:3])
    text = subprocess.run([*MUR, "ps", "--tree"], env=procs.env, capture_output=True, text=True, timeout=60).stdout
    row = next((ln for ln in text.splitlines() if "└─ dlg_…" in ln), "")
    assert " refused " in row and "chain@0.1.0 [" in row and "(dlg_" not in row, text


def test_same_capsule_chain_cap_refuses_before_roost(procs: Procs, tmp_path: Path) -> None:
    levels = _run(procs, tmp_path, "--max-same-capsule-chain", "1")
    assert len(levels) == 2, levels  # root -> child is 1 step; the child's own step would be 2
    assert [n["refused"] for n in levels] == [0, 1], levels
    [refused] = _not_started(levels[1])  # refused by the runtime before mur-roost: a delegation node too
    assert refused["status"] == "refused" and "--max-same-capsule-chain 1" in refused["reason"], refused
    caps = {"max_tree_total": None, "max_same_capsule_chain": 1}
    assert [n.get("caps") for n in levels] == [caps, caps], levels  # shown by `mur ps --tree --json`


def test_tree_total_counts_every_attempt_and_refuses_past_it(procs: Procs, tmp_path: Path) -> None:
    levels = _run(procs, tmp_path, "--max-tree-total", "2")
    assert len(levels) == 3, levels  # two delegations started; the third attempt is refused
    assert [n["refused"] for n in levels] == [0, 0, 1], levels
    assert levels[0]["caps"] == {"max_tree_total": 2, "max_same_capsule_chain": None}, levels[0]
