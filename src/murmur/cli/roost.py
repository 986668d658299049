"""``mur-roost``: the spawn-authority daemon's command line (spec/roost.md, "Starting it").

Flags, exactly these and no others::

    --port N                 port on 127.0.0.1 (default 7700; 0 lets the OS choose)
    --registry-path PATH     artifact store resolved from (default $MURMUR_HOME/artifacts)
    --spawn-allow NAME       one capsule name per occurrence; repeatable; =NAME accepted
    --max-depth N            default 3
    --max-concurrent N       default 4
    --max-live-capsules N    default: cores x 8, clamped to 16..256
    --die-with-parent[=PID]  stop (as on SIGTERM) when the process that started this one
                           dies; =PID names it (our addition, spec/roost.md)
  --version                print the version and exit without binding
    --help, -h               print the flag table and exit without binding

Every flag also takes ``--flag=value``. Numbers are whole (``0`` refuses every delegation).
Any other argument prints ``unknown argument: <arg>`` and exits 2 without binding. Once
bound the daemon prints two lines (``listening on``, ``machine ceiling``) and serves until
SIGINT or SIGTERM (graceful; exit 0); a second signal exits 143 at once.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

import attrs
import trio

from murmur import __version__, paths
from murmur.diagnostics import EXIT_SIGTERM, EXIT_USAGE, error
from murmur.errors import DiagnosticError, UsageError

__all__ = ["RoostOptions", "machine_ceiling", "main", "parse_args"]

PROGRAM = "mur-roost"
USAGE = (
    "usage: mur-roost [--port N] [--registry-path PATH] [--spawn-allow NAME]... "
    "[--max-depth N] [--max-concurrent N] [--max-live-capsules N] [--die-with-parent[=PID]] [--version]"
)
HELP = f"""\
{USAGE}

mur-roost referees delegation: a capsule asks it before spawning a child capsule.

flags (each also takes --flag=value):
  --port N                 TCP port on 127.0.0.1 (default 7700; 0: the OS picks one)
  --registry-path PATH     the artifact store child manifests are resolved from
                           (default $MURMUR_HOME/artifacts, i.e. ~/.murmur/artifacts)
  --spawn-allow NAME       a capsule that may register with no approval; one per flag,
                           repeat for more (default: none)
  --max-depth N            bounds delegation levels below a top-level capsule (default 3)
  --max-concurrent N       bounds children one session holds live at once (default 4)
  --max-live-capsules N    bounds capsules live at once across everything
                           (default: cores x 8, clamped to 16..256)
  --die-with-parent[=PID]  stop (as on SIGTERM) when the process that started this one
                           dies; =PID names it (our addition, spec/roost.md)
  --version                print the version and exit without binding
  --help, -h               print this table and exit without binding

Bounds are whole numbers; 0 refuses every delegation. Any other argument is
`unknown argument: X` (exit 2). SIGINT/SIGTERM stop it gracefully (exit 0)."""
_VALUE_FLAGS = ("--port", "--registry-path", "--spawn-allow", "--max-depth", "--max-concurrent", "--max-live-capsules")


def machine_ceiling(cores: int | None) -> int:
    """The default ``--max-live-capsules``: ``cores x 8`` clamped to 16..256.

    Args:
        cores (int | None): the host's core count (None when unknown; counted as 1).
    """
    return max(16, min(256, (cores or 1) * 8))


@attrs.frozen
class RoostOptions:
    """Parsed ``mur-roost`` flags. ``max_live_capsules`` None means "derive from the cores"."""

    port: int = 7700
    registry_path: Path | None = None
    spawn_allow: tuple[str, ...] = ()
    max_depth: int = 3
    max_concurrent: int = 4
    max_live_capsules: int | None = None
    version: bool = False
    help: bool = False
    die_with_parent: int | None = None  # 0: whichever process is the parent now


class UnknownArgument(Exception):
    """An argument that is not one of the daemon's flags."""

    def __init__(self, argument: str) -> None:
        super().__init__(f"unknown argument: {argument}")
        self.argument = argument


