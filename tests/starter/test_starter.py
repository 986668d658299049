"""The warm starter (spec/formation.md "The warm start path"): messages, and real forks.

The real tests start a starter with :meth:`Starter.launch` under its owning task and fork
real ``mur`` commands through it; every process is reaped by the starter and the starter by
its owning task, each wait bounded.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio
import trio.testing

from murmur import containment, starter
from murmur.formation.launch.process import ProcessSpawner, mur_command
from murmur.formation.launch.supervise import MemberSpec
from murmur.starter import early, procarea, protocol
from murmur.starter.client import Starter, Unavailable, WarmProcess

pytestmark = [pytest.mark.e2e]


def test_request_round_trip() -> None:
    req = protocol.StartRequest(
        id=3, argv=("mur", "run", "--capsule", "local/x"), env={"A": "1"}, cwd="/tmp",
        fds=(0, 1, 2, 3, 4), session=True, pgid=None, cgroup="/sys/fs/cgroup/u", title="mur run --capsule local/x",
    )
    assert protocol.StartRequest.decode(req.encode()) == req


@pytest.mark.parametrize("raw", [b"[]", b'{"start": "1"}', b'{"start": 1, "argv": []}',
                                 b'{"start": 1, "argv": ["mur"], "env": {"A": 1}, "fds": []}',
                                 b'{"start": 1, "argv": ["mur"], "env": {}, "fds": [-1]}'])
def test_bad_requests_are_refused(raw: bytes) -> None:
    with pytest.raises(ValueError):
        protocol.StartRequest.decode(raw)


def test_title_is_mur_and_the_arguments() -> None:
    assert protocol.title(["/venv/bin/mur", "run", "--capsule", "local/a"]) == "mur run --capsule local/a"


@pytest.mark.parametrize(
    ("environ", "warm"),
    [({}, True), ({"MURMUR_STARTER": "off"}, False), ({"MURMUR_STARTER": " No "}, False),
     ({"MURMUR_STARTER": "0"}, False), ({"MURMUR_STARTER": "false"}, False), ({"MURMUR_STARTER": "on"}, True),
     ({"MURMUR_MUR_BINARY": "/bin/fake"}, False), ({"MURMUR_STARTER": "on", "MURMUR_MUR_BINARY": "  "}, True)],
)
def test_wanted(environ: dict[str, str], warm: bool) -> None:
    """On by default; off by ``MURMUR_STARTER=off`` (0/no/false) or a ``MURMUR_MUR_BINARY``."""
    assert starter.wanted(environ) is warm


def test_mur_command_has_one_home() -> None:
    """The formation and delegation sides start the same ``mur`` (``murmur.starter``)."""
    from murmur.delegation import child_process
    from murmur.formation.launch import process

    assert process.mur_command is child_process.mur_command is starter.mur_command
    assert starter.mur_command({"MURMUR_MUR_BINARY": " /opt/mur "}) == ["/opt/mur"]


def test_starter_env_keeps_only_what_the_interpreter_reads() -> None:
    environ = {"PATH": "/bin", "HOME": "/root", "PYTHONPATH": "/src", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8",
               "LC_ALL": "C.UTF-8", "MURMUR_SPAWNER_LIFELINE": "9", "MURMUR_FORMATION_ID": "frm_x",
               "MURMUR_CONTAINMENT_UNIT": "/murmur-x", "SECRET": "s", "APYTHONX": "1"}
    assert early.starter_env(environ) == {"PYTHONPATH": "/src", "PYTHONHASHSEED": "0", "LANG": "C.UTF-8",
                                          "LC_ALL": "C.UTF-8"}


def test_area_blocks_are_nul_terminated_strings() -> None:
    assert procarea.block(["mur", "run", ""]) == b"mur\0run\0\0"
    assert procarea.block(procarea.env_items({"A": "1", "B": "x=y"})) == b"A=1\0B=x=y\0"
    assert procarea.block([]) == b""


_POINT = """
import json, os, sys
from murmur.starter import procarea
env = {"ONLY": "this", "AND": "that"}
ok = procarea.point_areas(["mur", "run", "--capsule", "local/x"], env)
junk = [bytearray(1 << 16) for _ in range(64)]  # the heap still grows after the map was set
print(json.dumps({"ok": ok, "environ": open("/proc/self/environ", "rb").read().decode(),
                  "cmdline": open("/proc/self/cmdline", "rb").read().decode()}))
