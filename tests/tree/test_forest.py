"""The forest of `mur ps --tree`: states, scoping, short ids, exact text (pure; spec/tree.md)."""

from __future__ import annotations

from typing import Any

from murmur.tree.cascade import plan_cascade
from murmur.tree.forest import build_forest, render_text, resolve, scope, short_ids, to_json

NOW = 1_800_000_000_000
FRM = "frm_0190000000007000800000000009a3e4"
LEAD = "ses_0190000000007000800000000000c1c4"
KID = "ses_019000000000700080000000000088ab"
INV = "ses_019000000000700080000000000077d0"
CHK = "ses_019000000000700080000000000051e9"
ROOT = "ses_0190000000007000800000000000aaa1"
DLG = "dlg_01900000000070008000000000002f1c"


def start(ident: str, at: int, lineage: dict[str, Any], capsule: str, pid: int) -> dict[str, Any]:
    return {"v": 1, "event": "start", "id": ident, "unix_ms": at, "pid": pid, "start_time": 7,
            "capsule": capsule, "lineage": lineage}


def member(name: str) -> dict[str, Any]:
    return {"parent": f"formation:{FRM}", "root": FRM, "depth": 1, "spawn": [], "formation_id": FRM, "member": name}


EVENTS = [
    start(LEAD, NOW - 122_000, member("lead"), "local/lead@0.1.0", 10),
    start(INV, NOW - 121_000, member("inventory"), "local/inventory@0.1.0", 11),
    start(CHK, NOW - 121_000, member("checker"), "local/checker@0.1.0", 12),
    start(KID, NOW - 80_000, {"parent": f"session:{LEAD}", "root": FRM, "depth": 2, "spawn": [],
                              "delegation_id": DLG, "formation_id": FRM}, "audit-pycheck@0.1.0", 13),
    {"v": 1, "event": "end", "id": KID, "unix_ms": NOW - 38_800, "status": "ok", "exit_code": 0,
     "delegations": {"started": 0, "refused": 0}},
    start(ROOT, NOW - 7_200_000, {"parent": None, "root": ROOT, "depth": 1, "spawn": ["x"]}, "local/solo@1.0.0", 14),
    {"v": 1, "event": "end", "id": ROOT, "unix_ms": NOW - 7_100_000, "status": "canceled", "exit_code": 1,
     "delegations": {"started": 1, "refused": 2}},
]
ALIVE = {LEAD: True, INV: True, CHK: False}
RUNNING = {LEAD: {"started": 1, "refused": 0}, INV: {"started": 0, "refused": 0}}


def test_states_and_order() -> None:
    """Running tree first; an ended child under its parent; a dead process without an end is uncertain."""
    roots = build_forest(EVENTS, ALIVE, RUNNING)
    assert [r.id for r in roots] == [FRM, ROOT]
    frm = roots[0]
    assert frm.state == "running" and [c.id for c in frm.children] == [LEAD, INV, CHK]
    lead, _inv, chk = frm.children
    assert lead.state == "running" and [c.id for c in lead.children] == [KID]
    assert lead.children[0].state == "ended" and lead.children[0].status == "ok"
    assert chk.state == "uncertain" and chk.reason == "the process is gone and recorded no end"
    assert roots[1].state == "ended" and roots[1].delegations["refused"] == 2


def test_text_exact() -> None:
    """The text form for a fixture journal at a fixed clock."""
    roots = build_forest(EVENTS, ALIVE, RUNNING)
    text = render_text(scope(roots, NOW, show_all=True), NOW)
    assert text.splitlines() == [
        "ID               STARTED  STATE           EXIT  RUN    REFUSED  TOKENS  COMMAND",
        "frm_…a3e4        2m ago   running         -     2m02s  -        -       formation (3 members)",
        "├─ ses_…c1c4     2m ago   running         -     2m02s  0        -       ├─ lead local/lead@0.1.0",
        "│  └─ ses_…88ab  1m ago   ended ok        0     41.2s  0        -       │  └─ audit-pycheck@0.1.0 (dlg_…2f1c)",
        "├─ ses_…77d0     2m ago   running         -     2m01s  0        -       ├─ inventory local/inventory@0.1.0",
        "└─ ses_…51e9     2m ago   uncertain       -     -      0        -       └─ checker local/checker@0.1.0 "
        "[the process is gone and recorded no end]",
        "ses_…aaa1        2h ago   ended canceled  1     1m40s  2        -       local/solo@1.0.0",
    ]