def _flag_error(message: str, hint: str | None = None) -> UsageError:
    return UsageError(error("E-RST-001", message, hint=hint or USAGE))


def _whole_number(flag: str, text: str) -> int:
    if not text.isascii() or not text.isdigit():
        raise _flag_error(f"{flag} takes a whole number, not '{text}'", "use 0 or a positive integer")
    value = int(text)
    if flag == "--port" and value > 65535:
        raise _flag_error(f"--port takes a port number from 0 to 65535, not {value}")
    return value


def parse_args(argv: Sequence[str]) -> RoostOptions:
    """Parse the daemon's flags.

    Args:
        argv (Sequence[str]): the arguments after the program name.

    Returns:
        RoostOptions: the options.

    Raises:
        UnknownArgument: for any argument that is not one of the flags.
        UsageError: ``E-RST-001`` for a missing or invalid value.
    """
    values: dict[str, object] = {}
    allow: list[str] = []
    version = False
    wants_help = False
    i = 0
    while i < len(argv):
        arg = argv[i]
        flag, eq, inline = arg.partition("=")
        if flag == "--version" and not eq:
            version = True
            i += 1
            continue
        if flag == "--die-with-parent":  # our addition (spec/roost.md): no value, or =PID
            if eq and not (inline.isascii() and inline.isdigit() and int(inline) > 0):
                raise _flag_error(f"--die-with-parent=PID takes a process id, not '{inline}'",
                                  "give the parent's pid, or no value for whichever process started this one")
            values["die_with_parent"] = int(inline) if eq else 0
            i += 1
            continue
        if arg in ("--help", "-h"):  # beside spec/roost.md's flags: print the table
            wants_help = True
            i += 1
            continue
        if flag not in _VALUE_FLAGS:
            raise UnknownArgument(flag if arg.startswith("--") else arg)
        if eq:
            value = inline
        elif i + 1 < len(argv):
            i += 1
            value = argv[i]
        else:
            raise _flag_error(f"{flag} needs a value")
        i += 1
        if not value:
            raise _flag_error(f"{flag} needs a value")
        if flag == "--spawn-allow":
            if "," in value:
                raise _flag_error(
                    f"--spawn-allow takes one capsule name per occurrence, not the list '{value}'",
                    "repeat the flag: --spawn-allow a --spawn-allow b",
                )
            from murmur.jsonbody import loggable
            from murmur.manifest import is_capsule_name

            if not is_capsule_name(value):
                raise _flag_error(
                    f"--spawn-allow '{loggable(value)}' is not a capsule name, so no capsule could "
                    "ever register under it",
                    "a capsule name is lowercase letters, digits and '-', starting with a letter "
                    "(the `name` in its murmur.yaml)",
                )
            allow.append(value)
        elif flag == "--registry-path":
            values["registry_path"] = Path(value)
        else:
            values[flag[2:].replace("-", "_")] = _whole_number(flag, value)
    return RoostOptions(spawn_allow=tuple(allow), version=version, help=wants_help, **values)  # type: ignore[arg-type]


