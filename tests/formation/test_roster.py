"""roster.yaml schema and loader (admission check 1, E-ROS-001)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from murmur.errors import DiagnosticError
from murmur.formation.roster.schema import (
    ReachabilityKind,
    load_roster,
    parse_roster,
    resolve_roster_path,
)

SEED_EXAMPLE = """\
roster_version: 1
members:
  - name: planner
    capsule: local/planner
    version: 0.3.0
    entry: true
  - name: coder
    capsule: local/coder
    version: 1.2.0
  - name: reviewer
    capsule: local/reviewer
    version: 0.9.0
reachability:
  - from: planner
    to: [coder, reviewer]
  - from: reviewer
    to: [coder]
"""


def refusal(text: str) -> tuple[str, int | None, str]:
    with pytest.raises(DiagnosticError) as info:
        parse_roster(text, path="r/roster.yaml")
    d = info.value.diagnostics[0]
    assert len(info.value.diagnostics) == 1
    assert d.location is not None and d.location.path == "r/roster.yaml"
    return d.code, d.location.line, d.message


class TestScalarsAsWritten:
    """Unquoted ``null``, ``~``, ``true``, ``1.10`` in a text field are that text (seed 004)."""

    @pytest.mark.parametrize("word", ["null", "Null", "NULL", "true", "False", "1.10"])
    def test_version(self, word: str) -> None:
        text = f"roster_version: 1\nmembers:\n  - name: a\n    capsule: local/a\n    version: {word}\n"
        assert parse_roster(text).members[0].version == word

    def test_tilde_version_is_text(self) -> None:
        """``~`` is the text ``~``, which is not a version (never "is required")."""
        _, _, message = refusal(BASE.replace("version: '1'", "version: ~"))
        assert "has version '~', which is not a version" in message

    def test_name_null_is_a_name(self) -> None:
        text = "roster_version: 1\nmembers:\n  - name: null\n    capsule: local/true\n    version: 1.10\n"
        member = parse_roster(text).members[0]
        assert (member.name, member.capsule, member.version) == ("null", "local/true", "1.10")

    def test_key_without_value_is_absent(self) -> None:
        code, _, message = refusal("roster_version: 1\nmembers:\n  - name:\n    capsule: s/a\n    version: '1'\n")
        assert (code, message) == ("E-ROS-001", "roster.yaml: `members[0].name` is required")

    def test_null_entry_and_reachability_are_absent(self) -> None:
        text = BASE.replace("entry: true", "entry: ~") + "reachability: null\n"
        r = parse_roster(text)
        assert r.members[0].entry is False
        assert r.reachability is ReachabilityKind.NONE


class TestParse:
    def test_seed_example(self) -> None:
        """The seed's example parses: members in order, entry flag, rules with lines."""
        r = parse_roster(SEED_EXAMPLE)
        assert [m.name for m in r.members] == ["planner", "coder", "reviewer"]
        assert [m.coordinate for m in r.members] == [
            "local/planner@0.3.0", "local/coder@1.2.0", "local/reviewer@0.9.0"]
        assert [m.entry for m in r.members] == [True, False, False]
        assert [m.line for m in r.members] == [3, 7, 10]
        assert r.members[0].entry_line == 6
        assert r.reachability is ReachabilityKind.RULES
        assert [(x.caller.name, [c.name for c in x.callees]) for x in r.rules] == [
            ("planner", ["coder", "reviewer"]), ("reviewer", ["coder"])]
        assert r.rules[1].callees[0].line == 17
        assert r.members_line == 2

    @pytest.mark.parametrize(
        ("written", "expected"),
        [("1.10", "1.10"), ("1", "1"), ("'1.10'", "1.10"), ("2.0.0-rc.1", "2.0.0-rc.1"),
         ("0x10", "0x10"), ("1e3", "1e3")],
    )
    def test_unquoted_number_version_reads_as_text(self, written: str, expected: str) -> None:
        """An unquoted number such as 1.10 reads as its own text."""
        text = f"roster_version: 1\nmembers:\n  - name: a\n    capsule: s/a\n    version: {written}\n    entry: true\n"
        assert parse_roster(text).members[0].version == expected

    @pytest.mark.parametrize(
        ("reach", "kind"),
        [("", ReachabilityKind.NONE), ("reachability:\n", ReachabilityKind.NONE),
         ("reachability: []\n", ReachabilityKind.NONE), ("reachability: ~\n", ReachabilityKind.NONE),
         ("reachability: all\n", ReachabilityKind.ALL)],
    )
    def test_reachability_forms(self, reach: str, kind: ReachabilityKind) -> None:
        """Absent, blank, [] mean none; `all` is all."""
        text = "roster_version: 1\nmembers:\n  - name: a\n    capsule: s/a\n    version: '1'\n    entry: true\n" + reach
        r = parse_roster(text)
        assert r.reachability is kind
        assert r.rules == ()

    def test_blank_entry_is_absent(self) -> None:
        """`entry:` with no value is the same as an absent key (false)."""
        text = "roster_version: 1\nmembers:\n  - name: a\n    capsule: s/a\n    version: '1'\n    entry:\n"
        assert parse_roster(text).members[0].entry is False

    def test_same_capsule_twice(self) -> None:
        """Two members may run the same capsule."""
        text = ("roster_version: 1\nmembers:\n  - {name: a, capsule: s/x, version: '1', entry: true}\n"
                "  - {name: b, capsule: s/x, version: '1'}\n")
        assert [m.capsule for m in parse_roster(text).members] == ["s/x", "s/x"]


