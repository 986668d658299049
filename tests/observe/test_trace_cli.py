"""`mur trace show | diff | report` against upstream's documented examples (spec/trace.md), and
the address forms and refusals (E-TRC-001..007)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from murmur.cli.mur import main
from observe import upstream_traces as up

SHOW_A = """\
── Session ──────────────────────────────────────
session:    ses_aaaaaaaaaaaa4aaa8aaa000000000001
capsule:    my-agent v0.1.0
model:      claude-3-5-sonnet
status:     ok
duration:   500ms

── Turns ────────────────────────────────────────
count:      2  (max: 10)

── Tokens ───────────────────────────────────────
input:      2,200  (avg 1100/turn)
output:     350  (avg 175/turn)
total:      2,550

── Tool calls ───────────────────────────────────
count:      1  (1 ok, 0 error)  success 100.0%
latency:    avg 100ms
  turn 0  bash 100ms ✓  {"command":"cargo test --workspace"}

── Shell calls ──────────────────────────────────
count:      1
exit codes: 1\u00d70
latency:    avg 50ms

── Compaction ───────────────────────────────────
fired:      no
"""

DIFF_AB = """\
Metric                 Run A            Run B            Delta
────────────────────── ──────────────── ──────────────── ──────────────────────────
turns                  2                5                +3 (A better)
duration               500ms            1.7s             +1.2s (A better)
input tokens           2,200            9,700            +7500 (A better)
output tokens          350              1,090            +740 (A better)
input/turn (avg)       1100             1940             +840.0 (A better)
output/turn (avg)      175              218              +43.0 (A better)
tool calls             1                5                +4 (A better)
tool success rate      100.0%           80.0%            -20.0 (A better)
avg tool latency       100ms            188ms            +88ms (A better)
shell calls            1                5                +4 (A better)
avg shell latency      50ms             36ms             -14ms (B better)
compaction             none             turn 3           —
exit status            ok               max_turns_reached —
"""

REPORT_ABC = """\
Files: 3  ({dir})

Metric                 Mean           StdDev         Min            Max
────────────────────── ────────────── ────────────── ────────────── ──────────────
turns                  2.7            1.7            1.0            5.0
duration (ms)          800            648            200            1,700
input tokens           4,133          3,996          500            9,700
output tokens          513            420            100            1,090
tool calls             2.0            2.2            0.0            5.0
tool success (%)       90.0           10.0           80.0           100.0
shell calls            2.0            2.2            0.0            5.0

