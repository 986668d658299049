"""Messages between a launcher and its warm starter (pure encoding; no I/O).

Specification: ``spec/formation.md`` "The warm start path". The two ends share one
``AF_UNIX``/``SOCK_SEQPACKET`` socket pair: one message is one JSON object, and a request
carries the child's descriptors as ``SCM_RIGHTS`` (``socket.send_fds``).

Starter → launcher:

* ``{"ready": PID}`` once, when every import is done;
* ``{"started": ID, "pid": PID}`` or ``{"started": ID, "errno": N, "error": TEXT}`` for each
  request, in order (an ``exec`` refusal adds ``"stage"``: ``clone`` or ``place`` — the clone
  itself failed, or the child's set-up before its ``chdir``: start it another way — or ``chdir``/``setup``/``exec`` — the child failed before or
  at its ``execve``, as ``subprocess.Popen`` would raise it — and ``"filename"``);
* ``{"exited": PID, "status": S}`` when a child it forked has been reaped: ``S`` as
  ``os.waitstatus_to_exitcode`` gives it (``-N`` for signal ``N``).

Launcher → starter: ``{"start": ID, "argv": [...], "env": {...}, "cwd": PATH, "fds": [T, …],
"session": true|false, "pgid": G|null, "cgroup": PATH|null, "title": TEXT, "confinement": {...}|null}`` with one
descriptor per entry of ``fds``: descriptor ``i`` becomes number ``fds[i]`` in the child.

Launcher → starter: ``{"exec": ID, "argv": [...], "executable": PATH, "env": {...}, "cwd": PATH,
"fds": [T, …], "session": true|false, "pgid": G|null, "cgroup": PATH, "confinement": {...}|null}``
(:class:`ExecRequest`): clone a process straight into unit ``cgroup`` and ``execve`` the
command in it (spec/architecture.md "Where a process starts"); descriptors as for ``start``.
"""

from __future__ import annotations

import json
from typing import Any

import attrs

MAX_MESSAGE = 1 << 20
"""Bytes one message may hold (an environment of a few hundred KB fits)."""

MAX_FDS = 16


@attrs.frozen
class StartRequest:
    """One child to fork.

    Attributes:
        id (int): the request's number (echoed in its ``started`` answer).
        argv (tuple[str, ...]): the ``mur`` command line (``argv[0]`` the program; the child
            runs ``murmur.cli.mur.main(argv[1:])``).
        env (dict[str, str]): the child's whole environment.
        cwd (str): its working directory.
        fds (tuple[int, ...]): the descriptor number each passed descriptor gets.
        session (bool): ``setsid`` (a peer); otherwise it joins ``pgid``.
        pgid (int | None): the process group to join when not ``session`` (the launcher's).
        cgroup (str | None): the unit directory whose ``cgroup.procs`` it joins first.
        title (str): its process title (what ``ps`` shows).
        confinement (dict | None): the wire object of its confinement
            (:meth:`murmur.procs.Confinement.to_wire`), applied after the unit join; None: advisory.
    """

    id: int
    argv: tuple[str, ...]
    env: dict[str, str]
    cwd: str
    fds: tuple[int, ...]
    session: bool
    pgid: int | None
    cgroup: str | None
    title: str
    confinement: dict[str, Any] | None = None

    def encode(self) -> bytes:
        return json.dumps(
            {
                "start": self.id,
                "argv": list(self.argv),
                "env": self.env,
                "cwd": self.cwd,
                "fds": list(self.fds),
                "session": self.session,
                "pgid": self.pgid,
                "cgroup": self.cgroup,
                "title": self.title,
                "confinement": self.confinement,
            }
        ).encode()

    @classmethod
    def decode(cls, raw: bytes) -> StartRequest:
        """Raises ValueError for anything but a well-formed request."""
        msg = json.loads(raw)
        if not isinstance(msg, dict) or not isinstance(msg.get("start"), int):
            raise ValueError("not a start request")
        argv, env, fds = msg.get("argv"), msg.get("env"), msg.get("fds")
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise ValueError("argv")
        if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            raise ValueError("env")
        if not (isinstance(fds, list) and all(isinstance(f, int) and f >= 0 for f in fds)):
            raise ValueError("fds")
        pgid, cg, conf = msg.get("pgid"), msg.get("cgroup"), msg.get("confinement")
        if conf is not None and not isinstance(conf, dict):
            raise ValueError("confinement")
        return cls(
            id=msg["start"],
            argv=tuple(argv),
            env=dict(env),
            cwd=str(msg.get("cwd") or "/"),
            fds=tuple(fds),
            session=bool(msg.get("session")),
            pgid=pgid if isinstance(pgid, int) else None,
            cgroup=cg if isinstance(cg, str) else None,
            title=str(msg.get("title") or ""),
            confinement=conf,
        )