BASE = "roster_version: 1\nmembers:\n  - name: a\n    capsule: s/a\n    version: '1'\n    entry: true\n"

# (id, text, line, substring of message)
SHAPE_FAULTS = [
    ("not-yaml", "roster_version: 1\nmembers: [\n", 3, "not valid YAML"),
    ("empty", "", 1, "empty"),
    ("top-list", "- a\n", 1, "mapping"),
    ("unknown-top", BASE + "extra: 1\n", 7, "unknown key `extra`"),
    ("dup-top-key", BASE + "roster_version: 1\n", 7, "written twice"),
    ("no-version", "members:\n  - {name: a, capsule: s/a, version: '1', entry: true}\n", 1, "`roster_version` is required"),
    ("version-2", BASE.replace("roster_version: 1", "roster_version: 2"), 1, "roster_version 1 only"),
    ("version-str", BASE.replace("roster_version: 1", "roster_version: '1'"), 1, "integer 1"),
    ("version-float", BASE.replace("roster_version: 1", "roster_version: 1.0"), 1, "integer 1"),
    ("no-members", "roster_version: 1\n", 1, "`members` is required"),
    ("blank-members", "roster_version: 1\nmembers:\n", 1, "`members` is required"),
    ("empty-members", "roster_version: 1\nmembers: []\n", 2, "at least one member"),
    ("members-map", "roster_version: 1\nmembers: {a: 1}\n", 2, "list of members"),
    ("member-scalar", "roster_version: 1\nmembers:\n  - a\n", 3, "must be a mapping"),
    ("unknown-member-key", BASE + "    role: x\n", 7, "unknown key `members[0].role`"),
    ("no-name", "roster_version: 1\nmembers:\n  - capsule: s/a\n    version: '1'\n", 3, "`members[0].name` is required"),
    ("bad-name-upper", BASE.replace("name: a", "name: Alpha"), 3, "not a valid member name"),
    ("bad-name-digit", BASE.replace("name: a", "name: 1a"), 3, "not a valid member name"),
    ("bad-name-long", BASE.replace("name: a", "name: a" + "b" * 32), 3, "not a valid member name"),
    ("name-number", BASE.replace("name: a", "name: 12"), 3, "member name '12' is not a valid member name"),
    ("name-list", BASE.replace("name: a", "name: [a]"), 3, "must be a string"),
    ("deep", "roster_version: 1\nmembers: " + "[" * 600 + "]" * 600 + "\n", 2, "nests more than 100 levels"),
    ("no-capsule", BASE.replace("    capsule: s/a\n", ""), 3, "`members[0].capsule` is required"),
    ("bare-capsule", BASE.replace("capsule: s/a", "capsule: coder"), 4, "without its scope"),
    ("capsule-3parts", BASE.replace("capsule: s/a", "capsule: a/b/c"), 4, "not an artifact name"),
    ("capsule-upper", BASE.replace("capsule: s/a", "capsule: S/a"), 4, "not an artifact name"),
    ("no-version-member", BASE.replace("    version: '1'\n", ""), 3, "`members[0].version` is required"),
    ("blank-version", BASE.replace("version: '1'", "version:"), 3, "`members[0].version` is required"),
    ("empty-version", BASE.replace("version: '1'", "version: ''"), 5, "blank version"),
    ("space-version", BASE.replace("version: '1'", "version: '  '"), 5, "blank version"),
    ("latest", BASE.replace("version: '1'", "version: latest"), 5, "exact version"),
    ("stable", BASE.replace("version: '1'", "version: stable"), 5, "exact version"),
    ("edge", BASE.replace("version: '1'", "version: edge"), 5, "exact version"),
    ("latest-caps", BASE.replace("version: '1'", "version: Latest"), 5, "exact version"),
    ("version-space", BASE.replace("version: '1'", "version: '1.0 beta'"), 5, "not a version"),
    ("version-newline", BASE.replace("version: '1'", 'version: "1\\n2"'), 5, "not a version"),
    ("version-dash-first", BASE.replace("version: '1'", "version: -1"), 5, "not a version"),
    ("version-map", BASE.replace("version: '1'", "version: {a: 1}"), 5, "version string"),
    ("version-list", BASE.replace("version: '1'", "version: [1]"), 5, "version string"),
    ("entry-str", BASE.replace("entry: true", "entry: 'true'"), 6, "true or false"),
    ("entry-yes", BASE.replace("entry: true", "entry: yes"), 6, "true or false"),
    ("entry-int", BASE.replace("entry: true", "entry: 1"), 6, "true or false"),
    ("dup-member-key", BASE + "    name: b\n", 7, "written twice"),
    ("reach-word", BASE + "reachability: everyone\n", 7, "`all` or a list"),
    ("reach-map", BASE + "reachability: {from: a}\n", 7, "`all` or a list"),
    ("rule-scalar", BASE + "reachability:\n  - a\n", 8, "must be a mapping"),
    ("rule-unknown-key", BASE + "reachability:\n  - from: a\n    to: [b]\n    via: c\n", 10, "unknown key `reachability[0].via`"),
    ("rule-no-from", BASE + "reachability:\n  - to: [b]\n", 8, "`reachability[0].from` is required"),
    ("rule-no-to", BASE + "reachability:\n  - from: a\n", 8, "`reachability[0].to` is required"),
    ("rule-blank-to", BASE + "reachability:\n  - from: a\n    to:\n", 8, "`reachability[0].to` is required"),
    ("rule-empty-to", BASE + "reachability:\n  - from: a\n    to: []\n", 9, "at least one member"),
    ("rule-to-str", BASE + "reachability:\n  - from: a\n    to: b\n", 9, "list of member names"),
    ("rule-to-list", BASE + "reachability:\n  - from: a\n    to: [[b]]\n", 9, "must be a string"),
    ("rule-self", BASE + "reachability:\n  - from: a\n    to:\n      - b\n      - a\n", 11, "itself"),
    ("rule-from-list", BASE + "reachability:\n  - from: [a]\n    to: [b]\n", 8, "must be a string"),
]


