"""transport: process — an agent CLI per task, task on stdin, answer on stdout."""

from __future__ import annotations

import stat
from pathlib import Path

import trio

from murmur.agent import AgentWorkload
from murmur.manifest.model import Capabilities, EnvCaps, Inference, Manifest, Transport
from murmur.shell import run_shell

from ..scripted import FakeTrace, group_gone, task_context

SCRIPT = """#!/bin/sh
input=$(cat)
echo "stdin=[$input]"
echo "allowed=${ALLOWED_VAR-unset} secret=${SECRET_VAR-unset} pwd=$(pwd)"
"""


def _tool(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _manifest(command: str, system_prompt: str | None = None) -> Manifest:
    return Manifest(
        name="cli-agent",
        version="0.1.0",
        capabilities=Capabilities(env=EnvCaps(allow=("ALLOWED_VAR",))),
        inference=Inference(transport=Transport.PROCESS, command=command, protocol="stdio",
                            system_prompt=system_prompt),
    )


def _env(bin_dir: Path) -> dict[str, str]:
    return {"PATH": f"{bin_dir}:/usr/bin:/bin"}


class TestProcessTransport:
    async def test_answer_from_stdout(self, tmp_path: Path) -> None:
        """The task (after the system prompt) goes to stdin; stdout is the answer; env is reduced."""
        bin_dir = tmp_path / "bin"
        _tool(bin_dir, "fake-agent", SCRIPT)
        manifest = _manifest("fake-agent --print", system_prompt="Be terse.")
        shell_env = {**_env(bin_dir), "ALLOWED_VAR": "yes"}  # the session's baseline + env.allow
        ctx = task_context(manifest, tmp_path, FakeTrace(), text="count files", env=shell_env)
        work = AgentWorkload(manifest, tmp_path, environ={**_env(bin_dir), "SECRET_VAR": "s3cr3t"})
        outcome = await work.run_task(ctx)
        assert outcome.status == "ok"
        assert outcome.answer.splitlines() == [
            "stdin=[Be terse.", "", "count files]",
            f"allowed=yes secret=unset pwd={ctx.workdir}",
        ]
        (inf,) = ctx.trace.of("inference")
        assert (inf["turn"], inf["decision"], inf["stop_reason"]) == (1, "end_turn", "exit_0")
        assert ctx.usage.turns == 1

    async def test_untrusted_task_fenced_on_stdin(self, tmp_path: Path) -> None:
        """An untrusted task reaches the CLI fenced."""
        bin_dir = tmp_path / "bin"
        _tool(bin_dir, "fake-agent", SCRIPT)
        manifest = _manifest("fake-agent")
        ctx = task_context(manifest, tmp_path, FakeTrace(), text="x", trust="untrusted", origin="peer",
                           env=_env(bin_dir))
        outcome = await AgentWorkload(manifest, tmp_path, environ=_env(bin_dir)).run_task(ctx)
        assert "stdin=[<untrusted-content source=task:peer>" in outcome.answer

    async def test_nonzero_exit_fails(self, tmp_path: Path) -> None:
        """A non-zero exit fails the task naming the status and the stderr tail."""
        bin_dir = tmp_path / "bin"
        _tool(bin_dir, "bad-agent", "#!/bin/sh\necho 'model overloaded' >&2\nexit 3\n")
        manifest = _manifest("bad-agent")
        ctx = task_context(manifest, tmp_path, FakeTrace(), env=_env(bin_dir))
        outcome = await AgentWorkload(manifest, tmp_path, environ=_env(bin_dir)).run_task(ctx)
        assert outcome.status == "failed"
        assert outcome.answer == "the agent command bad-agent exited with status 3: model overloaded"
        assert ctx.trace.of("task_failed")[0]["cause"] == "driver_error"

    async def test_vanished_command_fails_with_e_run_006(self, tmp_path: Path) -> None:
        """A command missing from the task's PATH at run time fails with E-RUN-006."""
        bin_dir = tmp_path / "bin"
        _tool(bin_dir, "fake-agent", SCRIPT)
        manifest = _manifest("fake-agent")
        ctx = task_context(manifest, tmp_path, FakeTrace(), env={"PATH": "/nonexistent"})
        outcome = await AgentWorkload(manifest, tmp_path, environ=_env(bin_dir)).run_task(ctx)
        assert outcome.status == "failed" and outcome.answer.startswith("E-RUN-006")

    async def test_cancel_kills_the_process_group(self, tmp_path: Path) -> None:
        """Cancelling the task kills the CLI and its children (its whole group)."""
        bin_dir = tmp_path / "bin"
        _tool(bin_dir, "slow-agent", "#!/bin/sh\nsleep 30 &\nsleep 30\n")
        manifest = _manifest("slow-agent")
        ctx = task_context(manifest, tmp_path, FakeTrace(), env=_env(bin_dir))
        pids: list[int] = []
        running = trio.Event()

        async def shell(argv, **kw):
            result = None
            async with trio.open_nursery() as n:
                async def run(task_status=trio.TASK_STATUS_IGNORED) -> None:
                    nonlocal result
                    result = await run_shell(argv, task_status=task_status, **kw)
                pids.append(await n.start(run))
                running.set()
            return result

        work = AgentWorkload(manifest, tmp_path, environ=_env(bin_dir), shell=shell)
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                async def cancel() -> None:
                    await running.wait()
                    scope.cancel()
                nursery.start_soon(cancel)
                await work.run_task(ctx)
        assert scope.cancelled_caught
        assert await group_gone(pids[0])


class TestLinksContext:
    async def test_harness_finds_the_context_file_by_its_variable(self, tmp_path: Path) -> None:
        """With capsule links the harness's environment names the `mur context` file; without, nothing."""
        bin_dir = tmp_path / "bin"
        _tool(bin_dir, "fake-agent", '#!/bin/sh\ncat >/dev/null\n'
                                     'if [ -n "${MURMUR_CONTEXT_FILE-}" ]; then cat "$MURMUR_CONTEXT_FILE"; '
                                     'else echo no-context; fi\n')
        manifest = _manifest("fake-agent")
        context = tmp_path / "links" / "context.md"
        context.parent.mkdir()
        context.write_text("You are running inside the capsule `cli-agent` (murmur).\n")
        ctx = task_context(manifest, tmp_path, FakeTrace(), text="x", env=_env(bin_dir))
        work = AgentWorkload(manifest, tmp_path, environ=_env(bin_dir))
        assert (await work.run_task(ctx)).answer == "no-context"
        ctx = task_context(manifest, tmp_path, FakeTrace(), text="x", env=_env(bin_dir))
        ctx.links_context = context
        outcome = await work.run_task(ctx)
        assert outcome.status == "ok" and outcome.answer == "You are running inside the capsule `cli-agent` (murmur)."
        assert "MURMUR_CONTEXT_FILE" not in ctx.shell_env  # only the harness gets it, not every command
