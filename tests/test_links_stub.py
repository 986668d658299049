"""The link stub against a runtime that answers before reading (spec/links.md "Protocol").

The runtime refuses an outside caller — and the connection cap an excess one — with one line and
closes. A stub whose request write then breaks (EPIPE / ECONNRESET) must still print that line
and exit with its status, never "socket cannot be reached" (the flaky 125 of issue 13).
"""

from __future__ import annotations

import json
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from murmur.links.protocol import TOO_MANY, Answer
from murmur.links.stub import write_links


def serve_once(links: Path, reply: bytes) -> threading.Thread:
    """Listen on ``links/cap.sock``; answer the first connection with ``reply`` unread, close."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(links / "cap.sock"))
    srv.listen(1)
    srv.settimeout(30)

    def run() -> None:
        try:
            conn, _ = srv.accept()
            conn.sendall(reply)
            conn.close()  # the request is never read
        finally:
            srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def serve_capture(links: Path, answer: Answer) -> tuple[threading.Thread, list[bytes]]:
    """Listen on ``links/cap.sock``; read the first connection's request line into the list
    returned, answer it with ``answer``, close."""
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(links / "cap.sock"))
    srv.listen(1)
    srv.settimeout(30)
    got: list[bytes] = []

    def run() -> None:
        try:
            conn, _ = srv.accept()
            data = b""
            while not data.endswith(b"\n"):
                data += conn.recv(65536)
            got.append(data)
            conn.sendall(answer.line())
            conn.close()
        finally:
            srv.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, got


@pytest.mark.parametrize(("reply", "code", "stderr"), [
    (Answer(126, stderr="murmur: link refused: process 1 is not inside session ses_x (…)\n").line(), 126,
     "murmur: link refused: process 1 is not inside session ses_x (…)\n"),
    ((TOO_MANY + "\n").encode(), 125, TOO_MANY + "\n"),
])
def test_answer_before_the_request_is_read(tmp_path: Path, reply: bytes, code: int, stderr: str) -> None:
    """A 4 MiB task on stdin cannot fit the socket buffer: the write breaks, the answer is still read."""
    links = tmp_path / "links"
    stub = write_links(links, ["kid"]) / "kid"
    t = serve_once(links, reply)
    done = subprocess.run([str(stub)], input=b"x" * (4 << 20), capture_output=True, timeout=30)
    t.join(10)
    assert (done.returncode, done.stderr.decode()) == (code, stderr), done


def test_cleared_environment_and_the_request_line(tmp_path: Path) -> None:
    """`env -i stub a b`: the stub finds the socket by its own path and sends one JSON line."""
    links = tmp_path / "links"
    stub = write_links(links, ["kid"]) / "kid"
    t, got = serve_capture(links, Answer(0, stdout="kid a b\n", stderr="kid: ok\n"))
    done = subprocess.run(["env", "-i", str(stub), "a", "b"], capture_output=True, text=True, timeout=30)
    t.join(10)
    assert (done.returncode, done.stdout, done.stderr) == (0, "kid a b\n", "kid: ok\n")
    assert json.loads(got[0]) == {"op": "link", "name": "kid", "version": None, "task": "a b", "json": False}


def test_scoped_names_get_their_last_segment_as_command(tmp_path: Path) -> None:
    """`local/kid` is the command `kid` (the stub still asks for `local/kid`); `mur` always exists."""
    binary = write_links(tmp_path / "links", ["local/kid", "other/kid", "napper"])
    assert sorted(p.name for p in binary.iterdir()) == ["kid", "mur", "napper"]
    assert "NAME = 'local/kid'" in (binary / "kid").read_text()
    assert (binary.stat().st_mode & 0o777) == 0o700 and ((binary / "kid").stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize("argv", [["--bogus", "x"], ["-q", "x"], ["--capsule-versio=1", "x"]])
def test_an_unknown_option_is_a_usage_error(tmp_path: Path, argv: list[str]) -> None:
    """An option-shaped word the stub does not know is exit 2 naming it, before any connection
    (no socket exists here: a connection attempt would exit 125 instead)."""
    stub = write_links(tmp_path / "links", ["kid"]) / "kid"
    done = subprocess.run([str(stub), *argv], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2, done
    assert f"kid: unknown option {argv[0]} (put -- before a task that starts with -)" in done.stderr


@pytest.mark.parametrize(("argv", "task"), [
    (["--", "--bogus", "x"], "--bogus x"),
    (["-5", "degrees"], "-5 degrees"),
    (["-x is a flag"], "-x is a flag"),
])
def test_dash_words_that_are_tasks(tmp_path: Path, argv: list[str], task: str) -> None:
    """After `--`, a number, or a word with spaces: the words are the task."""
    links = tmp_path / "links"
    stub = write_links(links, ["kid"]) / "kid"
    t, got = serve_capture(links, Answer(0, stdout="ok\n"))
    done = subprocess.run([str(stub), *argv], capture_output=True, text=True, timeout=30)
    t.join(10)
    assert done.returncode == 0, done
    assert json.loads(got[0])["task"] == task


def test_the_stub_imports_only_c_modules(tmp_path: Path) -> None:
    """Issue 32 item 6: the stub starts near the bare interpreter's time because it imports no
    Python-level module (``json``, ``socket``, ``signal`` and their ``enum`` / ``re`` cost as
    much again as the interpreter; ``os`` and its ``_collections_abc`` a quarter of it); what it
    does import is listed by ``-X importtime``."""
    from murmur.links.stub import interpreter

    binary = write_links(tmp_path / "links", ["kid"])
    done = subprocess.run([interpreter(), "-I", "-S", "-X", "importtime", str(binary / "kid"), "--help"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    for heavy in ("json", "socket", "signal", "enum", "re", "selectors", "os", "_collections_abc", "posixpath"):
        assert heavy not in imported, sorted(imported)
    serve_once(tmp_path / "links", Answer(0, stdout="kid ok\n", stderr="").line())
    ran = subprocess.run([str(binary / "kid"), "hello"], capture_output=True, text=True, timeout=30, check=False,
                         stdin=subprocess.DEVNULL)
    assert (ran.returncode, ran.stdout) == (0, "kid ok\n"), ran.stderr


def test_the_stub_runs_the_compiled_body(tmp_path: Path) -> None:
    """`links/stub.code` is the body compiled once (headed by the interpreter's hexversion): a
    stub runs it and never compiles. Shown by breaking the source: the stub still answers."""
    import sys

    links = tmp_path / "links"
    stub = write_links(links, ["kid"]) / "kid"
    assert (links / "stub.code").read_bytes().startswith(b"%d\n" % sys.hexversion)
    (links / "stub.py").write_text("raise SystemExit(99)\n")
    done = subprocess.run([str(stub), "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "usage: kid" in done.stderr, done


@pytest.mark.parametrize("code", [None, b"1\n" + b"\0" * 8, b"garbage"], ids=["missing", "other-interpreter", "corrupt"])
def test_the_stub_compiles_the_source_without_a_usable_code_file(tmp_path: Path, code: bytes | None) -> None:
    """No `stub.code`, one from another interpreter, or a corrupt one: the stub compiles
    `stub.py` and works the same (the negative control of the test above: a broken source now fails)."""
    links = tmp_path / "links"
    stub = write_links(links, ["kid"]) / "kid"
    if code is None:
        (links / "stub.code").unlink()
    else:
        (links / "stub.code").write_bytes(code)
    done = subprocess.run([str(stub), "--help"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "usage: kid" in done.stderr, done
    (links / "stub.py").write_text("raise SystemExit(99)\n")
    assert subprocess.run([str(stub), "--help"], capture_output=True, timeout=30).returncode == 99
