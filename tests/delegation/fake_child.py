"""A stand-in for `mur run` started by the launcher in tests: `fake_child.py MODE REPORT run …`.

It reads its stdin to EOF, writes what it was given (environment, argv, cwd, whether stdin
held an approval-shaped token, whether its lifeline is a pipe — never the token) to REPORT,
then behaves as MODE says.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, REPORT = sys.argv[1], sys.argv[2]
delivered = threading.Event()


def initial_environment() -> dict[str, str]:
    """The environment this process was started with (Python may add LC_CTYPE to os.environ)."""
    with open("/proc/self/environ", "rb") as fh:
        raw = fh.read()
    pairs = [item.split(b"=", 1) for item in raw.split(b"\0") if item]
    return {k.decode(): v.decode() for k, v in pairs}


def report() -> None:
    data = sys.stdin.buffer.read()
    life = os.environ.get("MURMUR_SPAWNER_LIFELINE", "")
    try:
        life_ok = stat.S_ISFIFO(os.fstat(int(life)).st_mode)
    except (ValueError, OSError):
        life_ok = False
    info = {
        "env": initial_environment(),
        "approval_ok": data.startswith(b"msa1.") and data.count(b"\n") == 0,
        "argv": sys.argv[3:],
        "cwd": os.getcwd(),
        "lifeline_ok": life_ok,
        "pid": os.getpid(),
    }
    tmp = REPORT + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(info, fh)
    os.replace(tmp, REPORT)


def forever() -> None:
    while True:
        time.sleep(3600)


class Door(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if body["method"] == "SendMessage":
            self.server.task_text = body["params"]["message"]["parts"][0]["text"]  # type: ignore[attr-defined]
            state = "TASK_STATE_REJECTED" if MODE == "serve-reject" else "TASK_STATE_SUBMITTED"
            status: dict[str, object] = {"state": state}
            if MODE == "serve-reject":
                status["message"] = {"role": "ROLE_AGENT", "parts": [{"text": "task rejected: capsule is busy"}]}
            result: dict[str, object] = {"task": {"id": "tsk_fake", "status": status}}
        else:  # GetTask
            if MODE == "serve-answer":
                text = "fake answer: " + self.server.task_text  # type: ignore[attr-defined]
                result = {"id": "tsk_fake", "status": {"state": "TASK_STATE_COMPLETED"},
                          "artifacts": [{"artifactId": "response", "parts": [{"text": text}]}]}
            else:
                result = {"id": "tsk_fake", "status": {"state": "TASK_STATE_WORKING"}}
        out = json.dumps({"jsonrpc": "2.0", "id": body.get("id"), "result": result}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
        self.wfile.flush()
        if body["method"] == "SendMessage":
            # Only after the answer is on the wire: a serve-exit child must not end before
            # its caller has heard that the task was taken.
            delivered.set()


def ready(url: str, records_dir: str | None = None) -> None:
    line = {"session_id": "ses_" + "f" * 32, "url": url, "name": "worker", "version": "0.1.0"}
    if records_dir is not None:
        line["records_dir"] = records_dir
    print(json.dumps(line), flush=True)


def main() -> None:
    report()
    if MODE == "exit-early":
        print("boom: no capsule", file=sys.stderr, flush=True)
        sys.exit(3)
    if MODE == "garbage":
        print("hello", flush=True)
        forever()
    if MODE == "nodoor":
        print(json.dumps({"session_id": "ses_" + "f" * 32}), flush=True)
        forever()
    if MODE == "silent":
        forever()
    if MODE == "door-refuses":
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        ready(f"http://127.0.0.1:{port}")
        forever()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Door)
    server.task_text = ""  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    if MODE == "serve-stubborn":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    records = os.path.join(os.getcwd(), ".murmur", "ses_fake")
    ready(f"http://127.0.0.1:{server.server_address[1]}", records)
    if MODE == "serve-exit":  # answers in its result file, then ends before anyone asked
        delivered.wait()
        os.makedirs(os.path.join(records, "out"))
        with open(os.path.join(records, "out", "result_tsk_fake.txt"), "w") as fh:
            fh.write("from the file: " + server.task_text + "\n")  # type: ignore[attr-defined]
        os._exit(0)
    if MODE == "serve-crash":
        delivered.wait()
        time.sleep(0.1)
        print("fatal: lost", file=sys.stderr, flush=True)
        os._exit(3)
    forever()


if __name__ == "__main__":
    main()
