"""Helpers for formation e2e tests: projects, a launcher process, its members' event log.

Members are ``fake_mur.py`` (``$MURMUR_MUR_BINARY``) unless a test says otherwise. Every
process a test starts is killed at teardown, whatever happened: the launcher's process group
and every member pid the event log names (and their groups).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import attrs

from murmur import registry

HERE = Path(__file__).resolve().parent
FAKE_MUR = HERE / "fake_mur.py"


@attrs.frozen
class Spec:
    """One roster member for a test project."""

    name: str
    entry: bool = False
    callees: tuple[str, ...] = ()
    serves_peers: bool = False


def _manifest(capsule: str, spec: Spec, authenticated: bool) -> str:
    text = f"name: {capsule}\nversion: 0.1.0\n"
    if spec.serves_peers:
        text += "exports:\n  peer_tasks:\n    accept: true\n"
    if authenticated:
        text += "network:\n  authentication:\n    scheme: bearer\n"
    if spec.callees:
        text += "capabilities:\n  network:\n    allow: [localhost]\n"
    return text


def make_project(root: Path, specs: Sequence[Spec], *, retain: str | None = None) -> Path:
    """Build and install one capsule per member into ``root/proj``; write its roster.yaml.

    Args:
        root (Path): a scratch directory.
        specs (Sequence[Spec]): the members, in roster order.
        retain (str | None): YAML for the entry member's ``trace.retain`` mapping body.
    """
    proj = root / "proj"
    proj.mkdir()
    authenticated = any(s.callees for s in specs)
    lines = ["roster_version: 1", "members:"]
    rules = []
    for s in specs:
        capsule = f"m-{s.name}"
        src = root / "src" / s.name
        src.mkdir(parents=True)
        text = _manifest(capsule, s, authenticated)
        if s.entry and retain:
            text += f"trace:\n  retain:\n{retain}"
        (src / "murmur.yaml").write_text(text)
        archive = registry.build(src)
        registry.install(archive, global_=False, project_dir=proj)
        lines += [f"  - name: {s.name}", f"    capsule: local/{capsule}", "    version: 0.1.0"]
        if s.entry:
            lines.append("    entry: true")
        if s.callees:
            rules.append(f"  - from: {s.name}\n    to: [{', '.join(s.callees)}]")
    if rules:
        lines.append("reachability:")
        lines += rules
    (proj / "roster.yaml").write_text("\n".join(lines) + "\n")
    return proj


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live, non-zombie process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for(pred: Callable[[], bool], timeout: float, step: float = 0.02) -> float:
    """Poll ``pred`` until true; the seconds it took. Raises AssertionError on timeout."""
    t0 = time.monotonic()
    while not pred():
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(step)
    return time.monotonic() - t0


class Launch:
    """A ``mur run --roster`` process with fake members.

    Args:
        proj (Path): the roster's project directory.
        tmp (Path): scratch space (wrapper script, event log, captured output).
        plan (dict): ``$FAKE_MUR_PLAN`` per member.
        args (Sequence[str]): extra launcher flags (``--task``, ``--json``, ``--deadline``).
        env (dict | None): extra environment.
    """

    def __init__(
        self,
        proj: Path,
        tmp: Path,
        plan: dict[str, dict[str, object]] | None = None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
    ) -> None:
        self.log = tmp / "events.jsonl"
        self.log.touch()
        wrapper = tmp / "mur-fake"
        wrapper.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE_MUR} \"$@\"\n")
        wrapper.chmod(0o755)
        full_env = dict(os.environ)
        full_env.update(
            MURMUR_MUR_BINARY=str(wrapper),
            FAKE_MUR_LOG=str(self.log),
            FAKE_MUR_PLAN=json.dumps(plan or {}),
            PYTHONPATH=str(HERE.parents[1] / "src"),
        )
        full_env.pop("MURMUR_FORMATION_ID", None)
        full_env.update(env or {})
        self.stdout_path = tmp / "launcher.out"
        self.stderr_path = tmp / "launcher.err"
        self._out = self.stdout_path.open("wb")
        self._err = self.stderr_path.open("wb")
        cmd = [sys.executable, "-m", "murmur.cli.mur", "run", "--roster", str(proj), "--die-with-parent", *args]
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            cmd, stdout=self._out, stderr=self._err, stdin=subprocess.DEVNULL,
            env=full_env, cwd=tmp, start_new_session=True,
        )

    # -- observation --------------------------------------------------------------------

    def events(self, member: str | None = None, event: str | None = None) -> list[dict]:
        """Events from the members' log, optionally filtered."""
        out = []
        for line in self.log.read_text().splitlines():
            rec = json.loads(line)
            if (member is None or rec["member"] == member) and (event is None or rec["event"] == event):
                out.append(rec)
        return out

    def member_pids(self) -> dict[str, int]:
        """``member -> pid`` of every member that started."""
        return {e["member"]: e["pid"] for e in self.events(event="start")}

    def all_pids(self) -> list[int]:
        """Every member and grandchild: each process carrying this launch's log in its
        environment (found in ``/proc``, so members that had not logged yet count too),
        other than the launcher, plus every pid the log names."""
        marker = f"FAKE_MUR_LOG={self.log}".encode()
        pids = set(self.member_pids().values())
        pids.update(e["grandchild"] for e in self.events(event="grandchild"))
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == self.proc.pid:
                continue
            try:
                environ = (entry / "environ").read_bytes()
            except OSError:
                continue
            if marker in environ.split(b"\0"):
                pids.add(int(entry.name))
        return sorted(pids)

    def wait_ready(self, members: Sequence[str], timeout: float = 20.0) -> None:
        """Wait until each of ``members`` has logged ``ready``."""
        wait_for(lambda: all(self.events(m, "ready") for m in members), timeout)

    def wait(self, timeout: float = 60.0) -> int:
        """Wait for the launcher to exit; its status."""
        return self.proc.wait(timeout=timeout)

    def stdout(self) -> str:
        return self.stdout_path.read_text()

    def stderr(self) -> str:
        return self.stderr_path.read_text()

    def survivors(self) -> list[int]:
        """Member or grandchild pids still alive."""
        return [p for p in self.all_pids() if alive(p)]

    def time_to_nothing_left(self, timeout: float = 30.0) -> float:
        """Seconds until no member or grandchild is alive (AssertionError past ``timeout``)."""
        return wait_for(lambda: not self.survivors(), timeout)

    # -- cleanup ------------------------------------------------------------------------

    def kill_everything(self) -> None:
        """SIGKILL the launcher's group and every member (and its group); reap the launcher."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        for pid in self.all_pids():
            for kill in (os.killpg, os.kill):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._out.close()
        self._err.close()


@contextlib.contextmanager
def launched(*a: object, **kw: object) -> Iterator[Launch]:
    """A :class:`Launch` that is always cleaned up."""
    launch = Launch(*a, **kw)  # type: ignore[arg-type]
    try:
        yield launch
    finally:
        launch.kill_everything()
