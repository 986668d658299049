"""The warm starter's ``exec``: a command cloned straight into its unit (spec/architecture.md
"Where a process starts").

Real starters (:meth:`Starter.launch` under its owning task) and real commands through
:func:`murmur.procs.open_process`/:func:`murmur.procs.run_process` with ``starter=``; each
test says which path it took (:class:`Recording` keeps what the starter answered), every
process is reaped and every unit released, each wait bounded.
"""

from __future__ import annotations

import errno
import json
import os
import signal
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from murmur import containment, procs
from murmur.procs import cloned
from murmur.starter import protocol
from murmur.starter.client import Commands, Starter, WarmProcess

pytestmark = [pytest.mark.e2e]

TESTS = Path(__file__).resolve().parents[1]
ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
SH = "/bin/sh"


def _cgroup_class() -> None:
    host = containment.detect({}, probe=True)
    if host.name != containment.CGROUP:
        pytest.skip(f"no cgroup class here: {host.why}")


class Recording(Commands):
    """:class:`Commands` that keeps what each start got (a process, or None: the fallback)."""

    def __init__(self, starter: Starter | None) -> None:
        super().__init__(lambda: starter)
        self.got: list[procs.Running | None] = []

    async def exec_into(self, *args: Any, **kw: Any) -> procs.Running | None:
        got = await super().exec_into(*args, **kw)
        self.got.append(got)
        return got


@pytest.fixture
async def warm() -> AsyncIterator[Starter]:
    path = os.pathsep.join(p for p in (str(TESTS), os.environ.get("PYTHONPATH", "")) if p)
    s = Starter.launch({**os.environ, "PYTHONPATH": path})
    assert s is not None
    async with trio.open_nursery() as nursery:
        await nursery.start(s.run)
        try:
            with trio.fail_after(60):
                assert await s.wait_ready()
            yield s
        finally:
            nursery.cancel_scope.cancel()
    assert s._popen.poll() is not None, "the starter outlived its owning task"


def test_exec_request_round_trip() -> None:
    req = protocol.ExecRequest(id=4, argv=("cat", "-"), executable="/usr/bin/cat", env={"A": "1"}, cwd="/tmp",
                               fds=(0, 1, 2, 9), session=True, pgid=None, cgroup="/sys/fs/cgroup/u",
                               confinement={"kind": "k"})
    assert protocol.decode_request(req.encode()) == req
    start = protocol.StartRequest(id=1, argv=("mur",), env={}, cwd="/", fds=(), session=True, pgid=None,
                                  cgroup=None, title="mur")
    assert protocol.decode_request(start.encode()) == start


@pytest.mark.parametrize("change", [{"executable": "cat"}, {"cgroup": None}, {"fds": [0, 256]}, {"argv": []},
                                    {"env": {"A": 1}}, {"exec": "1"}])
def test_bad_exec_requests_are_refused(change: dict[str, Any]) -> None:
    good = {"exec": 1, "argv": ["cat"], "executable": "/usr/bin/cat", "env": {}, "cwd": "/", "fds": [0],
            "session": True, "pgid": None, "cgroup": "/sys/fs/cgroup/u", "confinement": None}
    protocol.decode_request(json.dumps(good).encode())  # the control: the unchanged one decodes
    with pytest.raises(ValueError):
        protocol.decode_request(json.dumps({**good, **change}).encode())


async def _open(argv: list[str], executable: str, starter: Commands, cwd: Path, **kw: Any) -> procs.OwnedProcess:
    with trio.fail_after(60):
        return await procs.open_process(argv, label="cmd", env=ENV, cwd=cwd, executable=executable,
                                        starter=starter, **kw)


async def _finish(proc: procs.OwnedProcess) -> tuple[int, bytes, bytes]:
    """(status, stdout, stderr): its pipes read to EOF, its status, everything released."""
    out, err = bytearray(), bytearray()

    async def drain(stream: trio.abc.ReceiveStream | None, into: bytearray) -> None:
        if stream is not None:
            while chunk := await stream.receive_some(65536):
                into += chunk

    try:
        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(drain, proc.stdout, out)
                nursery.start_soon(drain, proc.stderr, err)
                code = await proc.wait()
    finally:
        await proc.kill_and_reap()
    return code, bytes(out), bytes(err)


async def test_the_command_is_in_its_unit_and_the_starters_child(warm: Starter, tmp_path: Path) -> None:
    """``cat /proc/self/stat /proc/self/cgroup`` cloned and exec'd by the starter: its parent
    is the starter, no ``/bin/sh`` trampoline ran before it (so nothing but the clone can have
    put it in a unit), and the cgroup it reads as it runs is its unit's; its status came from
    the starter."""
    _cgroup_class()
    rec = Recording(warm)
    proc = await _open(["cat", "/proc/self/stat", "/proc/self/cgroup"], "/bin/cat", rec, tmp_path)
    unit = proc.unit
    code, out, _err = await _finish(proc)
    assert isinstance(rec.got[0], WarmProcess) and code == 0 and warm.exits[proc.pid] == 0
    fields, cgroup = out.decode().rsplit(")", 1)[1].split("\n", 1)
    assert int(fields.split()[1]) == warm.pid  # ppid
    assert unit is not None and unit.path is not None
    mount = containment.here().host.mount
    assert mount is not None
    assert cgroup.strip().split("::")[-1] == "/" + str(unit.path.relative_to(mount))


