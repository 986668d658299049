"""Busy capsules for the kill suite: plan steps that hold real commands, escapees included.

Every busy step is ``[sh, -c, SCRIPT, sh, READY, FIFO, TAG]``. ``READY`` (a two-line script
the test writes) reports ``TAG PID COMMAND_PID`` on the test's readiness FIFO and then
becomes ``sleep 300`` (same pid). Each :data:`VARIANTS` script starts ``READY`` the way its
escape works, *after* the escape (the report comes from the escaped process itself), so when
every line has arrived every command and escapee exists. ``COMMAND_PID`` is the step's own
process (``$$`` of the outer ``sh``, which leads the command's process group): an escapee
whose group differs from it has left its group.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

import attrs
import trio

from murmur import registry

_R = '"$1" "$2" "$3" $$ 300'
VARIANTS: dict[str, str] = {
    "sleep": f"exec {_R}",
    "bg_wait": f"{_R} & wait",  # sh -c 'sleep N & wait'
    "nohup": f"nohup {_R} >/dev/null 2>&1 & exec sleep 300",
    "setsid": f"setsid {_R} & exec sleep 300",
    "setsid_f": f"setsid -f {_R}; exec sleep 300",
    "setsid_wait": f"exec setsid --wait {_R}",
    "double_fork": f"({_R} &) & exec sleep 300",  # sh -c '(sleep N &) &'
    "trap_term": f"trap '' TERM; {_R} & wait",  # ignores SIGTERM, and so does its sleep
}
"""Variant name -> the step's ``sh -c`` script."""

READY_SCRIPT = """#!/bin/sh
printf '%s %s %s\\n' "$2" "$$" "$3" > "$1"
exec sleep "$4"
"""

BIN = Path(sys.executable).parent
MUR = [str(BIN / "mur")] if (BIN / "mur").exists() else [sys.executable, "-m", "murmur.cli.mur"]
ROOST = [str(BIN / "mur-roost")] if (BIN / "mur-roost").exists() else [sys.executable, "-m", "murmur.cli.roost"]


def _yaml_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def busy_steps(ready: Path, fifo: Path, tag: str, variants: Sequence[str]) -> str:
    """YAML for one concurrent busy step per variant (``tag`` may be a template)."""
    out = ""
    for v in variants:
        argv = ["sh", "-c", VARIANTS[v], "sh", str(ready), str(fifo), f"{tag}:{v}"]
        out += f"  - id: busy_{v}\n    shell: [{', '.join(_yaml_str(a) for a in argv)}]\n"
    return out


@attrs.frozen
class Capsule:
    """A busy plan capsule to write, build and install.

    Attributes:
        name: the capsule name.
        tag: the readiness tag prefix (``{{ session_id }}`` works: steps are templates).
        variants: the busy steps it runs at once.
        members: formation members it calls with ``member`` steps.
        children: capsules it delegates to with ``capsule`` steps (each one step).
        peer: serves peer tasks (a formation peer).
        auth: a bearer door (every member of a roster with edges).
        acceptance, after: its lifecycle.
    """

    name: str
    tag: str
    variants: tuple[str, ...] = tuple(VARIANTS)
    members: tuple[str, ...] = ()
    children: tuple[str, ...] = ()
    peer: bool = False
    auth: bool = False
    acceptance: str = "queue"
    after: str = "sleep"

    def write(self, root: Path, ready: Path, fifo: Path) -> Path:
        d = root / self.name
        d.mkdir(parents=True)
        lines = [f"name: {self.name}", "version: 0.1.0", "plan: plan.yaml", "capabilities:",
                 "  shell:", "    allow: [sh]"]
        if self.members:
            lines += ["  network:", "    allow: [localhost]"]
        if self.children:
            lines += ["  spawn:", f"    allow: [{', '.join(sorted(set(self.children)))}]"]
        lines += ["lifecycle:", f"  task_acceptance: {self.acceptance}", "  queue_depth: 4",
                  f"  after_task: {self.after}", "  delegation_deadline_secs: 600"]
        if self.peer:
            lines += ["exports:", "  peer_tasks:", "    accept: true"]
        if self.auth:
            lines += ["network:", "  authentication:", "    scheme: bearer"]
        (d / "murmur.yaml").write_text("\n".join(lines) + "\n")
        plan = "steps:\n" + busy_steps(ready, fifo, self.tag, self.variants)
        for m in self.members:
            plan += f"  - id: call_{m}\n    member: {m}\n    task: go\n"
        for i, c in enumerate(self.children):
            plan += f"  - id: spawn_{i}\n    capsule: {c}\n    version: 0.1.0\n    task: go\n"
        plan += 'output: "done"\n'
        (d / "plan.yaml").write_text(plan)
        return d


def write_ready(root: Path) -> Path:
    path = root / "ready.sh"
    path.write_text(READY_SCRIPT)
    path.chmod(0o755)
    return path


def formation_project(root: Path, ready: Path, fifo: Path, peers: Sequence[str] = ("p1", "p2"),
                      variants: Sequence[str] = tuple(VARIANTS), *, call: bool = True) -> Path:
    """A roster ``lead`` (entry) + ``peers``, each member busy in ``variants`` once it has a
    task; with ``call`` the entry calls every peer (so ``--task`` makes every member busy)."""
    proj = root / "proj"
    proj.mkdir()
    src = root / "src"
    lines = ["roster_version: 1", "members:"]
    caps = [Capsule("k-lead", "lead", tuple(variants), members=tuple(peers) if call else (), auth=True,
                    acceptance="single", after="exit")]
    caps += [Capsule(f"k-{p}", p, tuple(variants), peer=True, auth=True) for p in peers]
    for cap, member in zip(caps, ["lead", *peers], strict=True):
        registry.install(registry.build(cap.write(src, ready, fifo)), global_=False, project_dir=proj)
        lines += [f"  - name: {member}", f"    capsule: local/{cap.name}", "    version: 0.1.0"]
        if member == "lead":
            lines.append("    entry: true")
    lines += ["reachability:", "  - from: lead", f"    to: [{', '.join(peers)}]"]
    (proj / "roster.yaml").write_text("\n".join(lines) + "\n")
    return proj


@attrs.frozen
class Report:
    """One readiness report: the process ``pid`` of busy step ``tag`` (``member:variant``),
    whose command (group leader) is ``command``."""

    tag: str
    pid: int
    command: int

    @property
    def session(self) -> str:
        return self.tag.rpartition(":")[0]

    @property
    def variant(self) -> str:
        return self.tag.rpartition(":")[2]


class Fifo:
    """The readiness FIFO: busy steps write one line each; the test reads them as events.

    The test holds a write end too, so the reader never sees EOF between writers.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path, 0o600)
        self._rd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        self._wr = os.open(path, os.O_WRONLY)
        self._stream = trio.lowlevel.FdStream(self._rd)
        self._buf = b""
        self.reports: list[Report] = []

    async def expect(self, count: int) -> list[Report]:
        """Read until ``count`` reports have arrived in all; every report so far."""
        while len(self.reports) < count:
            chunk = await self._stream.receive_some(4096)
            self._buf += chunk
            *lines, self._buf = self._buf.split(b"\n")
            for line in lines:
                tag, pid, cmd = line.decode().split()
                self.reports.append(Report(tag, int(pid), int(cmd)))
        return list(self.reports)

    async def aclose(self) -> None:
        await self._stream.aclose()
        os.close(self._wr)
