"""Tests of the manifest loader: the malformed table, YAML 1.2 semantics, fault order, fuzzing."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manifest.malformed import CASES, Case
from murmur.errors import DiagnosticError
from murmur.manifest.load import (
    MAX_MANIFEST_BYTES,
    load_manifest,
    manifest_from_mapping,
    parse_manifest,
    parse_manifest_bytes,
)
from murmur.manifest.model import (
    AfterTask,
    ArtifactRef,
    Containment,
    DoorCredential,
    Manifest,
    TaskAcceptance,
    Transport,
)


def _refusal(text: str) -> DiagnosticError:
    with pytest.raises(DiagnosticError) as info:
        parse_manifest(text, path="m.yaml")
    return info.value


class TestMalformedTable:
    def test_table_is_large_enough(self) -> None:
        """The table holds at least 40 malformed manifests with distinct ids."""
        assert len(CASES) >= 40
        assert len({c.id for c in CASES}) == len(CASES)

    @pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
    def test_case_code_and_line(self, case: Case) -> None:
        """Each malformed manifest's first diagnostic has the table's code and line."""
        exc = _refusal(case.text)
        first = exc.diagnostics[0]
        assert first.code == case.code, exc
        assert first.location is not None and first.location.path == "m.yaml"
        assert first.location.line == case.line, exc

    @pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
    def test_every_diagnostic_is_located(self, case: Case) -> None:
        """Every diagnostic of every case names the file and a line."""
        for d in _refusal(case.text).diagnostics:
            assert d.location is not None and d.location.line is not None, d.render()


class TestYaml12:
    def test_version_keeps_its_text(self) -> None:
        """An unquoted 1.10 stays the text 1.10, and 0.1 stays 0.1."""
        assert parse_manifest("name: a\nversion: 1.10\n", path="m").version == "1.10"
        assert parse_manifest("name: a\nversion: 0.1\n", path="m").version == "0.1"
        assert parse_manifest("name: a\nversion: 1\n", path="m").version == "1"

    def test_yaml11_words_stay_text(self) -> None:
        """on, no, null and ~ stay text where the schema says string."""
        m = parse_manifest(
            "name: no\nversion: 1.0\ndescription: null\n"
            "capabilities:\n  env:\n    allow: [on, off, y]\n  state:\n    store: 'null'\n",
            path="m",
        )
        assert m.name == "no"
        assert m.description == "null"
        assert m.env_allow == ("on", "off", "y")

    def test_key_without_value_is_absent(self) -> None:
        """`key:` with no value means the key is absent (defaults apply)."""
        m = parse_manifest("name: a\nversion: '1'\ndescription:\ninference:\nlifecycle:\n", path="m")
        assert m.description is None and m.inference is None
        assert m.lifecycle.task_acceptance is TaskAcceptance.SINGLE

    def test_null_word_for_block_is_absent(self) -> None:
        """A plain null where a block is expected means absent."""
        m = parse_manifest("name: a\nversion: '1'\nexports: null\ntrace: ~\n", path="m")
        assert m.exports is None and m.trace is None

    def test_core_schema_ints_and_bools(self) -> None:
        """Integers take YAML 1.2 forms (0x, 0o); booleans only true/false spellings."""
        m = parse_manifest(
            "name: a\nversion: '1'\nlifecycle:\n  queue_depth: 0x10\n  task_acceptance: queue\n"
            "capabilities:\n  network:\n    unix_sockets: True\n",
            path="m",
        )
        assert m.lifecycle.queue_depth == 16
        assert m.capabilities.network is not None and m.capabilities.network.unix_sockets is True


FULL = """\
name: auditor
version: 2.0.1
description: A full manifest.
artifacts:
  - name: murmur-driver-openai
    version: 0.3.0
    runtime: driver
  - name: notes
    source: ./skills/notes
    runtime: skill