@pytest.mark.parametrize("case", ["missing", "not executable", "missing cwd"])
async def test_exec_failures_are_the_oserror_popen_raises(case: str, warm: Starter, tmp_path: Path) -> None:
    """A missing or non-executable command, or a missing working directory: the same OSError
    subclass, errno and filename as ``subprocess.Popen`` starting it directly (uncontained:
    no trampoline), and the unit is released."""
    _cgroup_class()
    plain = tmp_path / "plain"
    plain.write_text("#!/bin/sh\necho no\n")
    plain.chmod(stat.S_IRUSR | stat.S_IWUSR)
    exe = {"missing": str(tmp_path / "nowhere"), "not executable": str(plain), "missing cwd": "/bin/true"}[case]
    cwd = tmp_path / "gone" if case == "missing cwd" else tmp_path
    rec = Recording(warm)
    with pytest.raises(OSError) as warm_err:
        await _open(["x"], exe, rec, cwd)
    with pytest.raises(OSError) as popen_err:
        await procs.open_process(["x"], label="cmd", env=ENV, cwd=cwd, executable=exe, contained=False)
    assert type(warm_err.value) is type(popen_err.value), (warm_err.value, popen_err.value)
    assert warm_err.value.errno == popen_err.value.errno
    assert warm_err.value.filename == popen_err.value.filename
    assert rec.got == []  # it raised: no process was handed back
    assert warm.alive  # the starter serves on
    again = await _open(["true"], "/bin/true", rec, tmp_path)
    assert (await _finish(again))[0] == 0 and isinstance(rec.got[-1], WarmProcess)


@pytest.mark.parametrize(("script", "status"), [("exit 3", 3), ("kill -TERM $$", -signal.SIGTERM),
                                                 ("exec 1>&-; exec 2>&-; sleep 0.2; exit 0", 0)])
async def test_statuses_signals_and_eof(script: str, status: int, warm: Starter, tmp_path: Path) -> None:
    """The status the starter reaped (``-N`` for a signal); the pipes reach EOF when the last
    writer is gone (here also before it exits)."""
    _cgroup_class()
    rec = Recording(warm)
    proc = await _open(["sh", "-c", script], SH, rec, tmp_path)
    assert isinstance(rec.got[0], WarmProcess)
    assert (await _finish(proc))[0] == status


async def test_run_process_reads_its_output(warm: Starter, tmp_path: Path) -> None:
    """``run_process`` through the starter: stdin written, stdout and stderr kept to EOF."""
    _cgroup_class()
    rec = Recording(warm)
    with trio.fail_after(60):
        done = await procs.run_process(["sh", "-c", "cat; echo err >&2; pwd"], env=ENV, cwd=tmp_path,
                                       executable=SH, stdin=b"in\n", starter=rec)
    assert isinstance(rec.got[0], WarmProcess)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"in\n{tmp_path}\n".encode(), b"err\n")


async def test_the_units_kill_kills_it(warm: Starter, tmp_path: Path) -> None:
    """The command and the ``sleep`` it forked are killed by the unit's kill (it leads its own
    session and group)."""
    _cgroup_class()
    rec = Recording(warm)
    proc = await _open(["sh", "-c", "sleep 60 & echo $!; wait"], SH, rec, tmp_path)
    assert isinstance(rec.got[0], WarmProcess)
    assert os.getpgid(proc.pid) == proc.pid and os.getsid(proc.pid) == proc.pid
    assert proc.stdout is not None
    with trio.fail_after(30):
        line = await proc.stdout.receive_some(64)
    sleeper = int(line.split()[0])
    assert proc.unit is not None and proc.unit.path is not None
    assert sleeper in containment.cgroup.procs(proc.unit.path)
    watch = os.pidfd_open(sleeper)  # readable once it has ended (not our child: no wait)
    try:
        proc.kill()
        code, _out, _err = await _finish(proc)
        assert code == -signal.SIGKILL
        with trio.move_on_after(5) as bound:
            await trio.lowlevel.wait_readable(watch)
        assert not bound.cancelled_caught, "the sleep outlived its unit's kill"
    finally:
        os.close(watch)


async def test_the_fallback_without_a_starter(tmp_path: Path) -> None:
    """No starter (or one that is gone): the start takes the exec path and works."""
    rec = Recording(None)
    proc = await _open(["sh", "-c", "echo $PPID"], SH, rec, tmp_path)
    code, _out, _err = await _finish(proc)
    assert rec.got == [None] and code == 0
    assert not isinstance(proc.running, WarmProcess)


