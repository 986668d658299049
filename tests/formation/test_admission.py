"""Roster admission: the seed's admission order, reachability and W-ROS-001 tables."""

from __future__ import annotations

from pathlib import Path

import attrs
import pytest

from murmur.diagnostics import error
from murmur.errors import DiagnosticError
from murmur.formation.roster.admission import (
    AdmittedRoster,
    Edge,
    admit,
    admit_file,
    tasks_held_at_once,
)
from murmur.formation.roster.schema import ReachabilityKind, parse_roster
from murmur.manifest.model import (
    AfterTask,
    Authentication,
    Exports,
    Lifecycle,
    Manifest,
    Network,
    PeerTasks,
    TaskAcceptance,
)


@attrs.frozen
class FakeInstalled:
    sha256: str
    archive: Path
    manifest: Manifest


def manifest(name: str, *, serves: bool = True, auth: bool = True,
             lifecycle: Lifecycle | None = None) -> Manifest:
    return Manifest(
        name=name,
        version="1.0.0",
        exports=Exports(PeerTasks(True)) if serves else None,
        network=Network(Authentication()) if auth else None,
        lifecycle=lifecycle or Lifecycle(TaskAcceptance.QUEUE, 4, AfterTask.SLEEP),
    )


class FakeStore:
    """A resolver over a dict; records every lookup in order."""

    def __init__(self, **manifests: Manifest) -> None:
        self.manifests = dict(manifests)
        self.failures: dict[str, DiagnosticError] = {}
        self.calls: list[tuple[str, str]] = []

    def __call__(self, capsule: str, version: str) -> FakeInstalled:
        self.calls.append((capsule, version))
        short = capsule.split("/")[1]
        if short in self.failures:
            raise self.failures[short]
        if short not in self.manifests:
            raise DiagnosticError(error("E-REG-001", f"{capsule}@{version} is not installed"))
        return FakeInstalled(f"{short:0<64}"[:64], Path(f"/store/{short}.mur.zip"),
                             self.manifests[short])


def roster_text(members: list[tuple[str, bool]], reach: str = "") -> str:
    lines = ["roster_version: 1", "members:"]
    for name, entry in members:
        lines += [f"  - name: {name}", f"    capsule: local/{name}", "    version: 1.0.0"]
        if entry:
            lines.append("    entry: true")
    return "\n".join(lines) + "\n" + reach


PLANNER3 = [("planner", True), ("coder", False), ("reviewer", False)]
SEED_RULES = ("reachability:\n  - from: planner\n    to: [coder, reviewer]\n"
              "  - from: reviewer\n    to: [coder]\n")


def seed_store() -> FakeStore:
    return FakeStore(planner=manifest("planner"), coder=manifest("coder"),
                     reviewer=manifest("reviewer"))


def refuse(text: str, store: FakeStore) -> tuple[str, int | None, str]:
    with pytest.raises(DiagnosticError) as info:
        admit(parse_roster(text, path="p/roster.yaml"), store)
    assert len(info.value.diagnostics) == 1
    d = info.value.diagnostics[0]
    assert d.location is not None and d.location.path == "p/roster.yaml"
    return d.code, d.location.line, d.message


def edges(a: AdmittedRoster) -> list[tuple[str, str]]:
    return [(e.caller, e.callee) for e in a.edges]


class TestAdmitted:
    def test_seed_example_admitted(self) -> None:
        """The seed's roster: members in order, bound to hashes, explicit edges, callees."""
        store = seed_store()
        a = admit(parse_roster(roster_text(PLANNER3, SEED_RULES)), store)
        assert [m.name for m in a.members] == ["planner", "coder", "reviewer"]
        assert a.entry.name == "planner"
        assert [m.name for m in a.peers] == ["coder", "reviewer"]
        assert edges(a) == [("planner", "coder"), ("planner", "reviewer"), ("reviewer", "coder")]
        assert a.member("planner").callees == ("coder", "reviewer")
        assert a.member("reviewer").callees == ("coder",)
        assert a.member("coder").callees == ()
        assert [m.name for m in a.callees("planner")] == ["coder", "reviewer"]
        assert a.callers("coder") == ("planner", "reviewer")
        assert a.may_call("reviewer", "coder") and not a.may_call("coder", "reviewer")
        assert not a.may_call("ghost", "coder")
        assert a.member("coder").sha256.startswith("coder")
        assert a.member("coder").archive == Path("/store/coder.mur.zip")
        assert a.member("coder").line == 7
        assert a.has_edges and a.reachability is ReachabilityKind.RULES
        assert store.calls == [("local/planner", "1.0.0"), ("local/coder", "1.0.0"),
                               ("local/reviewer", "1.0.0")]
        assert a.warnings == ()
        with pytest.raises(KeyError):
            a.member("ghost")

    def test_repeated_edges_collapse_sorted_by_roster_index(self) -> None:
        """The same edge written twice is one edge; edges sort by roster index."""
        reach = ("reachability:\n  - from: reviewer\n    to: [coder, coder]\n"
                 "  - from: planner\n    to: [reviewer, coder]\n  - from: planner\n    to: [coder]\n")
        a = admit(parse_roster(roster_text(PLANNER3, reach)), seed_store())
        assert edges(a) == [("planner", "coder"), ("planner", "reviewer"), ("reviewer", "coder")]
        assert a.member("planner").callees == ("coder", "reviewer")