@attrs.frozen
class ExecRequest:
    """One command to clone straight into its unit and exec (no Python runs in it).

    Attributes:
        id (int): the request's number (echoed in its ``started`` answer).
        argv (tuple[str, ...]): the command's arguments (``argv[0]`` as it sees it).
        executable (str): the absolute path ``execve`` runs.
        env (dict[str, str]): its whole environment.
        cwd (str): its working directory.
        fds (tuple[int, ...]): the descriptor number each passed descriptor gets (each < 256).
        session (bool): ``setsid``; otherwise it joins ``pgid`` (when not None).
        pgid (int | None): the process group to join when not ``session``.
        cgroup (str): the unit directory it is cloned into (``CLONE_INTO_CGROUP``).
        confinement (dict | None): its confinement's wire object; its ``child_setup`` runs just
            before the ``execve``. None: advisory.
    """

    id: int
    argv: tuple[str, ...]
    executable: str
    env: dict[str, str]
    cwd: str
    fds: tuple[int, ...]
    session: bool
    pgid: int | None
    cgroup: str
    confinement: dict[str, Any] | None = None

    def encode(self) -> bytes:
        return json.dumps(
            {
                "exec": self.id,
                "argv": list(self.argv),
                "executable": self.executable,
                "env": self.env,
                "cwd": self.cwd,
                "fds": list(self.fds),
                "session": self.session,
                "pgid": self.pgid,
                "cgroup": self.cgroup,
                "confinement": self.confinement,
            }
        ).encode()

    @classmethod
    def decode_msg(cls, msg: dict[str, Any]) -> ExecRequest:
        """Raises ValueError for anything but a well-formed exec request."""
        if not isinstance(msg.get("exec"), int):
            raise ValueError("not an exec request")
        argv, env, fds = msg.get("argv"), msg.get("env"), msg.get("fds")
        if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
            raise ValueError("argv")
        if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
            raise ValueError("env")
        if not (isinstance(fds, list) and all(isinstance(f, int) and 0 <= f < 256 for f in fds)):
            raise ValueError("fds")
        exe, cg, conf, pgid = msg.get("executable"), msg.get("cgroup"), msg.get("confinement"), msg.get("pgid")
        if not (isinstance(exe, str) and exe.startswith("/")):
            raise ValueError("executable")
        if not (isinstance(cg, str) and cg.startswith("/")):
            raise ValueError("cgroup")
        if conf is not None and not isinstance(conf, dict):
            raise ValueError("confinement")
        return cls(
            id=msg["exec"],
            argv=tuple(argv),
            executable=exe,
            env=dict(env),
            cwd=str(msg.get("cwd") or "/"),
            fds=tuple(fds),
            session=bool(msg.get("session")),
            pgid=pgid if isinstance(pgid, int) else None,
            cgroup=cg,
            confinement=conf,
        )


def decode_request(raw: bytes) -> StartRequest | ExecRequest:
    """One launcher → starter request (ValueError when it is neither kind, or malformed)."""
    msg = json.loads(raw)
    if isinstance(msg, dict) and "exec" in msg:
        return ExecRequest.decode_msg(msg)
    return StartRequest.decode(raw)


def encode(msg: dict[str, Any]) -> bytes:
    """One starter → launcher message."""
    return json.dumps(msg).encode()


def decode(raw: bytes) -> dict[str, Any]:
    """One starter → launcher message (ValueError when it is not a JSON object)."""
    msg = json.loads(raw)
    if not isinstance(msg, dict):
        raise ValueError("not an object")
    return msg


def title(argv: tuple[str, ...] | list[str]) -> str:
    """The process title of a forked ``mur`` (``mur run --capsule …``: the program's name
    without its directory, then the arguments as given)."""
    return " ".join(["mur", *argv[1:]])
