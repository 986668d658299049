"""The inference gateway's cost: a scripted provider called directly and through the gateway.

Usage: ``python benchmarks/gateway.py [--requests N]``. One run, one Trio loop: a scripted
provider (raw HTTP/1.1 on loopback, keep-alive, a fixed Messages API reply, plain or as
Server-Sent Events) and the gateway (the caller is this process, the tree's root). Prints
medians and ratios to the same-run direct floor:

* plain and streaming, 1 stream: per-call latency p50/p99, direct and via the gateway, and
  the added latency; streaming time to first byte;
* 64 concurrent streams: calls per second, direct and via, and their ratio.

The gateway persists each node's spend file after every charged call, as under ``mur run``
(into a scratch ``MURMUR_HOME``), so the figures include that write (``--no-spend-files``
leaves it out, to see its share).

The client, the gateway and the provider share one process and one core here, so the added
latency includes the client's and the provider's share of that core (an upper bound on what
the gateway adds). Targets (spec/gateway.md): added p50 <= 1 ms, p99 <= 5 ms, TTFB <= 1.1x
direct, 64-stream throughput >= 0.9x direct.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from functools import partial

import httpx
import trio

from murmur import procstat
from murmur.gateway import Gateway, KeyTable, Node, Tree, base_url, run_gateway, write_spend

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


async def _provider_conn(stream: trio.SocketStream) -> None:
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
            streamed = b'"stream": true' in body
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


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000.0


async def main(requests: int, spend_files: bool = True) -> None:
    async with trio.open_nursery() as nursery:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        port = listeners[0].socket.getsockname()[1]
        nursery.start_soon(trio.serve_listeners, _provider_conn, listeners)
        provider = f"http://127.0.0.1:{port}"
        me = os.getpid()
        tree = Tree().add(Node("root", me, procstat.start_time(me) or 0, None, (f"127.0.0.1:{port}",)))
        keys = KeyTable().with_key(provider, "${BENCH_KEY}", {"BENCH_KEY": "sk-bench"})
        gateway = Gateway(tree, keys, lambda record: None,
                          on_spend=partial(write_spend, "root") if spend_files else None)
        gw = await nursery.start(run_gateway, gateway)
        direct, via = provider + "/v1/messages", base_url(gw, provider) + "/v1/messages"
        limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
        # one client per path, so neither pool holds the other's connections; a generous timeout,
        # since placing 64 new connections by /proc can take seconds on a busy host
        async with httpx.AsyncClient(limits=limits, trust_env=False, timeout=60.0) as dc, \
                httpx.AsyncClient(limits=limits, trust_env=False, timeout=60.0) as vc:
            pick = {direct: dc, via: vc}
            for stream in (False, True):
                label = "streaming" if stream else "plain"
                for url in (direct, via):  # warm the pools (and the gateway's placement cache)
                    for _ in range(20):
                        await _one(pick[url], url, stream)
                d_tot, d_first, v_tot, v_first = [], [], [], []
                for _ in range(requests):  # interleaved, so drift hits both alike
                    t, f = await _one(dc, direct, stream)
                    d_tot.append(t)
                    d_first.append(f)
                    t, f = await _one(vc, via, stream)
                    v_tot.append(t)
                    v_first.append(f)
                print(f"{label:9} 1 stream : direct p50 {_pct(d_tot, .5):.3f} ms p99 {_pct(d_tot, .99):.3f} ms | "
                      f"via p50 {_pct(v_tot, .5):.3f} ms p99 {_pct(v_tot, .99):.3f} ms | added p50 "
                      f"{_pct(v_tot, .5) - _pct(d_tot, .5):.3f} ms p99 {_pct(v_tot, .99) - _pct(d_tot, .99):.3f} ms")
                if stream:
                    ratio = statistics.median(v_first) / statistics.median(d_first)
                    print(f"{label:9} TTFB     : direct {statistics.median(d_first) * 1000:.3f} ms via "
                          f"{statistics.median(v_first) * 1000:.3f} ms ratio {ratio:.2f}x")
                rates = {}
                for name, url in (("direct", direct), ("via", via)):
                    per = max(1, requests // 8)

                    async def worker(u: str = url, per: int = per, stream: bool = stream) -> None:
                        for _ in range(per):
                            await _one(pick[u], u, stream)

                    start = time.perf_counter()
                    async with trio.open_nursery() as workers:
                        for _ in range(64):
                            workers.start_soon(worker)
                    rates[name] = 64 * per / (time.perf_counter() - start)
                print(f"{label:9} 64 streams: direct {rates['direct']:.0f}/s via {rates['via']:.0f}/s "
                      f"ratio {rates['via'] / rates['direct']:.2f}x")
        nursery.cancel_scope.cancel()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200, help="calls per measurement (default 200)")
    parser.add_argument("--no-spend-files", action="store_true", help="do not persist the spend files")
    with tempfile.TemporaryDirectory() as home:
        os.environ["MURMUR_HOME"] = home  # the spend files go to a scratch home
        args = parser.parse_args()
        trio.run(main, args.requests, not args.no_spend_files)