# --- the seed's reachability table ------------------------------------------------------

FOUR = [("a", True), ("b", False), ("c", False), ("d", False)]


class TestReachabilityTable:
    @pytest.mark.parametrize("reach", ["", "reachability:\n", "reachability: []\n"])
    def test_absent_or_empty_means_no_edges(self, reach: str) -> None:
        """Absent or [] -> no edges; then no member needs authentication."""
        store = FakeStore(**{n: manifest(n, auth=False) for n, _ in FOUR})
        a = admit(parse_roster(roster_text(FOUR, reach)), store)
        assert a.edges == () and not a.has_edges
        assert a.reachability is ReachabilityKind.NONE

    def test_all_pairs_members_that_both_serve_never_into_entry(self) -> None:
        """`all`: every ordered pair of distinct serving members, except pairs into the entry."""
        store = FakeStore(a=manifest("a"), b=manifest("b"), c=manifest("c"),
                          d=manifest("d", serves=False))
        a = admit(parse_roster(roster_text(FOUR, "reachability: all\n")), store)
        assert edges(a) == [("a", "b"), ("a", "c"), ("b", "c"), ("c", "b")]
        assert a.callers("a") == ()
        assert a.reachability is ReachabilityKind.ALL

    def test_all_entry_calls_only_when_it_serves(self) -> None:
        """Under `all` the entry member calls others only if it serves peers itself."""
        store = FakeStore(a=manifest("a", serves=False), b=manifest("b"), c=manifest("c"),
                          d=manifest("d", serves=False))
        a = admit(parse_roster(roster_text(FOUR, "reachability: all\n")), store)
        assert edges(a) == [("b", "c"), ("c", "b")]
        assert a.member("a").callees == ()

    def test_all_pairing_nobody_needs_no_authentication(self) -> None:
        """An `all` that pairs no members has no edges and needs no authentication."""
        store = FakeStore(a=manifest("a", serves=False, auth=False), b=manifest("b", auth=False),
                          c=manifest("c", serves=False, auth=False),
                          d=manifest("d", serves=False, auth=False))
        a = admit(parse_roster(roster_text(FOUR, "reachability: all\n")), store)
        assert a.edges == ()

    def test_rules_expand_each_from_to_each_to(self) -> None:
        """A rule list: each rule's from to each member in its to; entry calls its own rules."""
        reach = "reachability:\n  - from: a\n    to: [c]\n  - from: b\n    to: [c, d]\n"
        store = FakeStore(a=manifest("a", serves=False), b=manifest("b", serves=False),
                          c=manifest("c"), d=manifest("d"))
        a = admit(parse_roster(roster_text(FOUR, reach)), store)
        assert edges(a) == [("a", "c"), ("b", "c"), ("b", "d")]

    def test_single_member_needs_no_authentication(self) -> None:
        """A roster with one member has no edges; a public door is admitted."""
        store = FakeStore(solo=manifest("solo", serves=False, auth=False))
        a = admit(parse_roster(roster_text([("solo", True)])), store)
        assert a.entry.name == "solo" and a.edges == ()
        assert not a.entry.authenticated and not a.entry.serves_peers


# --- the seed's admission order table ---------------------------------------------------

