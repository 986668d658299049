"""Upstream's examples run as their pages say: ``mur run`` of every corpus manifest whose
``run`` is set (``tests/manifest/upstream_corpus.py``), as a real process, against a scripted
provider standing in for the network (spec/components.md "Upstream's examples here").

The manifest is the page's, byte for byte, except the network: the provider's URL
(``https://api.anthropic.com`` / ``api.openai.com`` / ``api.deepseek.com``) becomes the scripted provider's
loopback URL, and a door port the page pins (``network.internal_port``) becomes a free one, in
every place it appears. The test asserts nothing else changed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
import trio
import yaml

from agent.npm_cli import npm_bin
from agent.scripted import Received, Reply, ScriptedServer, an_text, an_tools, oa_text, oa_tools
from agent.scripted_openai import ModelReply, ScriptedResponses, message
from components.wat import component
from manifest.test_upstream_corpus import page_file
from manifest.upstream_corpus import CORPUS, Expect

pytestmark = pytest.mark.e2e

CORPUS_DIR = Path(__file__).parent / "upstream"
KEY = "sk-upstream-run-SECRET-4b1d"
PROVIDERS = {"https://api.anthropic.com": "anthropic", "https://api.openai.com": "openai",
             "https://api.deepseek.com": "openai"}  # DeepSeek's API is OpenAI Chat Completions
PATHS = {"anthropic": "/v1/messages", "openai": "/chat/completions"}
A2A = {"A2A-Version": "1.0", "content-type": "application/json"}
RUNS = [e for e in CORPUS if e.run]
SKILL_MD = "# Code review conventions\n\nEvery PR names its issue; no commented-out code.\n"

# A stand-in for the page's fd probe (its C source is the page's; this is ours): it lists the
# descriptors open in its own process without opening any, then writes fdprobe-<tag>.txt in
# its cwd and answers in the native tool protocol.
PROBE = """#!{python}
import json, os, sys
fds = []
for fd in range(1024):
    try:
        os.fstat(fd)
    except OSError:
        continue
    fds.append(fd)
extra = [fd for fd in fds if fd > 2]
tag = sys.argv[1] if len(sys.argv) > 1 else "native"
with open("fdprobe-" + tag + ".txt", "w") as out:
    out.write("open_fds: " + " ".join(map(str, fds)) + "\\nextra_fds: " + str(len(extra)) + "\\n")
print(json.dumps({{"status": "passed", "summary": "extra_fds=" + str(len(extra)), "data": "wrote fdprobe-" + tag + ".txt"}}))
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _network(text: str, server_url: str) -> tuple[str, str]:
    """(the manifest with its network replaced, the provider dialect); asserts that only the
    provider URL and a pinned door port changed."""
    found = [(u, d) for u, d in PROVIDERS.items() if u in text]
    if not found:  # no model: nothing of the network in the manifest
        return text, "none"
    [(url, dialect)] = found
    out = text.replace(url, server_url)
    pinned = re.search(r"internal_port: (\d+)", text)
    if pinned:
        out = out.replace(pinned.group(1), str(_free_port()))
    changed = [(a, b) for a, b in zip(text.splitlines(), out.splitlines(), strict=True) if a != b]
    assert changed and all(url in a or (pinned and pinned.group(1) in a) for a, _ in changed)
    return out, dialect


def _text(dialect: str, text: str) -> dict[str, object]:
    return an_text(text) if dialect == "anthropic" else oa_text(text)


def _call(dialect: str, cid: str, name: str, args: object) -> dict[str, object]:
    return an_tools((cid, name, args)) if dialect == "anthropic" else oa_tools((cid, name, args))


def _system(dialect: str, req: Received) -> str:
    assert isinstance(req.body, dict)
    if dialect == "anthropic":
        return json.dumps(req.body.get("system"))
    return json.dumps([m for m in req.body["messages"] if m["role"] == "system"])