Exit status:
  max_turns_reached        1  (33.3%)
  ok                       2  (66.7%)
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MURMUR_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def mur(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_show_matches_upstreams_example(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`mur trace show PATH` prints upstream's single-task example line for line."""
    path = up.write(tmp_path / "a" / "trace.jsonl", up.run_a())
    assert mur(capsys, "trace", "show", str(path)) == (0, SHOW_A, "")
    assert mur(capsys, "trace", "show", str(path.parent))[1] == SHOW_A  # the directory holding it


def test_show_tasks_section(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A session with more than one task adds upstream's Tasks rows (an upstream id's first 8
    characters, a tsk_ id's last 8); one task adds none."""
    tasks = [{"task_id": "08ecee82-1111-4111-8111-111111111111", "turns": 1, "input_tokens": 39,
              "output_tokens": 20, "exit_status": "ok", "duration_ms": 178},
             {"task_id": "tsk_01a233bbac3576d4bb74cc95d014bbd7", "turns": 1, "input_tokens": 39,
              "output_tokens": 20, "exit_status": "ok", "duration_ms": 2}]
    recs = up.session("ses_dddddddddddd4ddd8ddd000000000004", turns=[(39, 20), (39, 20)], tools=[], shells=[],
                      duration_ms=180, status="ok", tasks=tasks)
    out = mur(capsys, "trace", "show", str(up.write(tmp_path / "m.jsonl", recs)))[1]
    assert out.endswith("fired:      no\n── Tasks ────────────────────────────────────────\n"
                        "task 1  08ecee82  turns: 1  in: 39  out: 20  ok  178ms\n"
                        "task 2  d014bbd7  turns: 1  in: 39  out: 20  ok  2ms\n")
    one = up.session("ses_eeeeeeeeeeee4eee8eee000000000005", turns=[], tools=[], shells=[], duration_ms=1,
                     status="ok", tasks=tasks[:1])
    assert "Tasks" not in mur(capsys, "trace", "show", str(up.write(tmp_path / "o.jsonl", one)))[1]


def test_diff_matches_upstreams_example(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`mur trace diff A B` prints upstream's metric table for its A/B example, and --json the same rows."""
    a = up.write(tmp_path / "a.jsonl", up.run_a())
    b = up.write(tmp_path / "b.jsonl", up.run_b())
    assert mur(capsys, "trace", "diff", str(a), str(b)) == (0, DIFF_AB, "")
    doc = json.loads(mur(capsys, "trace", "diff", str(a), str(b), "--json")[1])
    assert doc["schema"] == "murmur.trace.diff/v1"
    assert [r["metric"] for r in doc["rows"]][:3] == ["turns", "duration", "input tokens"]
    assert doc["rows"][7] == {"metric": "tool success rate", "a": "100.0%", "b": "80.0%", "delta": "-20.0 (A better)"}


def test_report_matches_upstreams_example(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`mur trace report DIR` over upstream's three example files prints its aggregates; other
    files are ignored; --json carries the numbers."""
    d = tmp_path / "traces"
    for name, recs in (("a", up.run_a()), ("b", up.run_b()), ("c", up.run_c())):
        up.write(d / f"{name}.jsonl", recs)
    (d / "notes.txt").write_text("not a trace\n")
    assert mur(capsys, "trace", "report", str(d)) == (0, REPORT_ABC.format(dir=d), "")
    doc = json.loads(mur(capsys, "trace", "report", str(d), "--json")[1])
    assert doc["files"] == 3 and doc["exit_status"] == {"max_turns_reached": 1, "ok": 2}
    assert doc["metrics"]["tool success (%)"] == {"mean": 90.0, "stddev": 10.0, "min": 80.0, "max": 100.0}
    assert doc["per_task"] is None


def test_report_per_task_averages(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A multi-task session adds the Per-task averages section and the task count."""
    tasks = [{"task_id": f"t{i}", "turns": i, "input_tokens": 500 * i, "output_tokens": 100 * i,
              "exit_status": "ok", "duration_ms": 200 * i} for i in (1, 2, 3)]
    up.write(tmp_path / "r" / "m.jsonl", up.session("ses_ffffffffffff4fff8fff000000000006", turns=[], tools=[],
                                                    shells=[], duration_ms=600, status="ok", tasks=tasks))
    out = mur(capsys, "trace", "report", str(tmp_path / "r"))[1]
    assert "── Per-task averages (multi-task sessions only) ──────────────\n" in out
    assert "task turns             2.0            0.8            1.0            3.0\n" in out
    assert out.endswith("task duration (ms)     400            163            200            600\nTasks: 3\n")


def test_refusals_are_coded(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Bad addresses and files get coded diagnostics with hints, never a traceback."""
    rc, _, err = mur(capsys, "trace", "show")
    assert rc == 1 and "error[E-TRC-005]" in err and "hint:" in err
    rc, _, err = mur(capsys, "trace", "show", str(tmp_path / "missing.jsonl"))
    assert rc == 1 and "error[E-TRC-003]" in err
    junk = tmp_path / "junk.jsonl"
    junk.write_text("not json\n[1, 2]\n")
    rc, _, err = mur(capsys, "trace", "show", str(junk))
    assert rc == 1 and "error[E-TRC-004]" in err
    rc, _, err = mur(capsys, "trace", "report", str(tmp_path / "nowhere"))
    assert rc == 1 and "error[E-TRC-007]" in err
    (tmp_path / "empty").mkdir()
    rc, _, err = mur(capsys, "trace", "report", str(tmp_path / "empty"))
    assert rc == 1 and "error[E-TRC-007]" in err and "holds no .jsonl" in err
    rc, _, err = mur(capsys, "trace", "diff", "@1", "@2")
    assert rc == 1 and "error[E-TRC-001]" in err


def test_a_torn_last_line_is_skipped(tmp_path: Path, home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A writer killed mid-line leaves a line that is skipped with a note; the rest reads."""
    path = up.write(tmp_path / "t.jsonl", up.run_a())
    with path.open("a") as fh:
        fh.write('{"event_type": "tool_ca')
    rc, out, err = mur(capsys, "trace", "show", str(path))
    assert rc == 0 and out == SHOW_A and "1 line(s)" in err


def test_diff_of_one_session_with_itself_is_refused(tmp_path: Path, home: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30 (trace bugs): `mur trace diff @1` with one session recorded compared it with itself
    and exited 0; a session against itself is refused with a code and a hint."""
    one_session(home, tmp_path)
    rc, out, err = mur(capsys, "trace", "diff", "@1")
    assert (rc, out) == (1, "")
    assert "error[E-TRC-010]: diff compares two sessions, but @1 and @1 (the default B) are the same one" in err
    assert "only one session is recorded here" in err and "hint: run the capsule again" in err
    a = up.write(tmp_path / "a.jsonl", up.run_a())
    rc, _, err = mur(capsys, "trace", "diff", str(a), str(a))
    assert rc == 1 and "error[E-TRC-010]" in err and "hint: give two different sessions" in err


def one_session(home: Path, tmp_path: Path) -> str:
    """A journal holding one ended session whose records hold upstream's run A."""
    records = tmp_path / "records" / "one"
    up.write(records / "trace.jsonl", up.run_a())
    sid = up.SES_A
    (home / "tree").mkdir(parents=True, exist_ok=True)
    start = {"v": 1, "event": "start", "id": sid, "unix_ms": 1, "pid": 1, "start_time": 1, "capsule": "my-agent@0.1.0",
             "lineage": {"parent": None, "root": sid, "depth": 1, "spawn": []}, "workdir": str(records),
             "records_dir": str(records)}
    end = {"v": 1, "event": "end", "id": sid, "unix_ms": 2, "status": "ok", "exit_code": 0}
    (home / "tree" / "journal.jsonl").write_text(json.dumps(start) + "\n" + json.dumps(end) + "\n")
    return str(sid)


def test_watch_with_nothing_running_says_so_and_exits_1(tmp_path: Path, home: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30 (trace bugs): `mur watch` with nothing running replayed the newest ended session and
    exited 0 as if it had followed a run; it now says nothing runs (E-TRC-011, exit 1), and
    names how to replay; an explicit address still replays and exits 0."""
    sid = one_session(home, tmp_path)
    rc, out, err = mur(capsys, "watch")
    assert (rc, out) == (1, "")
    assert "error[E-TRC-011]: nothing is running" in err
    assert f"hint: `mur watch @1` replays the newest session ({sid}, ended)" in err
    rc, out, err = mur(capsys, "watch", "@1")
    assert rc == 0 and "session started" in out.splitlines()[0]