class TestShapeFaults:
    @pytest.mark.parametrize(("text", "line", "needle"),
                             [pytest.param(t, ln, n, id=i) for i, t, ln, n in SHAPE_FAULTS])
    def test_refused_with_line(self, text: str, line: int, needle: str) -> None:
        """Every shape fault is E-ROS-001 at its line, naming the fault."""
        code, at, message = refusal(text)
        assert code == "E-ROS-001"
        assert at == line
        assert needle in message
        assert message.startswith("roster.yaml: ")

    def test_bare_capsule_hint_names_scoped_forms(self) -> None:
        """A bare capsule name's hint names `local/<name>` and `<scope>/<name>`."""
        with pytest.raises(DiagnosticError) as info:
            parse_roster(BASE.replace("capsule: s/a", "capsule: coder"))
        hint = info.value.diagnostics[0].hint or ""
        assert "local/coder" in hint and "<scope>/coder" in hint


class TestFile:
    def test_missing_file(self, tmp_path: Path) -> None:
        """A missing roster.yaml is E-ROS-001 naming it."""
        with pytest.raises(DiagnosticError) as info:
            load_roster(tmp_path / "roster.yaml")
        assert info.value.code == "E-ROS-001"
        assert "no roster" in info.value.diagnostics[0].message

    def test_not_utf8(self, tmp_path: Path) -> None:
        """Non-UTF-8 bytes are E-ROS-001."""
        p = tmp_path / "roster.yaml"
        p.write_bytes(b"\xff\xfe roster")
        with pytest.raises(DiagnosticError) as info:
            load_roster(p)
        assert info.value.code == "E-ROS-001"
        assert "UTF-8" in (info.value.diagnostics[0].hint or "")

    def test_too_large(self, tmp_path: Path) -> None:
        """A roster over 1 MiB is refused before parsing."""
        p = tmp_path / "roster.yaml"
        p.write_text("#" * (1 << 20) + "\n")
        with pytest.raises(DiagnosticError) as info:
            load_roster(p)
        assert "larger than 1 MiB" in info.value.diagnostics[0].message
        assert "members" in (info.value.diagnostics[0].hint or "")

    @pytest.mark.parametrize("kind", ["dev-zero", "fifo", "directory"])
    def test_not_a_regular_file(self, tmp_path: Path, kind: str) -> None:
        """A roster.yaml that is /dev/zero, a FIFO or a directory: E-ROS-001, nothing read."""
        p = tmp_path / "roster.yaml"
        if kind == "dev-zero":
            p.symlink_to("/dev/zero")
        elif kind == "fifo":
            os.mkfifo(p)
        else:
            p.mkdir()
        with pytest.raises(DiagnosticError) as info:
            load_roster(p)
        d = info.value.diagnostics[0]
        assert d.code == "E-ROS-001" and d.location is not None and d.location.path == str(p)
        what = {"dev-zero": "a character device", "fifo": "a FIFO", "directory": "a directory"}[kind]
        assert d.message == f"roster.yaml: {p} cannot be read: it is {what}, not a regular file"

    def test_loads_from_disk(self, tmp_path: Path) -> None:
        """load_roster reads a file and keeps the display path."""
        p = tmp_path / "roster.yaml"
        p.write_text(SEED_EXAMPLE)
        assert load_roster(p, display="x/roster.yaml").path == "x/roster.yaml"


