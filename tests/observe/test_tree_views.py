"""`mur trace show --tree` and `mur trace view --html` on a synthetic tree (spec/trace.md "The
tree", "The page"); address forms (short ids, suffixes, @N) and their refusals."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from murmur.cli.mur import main
from observe.synthetic import write_tree


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    home = tmp_path / "home"
    monkeypatch.setenv("MURMUR_HOME", str(home))
    return write_tree(home, sessions=8, events=400, members=3)


def mur(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_waterfall_lists_every_session_in_lineage_order(tree: dict[str, object],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """No address: the newest root. Every session once, each child after its parent, with the
    kinds of lines the issue names; the killed member and the refusal are said."""
    rc, out, _ = mur(capsys, "trace", "show", "--tree")
    assert rc == 0
    lines = out.splitlines()
    frm = str(tree["formation"])
    assert lines[0].startswith(f"trace {str(tree['trace_id'])[:8]}…: frm_…{frm[-4:]}, 8 sessions")
    rows = {sid: next(i for i, ln in enumerate(lines) if f"ses_…{sid[-4:]} " in ln) for sid in tree["sessions"]}  # type: ignore[attr-defined]
    for child, parent in tree["children"].items():  # type: ignore[attr-defined]
        assert rows[parent] < rows[child]
    text = "\n".join(lines)
    for needle in ("task tsk_…", "model turn 0: tool_call bash", "tool bash", "shell echo 0 → exit 0",
                   "call → m1: completed", "delegation → worker", "✗ delegation to forbidden refused: not in the spawn set",
                   "killed: forced exit (143)"):
        assert needle in text, needle
    assert lines[1].split() == ["START", "TIME", "TOKENS", "WHAT"]


def test_tree_json_and_addresses(tree: dict[str, object], capsys: pytest.CaptureFixture[str]) -> None:
    """--json: every session a node, the formation its root, one trace id; a member's suffix or
    short id or @N names the same tree."""
    frm = str(tree["formation"])
    doc = json.loads(mur(capsys, "trace", "show", "--tree", "--json")[1])
    assert doc["schema"] == "murmur.trace.tree/v1" and doc["root"] == frm
    assert doc["trace_ids"] == [tree["trace_id"]]
    assert sorted(n["id"] for n in doc["nodes"] if n["kind"] == "session") == sorted(tree["sessions"])  # type: ignore[call-overload]
    assert [k["id"] for k in doc["killed"]] == [tree["killed"]]
    kinds = {(e["kind"], e["refused"]) for e in doc["edges"]}
    assert {("member", False), ("call", False), ("delegation", False), ("delegation", True)} <= kinds
    member = str(tree["members"]["m2"])  # type: ignore[index]
    for address in (member[-6:], f"ses_…{member[-5:]}", member.upper(), "@1"):
        assert json.loads(mur(capsys, "trace", "show", "--tree", "--json", address)[1])["root"] == frm, address
    rc, out, _ = mur(capsys, "trace", "show", member[-8:])
    assert rc == 0 and f"session:    {member}" in out


def test_address_refusals(tree: dict[str, object], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A formation has no trace of its own (E-TRC-006); a 4-character suffix shared by two ids is
    ambiguous (E-TRC-002: the short id prefix does not help); @0 and @99 name nothing (E-TRC-001);
    an unwritable page is E-TRC-009."""
    frm = str(tree["formation"])
    rc, _, err = mur(capsys, "trace", "show", frm)
    assert rc == 1 and "error[E-TRC-006]" in err and "--tree" in err
    rc, _, err = mur(capsys, "trace", "show", "@99")
    assert rc == 1 and "error[E-TRC-001]" in err
    home = tmp_path / "home"
    extra = json.loads((home / "tree" / "journal.jsonl").read_text().splitlines()[0])
    twin = "ses_" + "0" * 28 + str(tree["sessions"][0])[-4:]  # type: ignore[index]
    extra["id"] = twin
    with (home / "tree" / "journal.jsonl").open("a") as fh:
        fh.write(json.dumps(extra) + "\n")
    rc, _, err = mur(capsys, "trace", "show", str(tree["sessions"][0])[-4:])  # type: ignore[index]
    assert rc == 1 and "error[E-TRC-002]" in err and "hint:" in err
    rc, _, err = mur(capsys, "trace", "view", "--html", str(tmp_path / "no" / "such" / "dir" / "p.html"))
    assert rc == 1 and "error[E-TRC-009]" in err


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.scripts: list[str] = []
        self.external: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "script":
            self._in_script = True
            if a.get("src"):
                self.external.append(str(a["src"]))
        if tag in ("link", "img", "iframe") and (a.get("href") or a.get("src")):
            self.external.append(str(a.get("href") or a.get("src")))

    def handle_endtag(self, tag: str) -> None:
        self._in_script = self._in_script and tag != "script"

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts.append(data)


