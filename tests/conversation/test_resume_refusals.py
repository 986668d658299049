"""`mur run --context/--resume/--resume-mode/--forget-session`: every refusal, before anything is staged.

Most cases call the composition root (``prepare``) in-process; the exit statuses of the
command line are checked once with real `mur run` processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from murmur.agent.harness.sessions import HarnessMap
from murmur.assembly import RunOptions, prepare
from murmur.conversation.record import RecordStore, conversations_root
from murmur.errors import DiagnosticError, UsageError
from murmur.ids import new_id
from murmur.session.records import records_dir_for

AGENT = """\
name: talker
version: 0.1.0
inference:
  transport: {transport}
  endpoint: http://127.0.0.1:9/v1
  model: m
  {extra}
lifecycle:
  conversation: threaded
{context}"""


def capsule(tmp: Path, *, transport: str = "http", context: str = "", plan: bool = False,
            protocol: str = "stdio") -> Path:
    cap = tmp / "cap"
    cap.mkdir(exist_ok=True)
    if plan:
        (cap / "plan.yaml").write_text('steps:\n  - id: say\n    shell: [echo, "hi"]\noutput: "{{ steps.say.stdout }}"\n')
        (cap / "murmur.yaml").write_text("name: talker\nversion: 0.1.0\nplan: plan.yaml\n"
                                         "capabilities:\n  shell:\n    allow: [echo]\n")
    else:
        extra = "command: sh" if transport == "process" else "driver: {artifact: murmur-driver-openai}"
        if transport == "process":
            extra += f"\n  protocol: {protocol}"
        (cap / "murmur.yaml").write_text(AGENT.format(transport=transport, extra=extra, context=context))
    return cap


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    monkeypatch.setenv("MURMUR_HOME", str(h))
    return h


def earlier_session(work: Path, *, context: str | None = "ctx_earlier", record: bool = True) -> str:
    """A finished (or killed) session of ``work``: its trace, and the record of its context."""
    sid = new_id("ses")
    rec = records_dir_for(work, sid)
    rec.mkdir(parents=True)
    lines = [{"event_type": "session_start", "session_id": sid}]
    if context is not None:
        lines.append({"event_type": "task_start", "task_id": "tsk_1", "context_id": context})
    (rec / "trace.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"event_type": "inf')
    if record and context is not None:
        RecordStore(conversations_root(), "talker", "talker", print).append(context, {"role": "user", "content": "x"})
    return sid


def refused(tmp: Path, **kw: object) -> str:
    work = tmp / "work"
    before = sorted(records_dir_for(work, "x").parent.glob("ses_*"))
    with pytest.raises((DiagnosticError, UsageError)) as exc:
        prepare(RunOptions(manifest=str(kw.pop("cap")), workdir=str(work), no_env_file=True, **kw),  # type: ignore[arg-type]
                environ={"PATH": os.environ["PATH"]}, cwd=tmp)
    assert sorted(records_dir_for(work, "x").parent.glob("ses_*")) == before  # nothing staged
    return exc.value.diagnostics[0].code


def test_resume_with_context_is_e_run_015(tmp_path: Path, home: Path) -> None:
    assert refused(tmp_path, cap=capsule(tmp_path), resume="@1", context="ctx_a") == "E-RUN-015"


def test_bad_context_segment_is_e_cap_011(tmp_path: Path, home: Path) -> None:
    assert refused(tmp_path, cap=capsule(tmp_path), context="../up") == "E-CAP-011"


def test_bad_record_store_is_e_cap_011(tmp_path: Path, home: Path) -> None:
    cap = capsule(tmp_path, context="context:\n  record_store: a/b\n")
    assert refused(tmp_path, cap=cap) == "E-CAP-011"


def test_a_session_that_ran_no_task_is_e_run_016(tmp_path: Path, home: Path) -> None:
    earlier_session(tmp_path / "work", context=None)
    assert refused(tmp_path, cap=capsule(tmp_path), resume="@1") == "E-RUN-016"


def test_a_context_without_a_record_is_e_run_017(tmp_path: Path, home: Path) -> None:
    earlier_session(tmp_path / "work", record=False)
    assert refused(tmp_path, cap=capsule(tmp_path), resume="@1") == "E-RUN-017"


def test_record_off_is_e_run_017(tmp_path: Path, home: Path) -> None:
    earlier_session(tmp_path / "work")
    assert refused(tmp_path, cap=capsule(tmp_path, context="context:\n  record: \"off\"\n"), resume="@1") == "E-RUN-017"


def test_a_plan_capsule_is_e_run_017(tmp_path: Path, home: Path) -> None:
    earlier_session(tmp_path / "work")
    assert refused(tmp_path, cap=capsule(tmp_path, plan=True), resume="@1") == "E-RUN-017"


def test_process_transport_without_a_harness_entry_is_e_run_017(tmp_path: Path, home: Path) -> None:
    earlier_session(tmp_path / "work")
    assert refused(tmp_path, cap=capsule(tmp_path, transport="process"), resume="@1") == "E-RUN-017"


def test_compact_without_a_hook_is_e_run_018(tmp_path: Path, home: Path) -> None:
    earlier_session(tmp_path / "work")
    assert refused(tmp_path, cap=capsule(tmp_path), resume="@1", resume_mode="compact") == "E-RUN-018"


def test_compact_under_process_is_e_run_037(tmp_path: Path, home: Path) -> None:
    earlier_session(tmp_path / "work")
    cap = capsule(tmp_path, transport="process")
    assert refused(tmp_path, cap=cap, resume="@1", resume_mode="compact") == "E-RUN-037"


def test_forget_session_under_http_is_e_run_039(tmp_path: Path, home: Path) -> None:
    assert refused(tmp_path, cap=capsule(tmp_path), context="ctx_a", forget_session=True) == "E-RUN-039"


def test_forget_session_needs_context_e_cnv_002(tmp_path: Path, home: Path) -> None:
    assert refused(tmp_path, cap=capsule(tmp_path), forget_session=True) == "E-CNV-002"
    assert refused(tmp_path, cap=capsule(tmp_path), resume="@1", forget_session=True) == "E-CNV-002"


@pytest.mark.parametrize("address", ["@2", "ses_0000", "zz", "./nowhere"])
def test_an_unknown_session_is_e_cnv_001(tmp_path: Path, home: Path, address: str) -> None:
    earlier_session(tmp_path / "work")
    assert refused(tmp_path, cap=capsule(tmp_path), resume=address) == "E-CNV-001"


@pytest.mark.parametrize("form", ["full", "suffix", "ordinal", "path", "trace"])
def test_every_address_form_resolves(tmp_path: Path, home: Path, form: str) -> None:
    """A full id, a 4+ suffix (any case), @N and a records path all name the same session."""
    work = tmp_path / "work"
    older = earlier_session(work, context="ctx_older")
    sid = earlier_session(work)
    rec = records_dir_for(work, sid)
    address = {"full": sid, "suffix": sid[-6:].upper(), "ordinal": "@1", "path": str(rec),
               "trace": str(rec / "trace.jsonl")}[form]
    setup = prepare(RunOptions(manifest=str(capsule(tmp_path)), workdir=str(work), no_env_file=True, resume=address),
                    # no gateway: its own session_start field is not what this test is about
                    environ={"PATH": os.environ["PATH"], "MURMUR_GATEWAY": "off"}, cwd=tmp_path)
    assert setup.launch_context_id == "ctx_earlier"
    assert setup.trace_start_fields == {"resumed_from": str(rec), "context_id": "ctx_earlier"}
    assert setup.session_id not in (older, sid)
    # the launch above staged a session of its own: the older one is now @3
    older_setup = prepare(RunOptions(manifest=str(capsule(tmp_path)), workdir=str(work), no_env_file=True,
                                     resume="@3"), environ={"PATH": os.environ["PATH"]}, cwd=tmp_path)
    assert older_setup.launch_context_id == "ctx_older"


def test_the_command_line_exits_2_for_misuse(tmp_path: Path, home: Path) -> None:
    """`--resume` with `--context`, and `--roster --resume`: exit 2 with the coded message."""
    cap = capsule(tmp_path)
    mur = [sys.executable, "-m", "murmur.cli.mur", "run"]
    env = {**os.environ, "MURMUR_HOME": str(home)}
    r = subprocess.run([*mur, "--manifest", str(cap), "--resume", "--context", "c"], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "error[E-RUN-015]" in r.stderr
    r = subprocess.run([*mur, "--roster", "--resume"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "error[E-CNV-003]" in r.stderr and "launch the formation again" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_mapped_cli_session_that_is_gone_is_e_run_036(tmp_path: Path, home: Path) -> None:
    """process + threaded: the map names a CLI session whose files are gone → E-RUN-036, map kept;
    with the files there the session resumes into that context."""
    earlier_session(tmp_path / "work", record=False)
    hmap = HarnessMap(conversations_root(), "talker", "claude-code", print)
    hmap.remember("ctx_earlier", "0b5e-sess")
    cap = capsule(tmp_path, transport="process", protocol="claude-code")
    assert refused(tmp_path, cap=cap, resume="@1") == "E-RUN-036"
    assert hmap.entry("ctx_earlier") is not None
    cli_home = hmap.home("ctx_earlier")
    assert cli_home is not None
    (cli_home / ".claude" / "projects" / "w").mkdir(parents=True)
    (cli_home / ".claude" / "projects" / "w" / "0b5e-sess.jsonl").write_text("{}\n")
    setup = prepare(RunOptions(manifest=str(cap), workdir=str(tmp_path / "work"), no_env_file=True, resume="@1"),
                    environ={"PATH": os.environ["PATH"]}, cwd=tmp_path)
    assert setup.launch_context_id == "ctx_earlier"
    thread = setup.workload.conversations.harness_thread("ctx_earlier")  # type: ignore[attr-defined]
    assert thread is not None and thread.resume_id == "0b5e-sess" and thread.home == cli_home


def test_forget_session_drops_the_mapping_at_launch(tmp_path: Path, home: Path) -> None:
    """`--context ID --forget-session` under process drops the CLI session that context maps to."""
    hmap = HarnessMap(conversations_root(), "talker", "claude-code", print)
    hmap.remember("ctx_x", "old-session")
    cap = capsule(tmp_path, transport="process", protocol="claude-code")
    setup = prepare(RunOptions(manifest=str(cap), workdir=str(tmp_path / "work"), no_env_file=True,
                               context="ctx_x", forget_session=True),
                    environ={"PATH": os.environ["PATH"]}, cwd=tmp_path)
    assert hmap.entry("ctx_x") is None and setup.launch_context_id == "ctx_x"
    assert len(setup.start_hooks) >= 1  # harness_session_forgotten is traced once the session starts


async def test_retention_at_launch_cuts_and_expires_records(tmp_path: Path, home: Path) -> None:
    """context.retain: max_messages cuts the record --context names; max_age removes stale ones,
    traced as `retention` once the session starts."""
    store = RecordStore(conversations_root(), "talker", "talker", print)
    for i in range(4):
        store.append("ctx_keep", {"role": "user", "content": str(i)})
    store.append("ctx_stale", {"role": "user", "content": "old"})
    stale = conversations_root() / "talker" / "ctx_stale" / "conversation.jsonl"
    os.utime(stale, (1000, 1000))
    cap = capsule(tmp_path, context="context:\n  retain:\n    max_messages: 2\n    max_age: 1d\n")
    setup = prepare(RunOptions(manifest=str(cap), workdir=str(tmp_path / "work"), no_env_file=True,
                               context="ctx_keep"), environ={"PATH": os.environ["PATH"]}, cwd=tmp_path)
    assert [m["content"] for m in store.load("ctx_keep")] == ["2", "3"]
    assert not stale.exists()
    emitted: list[tuple[str, dict[str, object]]] = []

    class FakeTrace:
        def emit(self, kind: str, /, *, parent_id: str | None, **fields: object) -> str:
            emitted.append((kind, fields))
            return "evt_x"

    class FakeSession:
        trace = FakeTrace()
        session_event_id = "evt_start"

    for hook in setup.start_hooks:
        await hook(FakeSession())  # type: ignore[arg-type]
    assert ("retention", {"store": "records", "removed": 1}) in emitted


def test_compact_is_checked_before_the_record_e_run_018(tmp_path: Path, home: Path) -> None:
    """Upstream's order: a resolved session, then compact (E-RUN-018), then the record (E-RUN-017)."""
    earlier_session(tmp_path / "work", record=False)
    assert refused(tmp_path, cap=capsule(tmp_path), resume="@1", resume_mode="compact") == "E-RUN-018"


