"""`mur doctor` checks a capsule as `mur run` does, and lists inert keys as warnings."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from murmur.assembly import RunOptions, prepare
from murmur.cli.mur import main
from murmur.errors import DiagnosticError

AGENT = """\
name: agent
version: 0.1.0
artifacts:
  - name: murmur-driver-openai
    version: 1.0.0
    runtime: driver
{extra_artifacts}inference:
  endpoint: https://api.example.com/v1
  model: m
  api_key: ${{DOCTOR_TEST_KEY}}
  driver: {{artifact: {driver}}}
"""


def _capsule(tmp_path: Path, *, driver: str = "murmur-driver-openai", extra_artifacts: str = "",
             tail: str = "") -> Path:
    d = tmp_path / "agent"
    d.mkdir()
    (d / "murmur.yaml").write_text(AGENT.format(driver=driver, extra_artifacts=extra_artifacts) + tail)
    return d


def _doctor(d: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    monkeypatch.chdir(d)
    capsys.readouterr()
    rc = main(["doctor", "--json"])
    return rc, json.loads(capsys.readouterr().out)["capsule"]


@pytest.mark.parametrize(
    ("kwargs", "code"),
    [
        ({"driver": "murmur-driver-gemini"}, "E-RUN-006"),
        # a tool or hook artifact runs here (spec/components.md) once installed; these are not
        ({"extra_artifacts": "  - {name: git-tool, version: 1.0.0, runtime: tool}\n"}, "E-REG-001"),
        ({"extra_artifacts": "  - {name: telemetry, version: 1.0.0, runtime: hook}\n"}, "E-REG-001"),
        ({"tail": "capabilities: {containment: sealed}\n"}, "E-CAP-003"),
    ],
)
def test_doctor_refuses_what_run_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str], kwargs: dict[str, str], code: str) -> None:
    """Whatever `mur run` refuses before its door, `mur doctor` reports with the same code."""
    monkeypatch.setenv("DOCTOR_TEST_KEY", "k")
    monkeypatch.setenv("MURMUR_SANDBOX_HOST", "no-mountns")  # a host that cannot back sealed
    d = _capsule(tmp_path, **kwargs)
    rc, report = _doctor(d, monkeypatch, capsys)
    assert rc == 1 and [x["code"] for x in report["diagnostics"]] == [code]  # type: ignore[index]
    with pytest.raises(DiagnosticError) as info:
        prepare(RunOptions(), environ=dict(os.environ), cwd=d)
    assert info.value.code == code


def test_unset_key_reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An api_key ${VAR} that is unset is E-MAN-003 in doctor and before `mur run` opens its door."""
    monkeypatch.delenv("DOCTOR_TEST_KEY", raising=False)
    d = _capsule(tmp_path)
    rc, report = _doctor(d, monkeypatch, capsys)
    assert rc == 1
    diag = report["diagnostics"][0]  # type: ignore[index]
    assert diag["code"] == "E-MAN-003" and "${DOCTOR_TEST_KEY}" in diag["message"]
    with pytest.raises(DiagnosticError) as info:
        prepare(RunOptions(), environ={}, cwd=d)
    assert info.value.code == "E-MAN-003"
    monkeypatch.setenv("DOCTOR_TEST_KEY", "k")
    assert _doctor(d, monkeypatch, capsys)[0] == 0


def test_gateway_gives_endpoint_and_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """artifacts[].gateway on the driver entry supplies the endpoint and key reference."""
    d = tmp_path / "gw"
    d.mkdir()
    (d / "murmur.yaml").write_text(
        "name: gw\nversion: 0.1.0\nartifacts:\n  - name: murmur-driver-anthropic\n    version: 1.0.0\n"
        "    runtime: driver\n    gateway:\n      endpoint: https://api.anthropic.com\n"
        "      api_key: ${GW_KEY}\ninference:\n  model: m\n  driver: {artifact: murmur-driver-anthropic}\n")
    with pytest.raises(DiagnosticError) as info:
        prepare(RunOptions(), environ={}, cwd=d)
    assert info.value.code == "E-MAN-003" and "gateway.api_key" in info.value.diagnostics[0].message
    setup = prepare(RunOptions(system_prompt="be brief"), environ={"GW_KEY": "k"}, cwd=d)
    config = setup.workload.config  # type: ignore[attr-defined]
    assert (config.endpoint, config.api_key_ref, config.driver) == ("https://api.anthropic.com", "${GW_KEY}", "anthropic")
    assert (config.system_prompt, config.system_prompt_source) == ("be brief", "override")


def test_inert_keys_are_warnings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """An upstream key with no effect is a ⚠ W-SEC-019 line; the capsule still passes."""
    monkeypatch.setenv("DOCTOR_TEST_KEY", "k")
    d = _capsule(tmp_path, tail="context: {seed_budget: 1000}\n")
    rc, report = _doctor(d, monkeypatch, capsys)
    assert rc == 0 and [w["code"] for w in report["warnings"]] == ["W-SEC-019"]  # type: ignore[index]
    monkeypatch.chdir(d)
    capsys.readouterr()
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "⚠ warning[W-SEC-019]: `context.seed_budget` has no effect here" in out and "✓ agent 0.1.0" in out