def test_view_writes_one_self_contained_page(tree: dict[str, object], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The page is one file naming no external resource; its data holds every session, the
    edges and the spans; the command prints a file:// URL."""
    page = tmp_path / "tree.html"
    rc, out, _ = mur(capsys, "trace", "view", "--html", str(page))
    assert rc == 0 and out == f"page: {page.resolve().as_uri()}\n"
    text = page.read_text()
    dom = _Dom()
    dom.feed(text)
    assert dom.external == [] and "http://" not in text.replace("http://www.w3.org/2000/svg", "")
    data = json.loads("".join(dom.scripts).split("window.MURMUR_TREE = ", 1)[1].split(";\n(function", 1)[0])
    assert sorted(n["id"] for n in data["nodes"] if n["kind"] == "session") == sorted(tree["sessions"])  # type: ignore[call-overload]
    assert {e["kind"] for e in data["edges"]} == {"member", "call", "delegation"}
    assert len(data["spans"]) > 100 and data["refusals"]
    doc = json.loads(mur(capsys, "trace", "view", "--html", str(page), "--json")[1])
    assert doc["sessions"] == 8 and doc["url"].startswith("file://")


def test_a_session_started_by_hand_joins_only_with_the_tasks_it_took(tree: dict[str, object], tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """A desk started by hand (its own trace, its own root) that one member's command called:
    it is in the tree with the task that joined the tree's trace, not with its task from another
    run, and that other run's session stays out."""
    from murmur.ids import new_id
    from murmur.session.trace import TraceWriter
    from murmur.tracectx import SpanContext

    home = tmp_path / "home"
    member = str(tree["members"]["m1"])  # type: ignore[index]
    member_task = next(json.loads(line) for line in
                       (home / "records" / "w" / member / "trace.jsonl").read_text().splitlines()
                       if json.loads(line)["event_type"] == "task_start")
    other = SpanContext("e" * 32, "f" * 16)
    desk, stranger = new_id("ses"), new_id("ses")
    events = []
    for sid, joins in ((desk, None), (stranger, other)):
        rd = home / "records" / "by-hand" / sid
        rd.mkdir(parents=True)
        events.append({"v": 1, "event": "start", "id": sid, "unix_ms": 1, "capsule": "desk@0.1.0",
                       "lineage": {"parent": None, "root": sid, "depth": 1, "spawn": []}, "records_dir": str(rd)})
        with TraceWriter(rd / "trace.jsonl", sid, joins=joins) as w:
            s = w.emit("session_start", parent_id=None, capsule_name="desk", capsule_version="0.1.0")
            if sid == desk:
                for caller, text in ((SpanContext(str(tree["trace_id"]), member_task["span_id"]), "ours"),
                                     (other, "theirs")):
                    t = w.emit("task_start", parent_id=s, joins=caller, task_id=f"tsk_{text}", origin="event")
                    w.emit("task_end", parent_id=t, task_id=f"tsk_{text}", exit_status="ok", duration_ms=1)
            w.emit("session_end", parent_id=s, exit_status="ok", duration_ms=5)
    with (home / "tree" / "journal.jsonl").open("a") as fh:
        for ev in events:
            fh.write(json.dumps(ev) + "\n")
    doc = json.loads(mur(capsys, "trace", "show", "--tree", "--json", str(tree["formation"]))[1])
    ids = [n["id"] for n in doc["nodes"]]
    assert desk in ids and stranger not in ids and doc["trace_ids"] == [tree["trace_id"]]
    node = next(n for n in doc["nodes"] if n["id"] == desk)
    assert (node["role"], node["parent"]) == ("joined", member)
    tasks = [s["label"] for s in doc["spans"] if s["session"] == desk and s["kind"] == "task"]
    assert tasks == ["task tsk_ours (event)"]
    assert {"src": member, "dst": desk, "kind": "call"}.items() <= next(
        e for e in doc["edges"] if e["dst"] == desk).items()