@pytest.mark.parametrize(("binding", "code"), [("binding: on-task-end\n", "E-RUN-018"), ("", None),
                                              ("binding: on-compaction\n", None)])
def test_compact_needs_a_hook_that_receives_on_compaction(
    tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch, binding: str, code: str | None
) -> None:
    """A hook bound elsewhere does not count; one with no binding (every event) or bound to
    on-compaction does, and the launch is staged."""
    from components.wat import hook
    from murmur.cli.mur import main

    monkeypatch.chdir(tmp_path)
    src = tmp_path / "src" / "squeezer"
    src.mkdir(parents=True)
    (src / "murmur.yaml").write_text(f"name: squeezer\nversion: 0.1.0\nruntime: hook\n{binding}requires_files: [h.wasm]\n")
    (src / "h.wasm").write_bytes(hook())
    assert main(["install", str(src)]) == 0
    cap = capsule(tmp_path)
    text = (cap / "murmur.yaml").read_text()
    (cap / "murmur.yaml").write_text(text.replace("inference:", "artifacts:\n  - {name: squeezer, version: 0.1.0, runtime: hook}\ninference:"))
    earlier_session(tmp_path / "work")
    if code is not None:
        assert refused(tmp_path, cap=cap, resume="@1", resume_mode="compact") == code
        return
    setup = prepare(RunOptions(manifest=str(cap), workdir=str(tmp_path / "work"), no_env_file=True, resume="@1",
                               resume_mode="compact"), environ={"PATH": os.environ["PATH"]}, cwd=tmp_path)
    assert setup.trace_start_fields["context_id"] == "ctx_earlier"