class TestResolvePath:
    def test_directory_means_its_roster(self, tmp_path: Path) -> None:
        """A project directory names the roster.yaml inside it."""
        assert resolve_roster_path(tmp_path) == tmp_path / "roster.yaml"

    def test_bare_means_cwd(self, tmp_path: Path) -> None:
        """No argument means ./roster.yaml."""
        assert resolve_roster_path(None, cwd=tmp_path) == tmp_path / "roster.yaml"

    def test_roster_file(self, tmp_path: Path) -> None:
        """The roster.yaml itself is accepted, relative to cwd."""
        assert resolve_roster_path("roster.yaml", cwd=tmp_path) == tmp_path / "roster.yaml"

    @pytest.mark.parametrize("name", ["other.yaml", "missing-dir"])
    def test_other_file_name_refused(self, tmp_path: Path, name: str) -> None:
        """Any other file name, or a path that does not exist, is E-ROS-001."""
        if name.endswith(".yaml"):
            (tmp_path / name).write_text("x")
        with pytest.raises(DiagnosticError) as info:
            resolve_roster_path(name, cwd=tmp_path)
        assert info.value.code == "E-ROS-001"


ONE = "roster_version: 1\nmembers:\n  - name: solo\n    capsule: local/solo\n    version: 0.1.0\n    entry: true\n"


class TestTreeCaps:
    """Issue 30 item 3: the tree caps as roster keys (spec/roster.md "Tree caps")."""

    def test_both_keys_read_as_integers(self) -> None:
        r = parse_roster(ONE + "max_tree_total: 20\nmax_same_capsule_chain: 0\n")
        assert (r.max_tree_total, r.max_same_capsule_chain) == (20, 0)
        r = parse_roster(ONE + "max_tree_total:\n")
        assert (r.max_tree_total, r.max_same_capsule_chain) == (None, None)  # no value: absent, no cap

    @pytest.mark.parametrize("value", ['"3"', "3.0", "true", "-1", "many", "[3]"])
    def test_anything_but_a_whole_number_is_refused(self, value: str) -> None:
        code, line, message = refusal(ONE + f"max_tree_total: {value}\n")
        assert (code, line) == ("E-ROS-001", 7)
        assert "`max_tree_total` must be a whole number of 0 or more" in message


class TestTreeBudget:
    """The formation tree's token budget as a roster key (spec/roster.md "Tree budget")."""

    def test_the_key_reads_as_a_positive_integer(self) -> None:
        assert parse_roster(ONE + "budget_tokens: 200000\n").budget_tokens == 200000
        assert parse_roster(ONE).budget_tokens is None
        assert parse_roster(ONE + "budget_tokens:\n").budget_tokens is None  # no value: absent

    @pytest.mark.parametrize("value", ['"3"', "3.0", "true", "0", "-1", "many"])
    def test_anything_but_a_positive_whole_number_is_refused(self, value: str) -> None:
        code, line, message = refusal(ONE + f"budget_tokens: {value}\n")
        assert (code, line) == ("E-ROS-001", 7)
        assert "`budget_tokens` must be a whole number of 1 or more" in message

    def test_the_flag_only_tightens_the_key(self) -> None:
        from murmur.cli.run_roster import tree_budget

        assert tree_budget(None, None) is None
        assert tree_budget(500, None) == 500 and tree_budget(None, 300) == 300
        assert tree_budget(500, 300) == 300 and tree_budget(300, 500) == 300