async def test_the_fallback_when_the_starter_is_gone(warm: Starter, tmp_path: Path) -> None:
    rec = Recording(warm)
    warm.alive = False  # as once its owning task saw it go
    try:
        proc = await _open(["true"], "/bin/true", rec, tmp_path)
    finally:
        warm.alive = True
    assert rec.got == [None] and (await _finish(proc))[0] == 0


async def test_the_fallback_when_the_clone_is_refused(warm: Starter, tmp_path: Path) -> None:
    """A unit the kernel cannot clone into (its directory is gone): the starter answers stage
    ``clone`` and the start goes the exec path (whose trampoline then cannot join: 125)."""
    _cgroup_class()
    rec = Recording(warm)
    unit = procs.new_unit("cmd")
    assert unit.path is not None
    try:
        with trio.fail_after(60):
            got = await rec.exec_into(["true"], "/bin/true", ENV, str(tmp_path), [], session=True,
                                      cgroup=str(unit.path / "missing"), confinement=None)
        assert got is None and warm.alive
    finally:
        await unit.release()


def test_clone_refusals_are_stage_clone() -> None:
    """No such unit directory: ``ExecFailed`` stage ``clone`` before anything is cloned."""
    req = protocol.ExecRequest(id=1, argv=("true",), executable="/bin/true", env={}, cwd="/", fds=(),
                               session=True, pgid=None, cgroup="/nonexistent-unit")
    with pytest.raises(cloned.ExecFailed) as got:
        cloned.clone_exec(req, [])
    assert got.value.stage == "clone" and got.value.errno == errno.ENOENT


async def test_the_confinement_is_applied(warm: Starter, tmp_path: Path) -> None:
    """The test marker: its setup runs in the cloned child (the fd limit) and its variable is
    in the environment; the same start without it has neither (negative control)."""
    _cgroup_class()
    from procs.marker import NOFILE, Marker  # type: ignore[import-not-found]

    probe = ["sh", "-c", 'ulimit -n; echo "${MURMUR_TEST_CONFINED:-none}"']
    rec = Recording(warm)
    confined = await _finish(await _open(probe, SH, rec, tmp_path, confinement=Marker()))
    plain = await _finish(await _open(probe, SH, rec, tmp_path))
    assert all(isinstance(g, WarmProcess) for g in rec.got) and len(rec.got) == 2
    assert confined[:2] == (0, f"{NOFILE}\n1\n".encode())
    assert plain[0] == 0 and plain[1].split()[1] == b"none" and plain[1].split()[0] != str(NOFILE).encode()


async def test_a_sandbox_refusal_on_this_path(warm: Starter, tmp_path: Path) -> None:
    """A scoped sandbox's confinement through the starter: ``cat`` of a file outside the
    workdir is refused; the same start without it reads the file (negative control)."""
    _cgroup_class()
    from murmur.manifest import Containment
    from murmur.sandbox import compiled
    from murmur.sandbox.host import probe
    from murmur.sandbox.policy import Policy

    if probe().lacks(Containment.SCOPED):
        pytest.skip("this host cannot back scoped")
    work = tmp_path / "work"
    work.mkdir()
    (tmp_path / "secret").write_text("s")
    box = compiled.compile(Policy(klass=Containment.SCOPED, workdir=str(work), allow=("cat",),
                                  search_path="/usr/bin:/bin"))
    rec = Recording(warm)
    try:
        conf = box.confinement()
        assert conf is not None
        with trio.fail_after(60):
            inside = await procs.run_process(["cat", str(tmp_path / "secret")], env=conf.environ(ENV), cwd=work,
                                             executable="/bin/cat", confinement=conf, starter=rec)
            control = await procs.run_process(["cat", str(tmp_path / "secret")], env=ENV, cwd=work,
                                              executable="/bin/cat", starter=rec)
    finally:
        box.close()
    assert len(rec.got) == 2 and all(isinstance(g, WarmProcess) for g in rec.got)
    assert control.returncode == 0 and control.stdout == b"s"
    assert inside.returncode != 0 and b"Permission denied" in inside.stderr


async def test_a_confinement_without_a_wire_form_is_applied_by_exec(warm: Starter, tmp_path: Path) -> None:
    """A confinement that cannot cross to the starter (``to_wire`` raises ValueError): the
    starter is not asked, and the exec path applies it (the fd limit its setup set)."""
    _cgroup_class()
    from procs.marker import NOFILE, Marker

    class Local(Marker):  # type: ignore[misc]
        def to_wire(self) -> dict[str, Any]:
            raise ValueError("no wire form")

    rec = Recording(warm)
    code, out, _err = await _finish(await _open(["sh", "-c", "ulimit -n"], SH, rec, tmp_path, confinement=Local()))
    assert rec.got == [] and (code, out) == (0, f"{NOFILE}\n".encode())
