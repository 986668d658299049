"""CLI habits: coded parser errors, `mur help CMD`, `-V`, `mur stop --json`, `mur ps --json`."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path

import pytest

from murmur import __version__, procstat
from murmur.cli.cmd_ps import uptime_seconds
from murmur.cli.cmd_stop import report_json
from murmur.cli.mur import main, parser_error_message
from murmur.session.running_record import RunningRecord, write_running


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    rc = main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize(
    ("argv", "first"),
    [
        (("run", "--bogus"), "error[E-CLI-002]: unrecognised option --bogus"),
        (("stop", "x", "--timeout", "abc"), "error[E-CLI-002]: option --timeout cannot take 'abc'"),
        (("run", "--deadline", "-5m"), "error[E-CLI-002]: option --deadline needs a value"),
        (("run", "--lifecycle-after-task", "nap"), "error[E-CLI-002]: option --lifecycle-after-task cannot take 'nap'"),
        (("stop",), "error[E-CLI-002]: missing the argument NAME"),
        (("ps", "extra"), "error[E-CLI-002]: unexpected argument extra"),
    ],
)
def test_parser_errors_are_coded(capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], first: str) -> None:
    """A parser error is three lines: the coded message, one usage line, a --help hint; exit 2."""
    rc, out, err = _run(capsys, *argv)
    lines = err.splitlines()
    assert rc == 2 and out == ""
    assert lines[0].startswith(first)
    assert len(lines) == 3 and lines[1].startswith(f"  usage: mur {argv[0]} ")
    assert lines[2] == f"  hint: run `mur {argv[0]} --help` for its options"


def test_deadline_value_with_dash_reaches_its_own_check(capsys: pytest.CaptureFixture[str]) -> None:
    """`--deadline=-5m` gets past the parser and is refused by the deadline rule (E-RUN-054)."""
    rc, _, err = _run(capsys, "run", "--deadline=-5m")
    assert rc == 2 and err.startswith("error[E-RUN-054]")


def test_parser_message_mapping_is_total() -> None:
    """An argparse message with no rewording passes through unchanged."""
    assert parser_error_message("something else") == "something else"


@pytest.mark.parametrize("command", ["run", "stop", "doctor", "build"])
def test_help_command_is_command_help(capsys: pytest.CaptureFixture[str], command: str) -> None:
    """`mur help CMD` prints exactly what `mur CMD --help` prints, exit 0."""
    a = _run(capsys, "help", command)
    b = _run(capsys, command, "--help")
    assert a == b and a[0] == 0 and a[1].startswith(f"usage: mur {command}")


def test_short_version(capsys: pytest.CaptureFixture[str]) -> None:
    """`mur -V` is `mur --version`."""
    assert _run(capsys, "-V") == _run(capsys, "--version") == (0, f"mur {__version__}\n", "")


def test_system_prompt_is_an_option(capsys: pytest.CaptureFixture[str]) -> None:
    """`mur run --help` lists --system-prompt."""
    assert "--system-prompt" in _run(capsys, "run", "--help")[1]


class TestStopJson:
    def test_report_json(self) -> None:
        """Stop report lines become one object with typed fields."""
        assert report_json(["stopped: ses_1", "capsule: demo 0.1.0", "signal: SIGTERM"]) == {
            "ok": True, "stopped": "ses_1", "kind": "session", "capsule": "demo 0.1.0", "signal": "SIGTERM"}
        assert report_json(["stopped: frm_1", "launcher: pid 42", "signal: SIGKILL", "session: ses_2 (SIGTERM)"]) == {
            "ok": True, "stopped": "frm_1", "kind": "formation", "launcher_pid": 42, "signal": "SIGKILL",
            "sessions": ["ses_2 (SIGTERM)"]}

    def test_nothing_running(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A refusal with --json is a JSON object on stdout and the diagnostic on stderr, exit 1."""
        rc, out, err = _run(capsys, "stop", "ses_" + "0" * 32, "--json")
        assert rc == 1 and json.loads(out)["ok"] is False
        assert json.loads(out)["diagnostics"][0]["code"] == "E-RUN-022" and "E-RUN-022" in err

    def test_stops_a_session(self, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
        """`mur stop @1 --json` ends the process its record names and says so in JSON; `mur ps
        --json` listed it first with a numeric uptime_s."""
        child = subprocess.Popen(["sleep", "60"])
        try:
            start = procstat.start_time(child.pid)
            assert start is not None
            started = (dt.datetime.now(dt.UTC) - dt.timedelta(seconds=90)).strftime("%Y-%m-%dT%H:%M:%SZ")
            sid = "ses_" + "a" * 32
            write_running(RunningRecord(sid, "http://127.0.0.1:9", child.pid, start, "demo", "0.1.0",
                                        str(tmp_path), str(tmp_path), started))
            rc, out, _ = _run(capsys, "ps", "--json")
            rows = json.loads(out)
            assert rc == 0 and [r["session_id"] for r in rows] == [sid]
            assert isinstance(rows[0]["uptime_s"], float) and 89 <= rows[0]["uptime_s"] < 600
            assert rows[0]["uptime"].startswith("1m")
            rc, out, _ = _run(capsys, "stop", "@1", "--json", "--timeout", "5")
            assert rc == 0
            assert json.loads(out) == {"ok": True, "stopped": sid, "kind": "session",
                                       "capsule": "demo 0.1.0", "signal": "SIGTERM"}
            assert child.wait(timeout=5) == -15
        finally:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=5)


def test_main_in_process_leaves_the_signals_alone(capsys: pytest.CaptureFixture[str]) -> None:
    """`main([...])` called inside another process (this test run) does not leave SIGTERM,
    SIGINT and SIGHUP ignored once `mur run`'s status is decided: an ignored signal would be
    this process's for good, and every child it starts later would inherit it."""
    import signal

    sigs = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    saved = {sig: signal.getsignal(sig) for sig in sigs}

    def mine(signum: int, frame: object) -> None:
        pass

    try:
        for sig in sigs:
            signal.signal(sig, mine)
        rc, _, err = _run(capsys, "run", "--no-such-option")
        assert rc == 2 and "error[" in err
        assert all(signal.getsignal(sig) is mine for sig in sigs)
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


@pytest.mark.parametrize("argv", [["run", "--deadline=-5m"], ["run", "--roster", "--capsule", "local/x"]])
def test_main_in_process_restores_the_handlers_it_installed(
    capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A `mur run` refused after the early handlers went in (a bad --deadline, --roster with a
    flag it does not take) gives the caller's SIGINT, SIGTERM, SIGHUP and SIGUSR1 handlers back:
    left installed, the first Ctrl-C of the calling process (a test run) would only be counted
    and the second would end it at once, with no summary."""
    import signal

    sigs = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1)
    saved = {sig: signal.getsignal(sig) for sig in sigs}

    def mine(signum: int, frame: object) -> None:
        pass

    try:
        for sig in sigs:
            signal.signal(sig, mine)
        rc, _, err = _run(capsys, *argv)
        assert rc == 2 and "error[" in err
        assert {sig: signal.getsignal(sig) for sig in sigs} == {sig: mine for sig in sigs}
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


def test_uptime_seconds() -> None:
    """uptime_s is seconds since started_at, never negative; None when unreadable."""
    now = dt.datetime(2026, 1, 1, 0, 10, tzinfo=dt.UTC)
    assert uptime_seconds("2026-01-01T00:00:00Z", now) == 600.0
    assert uptime_seconds("2026-01-01T01:00:00Z", now) == 0.0
    assert uptime_seconds("yesterday", now) is None