"""


@pytest.mark.parametrize("unprivileged", [False, True])
def test_point_areas_makes_proc_exact(unprivileged: bool, tmp_path: Path) -> None:
    """``PR_SET_MM_MAP`` with ``exe_fd`` -1, as root and as an unprivileged user with no
    capabilities: ``/proc/self/environ`` and ``cmdline`` show exactly what was given."""
    src = str(Path(starter.__file__).resolve().parents[1])
    argv = [sys.executable, "-c", _POINT]
    if unprivileged:
        setpriv = shutil.which("setpriv")
        if os.geteuid() != 0 or setpriv is None:
            pytest.skip("needs root and setpriv(1) to run the check as an unprivileged user")
        argv = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    done = subprocess.run(argv, env={"PYTHONPATH": src, "LEAK": "x"}, capture_output=True, timeout=60,
                          cwd=tmp_path, check=True)
    got = json.loads(done.stdout)
    assert got["ok"] is True, done.stderr
    assert got["environ"] == "ONLY=this\0AND=that\0"
    assert got["cmdline"] == "mur\0run\0--capsule\0local/x\0"


@pytest.fixture
async def warm() -> AsyncIterator[Starter]:
    s = Starter.launch({**os.environ, "MURMUR_TEST_NOT_GIVEN": "x", "PYTHON_TEST_GIVEN": "y"})
    assert s is not None
    async with trio.open_nursery() as nursery:
        await nursery.start(s.run)
        try:
            yield s
        finally:
            nursery.cancel_scope.cancel()
    assert s._popen.poll() is not None, "the starter outlived its owning task"


async def _start(s: Starter, argv: list[str], tmp: Path, **kw: object) -> tuple[int, int]:
    """Fork ``argv`` with stdout on a pipe; (pid, read end)."""
    r, w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY)
    chan_r, chan_w = os.pipe()
    life_r, life_w = os.pipe()
    try:
        with trio.fail_after(60):
            pid = await s.start(argv, {"PATH": os.environ["PATH"], "MARK": "x", **os.environ},
                                str(kw.get("cwd", tmp)),
                                [(devnull, 0), (w, 1), (w, 2), (chan_r, 3), (life_r, 4)],
                                session=True, cgroup=None)
    finally:
        for fd in (w, devnull, chan_r, life_r, chan_w, life_w):
            os.close(fd)
    return pid, r


def _proc(pid: int) -> tuple[list[str], bytes, str]:
    """(stat fields after the name, cmdline, comm) of ``pid``."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return stat, Path(f"/proc/{pid}/cmdline").read_bytes(), Path(f"/proc/{pid}/comm").read_text().strip()


def _read_all(fd: int) -> bytes:
    out = b""
    while chunk := os.read(fd, 65536):
        out += chunk
    os.close(fd)
    return out


async def test_fork_runs_mur_and_reports_the_status(warm: Starter, tmp_path: Path) -> None:
    """``mur --version`` forked by the starter prints on the pipe it was given; exit 0 is
    reported; an unknown command exits as ``mur`` does (2)."""
    pid, r = await _start(warm, ["mur", "--version"], tmp_path)
    with trio.fail_after(30):
        assert await warm.wait_exit(pid) == 0
    assert _read_all(r).startswith(b"mur ")
    pid, r = await _start(warm, ["mur", "no-such-command"], tmp_path)
    with trio.fail_after(30):
        assert await warm.wait_exit(pid) == 2
    assert b"no-such-command" in _read_all(r)


