"""``inference.transport: process``: an external agent CLI run once per task.

The command (``inference.command``, split into words; its first word a bare program on
``PATH``) runs in the capsule's workdir as a process group of its own, with

* the task on stdin — the system prompt (when one is configured), a blank line, then the
  task text (fenced under ``task:<origin>`` when untrusted) — then EOF;
* the environment reduced to the session's baseline plus ``capabilities.env.allow``
  (``TaskContext.shell_env``), and — for a session with capsule links — ``MURMUR_CONTEXT_FILE``
  naming its ``mur context`` file (:func:`murmur.workload.harness_env`), nothing else;
* its answer read from stdout (capped like shell output).

Exit 0 ends the task ``ok`` with stdout (surrounding whitespace trimmed) as the answer; any
other exit ends it ``failed`` naming the status and the tail of stderr. Cancelling the task
kills the whole process group (:func:`murmur.shell.run_shell`) before ``trio.Cancelled``
propagates. One ``inference`` record is written per task (``turn: 1``, no token counts).

Design: spec/agent.md, "Process transport".
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Awaitable, Callable, Sequence

from murmur.shell import ShellRefused, ShellResult, run_shell
from murmur.workload import TaskContext, TaskOutcome, harness_env

__all__ = ["run_stdio_task", "stdin_text"]

_STDERR_TAIL = 500  # characters of stderr quoted in a failure


def stdin_text(system_prompt: str | None, task_text: str) -> str:
    """What the agent CLI reads on stdin (pure)."""
    if system_prompt:
        return f"{system_prompt}\n\n{task_text}"
    return task_text


async def run_stdio_task(
    ctx: TaskContext,
    command: Sequence[str],
    *,
    task_text: str,
    system_prompt: str | None,
    shell: Callable[..., Awaitable[ShellResult]] = run_shell,
) -> TaskOutcome:
    """Run the agent CLI for one task.

    Args:
        ctx (TaskContext): the task (workdir, reduced environment, trace, usage).
        command (Sequence[str]): the CLI argv; ``command[0]`` is a bare program name.
        task_text (str): the task as the model should read it (already fenced if untrusted).
        system_prompt (str | None): prepended to stdin when set.
        shell: the runner (:func:`murmur.shell.run_shell`).

    Returns:
        TaskOutcome: ``ok`` with stdout, or ``failed``.

    Raises:
        trio.Cancelled: the task was cancelled (the process group is dead by then).
    """
    ctx.usage.turns += 1
    started = time.monotonic()
    binary = command[0]
    try:
        res = await shell(
            list(command),
            allow=(binary,),
            cwd=ctx.workdir,
            env=harness_env(ctx),  # + MURMUR_CONTEXT_FILE with links (spec/links.md)
            stdin=stdin_text(system_prompt, task_text).encode("utf-8"),
        )
    except ShellRefused as exc:
        message = f"E-RUN-006: the agent command could not be started: {exc.reason}"
        _trace(ctx, started, decision="error", stop_reason="not_started", error=message)
        _failed(ctx, message)
        return TaskOutcome("failed", message)
    answer = res.stdout_text.strip()
    if res.exit_code == 0:
        _trace(ctx, started, decision="end_turn", stop_reason="exit_0", answer=answer)
        return TaskOutcome("ok", answer)
    tail = res.stderr_text.strip()[-_STDERR_TAIL:]
    message = f"the agent command {binary} exited with status {res.exit_code}"
    if tail:
        message += f": {tail}"
    _trace(ctx, started, decision="error", stop_reason=f"exit_{res.exit_code}", error=message)
    _failed(ctx, message)
    return TaskOutcome("failed", message)


def _trace(
    ctx: TaskContext,
    started: float,
    *,
    decision: str,
    stop_reason: str,
    answer: str | None = None,
    error: str | None = None,
) -> None:
    fields: dict[str, object] = {
        "turn": 1,
        "task_id": ctx.task_id,
        "input_tokens": 0,
        "output_tokens": 0,
        "decision": decision,
        "stop_reason": stop_reason,
        "duration_ms": int((time.monotonic() - started) * 1000),
    }
    if answer is not None:
        fields["response_sha256"] = hashlib.sha256(answer.encode("utf-8")).hexdigest()
    if error is not None:
        fields["error_code"] = "driver_error"
        fields["error"] = error
    ctx.trace.emit("inference", parent_id=ctx.task_event_id, **fields)


def _failed(ctx: TaskContext, message: str) -> None:
    ctx.trace.emit(
        "task_failed",
        parent_id=ctx.task_event_id,
        task_id=ctx.task_id,
        turn=1,
        cause="driver_error",
        reason=message[:2000],
    )
