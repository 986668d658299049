"""Tests of shell execution: allowlist, environment, process groups, output cap, cancel."""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import pytest
import trio

from murmur.grants import grant_entry
from murmur.manifest.model import Capabilities, EnvCaps, Manifest, ShellCaps
from murmur.shell import (
    DEFAULT_PATH,
    ShellRefused,
    baseline_env,
    check_allowed,
    run_shell,
)
from plan.procs import live_members, wait_group_gone

ENV = {"PATH": os.environ.get("PATH", DEFAULT_PATH), "LANG": "C.UTF-8"}


class TestCheckAllowed:
    def test_listed_name_passes(self) -> None:
        """A bare name in the list is allowed."""
        check_allowed("echo", ["echo"])

    def test_unlisted_names_grant(self) -> None:
        """A name outside the list is refused naming the grant to add."""
        with pytest.raises(ShellRefused) as info:
            check_allowed("rm", ["echo"])
        assert info.value.grant == "capabilities.shell.allow: [echo, rm]"
        assert "capabilities.shell.allow: [echo, rm]" in str(info.value)

    def test_grant_keeps_existing_entries(self) -> None:
        """The suggested grant lists every existing entry, in order, then the new one."""
        assert grant_entry("capabilities.shell.allow", ["echo", "tr"], "tr") == (
            "capabilities.shell.allow: [echo, tr]")
        assert grant_entry("capabilities.shell.allow", [], "rm") == "capabilities.shell.allow: [rm]"
        assert grant_entry("capabilities.spawn.allow", ["local/a"], "x, y") == (
            'capabilities.spawn.allow: [local/a, "x, y"]')

    def test_path_refused(self) -> None:
        """A path is never allowed, even when listed."""
        with pytest.raises(ShellRefused, match="is a path") as info:
            check_allowed("/bin/echo", ["/bin/echo"])
        assert info.value.grant is None

    def test_empty_refused(self) -> None:
        """An empty argv[0] is refused."""
        with pytest.raises(ShellRefused, match="needs a binary"):
            check_allowed("", ["echo"])