R = "reachability:\n"
# (id, members, reachability text, store tweak, code, line, message needle)
ADMISSION_ROWS = [
    ("2-duplicate-name", [("a", True), ("b", False), ("b", False)], "", {}, "E-ROS-003", 10, "'b' is declared more than once"),
    ("3-no-entry", [("a", False), ("b", False)], "", {}, "E-ROS-002", 2, "no member is marked `entry: true`"),
    ("3-two-entries", [("a", True), ("b", False), ("c", True)], "", {}, "E-ROS-002", 13, "members 'a', 'c' are each marked"),
    ("4-unknown-to", PLANNER3, R + "  - from: planner\n    to: [coder, tester]\n", {}, "E-ROS-004", 15, "from 'planner' names 'tester'"),
    ("4-unknown-from", PLANNER3, R + "  - from: ghost\n    to: [coder]\n", {}, "E-ROS-004", 14, "from 'ghost' names 'ghost'"),
    ("5-calls-entry", PLANNER3, R + "  - from: planner\n    to: [coder]\n  - from: reviewer\n    to: [coder, planner]\n", {}, "E-ROS-008", 17, "lists the entry member 'planner'"),
    ("6-not-installed", PLANNER3, SEED_RULES, {"missing": "coder"}, "E-ROS-007", 7, "member 'coder' (local/coder@1.0.0) cannot be admitted: not installed"),
    ("6-manifest-unreadable", PLANNER3, SEED_RULES, {"bad": ("reviewer", "E-MAN-002")}, "E-ROS-007", 10, "cannot be admitted: packed murmur.yaml does not parse (E-MAN-002)"),
    ("6-lock-disagrees", PLANNER3, SEED_RULES, {"bad": ("coder", "E-REG-005")}, "E-REG-005", 7, "member 'coder': murmur.lock disagrees"),
    ("7-callee-refuses-peers", PLANNER3, SEED_RULES, {"refuses": "reviewer"}, "E-ROS-005", 15, "member 'reviewer' is listed in a reachability rule's `to`"),
    ("8-public-door-with-edges", PLANNER3, SEED_RULES, {"public": "planner"}, "E-ROS-006", 3, "member 'planner' declares no `network.authentication`"),
]


def tweaked_store(members: list[tuple[str, bool]], tweak: dict[str, object]) -> FakeStore:
    store = FakeStore(**{
        n: manifest(n, serves=tweak.get("refuses") != n, auth=tweak.get("public") != n)
        for n, _ in members if tweak.get("missing") != n
    })
    if "bad" in tweak:
        name, code = tweak["bad"]  # type: ignore[misc]
        store.failures[name] = DiagnosticError(error(code, "packed murmur.yaml does not parse"))
    return store