def test_scope_leaves_old_trees_out() -> None:
    """Without --all: running, last hour, five newest; an old tree beyond those is counted."""
    events = list(EVENTS)
    for i in range(6):
        sid = f"ses_0190000000007000800000000000b{i:03d}"
        events.append(start(sid, NOW - 10_000_000 - i, {"parent": None, "root": sid, "depth": 1, "spawn": []},
                            "local/old@0.1.0", 100 + i))
        events.append({"v": 1, "event": "end", "id": sid, "unix_ms": NOW - 9_000_000, "status": "ok", "exit_code": 0})
    roots = build_forest(events, ALIVE, RUNNING)
    shown = scope(roots, NOW)
    assert shown.left_out == 3 and len(shown.roots) == 5  # the running tree is one of the five newest
    assert render_text(shown, NOW).splitlines()[-1] == (
        "(3 older trees not shown; `mur ps --tree --all` lists every tree)")
    assert render_text(scope([], NOW), NOW) == "no session trees recorded"


def test_short_ids_unique() -> None:
    """Ids sharing their last four hex digits get longer tails."""
    a, b = "ses_" + "0" * 27 + "1abcd", "ses_" + "0" * 27 + "2abcd"
    got = short_ids([a, b, LEAD])
    assert got[a] == "ses_…1abcd" and got[b] == "ses_…2abcd" and got[LEAD] == "ses_…c1c4"
    roots = build_forest(EVENTS, ALIVE, RUNNING)
    assert [n.id for n in resolve(roots, "ses_…c1c4")] == [LEAD]
    assert [n.id for n in resolve(roots, "C1C4")] == [LEAD]
    assert resolve(roots, "c4") == []


def test_json_unscoped() -> None:
    """murmur.ps.tree/v1 with every node's fields."""
    doc = to_json(build_forest(EVENTS, ALIVE, RUNNING))
    assert doc["schema"] == "murmur.ps.tree/v1" and len(doc["roots"]) == 2
    lead = doc["roots"][0]["children"][0]
    assert {"id", "state", "exit_code", "created_unix_ms", "finished_unix_ms", "lineage", "refused",
            "children"} <= set(lead)
    assert lead["children"][0]["lineage"]["depth"] == 2


def test_uncertain_parent_makes_live_children_uncertain() -> None:
    """A live child whose parent vanished without an end is uncertain (parent lost)."""
    roots = build_forest(EVENTS, {**ALIVE, LEAD: False, KID: True},
                         RUNNING)
    lead = roots[0].children[0]
    assert lead.state == "uncertain"


def test_cascade_plan_covers_the_subtree_deepest_first() -> None:
    """Every not-ended session of the subtree, deepest first; the named node marked; kill at +25 s."""
    events = [e for e in EVENTS if not (e["event"] == "end" and e["id"] == KID)]
    roots = build_forest(events, {**ALIVE, KID: True}, RUNNING)
    lead = roots[0].children[0]
    plan = plan_cascade(lead, 100.0)
    assert [t.session_id for t in plan.targets] == [KID, LEAD]
    assert [t.is_target for t in plan.targets] == [False, True]
    assert plan.kill_at_s == 125.0 and [t.session_id for t in plan.descendants] == [KID]
    assert [t.session_id for t in plan_cascade(lead, 0.0, include_self=False).targets] == [KID]


def test_a_link_child_shows_its_calling_command() -> None:
    """A child a capsule link started sits under its parent; COMMAND ends `via link: <command>`."""
    kid = {"parent": f"session:{ROOT}", "root": ROOT, "depth": 2, "spawn": [], "delegation_id": DLG,
           "via": "link", "caller": ["sh", "-c", "kid hello"]}
    events = [start(ROOT, NOW - 10_000, {"parent": None, "root": ROOT, "depth": 1, "spawn": ["kid"]},
                    "local/boss@0.1.0", 14),
              start(KID, NOW - 5_000, kid, "kid@0.1.0", 15)]
    roots = build_forest(events, {ROOT: True, KID: True}, {ROOT: {"started": 1, "refused": 0}})
    assert [c.id for c in roots[0].children] == [KID]
    lines = render_text(scope(roots, NOW, show_all=True), NOW).splitlines()
    assert lines[2].endswith("└─ kid@0.1.0 (dlg_…2f1c) via link: sh -c kid hello"), lines


REFUSED = "dlg_0190000000007000800000000000d00e"


