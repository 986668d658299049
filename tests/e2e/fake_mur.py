"""A stand-in for ``mur run`` as a formation member, for launcher e2e tests.

It does only what the launcher can observe of a member: reads and checks its formation
channel's first line, serves a minimal agent card naming its session on 127.0.0.1, prints a
``--json`` readiness line, watches its lifeline and winds down on EOF (or SIGTERM; a second
SIGTERM exits 143 at once). Everything it does is appended, one JSON object per line, to
``$FAKE_MUR_LOG`` (the test's stand-in for trace files).

Per-member behaviour comes from ``$FAKE_MUR_PLAN``: a JSON object ``{member: {...}}`` with
keys (all optional):

* ``report``: ``ok`` (default) | ``never`` | ``garbage`` | ``exit:<n>`` (exit before reporting)
* ``door``: ``ok`` (default) | ``never`` (the card never names the session)
* ``delay``: seconds to sleep before reporting
* ``on_lifeline``: ``exit`` (default) | ``ignore`` (ignores EOF and SIGTERM: needs SIGKILL) |
  ``hang`` (winds down but exits 143 only ``hang_after`` seconds later, default 20)
* ``task_seconds`` / ``task_exit``: with ``--task``, run that long then exit with that status
* ``grandchild``: start ``sleep 600`` in the member's process group (a shell command's stand-in)
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG = os.environ.get("FAKE_MUR_LOG", "")
CHILDREN: list[subprocess.Popen[bytes]] = []
T0 = time.time()


def log(member: str, event: str, **extra: object) -> None:
    if not LOG:
        return
    rec = {"member": member, "pid": os.getpid(), "event": event, "t": time.time(), **extra}
    fd = os.open(LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, (json.dumps(rec) + "\n").encode())
    finally:
        os.close(fd)


def say(text: str) -> None:
    try:
        sys.stderr.write(text + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def arg(argv: list[str], flag: str) -> str | None:
    if flag in argv:
        i = argv.index(flag)
        return argv[i + 1] if i + 1 < len(argv) else ""
    return None


def read_first_line(fd: int, timeout: float = 10.0) -> bytes:
    buf = b""
    end = time.monotonic() + timeout
    while b"\n" not in buf:
        left = end - time.monotonic()
        if left <= 0:
            raise SystemExit("fake_mur: no first channel line within 10 s")
        ready, _, _ = select.select([fd], [], [], left)
        if not ready:
            continue
        chunk = os.read(fd, 1)  # byte by byte: later lines stay in the pipe
        if not chunk:
            raise SystemExit("fake_mur: channel closed before its first line")
        buf += chunk
    return buf


def main() -> int:
    argv = sys.argv[1:]
    formation = os.environ.get("MURMUR_FORMATION_ID", "")
    chan_fd = int(os.environ["MURMUR_FORMATION_CHANNEL"])
    life_fd = int(os.environ["MURMUR_FORMATION_LIFELINE"])
    first = read_first_line(chan_fd)
    creds = json.loads(first)
    name = creds["member"]
    if creds["formation_id"] != formation:
        say("fake_mur: channel names another formation")
        return 1
    plan = json.loads(os.environ.get("FAKE_MUR_PLAN", "{}")).get(name, {})
    session = "ses_" + uuid.uuid4().hex
    entry = arg(argv, "--lifecycle-task-acceptance") is not None
    log(name, "start", argv=argv, entry=entry, calls=[c["name"] for c in creds["calls"]],
        env={k: v for k, v in os.environ.items() if k.startswith("MURMUR_")})

    ending = threading.Event()
    sigterms = [0]

    def on_term(signum: int, _frame: object) -> None:
        sigterms[0] += 1
        if plan.get("on_lifeline") == "ignore":
            log(name, "sigterm_ignored")
            return
        if sigterms[0] > 1:
            log(name, "exit", code=143, why="second_sigterm")
            os._exit(143)
        log(name, "sigterm")
        ending.set()

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    def watch_lifeline() -> None:
        while True:
            try:
                data = os.read(life_fd, 1024)
            except InterruptedError:
                continue
            except OSError:
                data = b""
            if not data:
                break
        log(name, "lifeline_eof")
        if plan.get("on_lifeline") != "ignore":
            ending.set()

    def read_later_lines() -> None:
        buf = b""
        while True:
            try:
                chunk = os.read(chan_fd, 65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                log(name, "channel_line", line=json.loads(line))

    threading.Thread(target=watch_lifeline, daemon=True).start()
    threading.Thread(target=read_later_lines, daemon=True).start()

    if plan.get("grandchild"):
        gc = subprocess.Popen(["sleep", "600"])
        CHILDREN.append(gc)
        log(name, "grandchild", grandchild=gc.pid)

    class Card(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            sid = session if plan.get("door", "ok") == "ok" else "ses_" + "0" * 32
            body = json.dumps({"name": name, "capabilities": {"extensions": [
                {"uri": "https://x/#murmur-capsule-v1", "params": {"sessionId": sid}}]}}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Card)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]

    time.sleep(float(plan.get("delay", 0)))
    report = plan.get("report", "ok")
    if report.startswith("exit:"):
        say(f"fake_mur: {name} failing on purpose")
        log(name, "exit", code=int(report[5:]), why="before_report")
        return int(report[5:])
    if report == "garbage":
        print("this is not a readiness line", flush=True)
    elif report == "ok" and ("--json" in argv):
        line = {"name": name, "version": "0.1.0", "pid": os.getpid(), "session_id": session,
                "url": f"127.0.0.1:{port}", "workdir": arg(argv, "--workdir"),
                "formation_id": formation}
        print(json.dumps(line), flush=True)
    log(name, "ready", url=f"http://127.0.0.1:{port}", session_id=session)
    say(f"fake_mur: {name} serving")

    task = arg(argv, "--task")
    if task is not None:
        if ending.wait(float(plan.get("task_seconds", 0.2))):
            return wind_down(name, plan, canceled=True)
        code = int(plan.get("task_exit", 0))
        log(name, "exit", code=code, why="task_done")
        return code
    ending.wait()
    return wind_down(name, plan, canceled=False)


def wind_down(name: str, plan: dict[str, object], *, canceled: bool) -> int:
    log(name, "winding_down", canceled=canceled)
    for child in CHILDREN:  # as a session cancels its shell commands
        child.kill()
        child.wait()
    if plan.get("on_lifeline") == "hang":
        time.sleep(float(plan.get("hang_after", 20.0)))  # type: ignore[arg-type]
        log(name, "exit", code=143, why="guard")
        return 143
    log(name, "exit", code=0, why="wound_down")
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
