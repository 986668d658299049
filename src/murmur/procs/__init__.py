"""The one place where a process starts: placement, pipes, first line, end.

Specification: ``spec/architecture.md`` "Where a process starts". No module outside this
package starts a process (``tests/test_one_primitive.py`` holds the code to it). Every start —
a shell step and the agent loop's shell tool (:func:`run_process`), an agent CLI harness, a
formation member and a delegated child on both start paths (:func:`open_process` exec'd,
:func:`fork_process` forked by the warm starter), the demo's own processes — goes through
:func:`open_process` or :func:`fork_process`, which own:

* its **placement**: a containment unit (:func:`new_unit`; the unit is joined before the
  command runs) and its **confinement**, the sandbox's contribution (:class:`Confinement`;
  ``None`` = advisory), applied here and nowhere else;
* its **pipes** (:data:`PIPE`, :data:`DEVNULL`, inherit, or a descriptor);
* its **first line**, for a ``mur run``: the typed :class:`ReadyLine` a session writes and
  :func:`parse_ready_line` reads (:func:`read_first_line` within a bound);
* its **end**: :meth:`OwnedProcess.end` (ask, grace, SIGKILL of the unit, reap;
  :func:`end_within`) or :meth:`OwnedProcess.kill_and_reap` (shielded), then the unit released.

The sandbox hook (agreed with the sandbox's builders; :mod:`murmur.procs.confinement`)::

    class Confinement(Protocol):
        def argv(self, argv: Sequence[str]) -> list[str]: ...            # usually identity
        def environ(self, env: Mapping[str, str]) -> dict[str, str]: ...   # e.g. HTTP(S)_PROXY added
        def pass_fds(self) -> tuple[int, ...]: ...                         # fds the child must inherit
        def child_setup(self) -> Callable[[], None] | None: ...            # in the child: after the unit join, before exec
        def to_wire(self) -> dict[str, Any]: ...                           # {"kind", "module", ...} for the warm starter

Every start function takes ``confinement: Confinement | None = None``. In the child the unit
join comes first, then ``child_setup``. The warm starter rebuilds a confinement from its wire
object with :func:`from_wire` (the ``module`` it names registers ``kind`` with
:func:`register_loader` on import) and applies it in its forked child.

Three starts cannot be a Trio task's child; they are named functions here
(:mod:`murmur.procs.detached`): the containment janitor (:func:`start_janitor`, it must
outlive a SIGKILLed owner), the warm starter itself (:func:`spawn_starter`, started before
Trio is imported) and the warm starter's fork (:func:`fork_child`).

The face is lazy (PEP 562): :mod:`murmur.starter.early` imports it before Trio is loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.procs.capture import Completed, run_process, write_stdin
    from murmur.procs.childside import JOIN_FAILED, join_cgroup, preexec
    from murmur.procs.confinement import Confinement, from_wire, register_loader
    from murmur.procs.detached import fork_child, fork_helper, spawn_starter, start_janitor
    from murmur.procs.grace import end_within
    from murmur.procs.owned import (
        DEVNULL,
        PIPE,
        CommandStarter,
        OwnedProcess,
        Running,
        fork_process,
        open_process,
    )
    from murmur.procs.placement import ensure_janitor, new_unit
    from murmur.procs.readyline import (
        MAX_READY_LINE,
        NO_DOOR,
        NO_SESSION,
        NOT_A_READY_LINE,
        FirstLine,
        ReadyLine,
        normalise_url,
        parse_ready_line,
        read_first_line,
    )

__all__ = [
    "DEVNULL",
    "JOIN_FAILED",
    "MAX_READY_LINE",
    "NOT_A_READY_LINE",
    "NO_DOOR",
    "NO_SESSION",
    "PIPE",
    "CommandStarter",
    "Completed",
    "Confinement",
    "FirstLine",
    "OwnedProcess",
    "ReadyLine",
    "Running",
    "end_within",
    "ensure_janitor",
    "fork_child",
    "fork_helper",
    "fork_process",
    "from_wire",
    "join_cgroup",
    "new_unit",
    "normalise_url",
    "open_process",
    "parse_ready_line",
    "preexec",
    "read_first_line",
    "register_loader",
    "run_process",
    "spawn_starter",
    "start_janitor",
    "write_stdin",
]

__getattr__ = lazy.face(__name__, {
    "capture": ["Completed", "run_process", "write_stdin"],
    "childside": ["JOIN_FAILED", "join_cgroup", "preexec"],
    "confinement": ["Confinement", "from_wire", "register_loader"],
    "detached": ["fork_child", "fork_helper", "spawn_starter", "start_janitor"],
    "grace": ["end_within"],
    "owned": ["DEVNULL", "PIPE", "CommandStarter", "OwnedProcess", "Running", "fork_process", "open_process"],
    "placement": ["ensure_janitor", "new_unit"],
    "readyline": ["MAX_READY_LINE", "NOT_A_READY_LINE", "NO_DOOR", "NO_SESSION", "FirstLine", "ReadyLine",
                  "normalise_url", "parse_ready_line", "read_first_line"],
})