def test_entry_member_and_a_delegation_that_never_started() -> None:
    """Issue 30 item 5: the entry member's row says `(entry)`; a delegation refused before it
    started a session is a `delegation` node under its parent with its reason, in the text
    (state `refused`, RUN `-`) and in the JSON (with `children`)."""
    lead = start(LEAD, NOW - 122_000, {**member("lead"), "entry": True}, "local/lead@0.1.0", 10)
    refused = {"v": 1, "event": "delegation", "id": REFUSED, "unix_ms": NOW - 60_000, "parent": LEAD, "root": FRM,
               "capsule": "builder@0.1.0", "status": "refused",
               "reason": "spawn refused: depth limit reached (3)"}
    events = [lead, *EVENTS[1:4], refused, *EVENTS[4:]]
    roots = build_forest(events, ALIVE, RUNNING)
    text = render_text(scope(roots, NOW, show_all=True), NOW).splitlines()
    assert text[2].endswith("├─ lead (entry) local/lead@0.1.0")
    assert text[4].split()[:5] == ["│", "└─", "dlg_…d00e", "1m", "ago"]
    assert text[4].split("  ")[0:1] and " refused " in text[4] and "  -      -  " in text[4]
    assert text[4].endswith("│  └─ builder@0.1.0 [spawn refused: depth limit reached (3)]")
    node = to_json(roots)["roots"][0]["children"][0]["children"][1]
    assert node["node"] == "delegation" and node["id"] == REFUSED
    assert (node["state"], node["status"], node["capsule"]) == ("not-started", "refused", "builder@0.1.0")
    assert node["reason"] == "spawn refused: depth limit reached (3)" and node["children"] == []
    assert node["lineage"]["parent"] == f"session:{LEAD}"
    # a delegation whose child did start a session after all is that session's node, not two
    late = {**refused, "id": DLG, "status": "failed"}
    roots = build_forest([*events, late], ALIVE, RUNNING)
    assert [c.id for c in roots[0].children[0].children] == [KID, REFUSED]


def test_stopping_a_delegation_that_never_started_says_so() -> None:
    import pytest

    from murmur.errors import DiagnosticError
    from murmur.tree.stop import stop_node

    refused = {"v": 1, "event": "delegation", "id": REFUSED, "unix_ms": NOW - 60_000, "parent": LEAD, "root": FRM,
               "capsule": "builder@0.1.0", "status": "failed", "reason": "the launch failed"}
    roots = build_forest([*EVENTS, refused], ALIVE, RUNNING)
    (node,) = resolve(roots, REFUSED[-6:])
    with pytest.raises(DiagnosticError) as got:
        stop_node(node, progress=False)
    assert got.value.code == "E-RUN-022" and "(it is failed: it never started a session)" in str(got.value)


def test_tokens_show_each_node_s_own_and_subtree_spend() -> None:
    """The gateway's spend records fill TOKENS (own/subtree) and ``tokens`` in the JSON; a node
    with no record shows ``-`` and null."""
    from murmur.tree.forest import attach_spend

    roots = build_forest(EVENTS, ALIVE, RUNNING)
    attach_spend(roots, {FRM: {
        FRM: {"node": FRM, "own_tokens": 0, "subtree_tokens": 180, "budget_tokens": 1000},
        LEAD: {"node": LEAD, "own_tokens": 60, "subtree_tokens": 180, "budget_tokens": 1000},
        KID: {"node": KID, "own_tokens": 120, "subtree_tokens": 120, "budget_tokens": 940},
    }})
    lines = render_text(scope(roots, NOW, show_all=True), NOW).splitlines()
    assert lines[0].split() == ["ID", "STARTED", "STATE", "EXIT", "RUN", "REFUSED", "TOKENS", "COMMAND"]
    assert "0/180" in lines[1] and "60/180" in lines[2] and "120/120" in lines[3]
    assert lines[4].split()[-4] == "-"  # inventory: no calls recorded
    doc = to_json(roots)
    frm = doc["roots"][0]
    assert frm["tokens"] == {"own": 0, "subtree": 180, "budget": 1000}
    assert frm["children"][0]["children"][0]["tokens"] == {"own": 120, "subtree": 120, "budget": 940}
    assert frm["children"][1]["tokens"] is None


def test_a_link_without_a_version_is_shown_by_its_name() -> None:
    """A capsule link run without --capsule-version asks for no version: its not-started node
    names the capsule alone (`loop`), never `loop@` with nothing after the `@`."""
    from murmur.tree import asked_label

    assert asked_label("loop", "") == "loop" and asked_label("loop", None) == "loop"
    assert asked_label("loop", "0.1.0") == "loop@0.1.0"
    refused = {"v": 1, "event": "delegation", "id": REFUSED, "unix_ms": NOW - 60_000, "parent": LEAD, "root": FRM,
               "capsule": asked_label("loop", ""), "status": "refused", "reason": "spawn refused: not in the set"}
    roots = build_forest([*EVENTS, refused], ALIVE, RUNNING)
    text = render_text(scope(roots, NOW, show_all=True), NOW)
    assert "└─ loop [spawn refused: not in the set]" in text and "loop@" not in text
