"""The links directory: one stub per spawn-set name, plus ``mur`` (spec/links.md "Stubs").

Layout (inside the session's owner-only records directory)::

    links/          0700
      cap.sock      the capability socket (murmur.links.service)
      context.md    the ``mur context`` text
      bin/          0700, first on PATH of every command the session starts
        NAME        one stub per name in capabilities.spawn.allow
        mur         ``mur context``, ``mur ps --tree``

A stub is a plain-interpreter script (``python3 -I -S``: no site, no environment read) that
holds its own name and the absolute links directory — never a token — so it works with a
cleared environment (``env -i /…/links/bin/NAME …``). Its body, shared by every stub, is
``links/stub.py``, and ``links/stub.code`` the same body compiled once when the links are
written (``marshal``, headed by the interpreter's ``sys.hexversion``): a stub runs the code
object and compiles the source only when the code file is missing or from another
interpreter, so no call pays the compile. The body imports only C modules (``posix``, not
``os``, whose ``_collections_abc`` and ``posixpath`` cost a quarter of the interpreter's start;
``_socket``, ``_signal``, ``_json``: its JSON line is written with
``_json.encode_basestring_ascii`` and the answer read with ``_json.make_scanner``), so it
starts within twice the bare interpreter's time (``benchmarks/links.py``). It reaches the
socket by a relative path after ``chdir`` into the links directory, so the socket path's
length never matters.
"""

from __future__ import annotations

import marshal
import os
import sys
from collections.abc import Iterable
from pathlib import Path

from murmur.links.protocol import EXIT_INTERRUPTED, EXIT_REFUSED, EXIT_USAGE, SOCKET_NAME, TOO_MANY

MUR_LINK = "mur"


def interpreter() -> str:
    """The plain interpreter stubs run under (the base Python, not a venv wrapper)."""
    base = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(base)


_BODY = r'''
import _json, _signal, _socket, posix, sys
_enc = _json.encode_basestring_ascii
class _Ctx:
    strict, object_hook, object_pairs_hook, parse_constant = True, None, None, None
    parse_float, parse_int, memo = float, int, {}
def _dumps(obj):
    if obj is None:
        return "null"
    if obj is True or obj is False:
        return "true" if obj else "false"
    if isinstance(obj, str):
        return _enc(obj)
    return "{" + ", ".join(_enc(k) + ": " + _dumps(v) for k, v in obj.items()) + "}"
def _loads(text):
    obj, end = _json.make_scanner(_Ctx())(text.strip(), 0)
    if not isinstance(obj, dict):
        raise ValueError("not an object")
    return obj
def _stop(signum, frame):
    raise KeyboardInterrupt
def _usage(code):
    if NAME == "mur":
        sys.stderr.write("usage: mur context | mur ps --tree [--json] | mur agent who [--can BINARY] [--json]   (inside a capsule session)\n")
    else:
        sys.stderr.write("usage: %%s [--capsule-version V] [--json] [TASK...]   (TASK from stdin when no arguments)\n" %% NAME)
    return code
def _option_shaped(word):
    name = (word[2:] if word.startswith("--") else word[1:]).split("=", 1)[0]
    return name[:1].isalpha() and not any(c.isspace() for c in word)
def _request(argv):
    if NAME == "mur":
        if argv[:1] == ["context"]:
            return {"op": "context"}
        if argv[:1] == ["ps"]:
            return {"op": "ps", "json": "--json" in argv}
        if argv[:2] == ["agent", "who"]:
            rest, can = argv[2:], None
            for i, word in enumerate(rest):
                if word == "--can" and i + 1 < len(rest):
                    can = rest[i + 1]
                elif word.startswith("--can="):
                    can = word.split("=", 1)[1]
            return {"op": "who", "can": can, "json": "--json" in rest}
        return None
    version, as_json = None, False
    while argv and argv[0].startswith("-"):
        head = argv[0]
        if head == "--":
            argv = argv[1:]
            break
        if head == "--capsule-version" and len(argv) > 1:
            version, argv = argv[1], argv[2:]
        elif head.startswith("--capsule-version="):
            version, argv = head.split("=", 1)[1], argv[1:]
        elif head == "--json":
            as_json, argv = True, argv[1:]
        elif head in ("-h", "--help"):
            return "help"
        elif _option_shaped(head):
            return ("unknown", head)
        else:
            break
    if argv:
        task = " ".join(argv)
    elif posix.isatty(0):
        return None
    else:
        task = sys.stdin.read()
    req = {"op": "link", "name": NAME, "version": version, "task": task, "json": as_json}
    parent = posix.environ.get(b"TRACEPARENT")
    if parent:  # the calling command's span: the child joins its trace
        req["traceparent"] = parent.decode("utf-8", "surrogateescape")[:128]
    return req
def main():
    req = _request(sys.argv[1:])
    if req == "help":
        return _usage(0)
    if isinstance(req, tuple):
        sys.stderr.write("%%s: unknown option %%s (put -- before a task that starts with -)\n" %% (NAME, req[1]))
        return _usage(%(usage)d)
    if req is None:
        return _usage(%(usage)d)
    for sig in (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP):
        _signal.signal(sig, _stop)
    s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        posix.chdir(LINKS)
        s.connect("%(sock)s")
        try:
            s.sendall(_dumps(req).encode() + b"\n")
        except (BrokenPipeError, ConnectionResetError):
            pass  # the runtime answered (a refusal) and closed first: its line is still to read
        data = b""
        while not data.endswith(b"\n"):
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                if data:
                    break
                raise
            if not chunk:
                break
            data += chunk
    except KeyboardInterrupt:
        s.close()
        sys.stderr.write("%%s: interrupted; the child's subtree is being ended\n" %% NAME)
        return %(intr)d
    except OSError as exc:
        sys.stderr.write("%%s: murmur: the session's capability socket cannot be reached (%%s)\n" %% (NAME, exc.strerror or exc))
        return %(refused)d
    try:
        answer = _loads(data.decode("utf-8"))
    except (ValueError, StopIteration):
        text = data.decode("utf-8", "replace").strip() or "%(too_many)s"
        sys.stderr.write(text + "\n")
        return %(refused)d
    sys.stdout.write(answer.get("stdout", ""))
    sys.stdout.flush()
    sys.stderr.write(answer.get("stderr", ""))
    return int(answer.get("exit", %(refused)d))
try:
    sys.exit(main())
except KeyboardInterrupt:
    sys.stderr.write("%%s: interrupted\n" %% NAME)
    sys.exit(%(intr)d)
''' % {  # noqa: UP031 - the body holds braces; %-substitution keeps it readable
    "usage": EXIT_USAGE, "sock": SOCKET_NAME, "intr": EXIT_INTERRUPTED, "refused": EXIT_REFUSED,
       "too_many": TOO_MANY}