async def test_missing_cwd_is_an_oserror(warm: Starter, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        await _start(warm, ["mur", "--version"], tmp_path, cwd=tmp_path / "gone")


async def test_a_forked_process_is_its_own(warm: Starter, tmp_path: Path) -> None:
    """A forked ``mur run`` session: its own session and group, the title, its cwd and
    environment, descriptors 3 and 4 as given, and not the starter's socket."""
    capsule = tmp_path / "c"
    capsule.mkdir()
    (capsule / "murmur.yaml").write_text(
        "name: w\nversion: 0.1.0\nplan: plan.yaml\nlifecycle:\n  task_acceptance: queue\n  after_task: sleep\n")
    (capsule / "plan.yaml").write_text('steps:\n  - id: s\n    template: "x"\noutput: "x"\n')
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    env["MURMUR_HOME"] = str(home)
    env.pop("MURMUR_TEST_NOT_GIVEN", None)
    r, w = os.pipe()
    devnull = os.open(os.devnull, os.O_RDONLY)
    a, b = os.pipe()
    c, d = os.pipe()
    try:
        with trio.fail_after(60):
            pid = await warm.start(["mur", "run", "--json"], env, str(capsule),
                                   [(devnull, 0), (w, 1), (devnull, 2), (a, 3), (c, 4)],
                                   session=True, cgroup=None)
    finally:
        for fd in (w, devnull, a, c):
            os.close(fd)
    stream = trio.lowlevel.FdStream(r)
    try:
        buf = b""
        with trio.fail_after(60):
            while b"\n" not in buf:
                chunk = await stream.receive_some(65536)
                assert chunk, "the forked session ended before its readiness line"
                buf += chunk
        ready = json.loads(buf.split(b"\n")[0])
        assert ready["pid"] == pid
        assert ready["records_dir"].startswith(str(home))  # its environment (MURMUR_HOME)
        stat, cmdline, comm = _proc(pid)
        assert int(stat[1]) == warm.pid  # the starter is its parent
        assert int(stat[2]) == pid and int(stat[3]) == pid  # its own group and session
        assert cmdline == b"mur\0run\0--json\0"  # as an exec'd `mur run --json` shows it
        assert comm == "mur"
        # exactly its own environment: nothing the starter or this process had and it was not given
        shown = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")  # noqa: ASYNC240
        assert [x for x in shown if x] == [f"{k}={v}".encode() for k, v in env.items()]
        assert not any(x.startswith(b"MURMUR_TEST_NOT_GIVEN=") for x in shown)
        assert os.readlink(f"/proc/{pid}/cwd") == str(capsule)
        fds = {int(n): os.readlink(f"/proc/{pid}/fd/{n}") for n in os.listdir(f"/proc/{pid}/fd")}
        assert fds[3] == os.readlink(f"/proc/self/fd/{b}")  # the same pipes as given
        assert fds[4] == os.readlink(f"/proc/self/fd/{d}")
        # the starter's own environment (what a member would show if the kernel refused the
        # map): only what the interpreter reads, which every member is given too
        mine = Path(f"/proc/{warm.pid}/environ").read_bytes().split(b"\0")  # noqa: ASYNC240
        assert b"PYTHON_TEST_GIVEN=y" in mine
        assert not [x for x in mine if x and not x.startswith((b"PYTHON", b"LC_", b"LANG"))]
        starter_ends = {os.readlink(f"/proc/{warm.pid}/fd/{n}") for n in os.listdir(f"/proc/{warm.pid}/fd")}
        shared = {t for t in fds.values() if t.startswith("socket:")} & starter_ends
        assert not shared, f"the member holds the starter's socket: {shared}"
    finally:
        os.kill(pid, 15)
        with trio.fail_after(30):
            code = await warm.wait_exit(pid)
        await stream.aclose()
        for fd in (b, d):
            os.close(fd)
    assert code == 0  # an idle session SIGTERMed winds down to 0, as an exec'd one does


async def test_cgroup_join_first(warm: Starter, tmp_path: Path) -> None:
    """cgroup class: the forked process is in its unit; a unit it cannot join is status 125
    with the trampoline's message."""
    host = containment.detect({}, probe=True)
    if host.name != containment.CGROUP:
        pytest.skip(f"no cgroup class here: {host.why}")
    unit = containment.here().new_unit("starter-test")
    try:
        assert unit.path is not None
        r, w = os.pipe()
        devnull = os.open(os.devnull, os.O_RDONLY)
        try:
            with trio.fail_after(60):
                pid = await warm.start(["mur", "--version"], dict(os.environ), str(tmp_path),
                                       [(devnull, 0), (w, 1), (w, 2)], session=True, cgroup=str(unit.path / "missing"))
        finally:
            os.close(w)
            os.close(devnull)
        with trio.fail_after(30):
            assert await warm.wait_exit(pid) == 125
        assert b"could not join containment unit" in _read_all(r)
    finally:
        await unit.release()


async def test_owner_gone_starter_goes(tmp_path: Path) -> None:
    """Closing the socket (what the owner's death does) ends the starter; a start after it
    is :class:`Unavailable`."""
    s = Starter.launch(dict(os.environ))
    assert s is not None
    async with trio.open_nursery() as nursery:
        await nursery.start(s.run)
        nursery.cancel_scope.cancel()
    assert s._popen.poll() is not None
    with pytest.raises(Unavailable):
        await s.start(["mur", "--version"], {}, str(tmp_path), [], session=True, cgroup=None)


def _spec(tmp: Path) -> MemberSpec:
    """A peer whose command is the default ``mur`` (``mur --version``: one line, exit 0)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MURMUR_")}
    return MemberSpec(name="p1", argv=(*mur_command(env), "--version"), env=env, cwd=str(tmp),
                      channel=b'{"x": 1}\n', peer=True)


async def test_the_seam_forks_through_the_starter(warm: Starter, tmp_path: Path) -> None:
    """ProcessSpawner under ``owning``: a default-``mur`` peer is forked by the starter (its
    parent), its first stdout line arrives through the pipe, and its status through the starter."""
    spawner = ProcessSpawner(err=io.BytesIO(), starter=warm)
    spawner._owned = True  # the fixture already runs the starter's owning task
    async with trio.open_nursery() as relays:
        handle = await spawner.spawn(_spec(tmp_path), relays)
        assert isinstance(handle._proc.running, WarmProcess)  # forked: the starter reaps and reports it
        with trio.fail_after(60):
            line = await handle.first_line()
            code = await handle.wait()
        await handle.aclose()
    assert line is not None and line.startswith(b"mur ")
    assert code == 0 and warm.exits[handle.pid] == 0


async def test_the_seam_falls_back_to_exec(tmp_path: Path) -> None:
    """A starter that is gone: the same spawn starts the member by exec (this process is its
    parent), and it behaves the same."""
    s = Starter.launch(dict(os.environ))
    assert s is not None
    s.discard()
    spawner = ProcessSpawner(err=io.BytesIO(), starter=s)
    async with spawner.owning(), trio.open_nursery() as relays:
        handle = await spawner.spawn(_spec(tmp_path), relays)
        assert not isinstance(handle._proc.running, WarmProcess)  # exec'd: this process is its parent
        # WNOHANG: never blocks; raises ChildProcessError unless this process is its parent
        os.waitid(os.P_PID, handle.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)  # noqa: ASYNC222
        with trio.fail_after(60):
            line = await handle.first_line()
            code = await handle.wait()
        await handle.aclose()
    assert line is not None and line.startswith(b"mur ")
    assert code == 0


class _GoneStarter:
    """A starter that went away: it reports no exit status for anything."""

    def __init__(self) -> None:
        self.exits: dict[int, int] = {}

    async def wait_exit(self, pid: int) -> int | None:
        return None


async def test_several_waiters_after_the_starter_died() -> None:
    """The starter is gone and two tasks wait for the same forked process (a reaper and a
    stop): both see its end through the one pidfd, neither raises BusyResourceError."""
    from murmur.starter.client import UNKNOWN_STATUS

    sleeper = await trio.lowlevel.open_process(["sleep", "30"])
    try:
        proc = WarmProcess(_GoneStarter(), sleeper.pid, None, None)  # type: ignore[arg-type]
        codes: list[int] = []

        async def waiter() -> None:
            codes.append(await proc.wait())

        with trio.fail_after(20):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(waiter)
                nursery.start_soon(waiter)
                await trio.testing.wait_all_tasks_blocked()
                sleeper.kill()
        assert codes == [UNKNOWN_STATUS, UNKNOWN_STATUS] and proc.returncode == UNKNOWN_STATUS
    finally:
        sleeper.kill()
        with trio.CancelScope(shield=True), trio.fail_after(10):
            await sleeper.wait()
