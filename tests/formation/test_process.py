"""Tests of starting members as real processes: pipes, groups, relays (real clock)."""

from __future__ import annotations

import io
import os
import signal
import sys
from pathlib import Path

import pytest
import trio

from murmur.formation.launch.process import ProcessSpawner, mur_command
from murmur.formation.launch.supervise import MemberSpec, stop_member

# A child that reports what it inherited, then waits for lifeline EOF.
CHILD = r"""
import json, os, sys
chan = int(os.environ["MURMUR_FORMATION_CHANNEL"])
life = int(os.environ["MURMUR_FORMATION_LIFELINE"])
buf = b""
while b"\n" not in buf:
    buf += os.read(chan, 65536)
first, rest = buf.split(b"\n", 1)
first += b"\n"
print(json.dumps({"first": first.decode(), "pgid": os.getpgid(0), "pid": os.getpid(),
                  "fds": sorted(int(f) for f in os.listdir("/proc/self/fd"))}), flush=True)
sys.stderr.write("hello from child\npartial")
sys.stderr.flush()
mode = sys.argv[1] if len(sys.argv) > 1 else "eof"
if mode == "grandchild":
    import subprocess
    gc = subprocess.Popen(["sleep", "600"])
    print(gc.pid, flush=True)
if mode == "ignore":
    import signal, time
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    while True:
        time.sleep(1)
while os.read(life, 100):
    pass
os.set_blocking(chan, False)
try:
    later = rest or os.read(chan, 1 << 20)
except BlockingIOError:
    later = b""
sys.stderr.write("\nlater=" + later.decode().strip() + "\n")
sys.exit(7)
"""


def _spec(tmp_path: Path, *args: str, peer: bool = True, channel: bytes = b'{"x":1}\n') -> MemberSpec:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return MemberSpec(
        name="m1",
        argv=(sys.executable, str(script), *args),
        env=dict(os.environ),
        cwd=str(tmp_path),
        channel=channel,
        peer=peer,
    )


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class TestSpawn:
    async def test_pipes_group_relay(self, tmp_path: Path) -> None:
        """A peer inherits exactly its two pipes, runs in its own group, sees EOF on close."""
        import json

        err = io.BytesIO()
        async with trio.open_nursery() as relays:
            handle = await ProcessSpawner(err).spawn(_spec(tmp_path), relays)
            with trio.fail_after(10):
                line = await handle.first_line()
            assert line is not None
            seen = json.loads(line)
            assert seen["first"] == '{"x":1}\n'
            assert seen["pgid"] == seen["pid"] == handle.pid
            chan_fd = int(_spec(tmp_path).env.get("MURMUR_FORMATION_CHANNEL", "-1"))
            assert chan_fd == -1  # the spec carries no fd numbers; the spawner adds them
            assert len([f for f in seen["fds"] if f > 2]) <= 3  # channel, lifeline, listdir's own
            await handle.send_line(b'{"addresses":[]}\n')
            with trio.fail_after(10):
                stopped = await stop_member(handle, kill_after=10.0)
            await handle.aclose()
            assert stopped.returncode == 7 and stopped.by_launcher and not stopped.killed
        text = err.getvalue().decode()
        assert "[m1] hello from child\n" in text
        assert '[m1] partial\n' in text
        assert '[m1] later={"addresses":[]}\n' in text
        assert handle.last_stderr()[-1] == 'later={"addresses":[]}'

    async def test_kill_after_takes_group(self, tmp_path: Path) -> None:
        """A peer that ignores its lifeline is SIGKILLed with its group after the bound."""
        async with trio.open_nursery() as relays:
            handle = await ProcessSpawner(io.BytesIO()).spawn(_spec(tmp_path, "ignore"), relays)
            with trio.fail_after(10):
                assert await handle.first_line() is not None
            t0 = trio.current_time()
            with trio.fail_after(10):
                stopped = await stop_member(handle, kill_after=0.5)
            assert trio.current_time() - t0 >= 0.5
            assert stopped.killed and stopped.returncode == -signal.SIGKILL
            await handle.aclose()
        assert not _alive(handle.pid)

    async def test_aclose_sweeps_group(self, tmp_path: Path) -> None:
        """After a peer exits, what it left in its process group is killed too."""
        err = io.BytesIO()
        async with trio.open_nursery() as relays:
            handle = await ProcessSpawner(err).spawn(_spec(tmp_path, "grandchild"), relays)
            with trio.fail_after(10):
                assert await handle.first_line() is not None
            grandchild = None
            with trio.fail_after(10):
                while grandchild is None:
                    await trio.sleep(0.02)
                    for raw in err.getvalue().decode().splitlines():
                        if raw.startswith("[m1] ") and raw[5:].isdigit():
                            grandchild = int(raw[5:])
            assert _alive(grandchild)
            with trio.fail_after(10):
                await stop_member(handle, kill_after=5.0)
            await handle.aclose()
        # the grandchild was in the peer's group (later stdout lines are relayed too)
        with trio.fail_after(5):
            while _alive(grandchild):  # noqa: ASYNC110 - polling the process table
                await trio.sleep(0.02)

    async def test_large_channel_prefill(self, tmp_path: Path) -> None:
        """A first line larger than the pipe buffer still arrives whole."""
        import json

        big = b'{"pad":"' + b"a" * 200_000 + b'"}\n'
        async with trio.open_nursery() as relays:
            handle = await ProcessSpawner(io.BytesIO()).spawn(_spec(tmp_path, channel=big), relays)
            with trio.fail_after(20):
                line = await handle.first_line()
            assert line is not None and json.loads(line)["first"].encode() == big
            with trio.fail_after(10):
                await stop_member(handle, kill_after=5.0)
            await handle.aclose()

    async def test_entry_shares_group(self, tmp_path: Path) -> None:
        """The entry member stays in the launcher's process group and is killed alone."""
        async with trio.open_nursery() as relays:
            handle = await ProcessSpawner(io.BytesIO()).spawn(
                _spec(tmp_path, "ignore", peer=False), relays
            )
            assert await handle.first_line() is None  # its stdout is not the launcher's to read
            assert os.getpgid(handle.pid) == os.getpgid(0)
            with trio.fail_after(10):
                stopped = await stop_member(handle, kill_after=0.3)
            assert stopped.killed
            await handle.aclose()

    async def test_spawn_failure_closes_pipes(self, tmp_path: Path) -> None:
        """A command that cannot start raises OSError and leaks no descriptor."""
        before = len(os.listdir("/proc/self/fd"))
        spec = MemberSpec("m", (str(tmp_path / "missing"),), {}, str(tmp_path), b"x\n", True)
        async with trio.open_nursery() as relays:
            with pytest.raises(OSError):
                await ProcessSpawner(io.BytesIO()).spawn(spec, relays)
        assert len(os.listdir("/proc/self/fd")) == before


class TestMurCommand:
    def test_explicit_binary(self) -> None:
        """$MURMUR_MUR_BINARY wins."""
        assert mur_command({"MURMUR_MUR_BINARY": "/x/mur"}) == ["/x/mur"]

    def test_default_beside_interpreter(self) -> None:
        """Without it, the interpreter's own mur (or -m murmur.cli.mur)."""
        cmd = mur_command({})
        assert cmd[0].startswith(str(Path(sys.executable).parent)) or cmd[1:] == ["-m", "murmur.cli.mur"]
