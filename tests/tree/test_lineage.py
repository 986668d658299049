"""Lineage construction and spawn-set narrowing (pure; spec/tree.md)."""

from __future__ import annotations

import json

import pytest

from murmur.errors import DiagnosticError
from murmur.ids import new_id
from murmur.tree.lineage import (
    Narrowing,
    child_lineage,
    effective_spawn,
    lineage_from_json,
    member_lineage,
    narrowings,
    narrows,
    parse_handed,
    parse_names,
    refusal_sentence,
    root_lineage,
)

PARENT = new_id("ses")
DLG = new_id("dlg")


def handed(**over: object) -> str:
    data: dict[str, object] = {"parent": f"session:{PARENT}", "root": PARENT, "depth": 2,
                               "spawn": ["a", "b"], "delegation_id": DLG}
    data.update(over)
    return json.dumps({k: v for k, v in data.items() if v is not None})


class TestShapes:
    def test_root(self) -> None:
        """A root: parent null, root itself, depth 1; absent keys left out."""
        sid = new_id("ses")
        assert root_lineage(sid, ["a"]).to_json() == {"parent": None, "root": sid, "depth": 1, "spawn": ["a"]}

    def test_member(self) -> None:
        """A member: parent formation:frm_…, root the formation, depth 1, member and formation id."""
        fid = new_id("frm")
        assert member_lineage(fid, "coder", []).to_json() == {
            "parent": f"formation:{fid}", "root": fid, "depth": 1, "spawn": [], "formation_id": fid, "member": "coder"}

    def test_hand_down_then_parse_is_one_level_deeper(self) -> None:
        """What a parent hands its child parses into the child's lineage: same root, depth + 1."""
        parent = root_lineage(PARENT, ["a", "b"])
        value = parent.hand_down(PARENT, DLG)
        h = parse_handed(value, spawner_session=PARENT, spawner_delegation=DLG)
        assert h is not None
        child = child_lineage(h, ["a"])
        assert child.to_json() == {"parent": f"session:{PARENT}", "root": PARENT, "depth": 2, "spawn": ["a"],
                                   "delegation_id": DLG}
        assert narrows(parent, child)
        assert lineage_from_json(child.to_json()) == child

    def test_formation_id_travels_down(self) -> None:
        """A member's child carries the formation id and the formation as root."""
        fid = new_id("frm")
        h = parse_handed(member_lineage(fid, "m", ["x"]).hand_down(PARENT, DLG), spawner_session=PARENT,
                         spawner_delegation=DLG)
        assert h is not None and h.root == fid and h.formation_id == fid and h.depth == 2


class TestViaLink:
    def test_a_link_child_records_via_and_the_calling_command(self) -> None:
        """A child a capsule link started records `via: link` and 16 words of 200 characters."""
        parent = root_lineage(PARENT, ["a"])
        words = ["sh", "-c", "a " + "x" * 500, *[f"w{i}" for i in range(30)]]
        h = parse_handed(parent.hand_down(PARENT, DLG, caller=words), spawner_session=PARENT,
                         spawner_delegation=DLG)
        assert h is not None
        child = child_lineage(h, ["a"])
        shown = child.to_json()
        assert shown["via"] == "link" and len(shown["caller"]) == 16
        assert shown["caller"][:2] == ["sh", "-c"] and shown["caller"][2] == ("a " + "x" * 500)[:200]
        assert lineage_from_json(shown) == child and narrows(parent, child)

    def test_non_ascii_caller_fits_the_bound(self) -> None:
        """16 words of 200 astral characters (JSON-escaped to 12 bytes each) still parse."""
        words = ["\U0001F600" * 200] * 16
        value = root_lineage(PARENT, []).hand_down(PARENT, DLG, caller=words)
        h = parse_handed(value, spawner_session=PARENT, spawner_delegation=DLG)
        assert h is not None and h.caller == tuple(words)

    def test_without_a_link_no_via(self) -> None:
        """A delegate-task / capsule-step child records neither field."""
        h = parse_handed(root_lineage(PARENT, []).hand_down(PARENT, DLG), spawner_session=PARENT,
                         spawner_delegation=DLG)
        assert h is not None and "via" not in child_lineage(h, []).to_json()


