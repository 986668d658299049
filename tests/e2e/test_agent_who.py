"""`mur agent who` end to end: real stores from `mur new --roster` plus extra members, the
exact text, the --json schema, and PROFILE EDITED SINCE START on a real running session."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from murmur.cli.mur import main

from ._session import MurProcess, env_for

SCHEMA = Path(__file__).parents[2] / "spec" / "agent-who.schema.json"

MEMBER = """name: {name}
version: 0.1.0
description: {about}
plan: plan.yaml
lifecycle:
  task_acceptance: queue
  queue_depth: 2
  after_task: sleep
capabilities:
  shell:
    allow: [{allow}]
{extra}exports:
  peer_tasks:
    accept: true
network:
  authentication:
    scheme: bearer
"""

ROSTER = """roster_version: 1
members:
  - name: lead
    capsule: local/app-lead
    version: 0.1.0
    entry: true
  - name: worker
    capsule: local/app-worker
    version: 0.1.0
  - name: builder
    capsule: local/app-builder
    version: 0.1.0
  - name: qa
    capsule: local/app-qa
    version: 0.1.0
reachability:
  - from: lead
    to: [worker, builder]
  - from: worker
    to: [builder]
"""


def _member(app: Path, name: str, about: str, allow: str, extra: str = "") -> None:
    d = app / name
    d.mkdir()
    (d / "murmur.yaml").write_text(MEMBER.format(name=f"app-{name}", about=about, allow=allow, extra=extra))
    (d / "plan.yaml").write_text((app / "worker" / "plan.yaml").read_text())


@pytest.fixture
def project(tmp_path: Path, murmur_home: Path, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> Path:
    monkeypatch.chdir(tmp_path)
    assert main(["new", "--roster", "app"]) == 0
    app = tmp_path / "app"
    _member(app, "builder", "Builds the Rust workspace.", "echo, cargo",
            "  filesystem:\n    scope: repos/app\n")
    _member(app, "qa", "Runs the test suites.", "echo, cargo, cargo-nextest, rustc, git",
            "  network:\n    allow: [crates.io, github.com]\n")
    (app / "roster.yaml").write_text(ROSTER)
    monkeypatch.chdir(app)  # `mur install` fills the project store of the cwd
    for m in ("lead", "worker", "builder", "qa"):
        assert main(["install", m]) == 0, m
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    return app


def who(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["agent", "who", *args])
    out, err = capsys.readouterr()
    return code, out, err


EXPECTED = """\
Capsules and members that explicitly hold `cargo`:
  builder (local/app-builder@0.1.0) [installed]
      role   member
      about  Builds the Rust workspace.
      exec   echo, cargo
      writes repos/app
      net    none
  qa (local/app-qa@0.1.0) [installed]
      role   member
      about  Runs the test suites.
      exec   echo, cargo, cargo-nextest, rustc, git
      writes .
      net    crates.io, github.com

Dispatch routes for 'lead', best first:
  ready:
    call-member builder        via builder       key 1 other binary, scope depth 2, 0 hosts, no spawn
    call-member worker         via builder       key 1 other binary, scope depth 0, 0 hosts, no spawn
  blocked (capable, but not usable right now):
    call-member qa             via qa            — app/roster.yaml has no reachability edge from 'lead' to 'qa'
      authorize: add `- {from: lead, to: [qa]}` to reachability in app/roster.yaml, and relaunch the formation
    delegate-task app-builder  via app-builder   — the spawn envelope refuses it: the child holds `cargo`, which its parent does not
      authorize: none: the spawn envelope refuses it: the child holds `cargo`, which its parent does not; a child never holds more than its parent
    delegate-task app-qa       via app-qa        — the spawn envelope refuses it: the child holds `cargo`, which its parent does not
      authorize: none: the spawn envelope refuses it: the child holds `cargo`, which its parent does not; a child never holds more than its parent
"""


def test_text_is_exact(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = who(capsys, "--can", "cargo", "--as", "lead", "--roster", "app")
    assert (code, err) == (0, "")
    assert out == EXPECTED


def test_nothing_holds_it_exits_1_and_bad_as_exits_2(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = who(capsys, "--can", "zig", "--roster", "app")
    assert code == 1 and "(none)" in out
    code, _, err = who(capsys, "--can", "cargo", "--as", "nobody", "--roster", "app")
    assert code == 2 and "error[E-CLI-001]: --as nobody: no such capsule or member" in err


def test_as_takes_the_installed_scope_name(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`--as local/app-lead` (the name `mur install` printed) asks as capsule app-lead; a scope
    before a name that is not there is still `E-CLI-001`, naming what was given."""
    plain = who(capsys, "--can", "cargo", "--as", "app-lead", "--roster", "app")
    scoped = who(capsys, "--can", "cargo", "--as", "local/app-lead", "--roster", "app")
    assert scoped == plain and plain[0] == 0
    code, _, err = who(capsys, "--can", "cargo", "--as", "local/nobody", "--roster", "app")
    assert code == 2 and "error[E-CLI-001]: --as local/nobody: no such capsule or member" in err


