"""Claude Code's PreToolUse hook (murmur.agent.harness.pretool): which program of a Bash command
is ungranted, the decision it prints, and the plain refusal when the deny socket is gone."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from murmur.agent.harness import pretool
from murmur.grants import denied_binary


@pytest.mark.parametrize(("command", "found"), [
    ("cd src && FOO=1 cargo build | tee log", ["cargo", "tee"]),
    ("/usr/bin/cargo test", ["cargo"]),
    ("if true; then ls; fi", ["ls"]),
    ('echo "a;b" && git status', ["git"]),
    ("echo $(rm -rf x)", ["rm"]),
    ("ls # cargo", ["ls"]),
    ("echo hi", []),
])
def test_programs(command: str, found: list[str]) -> None:
    assert pretool.programs(command) == found


def test_unparseable_command_is_left_to_claude_code() -> None:
    assert pretool.programs("echo 'open") is None
    assert pretool.first_denied("echo 'open", ["echo"]) is None


def test_first_denied_uses_the_grant_globs() -> None:
    assert pretool.first_denied("python3.11 -c 1 && cargo b", ["python3*"]) == "cargo"
    assert pretool.first_denied("python3.11 -c 1", ["python3*"]) is None


def _run(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], config: Path, call: object) -> str:
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(json.dumps(call).encode())))
    assert pretool.main([str(config)]) == 0
    return capsys.readouterr().out


def test_no_socket_gives_the_plain_refusal_and_granted_gives_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "pretool.json"
    config.write_bytes(pretool.config_bytes("boss", ["echo"]))
    out = _run(monkeypatch, capsys, config, {"tool_name": "Bash", "tool_input": {"command": "cargo build"}})
    assert json.loads(out) == pretool.decision(denied_binary("cargo", "boss", ["echo"]))
    assert _run(monkeypatch, capsys, config, {"tool_name": "Bash", "tool_input": {"command": "echo ok"}}) == ""
    assert _run(monkeypatch, capsys, config, {"tool_name": "Read", "tool_input": {"file_path": "x"}}) == ""