def _key_sent(dialect: str, req: Received) -> bool:
    if dialect == "anthropic":
        return req.headers.get("x-api-key") == KEY
    return req.headers.get("authorization") == f"Bearer {KEY}"


@pytest.fixture
async def provider(nursery: trio.Nursery) -> AsyncIterator[ScriptedServer]:
    server = ScriptedServer()
    await nursery.start(server.serve)
    yield server


def _stage(case: Expect, tmp_path: Path, server_url: str) -> tuple[Path, str, dict[str, object], dict[str, str]]:
    """The capsule directory (the page's manifest, its network replaced, its artifacts
    installed as the page has them built), its dialect, its parsed manifest, the environment."""
    cap = tmp_path / "capsule"
    cap.mkdir()
    text, dialect = _network((CORPUS_DIR / case.file).read_text(encoding="utf-8"), server_url)
    (cap / "murmur.yaml").write_text(text, encoding="utf-8")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    probe = PROBE.format(python=sys.executable)
    (bin_dir / "fdprobe").write_text(probe)
    (bin_dir / "fdprobe").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    env.update(MURMUR_HOME=str(tmp_path / "home"), ANTHROPIC_API_KEY=KEY, OPENAI_API_KEY=KEY, DEEPSEEK_API_KEY=KEY,
               PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
               # a page's `otel_endpoint` (http://localhost:4318) has no collector here: the
               # export's own bound (5 s of retries) is cut to its floor; that a failed export
               # never fails the task is tests/observe/test_otlp.py's
               OTEL_EXPORTER_OTLP_TIMEOUT="0.1")
    for name in case.page_files:
        (cap / name).write_bytes(page_file(case, name))
    for art_file in case.installs:
        art = tmp_path / art_file.removesuffix(".yaml")
        art.mkdir()
        (art / "murmur.yaml").write_bytes((CORPUS_DIR / art_file).read_bytes())
        if "skill" in art_file:
            (art / "skill.md").write_text(SKILL_MD)
        elif "graduation" in art_file:  # the graduation tool: our echo component stands in
            (art / "jsonl-line-count.wasm").write_bytes(component("echo"))
        else:  # the fd probe, packed as the page packs it (bin/fdprobe-native)
            (art / "bin").mkdir()
            (art / "bin" / "fdprobe-native").write_text(probe)
            (art / "bin" / "fdprobe-native").chmod(0o755)
        r = subprocess.run([sys.executable, "-m", "murmur.cli.mur", "install", str(art)], cwd=cap, env=env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    manifest = yaml.safe_load(text)
    assert isinstance(manifest, dict)
    return cap, dialect, manifest, env


async def _mur(args: list[str], cap: Path, env: Mapping[str, str], **kw: object) -> subprocess.CompletedProcess[bytes]:
    with trio.fail_after(90):
        return await trio.run_process([sys.executable, "-m", "murmur.cli.mur", "run", *args], cwd=cap,
                                      env=dict(env), capture_stdout=True, capture_stderr=True, check=False,
                                      **kw)  # type: ignore[arg-type]


async def _roost(cap: Path, env: Mapping[str, str], name: str, nursery: trio.Nursery) -> str:
    """Publish the capsule to the global store and serve mur-roost over it, the capsule's name
    in ``--spawn-allow`` (spec/roost.md); its URL. The daemon is killed when the test ends."""
    with trio.fail_after(60):
        r = await trio.run_process([sys.executable, "-m", "murmur.cli.mur", "install", "-g", str(cap)], cwd=cap,
                                   env=dict(env), capture_stdout=True, capture_stderr=True, check=False)
    assert r.returncode == 0, r.stderr
    home = env["MURMUR_HOME"]
    proc = await trio.lowlevel.open_process(
        [str(Path(sys.executable).parent / "mur-roost"), "--port", "0", "--registry-path", f"{home}/artifacts",
         "--spawn-allow", name, "--die-with-parent"], env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        start_new_session=True)

    async def reap() -> None:
        try:
            await trio.sleep_forever()
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            with trio.CancelScope(shield=True):
                await proc.wait()

    nursery.start_soon(reap)
    assert proc.stdout is not None
    line = b""
    with trio.fail_after(30):
        while not line.endswith(b"\n"):
            chunk = await proc.stdout.receive_some(1)
            assert chunk, "mur-roost ended before it listened"
            line += chunk
    listening = re.fullmatch(r"mur-roost: listening on (127\.0\.0\.1:\d+)", line.decode().strip())
    assert listening is not None, line
    return f"http://{listening.group(1)}"


def _exported_or_logged(env: Mapping[str, str], collector: str) -> bool:
    """Whether the session's span export to ``collector`` failed and said so in its
    ``logs/otel.log`` (spec/trace.md), or something listens there to take it."""
    logs = list(Path(env["MURMUR_HOME"]).glob("records/**/logs/otel.log"))
    if len(logs) == 1 and f"export to {collector}/v1/traces failed" in logs[0].read_text():
        return True
    parts = urlsplit(collector)
    try:
        with socket.create_connection((parts.hostname or "localhost", parts.port or 80), timeout=1):
            return not logs
    except OSError:
        return False


def _result(env: Mapping[str, str]) -> str:
    """The session's ``out/result.txt`` (spec/session.md "Records directory")."""
    [path] = Path(env["MURMUR_HOME"]).glob("records/**/out/result.txt")
    return path.read_text().strip()


def _trace(env: Mapping[str, str]) -> list[dict[str, object]]:
    [path] = Path(env["MURMUR_HOME"]).glob("records/**/trace.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_every_example_that_builds_and_doctors_runs_or_says_why() -> None:
    """Every example that passes doctor is run here; one that does not run has a refusal code."""
    assert {e.file for e in CORPUS if e.stage is None and e.codes <= {"W-MAN-001"}} <= {e.file for e in RUNS}
    assert all(e.stage is None for e in RUNS)
    assert {e.run for e in RUNS} == {"task", "shell", "a2a", "skill", "fds", "roost", "cli", "script"}


CLI_RUNS = [e for e in RUNS if e.run == "cli"]


@pytest.mark.parametrize("case", CLI_RUNS, ids=lambda e: e.file.removesuffix(".yaml"))
async def test_subscription_example_runs(case: Expect, tmp_path: Path, nursery: trio.Nursery) -> None:
    """The quickstart's "use a subscription" manifests, unchanged (they name no endpoint):
    ``mur run --task "When I say Ping you say?"`` drives the real CLI (npm, pinned in
    .ci/npm-clis.txt), whose own base-URL variable points at a scripted provider."""
    text = (CORPUS_DIR / case.file).read_text(encoding="utf-8")
    manifest = yaml.safe_load(text)
    command = manifest["inference"]["command"]
    cap = tmp_path / "capsule"
    cap.mkdir()
    (cap / "murmur.yaml").write_text(text, encoding="utf-8")
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is needed to run the npm-installed agent CLIs")
    if command == "claude":
        cli = npm_bin("@anthropic-ai/claude-code", "claude")
        server: ScriptedServer | ScriptedResponses = ScriptedServer(_claude_side)
        server.add(Reply(an_text("Pong!")))
        await nursery.start(server.serve)
        net = {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": KEY}
    else:
        cli = npm_bin("@openai/codex", "codex")
        server = ScriptedResponses([ModelReply([message("Pong!")])])
        await nursery.start(server.serve)
        net = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": KEY}
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    env.update(MURMUR_HOME=str(tmp_path / "home"),
               PATH=os.pathsep.join([str(cli), str(Path(node).parent), env.get("PATH", "")]), **net)
    r = await _mur(["--task", "When I say Ping you say?"], cap, env)
    err = r.stderr.decode()
    assert (r.returncode, r.stdout.decode()) == (0, "Pong!\n"), err
    assert err.rstrip().endswith("status: ok")
    calls = server.model_calls if isinstance(server, ScriptedResponses) else server.requests
    assert len(calls) == 1 and "When I say Ping you say?" in json.dumps(calls[0].body)
    assert calls[0].body["model"] == manifest["inference"]["model"]  # type: ignore[index]
    header = ("x-api-key", KEY) if command == "claude" else ("authorization", f"Bearer {KEY}")
    assert calls[0].headers.get(header[0]) == header[1]
    records = _trace(env)
    assert [r["event_type"] for r in records].count("session_end") == 1
    assert [r["event_type"] for r in records].count("inference") == 1
    assert KEY not in json.dumps(records)


def _claude_side(r: Received) -> Reply | None:
    """Claude Code's side traffic (a probe, calls without tools) is answered off-script."""
    if r.path.startswith("/v1/messages") and isinstance(r.body, dict) and r.body.get("tools"):
        return None
    if r.path.startswith("/v1/messages"):
        return Reply(an_text("side", inp=0, out=0, msg_id="msg_side"))
    return Reply({})


# The DeepSeek tab of a page is its OpenAI tab with DeepSeek's names (the driver artifact, the
# URL, the model, the key variable): `murmur-driver-deepseek` *is* the OpenAI driver
# (murmur.agent.config.DRIVERS), and the URL is the scripted provider's in both. So CI runs
# each page's Anthropic and OpenAI tabs, and the DeepSeek tab of the quickstart (a task) and
# of one served page (the key read for each A2A task); the other DeepSeek tabs are in the
# soak set (`nox -s soak`), and so are the different-ways-to-run-murmur tabs, which are the
# quickstart's byte for byte. test_a_run_left_to_soak_is_a_run_ci_makes keeps it so.
DEEPSEEK_IN_CI = frozenset({"docs-quickstart-72.yaml", "docs-long-running-capsule-84.yaml"})
TWINS_IN_SOAK = frozenset({"docs-different-ways-to-run-murmur-21.yaml", "docs-different-ways-to-run-murmur-46.yaml"})
_AS_OPENAI = (("murmur-driver-deepseek", "murmur-driver-openai"), ("https://api.deepseek.com", "https://api.openai.com"),
              ("deepseek-r1", "o3-mini-high"), ("DEEPSEEK_API_KEY", "OPENAI_API_KEY"))


def _soak(case: Expect) -> bool:
    deepseek = "https://api.deepseek.com" in (CORPUS_DIR / case.file).read_text(encoding="utf-8")
    return (deepseek and case.file not in DEEPSEEK_IN_CI) or case.file in TWINS_IN_SOAK


def _as_run(case: Expect) -> tuple[str, str | None, tuple[str, ...], tuple[str, ...]]:
    """What a run of ``case`` does: its manifest (DeepSeek's names as OpenAI's), its run kind,
    what is installed and written beside it."""
    text = (CORPUS_DIR / case.file).read_text(encoding="utf-8")
    for deepseek, openai in _AS_OPENAI:
        text = text.replace(deepseek, openai)
    return text, case.run, case.installs, case.page_files


TASK_RUNS = [pytest.param(e, id=e.file.removesuffix(".yaml"), marks=[pytest.mark.soak] if _soak(e) else [])
             for e in RUNS if e.run != "cli"]


def test_a_run_left_to_soak_is_a_run_ci_makes() -> None:
    """Each run CI leaves to the soak set is, with DeepSeek's names swapped for OpenAI's, byte
    for byte a run CI makes (the same manifest, run kind, installs and page files); the
    DeepSeek names themselves run in CI."""
    ci = {_as_run(e) for e in RUNS if not _soak(e)}
    soak = [e for e in RUNS if _soak(e)]
    assert len(soak) == 11 and {e.file for e in RUNS} >= DEEPSEEK_IN_CI | TWINS_IN_SOAK
    for e in soak:
        assert "deepseek" not in _as_run(e)[0].lower() and _as_run(e) in ci, e.file


@pytest.mark.parametrize("case", TASK_RUNS)
async def test_example_runs(case: Expect, tmp_path: Path, provider: ScriptedServer, nursery: trio.Nursery) -> None:
    cap, dialect, manifest, env = _stage(case, tmp_path, provider.url)
    if case.run == "script":  # the capsule's own component is the work: no model at all
        r = await _mur(["--task", "count the lines"], cap, env)
        assert r.returncode == 0 and r.stderr.decode().rstrip().endswith("status: ok"), r.stderr.decode()
        calls = [(x["tool_name"], x["status"], x["input_bytes"]) for x in _trace(env) if x["event_type"] == "tool_call"]
        assert calls == [("jsonl-line-count", "ok", len("input.jsonl"))] and not provider.requests
        return
    inference = manifest["inference"]
    assert isinstance(inference, dict)
    if case.run == "a2a":
        await _served(cap, dialect, env, provider, manifest)
        return
    task = "Explain what makes an infrastructure deployment reproducible, in three bullet points."
    if case.run == "roost":  # a session that may delegate registers with mur-roost here
        r = await _mur(["--task", task], cap, env)
        assert r.returncode == 1 and "error[E-RUN-019]" in r.stderr.decode() and not provider.requests
        env = {**env, "MURMUR_ROOST_URL": await _roost(cap, env, str(manifest["name"]), nursery)}
    answer = "1. pinned inputs 2. declared reach 3. a trace"
    if case.run == "skill":
        provider.add(Reply(_call(dialect, "t1", "code-review-conventions", {})), Reply(_text(dialect, answer)))
    elif case.run == "shell":  # the page's Step 5: each shell invocation is a `shell` record
        provider.add(Reply(_call(dialect, "t1", "bash", {"args": ["-c", "echo lock-down-ok"]})),
                     Reply(_text(dialect, answer)))
    elif case.run == "fds":
        provider.add(Reply(_call(dialect, "t1", "fdprobe", {"args": ["shell"]})),
                     Reply(_call(dialect, "t2", "fdprobe-native", {})), Reply(_text(dialect, answer)))
    else:
        provider.add(Reply(_text(dialect, answer)))
    kw: dict[str, object] = {}
    leaked = None
    if case.run == "fds":  # the page's step 4: a descriptor mur inherits without FD_CLOEXEC
        leaked = os.open("/etc/passwd", os.O_RDONLY)  # outside the work folder and every grant
        kw["pass_fds"] = (leaked,)
    try:
        r = await _mur(["--task", task], cap, env, **kw)
    finally:
        if leaked is not None:
            os.close(leaked)
    err = r.stderr.decode()
    assert (r.returncode, r.stdout.decode()) == (0, answer + "\n"), err
    assert err.rstrip().endswith("status: ok")
    first = provider.requests[0]
    assert (first.method, first.path) == ("POST", PATHS[dialect]) and _key_sent(dialect, first)
    assert isinstance(first.body, dict) and first.body["model"] == inference["model"]
    assert task in json.dumps(first.body["messages"])
    if isinstance(inference.get("system_prompt"), str):  # the page's prompt reaches the model
        assert json.dumps(inference["system_prompt"].strip())[1:-1] in _system(dialect, first)
    records = _trace(env)
    assert [r["event_type"] for r in records].count("inference") == len(provider.requests)
    assert _result(env) == answer  # the page's `cat .../out/result.txt`
    observability = manifest.get("observability")
    if isinstance(observability, dict):  # the page's collector: the export was tried, bounded
        assert _exported_or_logged(env, str(observability["otel_endpoint"]))
    if case.run == "skill":
        assert [r["event_type"] for r in records].count("skill_call") == 1
        assert json.dumps(SKILL_MD)[1:-1] in json.dumps(provider.requests[1].body)  # skill.md reached the model
    if case.run == "shell":
        [shell] = [r for r in records if r["event_type"] == "shell"]
        assert (shell["exit_code"], "bash" in str(shell["command"])) == (0, True)
        assert "lock-down-ok" in json.dumps(provider.requests[1].body)  # its output reached the model
    if case.run == "fds":
        await _fds_clean(cap, probe=Path(env["PATH"].split(os.pathsep)[0]) / "fdprobe", env=env)
        assert [r["tool_name"] for r in records if r["event_type"] == "tool_call"] == ["fdprobe", "fdprobe-native"]
    assert KEY not in json.dumps(records)


async def _fds_clean(cap: Path, *, probe: Path, env: Mapping[str, str]) -> None:
    """Both probes wrote their report in the work folder and saw only stdio (the page's pass
    condition); the probe itself does see a leaked descriptor (the page's sanity check)."""
    for tag in ("shell", "native"):
        report = (cap / f"fdprobe-{tag}.txt").read_text()
        assert "extra_fds: 0" in report and report.startswith("open_fds: 0 1 2\n"), (tag, report)
    fd = os.open(probe, os.O_RDONLY)
    try:  # negative control: the same probe, handed the descriptor, reports it
        await trio.run_process([str(probe), "baseline"], cwd=cap, env=dict(env), pass_fds=(fd,),
                               capture_stdout=True)
    finally:
        os.close(fd)
    assert "extra_fds: 1" in (cap / "fdprobe-baseline.txt").read_text()


async def _served(cap: Path, dialect: str, env: Mapping[str, str], provider: ScriptedServer,
                  manifest: Mapping[str, object]) -> None:
    """The long-running shape: ``mur run`` (no task) serves; two tasks sent over A2A in one
    context are answered in turn (a threaded conversation hands the second the first); SIGTERM
    ends the session."""
    provider.add(Reply(_text(dialect, "four entries")), Reply(_text(dialect, "alice")))
    proc = await trio.lowlevel.open_process([sys.executable, "-m", "murmur.cli.mur", "run", "--json"], cwd=str(cap),
                                            env=dict(env), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                            start_new_session=True)
    try:
        assert proc.stdout is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                chunk = await proc.stdout.receive_some(1)
                assert chunk, "mur run ended before it was ready"
                line += chunk
        url = json.loads(line)["url"]
        answers = []
        async with httpx.AsyncClient(trust_env=False, timeout=60) as client:
            for n, text in enumerate(("alice=92, bob=85, carol=78, dave=91. How many entries?", "Who is highest?")):
                body = {"jsonrpc": "2.0", "id": n, "method": "SendMessage",
                        "params": {"message": {"messageId": f"msg-{n}", "contextId": "ctx-001", "role": "ROLE_USER",
                                               "parts": [{"text": text}]}}}
                reply = (await client.post(url.rstrip("/") + "/", json=body, headers=A2A)).json()
                task = reply["result"]["task"]
                assert task["status"]["state"] == "TASK_STATE_COMPLETED", reply
                answers.append("".join(p.get("text", "") for a in task.get("artifacts", []) for p in a["parts"]))
        assert answers == ["four entries", "alice"]
        second = json.dumps(provider.requests[1].body)
        lifecycle = manifest.get("lifecycle")
        threaded = isinstance(lifecycle, dict) and lifecycle.get("conversation") == "threaded"
        assert ("How many entries?" in second) is threaded  # the thread reaches the model, or not
        assert all(_key_sent(dialect, req) for req in provider.requests)
        assert isinstance(provider.requests[0].body, dict)
        assert provider.requests[0].body["model"] == manifest["inference"]["model"]  # type: ignore[index]
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(30):
            code = await proc.wait()
        assert code in (0, 143)
        records = _trace(env)
        assert [r["event_type"] for r in records].count("inference") == 2 and KEY not in json.dumps(records)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        with trio.CancelScope(shield=True):
            await proc.wait()