def test_every_capsule_without_a_query(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = who(capsys, "--project", "app")
    assert code == 0
    assert [ln.split()[0] for ln in out.splitlines() if ln.startswith("  ") and not ln.startswith("    ")] == [
        "app-builder", "app-lead", "app-qa", "app-worker"]


def _validate(value: Any, schema: dict[str, Any], root: dict[str, Any], where: str = "$") -> None:
    """The JSON Schema subset the schema file uses: type, enum, required, properties,
    additionalProperties: false, items, $ref."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return _validate(value, root["$defs"][name], root, where)
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        py = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}
        ok = any((isinstance(value, int) and not isinstance(value, bool)) if t == "integer"
                 else isinstance(value, py[t]) for t in names)
        assert ok, f"{where}: {value!r} is not {names}"
    if "enum" in schema:
        assert value in schema["enum"], f"{where}: {value!r} not in {schema['enum']}"
    if isinstance(value, dict):
        for key in schema.get("required", []):
            assert key in value, f"{where}: missing {key}"
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is False:
            extra = set(value) - set(props)
            assert not extra, f"{where}: unexpected {sorted(extra)}"
        for key, sub in props.items():
            if key in value:
                _validate(value[key], sub, root, f"{where}.{key}")
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            _validate(item, schema["items"], root, f"{where}[{i}]")
    return None


def test_json_matches_the_schema(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = who(capsys, "--can", "cargo", "--as", "lead", "--roster", "app", "--json")
    doc = json.loads(out)
    schema = json.loads(SCHEMA.read_text())
    _validate(doc, schema, schema)
    assert code == 0
    assert [r["target"] for r in doc["routes"]["ready"]] == ["builder", "worker"]
    assert doc["routes"]["ready"][1]["via"] == ["builder"]
    assert [r["target"] for r in doc["routes"]["blocked"]] == ["qa", "app-builder", "app-qa"]
    assert doc["routes"]["blocked"][0]["authorize"].startswith("add `- {from: lead, to: [qa]}`")
    # the validator itself refuses a document that breaks the schema
    doc["holders"][0]["state"] = "sleeping"
    with pytest.raises(AssertionError):
        _validate(doc, schema, schema)


def test_running_session_whose_source_manifest_is_edited_is_flagged(
    project: Path, murmur_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    proc = MurProcess(["--capsule", "local/app-builder", "--capsule-version", "0.1.0", "--json",
                       "--project-dir", str(project)], cwd=project, env=env_for(murmur_home))
    try:
        ready = proc.read_ready(timeout=60)
        code, out, _ = who(capsys, "--can", "cargo", "--roster", "app")
        assert code == 0
        assert "builder (local/app-builder@0.1.0) [running]\n" in out
        assert "PROFILE EDITED" not in out
        manifest = project / "builder" / "murmur.yaml"
        manifest.write_text(manifest.read_text().replace("allow: [echo, cargo]", "allow: [echo, cargo, make]"))
        code, out, _ = who(capsys, "--can", "cargo", "--roster", "app")
        assert "builder (local/app-builder@0.1.0) [running]  PROFILE EDITED SINCE START\n" in out
        assert f"{ready['session_id']}: the source manifest {manifest} changed; restart it" in out
        # its live grants are what it started with: the row still shows the installed profile
        assert "      exec   echo, cargo\n" in out
        code, out, _ = who(capsys, "--can", "cargo", "--roster", "app", "--json")
        row = json.loads(out)["holders"][0]
        assert row["profile_edited"][0]["session_id"] == ready["session_id"]
    finally:
        proc.close()


def test_no_as_asks_as_the_capsule_in_the_current_directory(
        project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 30 item 8: with no --as (and no --roster), the seed's default asker — the capsule
    `mur run` here would run — gets its routes, instead of holders only."""
    monkeypatch.chdir(project / "lead")
    code, out, err = who(capsys, "--can", "cargo", "--project", "..")
    assert (code, err) == (0, "")
    assert "\nDispatch routes for 'app-lead', best first:\n" in out
    assert out.rstrip().endswith("(routes as 'app-lead', the capsule in the current directory; "
                                 "`--as CAPSULE` asks as another)")
    doc = json.loads(who(capsys, "--can", "cargo", "--project", "..", "--json")[1])
    assert doc["routes"]["as"] == "app-lead"


def test_no_as_and_no_capsule_here_says_so(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = who(capsys, "--can", "cargo", "--project", "app")
    assert code == 0 and "Dispatch routes" not in out
    assert "(no routes: no --as, and no murmur.yaml in the current directory" in out
