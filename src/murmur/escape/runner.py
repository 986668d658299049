"""The escape-conformance run: every case, in real processes, against each class (spec/containment.md).

:func:`run` prepares a scratch tree (a workdir, an outside directory holding a secret, a bin
directory granting ``python3`` and, as root, a setuid copy of ``id`` owned by ``nobody``),
starts a loopback server no grant names, and for each case runs the probe through
:func:`murmur.shell.run_shell` twice: once under advisory (the negative control, which must
escape, or the attempt itself is broken) and once under each class (which must hold).

Exit codes (:attr:`Report.exit_code`): 0 every case held; 1 the harness failed (a control
did not escape, a probe printed nothing); 2 this host cannot back a class asked for; 3 a
boundary case escaped; 4 only a ceiling case escaped.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import attrs
import trio

from murmur.escape.cases import CASES, Case
from murmur.escape.probe import SOURCE as PROBE
from murmur.manifest import Containment
from murmur.sandbox import compiled
from murmur.sandbox.host import HostSupport, probe
from murmur.sandbox.installed import install, uninstall
from murmur.sandbox.limits import Limits
from murmur.sandbox.policy import Policy

__all__ = ["Report", "Verdict", "run", "run_sync"]

LIMITS = Limits(max_processes=32, cgroup_pids_max=32, memory_bytes=256 << 20, cpu_seconds=30)
"""The ceilings the ceiling cases run under."""


@attrs.frozen
class Verdict:
    """One case under one class.

    Attributes:
        case (str), kind (str): the case and ``boundary``/``ceiling``.
        klass (str): the class (``advisory`` for a control).
        outcome (str): ``held``, ``escaped``, ``skipped`` or ``broken`` (the probe printed nothing).
        detail (str): the probe's line, or why it was skipped.
    """

    case: str
    kind: str
    klass: str
    outcome: str
    detail: str


@attrs.frozen
class Report:
    """A whole run: the verdicts, the exit code and (exit 1/2) the problem."""

    classes: tuple[str, ...]
    controls: tuple[Verdict, ...]
    verdicts: tuple[Verdict, ...]
    exit_code: int
    problem: str | None = None
    host: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """The ``--json`` document."""
        return {
            "exit_code": self.exit_code,
            "problem": self.problem,
            "host": list(self.host),
            "classes": list(self.classes),
            "cases": [
                {"case": v.case, "kind": v.kind, "class": v.klass, "verdict": v.outcome, "detail": v.detail,
                 "control": next((c.outcome for c in self.controls if c.case == v.case), None)}
                for v in self.verdicts
            ],
        }

    def lines(self) -> list[str]:
        """The human report: one line per case and class, then the result."""
        out = [*self.host]
        for v in self.verdicts:
            ctl = next((c for c in self.controls if c.case == v.case), None)
            out.append(f"{v.klass:8} {v.case:15} {v.outcome:8} {v.detail}"
                       + (f"  [control: {ctl.outcome}]" if ctl is not None else ""))
        verdict = {0: "every case held", 1: "the harness failed", 2: "this host cannot back the class",
                   3: "a boundary case escaped", 4: "a resource ceiling did not hold"}[self.exit_code]
        out.append(f"escape: exit {self.exit_code}: {verdict}" + (f" ({self.problem})" if self.problem else ""))
        return out


def _python() -> str:
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return os.path.realpath(sys.executable)


def _stdlib(python: str) -> tuple[str, ...]:
    real = os.path.realpath(python)
    name = os.path.basename(real)
    version = name[len("python"):] if name.startswith("python") else ""
    prefix = os.path.dirname(os.path.dirname(real))
    dirs = [os.path.join(prefix, "lib", f"python{version}")] if version else []
    return tuple(d for d in dirs if os.path.isdir(d))


@attrs.frozen
class _Scratch:
    base: Path
    work: Path
    outside: Path
    home: Path
    tmp: Path
    bin: Path
    setuid_ready: bool


def _prepare() -> _Scratch:
    base = Path(tempfile.mkdtemp(prefix="murmur-escape-"))
    os.chmod(base, 0o755)
    dirs = {n: base / n for n in ("work", "outside", "home", "tmp", "bin")}
    for d in dirs.values():
        d.mkdir()
    (dirs["outside"] / "secret.txt").write_text("outside the grant\n")
    (dirs["bin"] / "python3").symlink_to(_python())
    ready = False
    ident = shutil.which("id")
    if os.geteuid() == 0 and ident:
        target = dirs["bin"] / "suid-id"
        shutil.copy(ident, target)
        os.chown(target, 65534, 65534)
        os.chmod(target, 0o4755)
        ready = True
    return _Scratch(base, dirs["work"], dirs["outside"], dirs["home"], dirs["tmp"], dirs["bin"], ready)


def _policy(klass: Containment, s: _Scratch, weaken: str | None, port: int) -> Policy:
    ro = _stdlib(_python()) + ((str(s.outside),) if weaken == "read-outside" else ())
    rw = (str(s.home), str(s.tmp)) + ((str(s.outside),) if weaken == "write-outside" else ())
    limits = attrs.evolve(LIMITS, max_processes=None, cgroup_pids_max=None) if weaken == "fork-bomb" else LIMITS
    return Policy(klass=klass, workdir=str(s.work), allow=("python3", "suid-id"), search_path=str(s.bin),
                  rw=rw, ro=ro, limits=limits,
                  loopback_ports=(port,) if weaken == "connect-port" else ())


async def _attempt(case: Case, s: _Scratch, port: int, klass: str) -> Verdict:
    from murmur.shell import ShellRefused, run_shell

    if case.needs_root and not s.setuid_ready:
        return Verdict(case.name, case.kind, klass, "skipped", "needs root to prepare a setuid file")
    env = {"PATH": str(s.bin), "HOME": str(s.home), "TMPDIR": str(s.tmp)}
    argv = ["python3", "-c", PROBE, case.name, str(s.outside), str(port), str(s.work), str(os.getpid())]
    try:
        with trio.fail_after(60):
            res = await run_shell(argv, allow=("python3", "suid-id"), cwd=s.work, env=env)
    except (ShellRefused, trio.TooSlowError) as exc:
        return Verdict(case.name, case.kind, klass, "broken", f"the probe could not run: {exc}")
    last = (res.stdout_text.strip().splitlines() or [""])[-1]
    word, _, detail = last.partition(" ")
    if word == "ESCAPED":
        return Verdict(case.name, case.kind, klass, "escaped", detail)
    if word == "HELD":
        return Verdict(case.name, case.kind, klass, "held", detail)
    if res.exit_code != 0 and klass != "advisory":
        tail = (res.stderr_text.strip().splitlines() or [f"exit {res.exit_code}"])[-1]
        return Verdict(case.name, case.kind, klass, "held", f"the probe was stopped: {tail}")
    return Verdict(case.name, case.kind, klass, "broken", f"no verdict (exit {res.exit_code}): "
                                                         f"{res.stderr_text.strip()[-200:]}")


async def _server(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            try:
                await stream.send_all(b"hello\n")
            except trio.BrokenResourceError:
                pass

    await trio.serve_listeners(answer, listeners)


async def run(classes: Sequence[Containment] | None = None, *, host: HostSupport | None = None,
              weaken: str | None = None, cases: Sequence[str] | None = None) -> Report:
    """Run the harness (see the module docstring).

    Args:
        classes: the classes to grade; None: every class this host backs above advisory.
        host: what the host backs (default: :func:`murmur.sandbox.probe`).
        weaken (str | None): a case whose rule is deliberately widened (tests: it must escape).
        cases: only these cases (default: all).
    """
    support = host or probe()
    lines = tuple(support.doctor_lines())
    wanted = [c for c in CASES if cases is None or c.name in cases]
    asked = list(classes) if classes else [k for k in (Containment.SCOPED, Containment.SEALED)
                                            if not support.lacks(k)]
    if not asked:
        return Report((), (), (), 2, "this host backs no class above advisory", lines)
    for k in asked:
        if k is Containment.ADVISORY:
            return Report((), (), (), 1, "advisory is the control, not a class to grade", lines)
        if support.lacks(k):
            return Report(tuple(a.value for a in asked), (), (), 2,
                          f"{k.value} needs {'; '.join(support.lacks(k))}", lines)
    scratch = _prepare()
    controls: list[Verdict] = []
    verdicts: list[Verdict] = []
    try:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(_server)
            uninstall()
            for case in wanted:
                controls.append(await _attempt(case, scratch, port, "advisory"))
            for k in asked:
                box = compiled.compile(_policy(k, scratch, weaken, port), support)
                install(box)
                try:
                    async with trio.open_nursery() as proxy:
                        proxy.start_soon(box.serve)
                        for case in wanted:
                            verdicts.append(await _attempt(case, scratch, port, k.value))
                        proxy.cancel_scope.cancel()
                finally:
                    uninstall()
            nursery.cancel_scope.cancel()
    except compiled.SandboxError as exc:
        return Report(tuple(a.value for a in asked), tuple(controls), tuple(verdicts), 2,
                      exc.diagnostic.message, lines)
    finally:
        shutil.rmtree(scratch.base, ignore_errors=True)
    return Report(tuple(a.value for a in asked), tuple(controls), tuple(verdicts),
                  _exit_code(controls, verdicts), _problem(controls, verdicts), lines)


def _problem(controls: list[Verdict], verdicts: list[Verdict]) -> str | None:
    bad = [c.case for c in controls if c.outcome not in ("escaped", "skipped")]
    if bad:
        return f"the advisory control did not escape for {', '.join(bad)}: the attempt itself is broken"
    broken = [f"{v.klass}/{v.case}" for v in verdicts if v.outcome == "broken"]
    if broken:
        return f"no verdict for {', '.join(broken)}"
    return None


def _exit_code(controls: list[Verdict], verdicts: list[Verdict]) -> int:
    if _problem(controls, verdicts) is not None:
        return 1
    if any(v.outcome == "escaped" and v.kind == "boundary" for v in verdicts):
        return 3
    if any(v.outcome == "escaped" for v in verdicts):
        return 4
    return 0


def run_sync(classes: Sequence[Containment] | None = None, **kw: object) -> Report:
    """:func:`run` in a fresh Trio run (the CLI)."""
    return trio.run(lambda: run(classes, **kw))  # type: ignore[arg-type]