def _bind_failure(exc: BaseException) -> OSError | None:
    """The OSError inside a (possibly grouped) startup failure."""
    if isinstance(exc, OSError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _bind_failure(inner)
            if found is not None:
                return found
    return None


async def serve_daemon(opts: RoostOptions, *, out: TextIO | None = None) -> int:
    """Run the daemon until SIGINT/SIGTERM.

    Args:
        opts (RoostOptions): the parsed flags.
        out (TextIO | None): a file for the two startup lines (default: stdout).

    Returns:
        int: 0 after a graceful shutdown.

    Raises:
        DiagnosticError: ``E-RST-002`` when the port cannot be bound.
    """
    from murmur.roost import (
        Bounds,
        ProcessWatch,
        StoreRegistry,
        create_app,
        hypercorn_config,
        serve,
    )

    stream = out if out is not None else sys.stdout
    ceiling = opts.max_live_capsules
    if ceiling is None:
        ceiling = machine_ceiling(os.cpu_count())
    registry_path = opts.registry_path or paths.global_store()
    watch = ProcessWatch()
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        if opts.die_with_parent is not None:  # the receiver is open: the signal is a stop
            from murmur.parentdeath import die_with_parent

            die_with_parent(opts.die_with_parent or None)
        app = create_app(
            bounds=Bounds(opts.max_depth, opts.max_concurrent, ceiling),
            spawn_allow=opts.spawn_allow,
            registry=StoreRegistry(registry_path),
            environ=dict(os.environ),
            watch=watch,
            notice=_notice,
        )
        stop = trio.Event()
        failure: OSError | None = None
        async with trio.open_nursery() as nursery:
            await nursery.start(watch.run)
            serve_fn = partial(serve, app, hypercorn_config(opts.port), stop.wait)
            try:
                binds = await nursery.start(_serve_then_end, serve_fn, nursery.cancel_scope)
            except BaseException as exc:  # hypercorn may group the bind error
                failure = _bind_failure(exc)
                if failure is None:
                    raise
                nursery.cancel_scope.cancel()
            else:
                _freeze_startup()  # before the line a client waits for, so none waits on it
                port = urlsplit(binds[0]).port
                print(f"{PROGRAM}: listening on 127.0.0.1:{port}", file=stream, flush=True)
                print(
                    f"{PROGRAM}: machine ceiling {ceiling} live capsules (--max-live-capsules)",
                    file=stream,
                    flush=True,
                )
                if not registry_path.is_dir():
                    print(
                        f"{PROGRAM}: warning: the registry path {registry_path} does not exist; "
                        "every resolve will fail until capsules are installed there",
                        file=sys.stderr,
                        flush=True,
                    )
                nursery.start_soon(_watch_signals, signals, stop)
    if failure is not None:
        raise DiagnosticError(
            error(
                "E-RST-002",
                f"mur-roost cannot listen on 127.0.0.1:{opts.port}: {failure.strerror or failure}",
                hint="another process holds the port; stop it or pass --port",
            )
        )
    return 0


def _notice(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _serve_then_end(
    serve_fn: Callable[..., Awaitable[None]],
    scope: trio.CancelScope,
    *,
    task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve; once the graceful shutdown has drained, end the signal watcher too."""
    await serve_fn(task_status=task_status)
    scope.cancel()


async def _watch_signals(signals: AsyncIterator[int], stop: trio.Event) -> None:
    async for _ in signals:
        if stop.is_set():
            sys.stdout.flush()
            os._exit(EXIT_SIGTERM)  # a second signal: now
        stop.set()


def run(argv: Sequence[str]) -> int:
    """Parse, then print the version or serve; returns the exit status."""
    try:
        opts = parse_args(argv)
    except UnknownArgument as exc:
        print(str(exc), file=sys.stderr)
        print(USAGE, file=sys.stderr, flush=True)
        return EXIT_USAGE
    if opts.help:
        print(HELP, flush=True)
        return 0
    if opts.version:
        print(f"{PROGRAM} {__version__}", flush=True)
        return 0
    return trio.run(serve_daemon, opts)


def _freeze_startup() -> None:
    """Move what starting the daemon built (modules, classes, functions: about 60,000
    objects, alive as long as the process) out of the collector's sight, so that no full
    collection -- which stops every request while it runs -- scans them again."""
    gc.collect()
    gc.freeze()


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``mur-roost`` console script."""
    from murmur.cli._common import guarded

    args = list(sys.argv[1:] if argv is None else argv)
    return guarded(lambda: run(args), program=PROGRAM)