capabilities:
  network:
    allow: [https://api.example.com, localhost, 'db.internal:5432', 'http://[::1]:8080']
    unix_sockets: false
  peer_fetch:
    allow: [localhost]
  shell:
    allow: [git, rg]
    baseline_env: [PATH, LC_*]
    strip_env: ['*_TOKEN']
  env:
    allow: [HOME_REGION]
  filesystem:
    scope: src/./lib
    workdir_exec: false
  state:
    store: auditor-state
  containment: scoped
inference:
  transport: http
  endpoint: ${OPENAI_BASE_URL}
  model: gpt-test
  api_key: ${OPENAI_API_KEY}
  driver:
    artifact: murmur-driver-openai
    config: {temperature: 0.2, tags: [a, 1, true, null]}
  max_turns: 5
  max_tokens: 1000
  system_prompt: Be brief.
lifecycle:
  task_acceptance: queue
  queue_depth: 3
  after_task: sleep
  delegation_deadline_secs: 120
exports:
  peer_tasks:
    accept: true
network:
  authentication:
    scheme: bearer
    credentials:
      reviewer:
        scopes: [SendMessage, GetTask]
      watcher:
trace:
  retain:
    max_sessions: 5
    max_age: 7d
"""


class TestValid:
    def test_full_manifest(self) -> None:
        """Every block of a full manifest lands in the model with the documented types."""
        m = parse_manifest(FULL, path="m")
        assert m.name == "auditor" and m.version == "2.0.1"
        assert m.artifacts[0] == ArtifactRef("murmur-driver-openai", "0.3.0", "driver")
        assert m.artifacts[1].source == "./skills/notes" and m.artifacts[1].version is None
        assert m.network_allow == (
            "https://api.example.com", "localhost", "db.internal:5432", "http://[::1]:8080")
        assert m.capabilities.containment is Containment.SCOPED
        assert m.capabilities.shell is not None and m.capabilities.shell.strip_env == ("*_TOKEN",)
        inf = m.inference
        assert inf is not None and inf.transport is Transport.HTTP
        assert inf.api_key == "${OPENAI_API_KEY}" and inf.endpoint == "${OPENAI_BASE_URL}"
        assert inf.driver is not None
        assert inf.driver.config == {"temperature": 0.2, "tags": ["a", 1, True, None]}
        assert m.lifecycle.after_task is AfterTask.SLEEP and m.lifecycle.queue_depth == 3
        assert m.accepts_peer_tasks
        assert m.authentication is not None
        assert m.authentication.credentials == (
            DoorCredential("reviewer", ("SendMessage", "GetTask")), DoorCredential("watcher"))
        assert m.trace is not None and m.trace.retain is not None
        assert (m.trace.retain.max_sessions, m.trace.retain.max_age) == (5, 7 * 86400)

    def test_minimal_defaults(self) -> None:
        """A two-line manifest gets the documented defaults."""
        m = parse_manifest("name: a\nversion: 0.1.0\n", path="m")
        assert m == Manifest(name="a", version="0.1.0")
        assert m.lifecycle.delegation_deadline_secs == 600

    def test_process_transport(self) -> None:
        """transport: process with a command (and a model) is valid."""
        m = parse_manifest("name: a\nversion: '1'\ninference:\n  transport: process\n"
                           "  command: codex\n  model: o3\n", path="m")
        assert m.inference is not None and m.inference.command == "codex"

    def test_loopback_http_endpoint(self) -> None:
        """http endpoints are accepted for localhost and loopback addresses."""
        for url in ("http://localhost:11434/v1", "http://127.0.0.1:8000", "http://[::1]:9/v1"):
            m = parse_manifest(f"name: a\nversion: '1'\ninference:\n  endpoint: '{url}'\n", path="m")
            assert m.inference is not None and m.inference.endpoint == url


class TestFaultOrder:
    def test_all_faults_in_document_order(self) -> None:
        """Every fault in a file is reported, sorted by line."""
        text = ("name: Bad\nversion: latest\nbogus: 1\ncapabilities:\n  filesystem:\n"
                "    scope: /abs\nlifecycle:\n  after_task: never\n")
        exc = _refusal(text)
        got = [(d.code, d.location.line if d.location else None) for d in exc.diagnostics]
        assert got == [("E-BLD-001", 1), ("E-REG-004", 2), ("E-MAN-003", 3), ("E-CAP-002", 6),
                       ("E-MAN-003", 8)]

    def test_type_error_and_rule_reported_once(self) -> None:
        """A wrongly typed value is one diagnostic, not a type error plus a rule error."""
        exc = _refusal("name: demo\nversion: 0.1.0\ncapabilities:\n  state:\n    store: [a]\n")
        assert [d.code for d in exc.diagnostics] == ["E-MAN-003"]

    def test_unknown_key_hint_suggests(self) -> None:
        """An unknown key close to a known one gets a did-you-mean hint."""
        exc = _refusal("name: demo\nversion: 0.1.0\nlifecycle:\n  queue_dept: 2\n")
        assert exc.diagnostics[0].hint == "did you mean `queue_depth`?"


class TestEntryPoints:
    def test_load_missing_file(self, tmp_path: Path) -> None:
        """A missing manifest file is E-MAN-004 naming the path."""
        with pytest.raises(DiagnosticError) as info:
            load_manifest(tmp_path / "murmur.yaml")
        assert info.value.code == "E-MAN-004"
        assert str(tmp_path) in info.value.diagnostics[0].render()

    @pytest.mark.parametrize("kind", ["fifo", "dev-zero"])
    def test_load_not_a_regular_file(self, tmp_path: Path, kind: str) -> None:
        """A murmur.yaml that is a FIFO or /dev/zero is E-MAN-004; nothing is read, no hang."""
        p = tmp_path / "murmur.yaml"
        os.mkfifo(p) if kind == "fifo" else p.symlink_to("/dev/zero")
        with pytest.raises(DiagnosticError) as info:
            load_manifest(p)
        d = info.value.diagnostics[0]
        assert d.code == "E-MAN-004" and "not a regular file" in d.message

    def test_load_directory_means_its_manifest(self, tmp_path: Path) -> None:
        """Passing a directory loads the murmur.yaml inside it."""
        (tmp_path / "murmur.yaml").write_text("name: a\nversion: '1'\n")
        assert load_manifest(tmp_path).name == "a"

    def test_not_utf8(self) -> None:
        """Bytes that are not UTF-8 are E-MAN-004."""
        with pytest.raises(DiagnosticError) as info:
            parse_manifest_bytes(b"name: \xff\n", path="m")
        assert info.value.code == "E-MAN-004"

    def test_bom_accepted(self) -> None:
        """A UTF-8 byte-order mark is accepted."""
        assert parse_manifest_bytes(b"\xef\xbb\xbfname: a\nversion: '1'\n", path="m").name == "a"

    def test_too_large(self, tmp_path: Path) -> None:
        """A manifest over the size limit is refused unread."""
        p = tmp_path / "murmur.yaml"
        p.write_bytes(b"#" * (MAX_MANIFEST_BYTES + 1))
        with pytest.raises(DiagnosticError) as info:
            load_manifest(p)
        assert info.value.code == "E-MAN-004"

    def test_from_mapping_same_rules(self) -> None:
        """Plain data goes through the same rules; numbers read as their text."""
        m = manifest_from_mapping({"name": "a", "version": 1.5, "description": None,
                                   "lifecycle": {"queue_depth": 2, "task_acceptance": "queue"}})
        assert m.version == "1.5" and m.lifecycle.queue_depth == 2
        with pytest.raises(DiagnosticError) as info:
            manifest_from_mapping({"name": "a", "version": "1", "lifecycle": {"queue_depth": "2"}},
                                  path="x.json")
        assert info.value.code == "E-MAN-003"
        loc = info.value.diagnostics[0].location
        assert loc is not None and loc.path == "x.json"

    def test_alias_bomb_refused(self) -> None:
        """A document whose aliases expand past the value limit is E-MAN-002."""
        lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
        for i in range(1, 8):
            prev = f"*a{i - 1}"
            lines.append(f"a{i}: &a{i} [{', '.join([prev] * 10)}]")
        exc = _refusal("\n".join(lines) + "\n")
        assert exc.code == "E-MAN-002"


# --- fuzzing: any text gives a manifest or a diagnostic, never another exception ----------

KEYS = ["name", "version", "capabilities", "network", "allow", "shell", "inference", "transport",
        "endpoint", "lifecycle", "queue_depth", "trace", "retain", "max_age", "artifacts",
        "runtime", "authentication", "credentials", "scopes", "spawn", "plan", "scope", "x"]
_scalars = st.one_of(st.sampled_from(["demo", "0.1.0", "1.10", "null", "~", "true", "no", "-1",
                                      "0x1F", "", "https://h", "/abs", "process", "queue"]),
                     st.text(max_size=8), st.integers(-5, 5), st.booleans(), st.none())
_trees = st.recursive(
    _scalars,
    lambda kids: st.one_of(st.lists(kids, max_size=4),
                           st.dictionaries(st.sampled_from(KEYS), kids, max_size=5)),
    max_leaves=25,
)


def _never_crashes(text: str) -> None:
    try:
        m = parse_manifest(text, path="f.yaml")
    except DiagnosticError as exc:
        assert exc.diagnostics
        for d in exc.diagnostics:
            assert d.location is not None and d.location.path == "f.yaml"
    else:
        assert isinstance(m, Manifest)


class TestFuzz:
    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.text(max_size=200))
    def test_any_text(self, text: str) -> None:
        """Arbitrary text yields a Manifest or a DiagnosticError, nothing else."""
        _never_crashes(text)

    @settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.dictionaries(st.sampled_from(KEYS), _trees, max_size=8))
    def test_manifest_shaped_documents(self, doc: dict[str, object]) -> None:
        """Manifest-shaped documents (JSON is YAML) never escape as other exceptions."""
        _never_crashes(json.dumps(doc))

    @settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(st.lists(st.sampled_from(["name: a\n", "version: 1\n", "capabilities:\n", "  shell:\n",
                                     "    allow: [echo]\n", "  - x\n", "inference:\n", ": :\n",
                                     "  transport: process\n", "&a b: *a\n", "? [k]\n", "'\n",
                                     "trace:\n", "  retain:\n", "\t\n", "---\n", "!tag x: 1\n"]),
                    max_size=10))
    def test_line_soup(self, lines: list[str]) -> None:
        """Recombined manifest lines never escape as other exceptions."""
        _never_crashes("".join(lines))


class TestLinkShadows:
    def test_name_in_spawn_and_shell_allow_is_refused(self) -> None:
        """A spawn.allow name also in shell.allow is E-MAN-003 at the spawn entry (spec/links.md)."""
        text = ("name: boss\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [sh, kid]\n"
                "  spawn:\n    allow:\n      - other\n      - kid\n")
        exc = _refusal(text)
        assert [d.code for d in exc.diagnostics] == ["E-MAN-003"]
        d = exc.diagnostics[0]
        assert d.location is not None and d.location.line == 9
        assert "`kid` is in both capabilities.spawn.allow and capabilities.shell.allow" in d.message
        assert d.hint is not None and "remove `kid`" in d.hint

    def test_scoped_name_shadows_by_its_last_segment(self) -> None:
        """`local/kid` gets the link `kid`, so it too collides with a `kid` binary."""
        exc = _refusal("name: boss\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [kid]\n"
                       "  spawn:\n    allow: [local/kid]\n")
        assert [d.code for d in exc.diagnostics] == ["E-MAN-003"]

    def test_disjoint_lists_load(self) -> None:
        """Different names in the two lists load."""
        m = parse_manifest("name: boss\nversion: 0.1.0\ncapabilities:\n  shell:\n    allow: [sh]\n"
                           "  spawn:\n    allow: [kid]\n", path="m.yaml")
        assert m.spawn_allow == ("kid",) or list(m.spawn_allow) == ["kid"]
