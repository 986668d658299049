"""The escape attempts, as one script run in a real confined process (``python3 -c``).

Data, not code the runtime runs: :data:`SOURCE` is handed to the granted interpreter as ``python3 -c <text> <case> <outside-dir> <port> <workdir> <other-pid>``. Each attempt prints
one line, ``ESCAPED <what happened>`` when it reached past the grant or ``HELD <why not>``
when the kernel stopped it. Standard library only; works on the interpreter the sandbox
grants.
"""

SOURCE = r'''
import ctypes
import os
import socket
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
CASE, OUTSIDE, PORT, WORKDIR, OTHER = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWNET = 0x20000, 0x10000000, 0x40000000


def err() -> str:
    return os.strerror(ctypes.get_errno())


def private_ns(flags: int) -> None:
    # Give an unprivileged advisory run the namespace it needs, so the control can succeed.
    libc.unshare(flags | (0 if os.geteuid() == 0 else CLONE_NEWUSER))


def read_outside() -> str:
    with open(os.path.join(OUTSIDE, "secret.txt")) as f:
        return "read " + repr(f.read().strip())


def write_outside() -> str:
    path = os.path.join(OUTSIDE, f"written-{os.getpid()}")
    with open(path, "w") as f:
        f.write("x")
    os.unlink(path)
    return "wrote " + path


def exec_ungranted() -> str:
    pid = os.fork()
    if pid == 0:
        try:
            os.execv("/bin/true", ["true"])
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError("exec of /bin/true failed")
    return "ran /bin/true"


def exec_workdir() -> str:
    target = os.path.join(WORKDIR, "planted")
    with open("/proc/self/exe", "rb") as src:
        data = src.read()
    with open(target, "wb") as dst:
        dst.write(data)
    os.chmod(target, 0o755)
    pid = os.fork()
    if pid == 0:
        try:
            os.execv(target, ["planted", "-c", "pass"])
        finally:
            os._exit(127)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise OSError("exec of the planted copy failed")
    return "ran a binary written into the workdir"


def proc_other() -> str:
    with open(f"/proc/{OTHER}/environ", "rb") as f:
        return f"read another process's environ ({len(f.read())} bytes)"


def ptrace() -> str:
    pid = os.fork()
    if pid == 0:
        time.sleep(5)
        os._exit(0)
    try:
        rc = libc.ptrace(16, pid, None, None)  # PTRACE_ATTACH
        if rc != 0:
            raise OSError(err())
        os.waitpid(pid, 0)
        libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
        return "attached to another process with ptrace"
    finally:
        os.kill(pid, 9)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass


def mount() -> str:
    private_ns(CLONE_NEWNS)
    libc.mount(None, b"/", None, ctypes.c_ulong(16384 | (1 << 18)), None)
    if libc.mount(b"tmpfs", WORKDIR.encode(), b"tmpfs", ctypes.c_ulong(0), None) != 0:
        raise OSError(err())
    return "mounted a tmpfs"


def userns() -> str:
    if libc.unshare(CLONE_NEWUSER) != 0:
        raise OSError(err())
    return "made a new user namespace"


def raw_socket() -> str:
    private_ns(CLONE_NEWNET)
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.close()
    return "opened a raw socket"


def connect_port() -> str:
    with socket.create_connection(("127.0.0.1", PORT), timeout=3) as s:
        return f"connected to ungranted loopback port {PORT} ({s.recv(16)!r})"


def connect_name() -> str:
    reached: list[str] = []
    direct: OSError | None = None
    try:
        with socket.create_connection(("localhost", PORT), timeout=3):
            reached.append("directly")
    except OSError as exc:
        direct = exc
    proxy = os.environ.get("HTTPS_PROXY")
    if proxy:
        host, port = proxy.rsplit("/", 1)[-1].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=3) as s:
            s.sendall(f"CONNECT localhost:{PORT} HTTP/1.1\r\nHost: localhost\r\n\r\n".encode())
            if b" 200 " in s.recv(256).split(b"\r\n", 1)[0] + b" ":
                reached.append("through the proxy")
    if not reached:
        raise OSError(f"direct: {direct}; proxy refused")
    return "reached ungranted host `localhost` " + " and ".join(reached)


def setuid() -> str:
    import subprocess
    out = subprocess.run(["suid-id", "-u"], capture_output=True, text=True)
    if out.returncode != 0:
        raise OSError(out.stderr.strip() or "suid-id failed")
    if int(out.stdout) == os.geteuid():
        raise OSError(f"the setuid bit was ignored (euid stayed {os.geteuid()})")
    return f"a setuid binary ran as uid {out.stdout.strip()}"


def fork_bomb() -> str:
    children, failed = [], None
    try:
        for _ in range(200):
            try:
                pid = os.fork()
            except OSError as exc:
                failed = exc
                break
            if pid == 0:
                time.sleep(3)
                os._exit(0)
            children.append(pid)
    finally:
        for pid in children:
            os.kill(pid, 9)
        for pid in children:
            os.waitpid(pid, 0)
    if failed is not None:
        raise OSError(f"fork failed after {len(children)} processes: {failed.strerror}")
    return f"started {len(children)} processes"


def memory_balloon() -> str:
    block = bytearray(1 << 30)  # untouched: an address-space ceiling refuses the mapping itself
    return f"mapped {len(block) >> 20} MiB"


try:
    print("ESCAPED", globals()[CASE.replace("-", "_")]())
except (OSError, MemoryError) as exc:
    print("HELD", f"{type(exc).__name__}: {exc}")
'''
