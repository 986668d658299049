"""Tests of the ``mur-roost`` command line: flag parsing, and the real binary as a subprocess."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

from murmur import __version__
from murmur.cli.roost import RoostOptions, UnknownArgument, machine_ceiling, parse_args
from murmur.errors import UsageError
from murmur.registry import install
from murmur.roost.app import hypercorn_config
from murmur.roost.client import RoostClient, RoostRefused

ROOST = str(Path(sys.executable).with_name("mur-roost"))
LISTENING = re.compile(r"^mur-roost: listening on 127\.0\.0\.1:(\d+)$")


class TestParseArgs:
    def test_defaults(self) -> None:
        """No flags: the seed's defaults (ceiling derived later)."""
        assert parse_args([]) == RoostOptions(7700, None, (), 3, 4, None, False)

    def test_every_flag_both_forms(self) -> None:
        """Each flag takes `--flag value` and `--flag=value`; --spawn-allow repeats."""
        argv = [
            "--port", "0", "--registry-path=/r", "--spawn-allow", "a", "--spawn-allow=b",
            "--max-depth=0", "--max-concurrent", "2", "--max-live-capsules=7",
        ]
        assert parse_args(argv) == RoostOptions(0, Path("/r"), ("a", "b"), 0, 2, 7, False)

    def test_version(self) -> None:
        """--version sets the version flag."""
        assert parse_args(["--version"]).version

    @pytest.mark.parametrize("flag", ["--help", "-h"])
    def test_help(self, flag: str) -> None:
        """--help and -h (the one exception to the seed's flags) set the help flag."""
        assert parse_args([flag]).help and not parse_args([]).help

    @pytest.mark.parametrize(
        ("argv", "named"),
        [
            (["--max-total", "5"], "--max-total"),
            (["--max-total=5"], "--max-total"),
            (["--helpme"], "--helpme"),
            (["--help=1"], "--help"),
            (["-p", "1"], "-p"),
            (["serve"], "serve"),
            (["--version=1"], "--version"),
        ],
    )
    def test_unknown_argument(self, argv: list[str], named: str) -> None:
        """Anything else is an unknown argument, named as given (without its value)."""
        with pytest.raises(UnknownArgument) as info:
            parse_args(argv)
        assert str(info.value) == f"unknown argument: {named}"

    @pytest.mark.parametrize(
        "argv",
        [["--port"], ["--port="], ["--max-depth", "-1"], ["--max-depth", "1.5"], ["--max-concurrent", "x"],
         ["--port", "70000"], ["--spawn-allow", "a,b"], ["--max-live-capsules", "٣"]],
    )
    def test_bad_values(self, argv: list[str]) -> None:
        """A missing or non-whole value is E-RST-001 (usage, exit 2)."""
        with pytest.raises(UsageError) as info:
            parse_args(argv)
        assert info.value.code == "E-RST-001" and info.value.exit_status == 2

    @pytest.mark.parametrize("name", ["bad name!", "Kid", "-kid", "kid/x", "a" * 200])
    def test_a_spawn_allow_that_no_capsule_could_have(self, name: str) -> None:
        """`--spawn-allow 'bad name!'` used to be accepted (and never matched)."""
        with pytest.raises(UsageError) as info:
            parse_args(["--spawn-allow", name])
        d = info.value.diagnostics[0]
        assert d.code == "E-RST-001" and "is not a capsule name" in d.message
        assert d.hint is not None and "lowercase letters" in d.hint
        assert parse_args(["--spawn-allow", "kid-2"]).spawn_allow == ("kid-2",)  # negative control


class TestMachineCeiling:
    @pytest.mark.parametrize(("cores", "ceiling"), [(None, 16), (1, 16), (2, 16), (3, 24), (8, 64), (32, 256), (64, 256)])
    def test_cores_times_eight_clamped(self, cores: int | None, ceiling: int) -> None:
        """cores x 8, clamped to 16..256."""
        assert machine_ceiling(cores) == ceiling

    def test_loopback_only(self) -> None:
        """The server binds 127.0.0.1 and nothing else."""
        assert hypercorn_config(7700).bind == ["127.0.0.1:7700"]


