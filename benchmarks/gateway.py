"""The inference gateway's cost: a scripted provider called directly and through the gateway.

Usage: ``python benchmarks/gateway.py [--requests N] [--no-spend-files] [--first-byte-ms MS]``.
The targets are read against the default run (the provider answers at once, so the gateway's
cost is the largest share it can be); ``--first-byte-ms`` delays the provider's streamed
replies as a model's first token is delayed, to show the same cost against a realistic floor.

Topology, as deployed: three processes on this host. The measuring client (this process, httpx,
as the built-in drivers are) is the tree's root session; the gateway runs in a process of its
own (as it runs in the root ``mur run`` while its callers, agent CLIs and child sessions, are
other processes) and places its caller, this process, by ``/proc``; the scripted provider (raw
HTTP/1.1 on loopback, keep-alive, a fixed Messages API reply, plain or as Server-Sent Events)
runs in a third process (a provider is remote). Direct and via calls are interleaved in one run,
so drift hits both alike. Prints medians and ratios to the same-run direct floor:

* plain and streaming, 1 stream: per-call latency p50/p99, direct and via the gateway, and
  the added latency; streaming time to first byte;
* 64 concurrent streams (each client holding 64 open connections first, so that httpx's pool
  does not queue): calls per second, direct and via, and their ratio, with the CPU time per
  call of the client and of the gateway;
* the gateway process's CPU time per call (from ``/proc/<pid>/schedstat``: load-independent).

The gateway persists each node's spend file after every charged call, as under ``mur run``
(into a scratch ``MURMUR_HOME``), so the figures include that write (``--no-spend-files``
leaves it out, to see its share). Targets (issue 27): added p50 <= 1 ms, p99 <= 5 ms,
TTFB <= 1.1x direct, 64-stream throughput >= 0.9x direct.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from functools import partial

import httpx
import trio

from murmur import procstat
from murmur.gateway import Gateway, KeyTable, Node, Tree, base_url, run_gateway, write_spend

TOPOLOGY = "client (httpx, this process) -> gateway (own process) -> provider (own process)"

_REPLY = {"id": "msg_1", "type": "message", "role": "assistant", "model": "bench",
          "content": [{"type": "text", "text": "x" * 200}], "stop_reason": "end_turn",
          "usage": {"input_tokens": 10, "output_tokens": 20}}


def _sse() -> bytes:
    events = [("message_start", {"type": "message_start", "message": {**_REPLY, "content": [],
                                                                       "usage": {"input_tokens": 10, "output_tokens": 1}}})]
    events += [("content_block_delta", {"type": "content_block_delta", "index": 0,
                                        "delta": {"type": "text_delta", "text": "x" * 20}})] * 10
    events += [("message_delta", {"type": "message_delta", "usage": {"output_tokens": 20}}),
               ("message_stop", {"type": "message_stop"})]
    return b"".join(f"event: {k}\ndata: {json.dumps(v)}\n\n".encode() for k, v in events)


_PLAIN, _STREAM = json.dumps(_REPLY).encode(), _sse()


async def _provider_conn(stream: trio.SocketStream, first_byte: float = 0.0) -> None:
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                buf += chunk
            head, buf = buf.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":", 1)[1])
            while len(buf) < length:
                buf += await stream.receive_some(65536)
            body, buf = buf[:length], buf[length:]
            streamed = b'"stream":true' in body.replace(b" ", b"")  # httpx writes compact JSON
            if streamed and first_byte:
                await trio.sleep(first_byte)  # a model's time to its first token
            payload = _STREAM if streamed else _PLAIN
            kind = b"text/event-stream" if streamed else b"application/json"
            await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: " + kind + b"\r\ncontent-length: "
                                  + str(len(payload)).encode() + b"\r\n\r\n" + payload)
    except (trio.BrokenResourceError, trio.ClosedResourceError):
        return


async def _one(client: httpx.AsyncClient, url: str, stream: bool) -> tuple[float, float]:
    body = {"model": "bench", "max_tokens": 5, "messages": [], "stream": stream}
    start = time.perf_counter()
    first = 0.0
    async with client.stream("POST", url, json=body, headers={"anthropic-version": "1"}) as reply:
        async for _ in reply.aiter_raw():
            if not first:
                first = time.perf_counter() - start
    return time.perf_counter() - start, first


async def _open_64(client: httpx.AsyncClient, url: str, stream: bool) -> None:
    """Make ``client`` open 64 connections to ``url``: 64 calls, each held until all are in."""
    body = {"model": "bench", "max_tokens": 5, "messages": [], "stream": stream}
    inside: list[None] = []
    all_in = trio.Event()

    async def hold() -> None:
        async with client.stream("POST", url, json=body, headers={"anthropic-version": "1"}) as reply:
            inside.append(None)
            if len(inside) == 64:
                all_in.set()
            await all_in.wait()
            async for _ in reply.aiter_raw():
                pass

    async with trio.open_nursery() as holders:
        for _ in range(64):
            holders.start_soon(hold)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


def _cpu_ns(pid: int) -> int:
    with open(f"/proc/{pid}/schedstat") as f:
        return int(f.read().split()[0])


async def _serve_provider(first_byte: float) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(listeners[0].socket.getsockname()[1], flush=True)
    await trio.serve_listeners(partial(_provider_conn, first_byte=first_byte), listeners)


async def _serve_gateway(provider_port: int, root_pid: int, spend_files: bool) -> None:
    provider = f"http://127.0.0.1:{provider_port}"
    ticks = procstat.start_time(root_pid) or 0
    tree = Tree().add(Node("root", root_pid, ticks, None, (f"127.0.0.1:{provider_port}",)))
    keys = KeyTable().with_key(provider, "${BENCH_KEY}", {"BENCH_KEY": "sk-bench"})
    gateway = Gateway(tree, keys, lambda record: None,
                      on_spend=partial(write_spend, "root") if spend_files else None)
    async with trio.open_nursery() as nursery:
        url = await nursery.start(run_gateway, gateway)
        print(url, flush=True)


async def _start(nursery: trio.Nursery, *args: str) -> tuple[trio.Process, str]:
    """A child serving role ``args``, and the first line it prints (its port or URL)."""
    proc = await nursery.start(partial(trio.run_process, [sys.executable, __file__, *args],
                                       stdout=-1, check=False))
    assert proc.stdout is not None
    line = b""
    while not line.endswith(b"\n"):
        chunk = await proc.stdout.receive_some(256)
        if not chunk:
            raise RuntimeError(f"{args[0]} exited before it served")
        line += chunk
    return proc, line.decode().strip()


async def main(requests: int, spend_files: bool = True, first_byte_ms: float = 0.0) -> None:
    print(f"topology: {TOPOLOGY}; the provider streams its first byte after {first_byte_ms:g} ms")
    async with trio.open_nursery() as nursery:
        _, port = await _start(nursery, "--serve", "provider", "--first-byte-ms", str(first_byte_ms))
        provider = f"http://127.0.0.1:{port}"
        role = ["--serve", "gateway", "--provider-port", port, "--root-pid", str(os.getpid())]
        gw_proc, gw = await _start(nursery, *role, *([] if spend_files else ["--no-spend-files"]))
        direct, via = provider + "/v1/messages", base_url(gw, provider) + "/v1/messages"
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        # one client per path, so neither pool holds the other's connections; a generous timeout,
        # since placing 64 new connections by /proc can take seconds on a busy host
        async with httpx.AsyncClient(limits=limits, trust_env=False, timeout=60.0) as dc, \
                httpx.AsyncClient(limits=limits, trust_env=False, timeout=60.0) as vc:
            pick = {direct: dc, via: vc}
            for stream in (False, True):
                label = "streaming" if stream else "plain"
                for url in (direct, via):  # warm the pools (and the gateway's placement)
                    for _ in range(20):
                        await _one(pick[url], url, stream)
                d_tot, d_first, v_tot, v_first = [], [], [], []
                cpu = _cpu_ns(gw_proc.pid)
                for _ in range(requests):  # interleaved, so drift hits both alike
                    t, f = await _one(dc, direct, stream)
                    d_tot.append(t)
                    d_first.append(f)
                    t, f = await _one(vc, via, stream)
                    v_tot.append(t)
                    v_first.append(f)
                cpu = (_cpu_ns(gw_proc.pid) - cpu) / requests / 1000.0
                added50, added99 = _pct(v_tot, .5) - _pct(d_tot, .5), _pct(v_tot, .99) - _pct(d_tot, .99)
                print(f"{label:9} 1 stream : direct p50 {_pct(d_tot, .5):.3f} ms p99 {_pct(d_tot, .99):.3f} ms | "
                      f"via p50 {_pct(v_tot, .5):.3f} ms p99 {_pct(v_tot, .99):.3f} ms | added p50 "
                      f"{added50:.3f} ms (target <= 1) p99 {added99:.3f} ms (target <= 5) | "
                      f"gateway CPU {cpu:.0f} us/call")
                if stream:
                    ratio = statistics.median(v_first) / statistics.median(d_first)
                    print(f"{label:9} TTFB     : direct {statistics.median(d_first) * 1000:.3f} ms via "
                          f"{statistics.median(v_first) * 1000:.3f} ms ratio {ratio:.2f}x (target <= 1.1x)")
                # 64 streams: both pools hold 64 open connections first (else httpx queues
                # requests for a few connections, and its pool's bookkeeping, not the path, sets
                # the rate), then rounds of direct and via in turn (interleaved, so drift hits
                # both alike)
                for url in (direct, via):
                    await _open_64(pick[url], url, stream)
                rounds, per = 4, max(1, requests // 32)
                took = {direct: 0.0, via: 0.0}
                mine = {direct: 0.0, via: 0.0}  # this client's CPU seconds
                gw_cpu = 0
                for _ in range(rounds):
                    for url in (direct, via):
                        cpu0, gw0 = time.process_time(), _cpu_ns(gw_proc.pid)

                        async def worker(u: str = url, stream: bool = stream, per: int = per) -> None:
                            for _ in range(per):
                                await _one(pick[u], u, stream)

                        start = time.perf_counter()
                        async with trio.open_nursery() as workers:
                            for _ in range(64):
                                workers.start_soon(worker)
                        took[url] += time.perf_counter() - start
                        mine[url] += time.process_time() - cpu0
                        if url == via:
                            gw_cpu += _cpu_ns(gw_proc.pid) - gw0
                calls = rounds * 64 * per
                rates = {"direct": calls / took[direct], "via": calls / took[via]}
                print(f"{label:9} 64 streams: direct {rates['direct']:.0f}/s via {rates['via']:.0f}/s "
                      f"ratio {rates['via'] / rates['direct']:.2f}x (target >= 0.9x) | CPU per call: client "
                      f"direct {mine[direct] / calls * 1e6:.0f} us via {mine[via] / calls * 1e6:.0f} us, "
                      f"gateway {gw_cpu / calls / 1000:.0f} us; client busy direct {mine[direct] / took[direct]:.0%} "
                      f"via {mine[via] / took[via]:.0%}")
            # a connection's first call: the gateway places its caller by /proc then (only then)
            firsts: dict[str, list[float]] = {direct: [], via: []}
            for _ in range(10):
                for url in (direct, via):
                    async with httpx.AsyncClient(trust_env=False, timeout=60.0) as fresh:
                        firsts[url].append((await _one(fresh, url, False))[0])
            print(f"new connection: first call direct {statistics.median(firsts[direct]) * 1000:.3f} ms via "
                  f"{statistics.median(firsts[via]) * 1000:.3f} ms (the caller placed once per connection)")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="calls per measurement (default 200)")
    parser.add_argument("--no-spend-files", action="store_true", help="do not persist the spend files")
    parser.add_argument("--first-byte-ms", type=float, default=0.0,
                        help="the provider's delay before a streamed reply (default 0: the figures "
                             "the targets are read against; a model's real first token takes longer)")
    parser.add_argument("--serve", choices=("provider", "gateway"), help=argparse.SUPPRESS)
    parser.add_argument("--provider-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--root-pid", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve == "provider":
        trio.run(_serve_provider, args.first_byte_ms / 1000.0)
    elif args.serve == "gateway":
        profile = os.environ.get("BENCH_GATEWAY_PROFILE")  # a cProfile of the gateway, written here
        if profile:
            import cProfile
            import signal

            signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
            profiler = cProfile.Profile(time.process_time)  # CPU time: the split is load-independent
            try:
                profiler.runcall(trio.run, _serve_gateway, args.provider_port, args.root_pid,
                                 not args.no_spend_files)
            finally:
                profiler.dump_stats(profile)
        else:
            trio.run(_serve_gateway, args.provider_port, args.root_pid, not args.no_spend_files)
    else:
        with tempfile.TemporaryDirectory() as home:
            os.environ["MURMUR_HOME"] = home  # the spend files go to a scratch home (children inherit it)
            trio.run(main, args.requests, not args.no_spend_files, args.first_byte_ms)