class TestRunShell:
    async def test_echo(self, tmp_path: Path) -> None:
        """A command's stdout, exit code and byte counts are kept."""
        r = await run_shell(["echo", "hi there"], allow=["echo"], cwd=tmp_path, env=ENV)
        assert (r.exit_code, r.stdout, r.stderr) == (0, b"hi there\n", b"")
        assert r.stdout_bytes == 9 and not r.truncated
        assert r.command == "echo 'hi there'"
        assert r.duration_ms >= 0

    async def test_nonzero_exit_kept(self, tmp_path: Path) -> None:
        """A failing command is a result with its exit code and stderr."""
        r = await run_shell(
            ["sh", "-c", "echo oops >&2; exit 3"], allow=["sh"], cwd=tmp_path, env=ENV
        )
        assert r.exit_code == 3 and r.stderr_text == "oops\n"

    async def test_argv_not_shell_parsed(self, tmp_path: Path) -> None:
        """Metacharacters in an argument stay one literal argument."""
        r = await run_shell(["echo", "$(id); ls *"], allow=["echo"], cwd=tmp_path, env=ENV)
        assert r.stdout == b"$(id); ls *\n"

    async def test_refused_binary_never_runs(self, tmp_path: Path) -> None:
        """A binary outside the allowlist is refused with the grant to add."""
        with pytest.raises(ShellRefused) as info:
            await run_shell(["touch", "x"], allow=["echo"], cwd=tmp_path, env=ENV)
        assert info.value.grant == "capabilities.shell.allow: [echo, touch]"
        assert not (tmp_path / "x").exists()

    async def test_not_on_path(self, tmp_path: Path) -> None:
        """An allowed binary missing from PATH is refused without a grant."""
        with pytest.raises(ShellRefused, match="not found on PATH") as info:
            await run_shell(["echo", "x"], allow=["echo"], cwd=tmp_path, env={"PATH": str(tmp_path)})
        assert info.value.grant is None

    async def test_resolved_on_given_path(self, tmp_path: Path) -> None:
        """The binary is looked up on the PATH of the env passed in, not the parent's."""
        bindir = tmp_path / "bin"
        bindir.mkdir()
        tool = bindir / "mytool"
        tool.write_text("#!/bin/sh\necho mine\n")
        tool.chmod(0o755)
        env = {"PATH": f"{bindir}:{ENV['PATH']}"}
        r = await run_shell(["mytool"], allow=["mytool"], cwd=tmp_path, env=env)
        assert r.stdout == b"mine\n"

    async def test_cannot_start(self, tmp_path: Path) -> None:
        """A file on PATH that cannot be executed is a refusal, not a traceback."""
        bindir = tmp_path / "bin"
        bindir.mkdir()
        tool = bindir / "broken"
        tool.write_bytes(b"\x00\x01garbage")
        tool.chmod(0o755)
        with pytest.raises(ShellRefused, match="could not be started"):
            await run_shell(["broken"], allow=["broken"], cwd=tmp_path, env={"PATH": str(bindir)})

    async def test_missing_cwd(self, tmp_path: Path) -> None:
        """A missing working directory is refused."""
        with pytest.raises(ShellRefused, match="cannot be entered"):
            await run_shell(["echo"], allow=["echo"], cwd=tmp_path / "nope", env=ENV)

    async def test_cwd_and_exact_env(self, tmp_path: Path) -> None:
        """The command runs in cwd with exactly the environment passed in."""
        env = {**ENV, "ONLY_THIS": "1"}
        r = await run_shell(["env"], allow=["env"], cwd=tmp_path, env=env)
        lines = sorted(r.stdout_text.splitlines())
        assert lines == sorted(f"{k}={v}" for k, v in env.items())
        r = await run_shell(["pwd"], allow=["pwd"], cwd=tmp_path, env=ENV)
        assert r.stdout_text.strip() == str(tmp_path)

    async def test_stdin_fed(self, tmp_path: Path) -> None:
        """Bytes given as stdin reach the command, then EOF."""
        r = await run_shell(["cat"], allow=["cat"], cwd=tmp_path, env=ENV, stdin=b"abc")
        assert r.stdout == b"abc"

    async def test_stdin_default_devnull(self, tmp_path: Path) -> None:
        """Without stdin the command reads EOF at once."""
        r = await run_shell(["cat"], allow=["cat"], cwd=tmp_path, env=ENV)
        assert (r.exit_code, r.stdout) == (0, b"")

    async def test_output_cap(self, tmp_path: Path) -> None:
        """Output beyond the cap is counted, drained and flagged, never kept."""
        r = await run_shell(
            ["head", "-c", "300000", "/dev/zero"], allow=["head"], cwd=tmp_path, env=ENV, output_cap=10
        )
        assert r.exit_code == 0
        assert r.stdout == b"\0" * 10 and r.stdout_bytes == 300000
        assert r.truncated and r.trace_fields()["truncated"] is True

    async def test_own_process_group(self, tmp_path: Path) -> None:
        """Each command leads a process group of its own."""
        r = await run_shell(
            ["sh", "-c", "echo $$; ps -o pgid= -p $$"], allow=["sh", "ps"], cwd=tmp_path, env=ENV
        )
        pid, pgid = (int(x) for x in r.stdout_text.split())
        assert pid == pgid != os.getpgid(0)

    async def test_background_grandchild_swept_at_exit(self, tmp_path: Path) -> None:
        """A grandchild left running when the command exits is killed, so the call returns."""
        with trio.fail_after(10):
            r = await run_shell(
                ["sh", "-c", "sleep 1000 & echo $$"], allow=["sh"], cwd=tmp_path, env=ENV
            )
        assert await wait_group_gone(int(r.stdout_text)) == []

    async def test_cancel_kills_group(self, tmp_path: Path) -> None:
        """Cancelling `sh -c 'sleep 1000 & wait'` leaves no process of its group alive."""
        async with trio.open_nursery() as nursery:
            pgid = await nursery.start(
                partial(
                    run_shell, ["sh", "-c", "sleep 1000 & wait"], allow=["sh"], cwd=tmp_path, env=ENV
                )
            )
            # Synchronise on the grandchild existing (the group has two live members).
            with trio.fail_after(5):
                while len(live_members(pgid)) < 2:  # noqa: ASYNC110 - /proc has no event
                    await trio.sleep(0.005)
            nursery.cancel_scope.cancel()
        assert await wait_group_gone(pgid) == []
        with pytest.raises(ChildProcessError):
            os.waitpid(pgid, os.WNOHANG)  # noqa: ASYNC222 - WNOHANG never blocks; the main process was reaped, not left a zombie

    async def test_trace_fields(self, tmp_path: Path) -> None:
        """The trace payload has the contract's shell fields."""
        r = await run_shell(["true"], allow=["true"], cwd=tmp_path, env=ENV)
        assert set(r.trace_fields()) == {
            "binary", "command", "exit_code", "stdout_bytes", "stderr_bytes", "duration_ms"
        }


def _manifest(**caps: object) -> Manifest:
    return Manifest(name="demo", version="0.1.0", capabilities=Capabilities(**caps))  # type: ignore[arg-type]


class TestBaselineEnv:
    PARENT = {
        "PATH": "/p",
        "HOME": "/real/home",
        "TMPDIR": "/real/tmp",
        "LANG": "en_US.UTF-8",
        "LC_ALL": "C",
        "SECRET_TOKEN": "s3cret",
        "AWS_SECRET": "x",
        "MY_VAR": "v",
        "MURMUR_SPAWNER": "{}",
        "GIT_AUTHOR": "me",
    }

    def test_minimal(self, tmp_path: Path) -> None:
        """Only PATH, synthetic HOME/TMPDIR and locale pass by default."""
        env = baseline_env(_manifest(), self.PARENT, records_dir=tmp_path)
        assert env == {
            "PATH": "/p",
            "HOME": str(tmp_path / "home"),
            "TMPDIR": str(tmp_path / "tmp"),
            "LANG": "en_US.UTF-8",
            "LC_ALL": "C",
        }

    def test_env_allow_and_globs(self) -> None:
        """env.allow names and baseline_env globs pass; strip_env removes; MURMUR_* never."""
        m = _manifest(
            env=EnvCaps(allow=("MY_VAR", "SECRET_TOKEN", "MURMUR_SPAWNER", "ABSENT")),
            shell=ShellCaps(allow=("sh",), baseline_env=("GIT_*", "MURMUR_*"), strip_env=("*SECRET*", "LC_*")),
        )
        env = baseline_env(m, self.PARENT, home=Path("/h"))
        assert env == {"PATH": "/p", "HOME": "/h", "LANG": "en_US.UTF-8", "MY_VAR": "v", "GIT_AUTHOR": "me"}

    def test_default_path(self) -> None:
        """A parent without PATH gets the default PATH."""
        assert baseline_env(_manifest(), {})["PATH"] == DEFAULT_PATH
