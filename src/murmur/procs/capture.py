"""``run_process`` for a command: start it owned, feed its stdin, keep its output, end it.

Specification: ``spec/plan.md`` "Shell execution" (what a shell step and the agent loop's
shell tool see). :func:`run_process` starts ``argv`` through :func:`murmur.procs.open_process`
(a ``cmd`` unit), writes ``stdin`` then EOF, keeps up to ``cap`` bytes of each output stream
(the rest is drained and counted), and when the command's main process exits kills what is
left in its unit; a cancelled caller gets the unit killed and the process reaped before
``trio.Cancelled`` propagates.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence

import attrs
import trio

from murmur import timing
from murmur.procs.confinement import Confinement
from murmur.procs.owned import DEVNULL, PIPE, CommandStarter, open_process

__all__ = ["Completed", "run_process", "write_stdin"]

_READ_CHUNK = 65536


@attrs.frozen
class Completed:
    """What a finished command did.

    Attributes:
        returncode (int): its exit status (``-N`` when signal ``N`` ended it).
        stdout, stderr (bytes): what was kept of each stream (at most the cap).
        stdout_bytes, stderr_bytes (int): what it wrote in all.
        duration_ms (int): wall time from start to exit, milliseconds.
    """

    returncode: int
    stdout: bytes
    stderr: bytes
    stdout_bytes: int
    stderr_bytes: int
    duration_ms: int


async def _drain(stream: trio.abc.ReceiveStream, keep: bytearray, cap: int) -> int:
    """Read ``stream`` to EOF, keeping at most ``cap`` bytes in ``keep``; return the total."""
    total = 0
    while True:
        chunk = await stream.receive_some(_READ_CHUNK)
        if not chunk:
            return total
        total += len(chunk)
        room = cap - len(keep)
        if room > 0:
            keep += chunk[:room]


async def write_stdin(stream: trio.abc.SendStream, data: bytes) -> None:
    """Write ``data`` to a command's stdin, then close it; a command that exits without
    reading it is not an error (a shell step's ``stdin``, an agent CLI's prompt)."""
    try:
        if data:
            await stream.send_all(data)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        pass
    finally:
        await stream.aclose()


async def run_process(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str | os.PathLike[str] | None = None,
    executable: str | None = None,
    stdin: bytes | None = None,
    cap: int = timing.SHELL_OUTPUT_CAP,
    confinement: Confinement | None = None,
    contained: bool = True,
    starter: CommandStarter | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> Completed:
    """Run one command in a ``cmd`` unit of its own and capture what it did.

    Args:
        argv: the command (no shell parsing: each element is one argument).
        env: its whole environment.
        cwd: its working directory.
        executable (str | None): the resolved program (else ``argv[0]`` on ``env``'s ``PATH``).
        stdin (bytes | None): written to its stdin, then EOF (``/dev/null`` when None).
        cap (int): bytes kept per output stream.
        confinement (Confinement | None): the sandbox's contribution (None: advisory).
        contained (bool): False: no unit (the demo's installs; see :func:`open_process`).
        starter (CommandStarter | None): the session's warm starter, which clones the command
            straight into its unit (see :func:`open_process`); None: exec.
        task_status: for ``nursery.start``: reports its pid (= its process group id).

    Raises:
        OSError: it could not be started.
        trio.Cancelled: the caller was cancelled (everything in its unit is dead by then).
    """
    started = time.monotonic()
    proc = await open_process(argv, label="cmd", env=env, cwd=cwd, executable=executable,
                              stdin=PIPE if stdin is not None else DEVNULL, confinement=confinement,
                              contained=contained, starter=starter)
    task_status.started(proc.pid)
    out, err = bytearray(), bytearray()
    totals = [0, 0]
    try:

        async def drain(index: int, stream: trio.abc.ReceiveStream, keep: bytearray) -> None:
            totals[index] = await _drain(stream, keep, cap)

        assert proc.stdout is not None and proc.stderr is not None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(drain, 0, proc.stdout, out)
            nursery.start_soon(drain, 1, proc.stderr, err)
            if stdin is not None:
                assert proc.stdin is not None
                nursery.start_soon(write_stdin, proc.stdin, stdin)
            await proc.wait()
            # The main process has exited: the command is over. Whatever it left running is
            # killed, and what is already in the pipes is read; a writer outside the unit
            # (possible only in the groups class) cannot hold the call open past the bound.
            proc.kill()
            nursery.cancel_scope.deadline = trio.current_time() + timing.SHELL_DRAIN_AFTER_EXIT
    finally:
        await proc.kill_and_reap()
    code = proc.returncode
    assert code is not None
    return Completed(code, bytes(out), bytes(err), totals[0], totals[1], int((time.monotonic() - started) * 1000))