def command_name(name: str) -> str:
    """The link's command for a spawn.allow name: a scoped ``local/kid`` is ``kid`` (pure)."""
    return name.rsplit("/", 1)[-1]


BODY_FILE = "stub.py"
CODE_FILE = "stub.code"

_LOADER = f'''import marshal, sys
try:
    with open(LINKS + "/{CODE_FILE}", "rb") as _f:
        _head, _, _code = _f.read().partition(b"\\n")
    if _head != b"%d" % sys.hexversion:
        raise ValueError("compiled by another interpreter")
    _code = marshal.loads(_code)
except (OSError, ValueError, EOFError, TypeError):
    with open(LINKS + "/{BODY_FILE}", "rb") as _f:
        _code = compile(_f.read(), LINKS + "/{BODY_FILE}", "exec")
exec(_code)
'''


def stub_text(name: str, links: Path, python: str) -> str:
    """The stub script for ``name`` (pure): its shebang, its two constants, and the loader that
    runs the shared body (``links/stub.code``, else ``links/stub.py``)."""
    return (f"#!{python} -IS\n# murmur capsule link for {name!r} (generated; holds no secret)\n"
            f"NAME = {name!r}\nLINKS = {str(links)!r}\n{_LOADER}")


def body_code(python: str) -> bytes | None:
    """``links/stub.code``: the body compiled by this interpreter, headed by its
    ``sys.hexversion`` line; None when ``python`` (the stubs' interpreter) is not this
    interpreter's version (the stubs then compile ``stub.py`` themselves)."""
    try:
        ran = python == interpreter() or os.path.samefile(python, interpreter())
    except OSError:
        ran = False
    if not ran:
        return None
    return b"%d\n" % sys.hexversion + marshal.dumps(compile(_BODY, BODY_FILE, "exec"))


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def write_links(links: Path, names: Iterable[str], *, python: str | None = None) -> Path:
    """Create ``links/`` and ``links/bin/`` (0700) with one stub per name plus ``mur``.

    Returns:
        Path: the ``bin/`` directory (to put first on ``PATH``).

    Raises:
        OSError: the directory cannot be written.
    """
    python = python or interpreter()
    binary = links / "bin"
    for d in (links, binary):
        d.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(d, 0o700)
    _write(links / BODY_FILE, _BODY.encode("utf-8"), 0o600)
    code = body_code(python)
    if code is not None:
        _write(links / CODE_FILE, code, 0o600)
    else:
        (links / CODE_FILE).unlink(missing_ok=True)
    written: set[str] = set()
    for name in [*names, MUR_LINK]:
        command = command_name(name)
        if command in written:
            continue  # `a/kid` and `b/kid` are both `kid`: the first listed keeps the command
        written.add(command)
        _write(binary / command, stub_text(name, links, python).encode("utf-8"), 0o700)
    return binary