def run_roost(*args: str) -> subprocess.CompletedProcess[str]:
    """Run mur-roost to completion (for invocations that must not bind)."""
    return subprocess.run([ROOST, *args], capture_output=True, text=True, timeout=30, check=False)


@asynccontextmanager
async def live_roost(*args: str) -> AsyncIterator[tuple[trio.Process, str, list[str]]]:
    """Start the real binary on port 0; yield (process, base URL, startup lines); always reap it."""
    proc = await trio.lowlevel.open_process(
        [ROOST, "--port", "0", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        buf = b""
        with trio.fail_after(30):
            while buf.count(b"\n") < 2:
                chunk = await proc.stdout.receive_some(4096)
                assert chunk, "mur-roost exited before printing its startup lines"
                buf += chunk
        lines = buf.decode().splitlines()
        m = LISTENING.match(lines[0])
        assert m is not None, lines
        yield proc, f"http://127.0.0.1:{m.group(1)}", lines
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()


def capsule_dir(root: Path, name: str, body: str) -> Path:
    """A capsule source directory."""
    d = root / name
    d.mkdir(parents=True, exist_ok=True)
    (d / "murmur.yaml").write_text(f"name: {name}\nversion: 0.1.0\n{body}", encoding="utf-8")
    for old in d.glob("*.mur.zip"):
        old.unlink()
    return d


@pytest.mark.e2e
class TestBinary:
    def test_version_does_not_bind(self) -> None:
        """--version prints the version and exits 0 without a startup line."""
        done = run_roost("--version", "--port", "1")
        assert (done.returncode, done.stdout) == (0, f"mur-roost {__version__}\n")

    @pytest.mark.parametrize("flag", ["--help", "-h"])
    def test_help_does_not_bind(self, flag: str) -> None:
        """--help prints the flag table with each default and exits 0, binding nothing
        (port 1 would be refused if it tried)."""
        done = run_roost(flag, "--port", "1")
        assert done.returncode == 0 and done.stderr == ""
        assert done.stdout.startswith("usage: mur-roost ")
        for flag_name, default in (("--port", "7700"), ("--max-depth", "3"), ("--max-concurrent", "4"),
                                   ("--max-live-capsules", "cores x 8"), ("--registry-path", "artifacts")):
            line = next(ln for ln in done.stdout.splitlines() if ln.strip().startswith(flag_name))
            block = done.stdout.split(line, 1)[1].split("\n  --", 1)[0]
            assert default in line + block
        assert "listening" not in done.stdout

    @pytest.mark.parametrize("argv", [["--max-total", "10"], ["--max-total=10"], ["--bogus"], ["-x"]])
    def test_unknown_flag_exits_without_binding(self, argv: list[str]) -> None:
        """Any other flag prints `unknown argument: --FLAG` and exits non-zero, binding nothing."""
        done = run_roost(*argv)
        assert done.returncode == 2
        assert done.stderr.splitlines()[0] == f"unknown argument: {argv[0].split('=')[0]}"
        assert done.stdout == ""

    def test_bad_value(self) -> None:
        """A non-whole number is a coded usage error."""
        done = run_roost("--max-depth", "three")
        assert done.returncode == 2
        assert done.stderr.startswith("error[E-RST-001]: --max-depth takes a whole number, not 'three'")

    async def test_startup_lines_and_sigterm(self) -> None:
        """Two startup lines (listening, derived ceiling); /health answers; SIGTERM exits 0."""
        async with live_roost() as (proc, url, lines):
            assert lines[1] == (
                f"mur-roost: machine ceiling {machine_ceiling(os.cpu_count())} live capsules (--max-live-capsules)"
            )
            async with RoostClient(url) as client:
                assert await client.health()
            proc.send_signal(signal.SIGTERM)
            with trio.fail_after(15):
                assert await proc.wait() == 0

    async def test_explicit_ceiling_is_printed(self) -> None:
        """--max-live-capsules N is the figure printed."""
        async with live_roost("--max-live-capsules", "5") as (_, _url, lines):
            assert lines[1] == "mur-roost: machine ceiling 5 live capsules (--max-live-capsules)"

    async def test_port_in_use(self) -> None:
        """A port another socket holds is E-RST-002, exit 1, and no startup line."""
        with trio.socket.socket() as holder:
            await holder.bind(("127.0.0.1", 0))
            holder.listen()
            port = holder.getsockname()[1]
            done = await trio.run_process([ROOST, "--port", str(port)], capture_stdout=True, capture_stderr=True, check=False)
        assert done.returncode == 1
        assert done.stdout == b""
        assert done.stderr.decode().startswith(f"error[E-RST-002]: mur-roost cannot listen on 127.0.0.1:{port}")

    async def test_full_cycle_against_real_store(self, tmp_path: Path) -> None:
        """register -> spawn -> child register -> deregister, with capsules from the real store."""
        install(capsule_dir(tmp_path, "orch", "capabilities:\n  spawn:\n    allow: [worker]\n  network:\n    allow: [example.com]\n"), global_=True)
        worker_src = capsule_dir(tmp_path, "worker", "capabilities:\n  network:\n    allow: [https://example.com]\n")
        install(worker_src, global_=True)
        async with live_roost("--spawn-allow", "orch") as (proc, url, _), RoostClient(url) as client:
            cred = await client.register("ses_root", "orch", "0.1.0")
            grant = await client.spawn(cred, "worker", "0.1.0")
            child = await client.register("ses_child", "worker", "0.1.0", approval=grant.approval)
            figures = await client.status("ses_root")
            assert figures is not None and (figures.live_children, figures.live_capsules) == (1, 2)
            await client.deregister(child, "complete")
            # the same coordinates reinstalled with other bytes are refused at redemption
            second = await client.spawn(cred, "worker", "0.1.0")
            install(capsule_dir(tmp_path, "worker", "description: rebuilt\ncapabilities:\n  network:\n    allow: [https://example.com]\n"), global_=True)
            with pytest.raises(RoostRefused) as info:
                await client.register("ses_child2", "worker", "0.1.0", approval=second.approval)
            assert "now resolves to a different artifact" in info.value.message
            with pytest.raises(RoostRefused) as info:
                await client.spawn(cred, "worker", "9.9.9")
            assert info.value.status == 500
            await client.deregister(cred, "complete")
            figures = await client.status("ses_root")
            assert figures is not None and (figures.status, figures.live_capsules) == ("complete", 0)
            proc.send_signal(signal.SIGINT)
            with trio.fail_after(15):
                assert await proc.wait() == 0

    async def test_registry_path_flag(self, tmp_path: Path) -> None:
        """--registry-path names the store resolved from; an empty one resolves nothing (500)."""
        install(capsule_dir(tmp_path, "orch", "capabilities:\n  spawn:\n    allow: [worker]\n"), global_=True)
        empty = tmp_path / "empty-store"
        empty.mkdir()
        async with live_roost("--spawn-allow=orch", "--registry-path", str(empty)) as (_, url, _lines):
            client = RoostClient(url)
            with pytest.raises(RoostRefused) as info:
                await client.register("ses_a", "orch", "0.1.0")
            await client.aclose()
            assert info.value.status == 500
        store = Path(os.environ["MURMUR_HOME"]) / "artifacts"
        async with live_roost("--spawn-allow=orch", f"--registry-path={store}") as (_, url, _lines):
            client = RoostClient(url)
            assert (await client.register("ses_a", "orch", "0.1.0")).startswith("msc1.")
            await client.aclose()