class TestAdmissionOrder:
    @pytest.mark.parametrize(
        ("members", "reach", "tweak", "code", "line", "needle"),
        [pytest.param(*row[1:], id=row[0]) for row in ADMISSION_ROWS],
    )
    def test_row(self, members: list[tuple[str, bool]], reach: str, tweak: dict[str, object],
                 code: str, line: int, needle: str) -> None:
        """Each row refuses with its one code, pointing at the roster line."""
        got_code, got_line, message = refuse(roster_text(members, reach),
                                             tweaked_store(members, tweak))
        assert (got_code, got_line) == (code, line)
        assert needle in message
        assert message.startswith("roster.yaml: ")

    @pytest.mark.parametrize("row", [r for r in ADMISSION_ROWS if r[0][0] in "2345"],
                             ids=lambda r: r[0])
    def test_checks_2_to_5_read_no_store(self, row: tuple[object, ...]) -> None:
        """A structural fault is refused even when no member is installed, without a lookup."""
        empty = FakeStore()
        code, _, _ = refuse(roster_text(row[1], row[2]), empty)  # type: ignore[arg-type]
        assert code == row[4]
        assert empty.calls == []

    def test_shape_fault_reads_no_store(self, tmp_path: Path) -> None:
        """Check 1 (E-ROS-001) comes before any lookup."""
        p = tmp_path / "roster.yaml"
        p.write_text("roster_version: 1\nmembers: []\n")
        empty = FakeStore()
        with pytest.raises(DiagnosticError) as info:
            admit_file(p, resolve=empty)
        assert info.value.code == "E-ROS-001" and empty.calls == []

    def test_duplicate_name_before_entry(self) -> None:
        """Check 2 before check 3: duplicate names and no entry -> E-ROS-003."""
        code, _, _ = refuse(roster_text([("a", False), ("a", False)]), FakeStore())
        assert code == "E-ROS-003"

    def test_entry_before_unknown_rule_member(self) -> None:
        """Check 3 before check 4."""
        text = roster_text([("a", False), ("b", False)], R + "  - from: a\n    to: [zz]\n")
        assert refuse(text, FakeStore())[0] == "E-ROS-002"

    def test_unknown_member_before_entry_callee(self) -> None:
        """Check 4 before check 5, even when the entry rule comes first."""
        text = roster_text(PLANNER3, R + "  - from: coder\n    to: [planner]\n"
                           "  - from: coder\n    to: [nobody]\n")
        assert refuse(text, FakeStore())[0] == "E-ROS-004"

    def test_not_installed_before_serves_peers(self) -> None:
        """Check 6 before 7 and 8."""
        store = tweaked_store(PLANNER3, {"missing": "planner", "refuses": "coder", "public": "coder"})
        assert refuse(roster_text(PLANNER3, SEED_RULES), store)[0] == "E-ROS-007"

    def test_serves_peers_before_authentication(self) -> None:
        """Check 7 before 8."""
        store = tweaked_store(PLANNER3, {"refuses": "coder", "public": "planner"})
        assert refuse(roster_text(PLANNER3, SEED_RULES), store)[0] == "E-ROS-005"

    def test_check_6_takes_each_member_through_both_rows(self) -> None:
        """A lock conflict on an earlier member wins over a later member not installed."""
        store = tweaked_store(PLANNER3, {"missing": "reviewer", "bad": ("coder", "E-REG-005")})
        assert refuse(roster_text(PLANNER3, SEED_RULES), store)[0] == "E-REG-005"
        assert store.calls == [("local/planner", "1.0.0"), ("local/coder", "1.0.0")]
        store = tweaked_store(PLANNER3, {"missing": "coder", "bad": ("reviewer", "E-REG-005")})
        assert refuse(roster_text(PLANNER3, SEED_RULES), store)[0] == "E-ROS-007"

    def test_members_in_roster_order_within_a_check(self) -> None:
        """Within check 7 and 8, the first member in roster order is named."""
        both = {"refuses": "coder"}
        store = tweaked_store(PLANNER3, both)
        store.manifests["reviewer"] = manifest("reviewer", serves=False)
        assert "member 'coder'" in refuse(roster_text(PLANNER3, SEED_RULES), store)[2]
        store = tweaked_store(PLANNER3, {"public": "reviewer"})
        store.manifests["coder"] = manifest("coder", auth=False)
        assert "member 'coder'" in refuse(roster_text(PLANNER3, SEED_RULES), store)[2]

    def test_member_on_no_edge_still_needs_authentication(self) -> None:
        """With any edge, every member authenticates, including members on no edge."""
        members = [("a", True), ("b", False), ("c", False)]
        store = FakeStore(a=manifest("a"), b=manifest("b"), c=manifest("c", auth=False))
        code, line, _ = refuse(roster_text(members, R + "  - from: a\n    to: [b]\n"), store)
        assert (code, line) == ("E-ROS-006", 10)

    def test_caller_need_not_serve_peers(self) -> None:
        """A caller does not need to serve peers."""
        store = tweaked_store(PLANNER3, {"refuses": "planner"})
        a = admit(parse_roster(roster_text(PLANNER3, SEED_RULES)), store)
        assert not a.entry.serves_peers and a.has_edges

    def test_unexpected_os_error_is_e_ros_007(self) -> None:
        """An unreadable artifact is E-ROS-007, not a traceback."""
        def broken(capsule: str, version: str) -> FakeInstalled:
            raise PermissionError(13, "Permission denied")
        code, line, message = refuse(roster_text([("a", True)]), broken)  # type: ignore[arg-type]
        assert (code, line) == ("E-ROS-007", 3) and "cannot be read" in message


# --- W-ROS-001 ----------------------------------------------------------------------------

LINK = "https://docs.murmur.nexus/reference/diagnostics/#w-ros-001"


def fan_in(callee_lifecycle: Lifecycle, callers: int = 3) -> AdmittedRoster:
    names = [*["planner", "coder", "reviewer", "tester", "docs"][:callers], "target"]
    members = [(n, i == 0) for i, n in enumerate(names)]
    rules = "".join(f"  - from: {n}\n    to: [target]\n" for n in names[:-1])
    store = FakeStore(**{n: manifest(n) for n in names})
    store.manifests["target"] = manifest("target", lifecycle=callee_lifecycle)
    return admit(parse_roster(roster_text(members, R + rules)), store)