class TestRefusals:
    @pytest.mark.parametrize(
        ("value", "reason"),
        [
            ("nope", "the value is not JSON"),
            ("[]", "the value is not a JSON object"),
            (handed(depth=1), "the field `depth` is below 2"),
            (handed(depth=0), "the field `depth` is below 2"),
            (handed(depth="3"), "the field `depth` is not an integer"),
            (handed(depth=True), "the field `depth` is not an integer"),
            (handed(depth=1000), "the field `depth` is above 64"),
            (handed(spawn="a,b"), "the field `spawn` is not a list of capsule names"),
            (handed(spawn=["a,b"]), "the field `spawn` is not a list of capsule names"),
            (handed(root="x"), "the field `root` is not a session or formation id"),
            (handed(parent=f"formation:{new_id('frm')}"), "the field `parent` is not `session:`"),
            (handed(delegation_id="dlg_1"), "the field `delegation_id` is not a delegation id"),
            (handed(extra=1), "the field `extra` is not a lineage field"),
            (handed(parent=f"session:{new_id('ses')}"), "names another parent than MURMUR_SPAWNER"),
            (handed(delegation_id=new_id("dlg")), "names another delegation than MURMUR_SPAWNER"),
            (handed(via="shell", caller=["sh"]), "the field `via` is not `link`"),
            (handed(via="link"), "the fields `via` and `caller` are not given together"),
            (handed(caller=["sh"]), "the fields `via` and `caller` are not given together"),
            (handed(via="link", caller=["x"] * 17), "the field `caller` is not a list of at most 16"),
            (handed(via="link", caller=["x" * 201]), "the field `caller` is not a list of at most 16"),
            (handed(via="link", caller="sh -c kid"), "the field `caller` is not a list of at most 16"),
        ],
    )
    def test_unreadable_or_inconsistent(self, value: str, reason: str) -> None:
        """A child claiming a shallower depth, another parent, or a malformed set is E-TRE-001."""
        with pytest.raises(DiagnosticError) as exc:
            parse_handed(value, spawner_session=PARENT, spawner_delegation=DLG)
        d = exc.value.diagnostics[0]
        assert d.code == "E-TRE-001" and reason in d.message

    def test_lineage_without_spawner(self) -> None:
        """A lineage is handed only beside a spawner handle."""
        with pytest.raises(DiagnosticError, match="without MURMUR_SPAWNER"):
            parse_handed(handed(), spawner_session=None, spawner_delegation=None)

    def test_spawner_without_lineage(self) -> None:
        """A spawner handle without a lineage is refused (a real parent sets both)."""
        with pytest.raises(DiagnosticError, match="MURMUR_LINEAGE is not"):
            parse_handed(None, spawner_session=PARENT, spawner_delegation=DLG)

    def test_neither_is_a_root(self) -> None:
        """No variables: not delegated."""
        assert parse_handed("  ", spawner_session=None, spawner_delegation=None) is None


class TestSpawnSet:
    @pytest.mark.parametrize(
        ("manifest", "ceiling", "narrow", "expect", "warned"),
        [
            (["a", "b", "c"], None, [], ["a", "b", "c"], None),
            (["a", "b", "c"], None, [("--spawn", ["c", "a"])], ["a", "c"], None),
            (["a", "b"], None, [("--spawn", ["a", "z"])], ["a"], "'z'"),
            (["a", "b"], None, [("--no-spawn", [])], [], None),
            (["a", "b"], None, [("MURMUR_SPAWN", ["b"]), ("--spawn", ["a", "b"])], ["b"], None),
            (["a", "b", "c"], ["a"], [], ["a"], None),
            # a child naming a wider set than its parent handed it gets the intersection
            (["a", "b", "c"], ["a"], [("--spawn", ["a", "b"])], ["a"], "'b'"),
            ([], None, [("--spawn", ["a"])], [], "'a'"),
        ],
    )
    def test_only_narrows(self, manifest: list[str], ceiling: list[str] | None,
                          narrow: list[tuple[str, list[str]]], expect: list[str], warned: str | None) -> None:
        """manifest ∩ ceiling ∩ every narrowing; one W-TRE-001 naming what is outside."""
        d = effective_spawn(manifest, ceiling=ceiling, narrow=[Narrowing(s, tuple(n)) for s, n in narrow])
        assert list(d.spawn) == expect
        assert set(d.spawn) <= set(manifest) and (ceiling is None or set(d.spawn) <= set(ceiling))
        if warned is None:
            assert d.warnings == ()
        else:
            (w,) = d.warnings
            assert w.code == "W-TRE-001" and warned in w.message

    def test_child_cannot_widen_past_its_ceiling(self) -> None:
        """child_lineage cuts any set to the handed ceiling."""
        h = parse_handed(handed(spawn=["a"]), spawner_session=PARENT, spawner_delegation=DLG)
        assert h is not None
        assert child_lineage(h, ["a", "b"]).spawn == ("a",)

    def test_names(self) -> None:
        """`a, b` and `none`."""
        assert parse_names("a, b,a") == ("a", "b")
        assert parse_names("none") == () and parse_names("NONE") == ()
        with pytest.raises(ValueError, match="empty"):
            parse_names("a,,b")

    def test_narrowings_sources(self) -> None:
        """MURMUR_SPAWN (blank = unset), --spawn, --no-spawn; a bad entry is E-TRE-002."""
        got = narrowings(spawn_flag="a", no_spawn=True, environ={"MURMUR_SPAWN": "none"})
        assert [(n.source, n.names) for n in got] == [("MURMUR_SPAWN", ()), ("--spawn", ("a",)), ("--no-spawn", ())]
        assert narrowings(spawn_flag=None, no_spawn=False, environ={"MURMUR_SPAWN": " "}) == ()
        with pytest.raises(DiagnosticError) as exc:
            narrowings(spawn_flag="a b", no_spawn=False, environ={})
        assert exc.value.diagnostics[0].code == "E-TRE-002"

    def test_refusal_sentence(self) -> None:
        """The exact sentence of the issue."""
        assert refusal_sentence("w") == (
            "spawn refused: 'w' is not in this session's spawn set (narrowed by --spawn / MURMUR_SPAWN)")