class TestCallerOverflow:
    @pytest.mark.parametrize(
        ("lifecycle", "held"),
        [(Lifecycle(TaskAcceptance.SINGLE, 1), 1), (Lifecycle(TaskAcceptance.QUEUE, 3), 4),
         (Lifecycle(TaskAcceptance.QUEUE, 0), 0), (Lifecycle(TaskAcceptance.NONE, 1), 0)],
    )
    def test_tasks_held_at_once(self, lifecycle: Lifecycle, held: int) -> None:
        """single 1; queue d 1+d; queue 0 and none 0."""
        assert tasks_held_at_once(manifest("x", lifecycle=lifecycle)) == held

    @pytest.mark.parametrize(
        ("lifecycle", "line"),
        [
            (Lifecycle(TaskAcceptance.QUEUE, 1, AfterTask.SLEEP),
             "warning[W-ROS-001]: roster.yaml lets 3 members call 'target' (planner, coder, "
             "reviewer), but it holds 2 tasks at once (one running, lifecycle.queue_depth: 1 "
             "waiting) so a call arriving while it is full is rejected; lifecycle.queue_depth: 2 "
             f"would hold them all ({LINK})"),
            (Lifecycle(TaskAcceptance.QUEUE, 0, AfterTask.SLEEP),
             "warning[W-ROS-001]: roster.yaml lets 3 members call 'target' (planner, coder, "
             "reviewer), but it holds no task (lifecycle.queue_depth: 0) so every call is "
             f"rejected; lifecycle.queue_depth: 2 would hold them all ({LINK})"),
            (Lifecycle(TaskAcceptance.SINGLE, 1),
             "warning[W-ROS-001]: roster.yaml lets 3 members call 'target' (planner, coder, "
             "reviewer), but it holds 1 task at once (lifecycle.task_acceptance: single) so a "
             "call arriving while it is busy is rejected; lifecycle.task_acceptance: queue with "
             f"lifecycle.queue_depth: 2 would hold them all ({LINK})"),
            (Lifecycle(TaskAcceptance.NONE, 1),
             "warning[W-ROS-001]: roster.yaml lets 3 members call 'target' (planner, coder, "
             "reviewer), but it holds no task (lifecycle.task_acceptance: none) so every call "
             "is rejected; lifecycle.task_acceptance: queue with lifecycle.queue_depth: 2 would "
             f"hold them all ({LINK})"),
        ],
        ids=["queue-1", "queue-0", "single", "none"],
    )
    def test_exact_line(self, lifecycle: Lifecycle, line: str) -> None:
        """W-ROS-001 renders as exactly one documented line; the roster is still admitted."""
        a = fan_in(lifecycle)
        assert [w.render() for w in a.warnings] == [line]
        assert "\n" not in a.warnings[0].render()
        assert a.overflows[0].callers == ("planner", "coder", "reviewer")
        assert "target (local/target@1.0.0): set" in a.overflows[0].fix()

    def test_one_caller_singular_and_depth_floor(self) -> None:
        """One caller into a none-lifecycle member: "1 member", suggested depth max(0, 1) = 1."""
        a = fan_in(Lifecycle(TaskAcceptance.NONE, 1), callers=1)
        text = a.warnings[0].render()
        assert "lets 1 member call 'target' (planner)" in text
        assert "lifecycle.queue_depth: 1 would hold them all" in text

    def test_no_warning_when_held(self) -> None:
        """Callers within what the lifecycle holds: no warning."""
        assert fan_in(Lifecycle(TaskAcceptance.QUEUE, 2, AfterTask.SLEEP)).warnings == ()
        assert fan_in(Lifecycle(TaskAcceptance.SINGLE, 1), callers=1).warnings == ()

    def test_warnings_in_roster_order_under_all(self) -> None:
        """`all` counts as expanded; warnings come in roster order."""
        single = Lifecycle(TaskAcceptance.SINGLE, 1)
        store = FakeStore(a=manifest("a"), b=manifest("b", lifecycle=single),
                          c=manifest("c", lifecycle=single), d=manifest("d"))
        a = admit(parse_roster(roster_text(FOUR, "reachability: all\n")), store)
        assert [o.member for o in a.overflows] == ["b", "c"]
        assert a.overflows[0].callers == ("a", "c", "d")


class TestEdgeValue:
    def test_edge_equality(self) -> None:
        """Edges are plain values."""
        assert Edge("a", "b") == Edge("a", "b") and Edge("a", "b") != Edge("b", "a")
