"""Outgoing HTTP from components: every request checked against ``network.allow`` first.

wasmtime-py links only wasmtime's default ``wasi:http/outgoing-handler``, which connects
wherever a component asks and offers no hook. So the guest's ``handle`` import is our own
function (:func:`_handle`), and the real handler is reached only through a small *gate*
component of ours (:data:`GATE_WAT`, component text compiled by wasmtime, instantiated in
the same store with the real ``wasi:http``). For each request the gate reads the request's
scheme and authority (``[method]outgoing-request.scheme`` / ``.authority``); the request goes
on (``forward``, the real ``handle``) only when a rule of the component's effective
``network.allow`` covers ``scheme://authority``. Otherwise it is refused with the
``wasi:http`` error ``HTTP-request-denied`` before any connection opens, and the refusal is
reported to the call's ``on_http`` hook (the caller writes a ``component_http_denied`` trace
record). Names under ``formation.invalid`` are refused the same way, whatever the name.
Specification: ``spec/components.md`` ("Outgoing HTTP").
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import attrs
import wasmtime
from wasmtime import component as wc

from murmur.manifest import covers

HANDLER_VERSIONS = tuple(f"0.2.{n}" for n in range(10))
"""``wasi:http/outgoing-handler`` versions a guest may import (0.2.x, semver-compatible)."""
DENIED = "HTTP-request-denied"
VIRTUAL_REFUSAL = "not a member this member may call"
VIRTUAL_SUFFIX = ".formation.invalid"

_ERROR_CODE = (
    '(variant (case "DNS-timeout") (case "DNS-error" $dns) (case "destination-not-found") '
    '(case "destination-unavailable") (case "destination-IP-prohibited") (case "destination-IP-unroutable") '
    '(case "connection-refused") (case "connection-terminated") (case "connection-timeout") '
    '(case "connection-read-timeout") (case "connection-write-timeout") (case "connection-limit-reached") '
    '(case "TLS-protocol-error") (case "TLS-certificate-error") (case "TLS-alert-received" $tls) '
    '(case "HTTP-request-denied") (case "HTTP-request-length-required") (case "HTTP-request-body-size" $ou64) '
    '(case "HTTP-request-method-invalid") (case "HTTP-request-URI-invalid") (case "HTTP-request-URI-too-long") '
    '(case "HTTP-request-header-section-size" $ou32) (case "HTTP-request-header-size" $ofsz) '
    '(case "HTTP-request-trailer-section-size" $ou32) (case "HTTP-request-trailer-size" $fsz) '
    '(case "HTTP-response-incomplete") (case "HTTP-response-header-section-size" $ou32) '
    '(case "HTTP-response-header-size" $fsz) (case "HTTP-response-body-size" $ou64) '
    '(case "HTTP-response-trailer-section-size" $ou32) (case "HTTP-response-trailer-size" $fsz) '
    '(case "HTTP-response-transfer-coding" $ostr) (case "HTTP-response-content-coding" $ostr) '
    '(case "HTTP-response-timeout") (case "HTTP-upgrade-failed") (case "HTTP-protocol-error") '
    '(case "loop-detected") (case "configuration-error") (case "internal-error" $ostr))'
)
"""``wasi:http`` 0.2's ``error-code`` cases, in WASI's order (the gate must match it exactly)."""

GATE_WAT = f"""
(component $gate
  (type $types-t (instance
    (export "outgoing-request" (type $req (sub resource)))
    (type $scheme-v (variant (case "HTTP") (case "HTTPS") (case "other" string)))
    (export "scheme" (type $scheme (eq $scheme-v)))
    (export "request-options" (type $opts (sub resource)))
    (export "future-incoming-response" (type $fut (sub resource)))
    (type $ostr (option string))
    (type $dns-r (record (field "rcode" $ostr) (field "info-code" (option u16))))
    (export "DNS-error-payload" (type $dns (eq $dns-r)))
    (type $tls-r (record (field "alert-id" (option u8)) (field "alert-message" $ostr)))
    (export "TLS-alert-received-payload" (type $tls (eq $tls-r)))
    (type $ou32 (option u32))
    (type $fsz-r (record (field "field-name" $ostr) (field "field-size" $ou32)))
    (export "field-size-payload" (type $fsz (eq $fsz-r)))
    (type $ou64 (option u64))
    (type $ofsz (option $fsz))
    (type $err-v {_ERROR_CODE})
    (export "error-code" (type $err (eq $err-v)))
    (export "[method]outgoing-request.scheme" (func (param "self" (borrow $req)) (result (option $scheme))))
    (export "[method]outgoing-request.authority" (func (param "self" (borrow $req)) (result $ostr)))
    (export "[method]outgoing-request.set-scheme"
      (func (param "self" (borrow $req)) (param "scheme" (option $scheme)) (result (result))))
    (export "[method]outgoing-request.set-authority"
      (func (param "self" (borrow $req)) (param "authority" $ostr) (result (result))))
  ))
  (import "wasi:http/types@0.2.0" (instance $types (type $types-t)))
  (alias export $types "outgoing-request" (type $req))
  (alias export $types "request-options" (type $opts))
  (alias export $types "future-incoming-response" (type $fut))
  (alias export $types "error-code" (type $err))
  (alias export $types "scheme" (type $scheme))
  (type $handler-t (instance
    (alias outer $gate $req (type $r0)) (export "outgoing-request" (type $r (eq $r0)))
    (alias outer $gate $opts (type $o0)) (export "request-options" (type $o (eq $o0)))
    (alias outer $gate $fut (type $f0)) (export "future-incoming-response" (type $f (eq $f0)))
    (alias outer $gate $err (type $e0)) (export "error-code" (type $e (eq $e0)))
    (export "handle" (func (param "request" (own $r)) (param "options" (option (own $o)))
                           (result (result (own $f) (error $e)))))
  ))
  (import "wasi:http/outgoing-handler@0.2.0" (instance $handler (type $handler-t)))
  (core module $mem
    (memory (export "memory") 1)
    (global $bump (mut i32) (i32.const 1024))
    (func (export "realloc") (param i32 i32 i32 i32) (result i32)
      (local $p i32)
      (local.set $p (i32.and (i32.add (global.get $bump) (i32.sub (local.get 2) (i32.const 1)))
                             (i32.xor (i32.sub (local.get 2) (i32.const 1)) (i32.const -1))))
      (global.set $bump (i32.add (local.get $p) (local.get 3)))
      (if (i32.gt_u (global.get $bump) (i32.mul (memory.size) (i32.const 65536)))
        (then (if (i32.eq (memory.grow (i32.add (i32.div_u (local.get 3) (i32.const 65536)) (i32.const 1)))
                          (i32.const -1)) (then unreachable))))
      (local.get $p)))
  (core instance $m (instantiate $mem))
  (alias core export $m "memory" (core memory $memory))
  (alias core export $m "realloc" (core func $realloc))
  (alias export $types "[method]outgoing-request.scheme" (func $scheme-f))
  (alias export $types "[method]outgoing-request.authority" (func $authority-f))
  (alias export $types "[method]outgoing-request.set-scheme" (func $set-scheme-f))
  (alias export $types "[method]outgoing-request.set-authority" (func $set-authority-f))
  (alias export $handler "handle" (func $handle-f))
  (core func $scheme-c (canon lower (func $scheme-f) (memory $memory) (realloc $realloc) string-encoding=utf8))
  (core func $authority-c (canon lower (func $authority-f) (memory $memory) (realloc $realloc) string-encoding=utf8))
  (core func $set-scheme-c (canon lower (func $set-scheme-f) (memory $memory) (realloc $realloc) string-encoding=utf8))
  (core func $set-authority-c (canon lower (func $set-authority-f) (memory $memory) (realloc $realloc) string-encoding=utf8))
  (core func $handle-c (canon lower (func $handle-f) (memory $memory) (realloc $realloc) string-encoding=utf8))
  (core func $drop-c (canon resource.drop $req))
  (core module $g
    (import "host" "drop" (func $drop (param i32)))
    (import "host" "scheme" (func $s (param i32 i32)))
    (import "host" "authority" (func $a (param i32 i32)))
    (import "host" "handle" (func $h (param i32 i32 i32 i32)))
    (import "host" "set-scheme" (func $ss (param i32 i32 i32 i32 i32) (result i32)))
    (import "host" "set-authority" (func $sa (param i32 i32 i32 i32) (result i32)))
    (func (export "set-scheme") (param i32 i32 i32 i32 i32) (result i32)
      (local $r i32)
      (local.set $r (call $ss (local.get 0) (local.get 1) (local.get 2) (local.get 3) (local.get 4)))
      (call $drop (local.get 0)) (local.get $r))
    (func (export "set-authority") (param i32 i32 i32 i32) (result i32)
      (local $r i32)
      (local.set $r (call $sa (local.get 0) (local.get 1) (local.get 2) (local.get 3)))
      (call $drop (local.get 0)) (local.get $r))
    ;; a borrowed handle is dropped before the call returns (the canonical ABI's rule)
    (func (export "scheme") (param i32) (result i32)
      (call $s (local.get 0) (i32.const 0)) (call $drop (local.get 0)) (i32.const 0))
    (func (export "authority") (param i32) (result i32)
      (call $a (local.get 0) (i32.const 32)) (call $drop (local.get 0)) (i32.const 32))
    (func (export "forward") (param i32 i32 i32) (result i32)
      (call $h (local.get 0) (local.get 1) (local.get 2) (i32.const 64)) (i32.const 64)))
  (core instance $gi (instantiate $g (with "host" (instance
    (export "drop" (func $drop-c)) (export "scheme" (func $scheme-c)) (export "authority" (func $authority-c))
    (export "handle" (func $handle-c)) (export "set-scheme" (func $set-scheme-c))
    (export "set-authority" (func $set-authority-c))))))
  (func (export "scheme") (param "self" (borrow $req)) (result (option $scheme))
    (canon lift (core func $gi "scheme") (memory $memory) (realloc $realloc) string-encoding=utf8))
  (func (export "authority") (param "self" (borrow $req)) (result (option string))
    (canon lift (core func $gi "authority") (memory $memory) (realloc $realloc) string-encoding=utf8))
  (func (export "set-scheme") (param "self" (borrow $req)) (param "scheme" (option $scheme)) (result (result))
    (canon lift (core func $gi "set-scheme") (memory $memory) (realloc $realloc) string-encoding=utf8))
  (func (export "set-authority") (param "self" (borrow $req)) (param "authority" (option string)) (result (result))
    (canon lift (core func $gi "set-authority") (memory $memory) (realloc $realloc) string-encoding=utf8))
  (func (export "forward") (param "request" (own $req)) (param "options" (option (own $opts)))
    (result (result (own $fut) (error $err)))
    (canon lift (core func $gi "forward") (memory $memory) (realloc $realloc) string-encoding=utf8))
)
"""


@attrs.frozen
class HttpPolicy:
    """What one component may reach: its effective ``network.allow`` rules.

    Attributes:
        allow (tuple[str, ...]): rules (``host``, ``host:port``, ``http(s)://host[:port]``).
    """

    allow: tuple[str, ...] = ()
    peers: Any = None  # murmur.components.peers.PeerAccess: the callees' relays (None: no formation)


@attrs.frozen
class HttpDecision:
    """One outgoing request's answer: ``url`` as the component asked, allowed or not, why."""

    url: str
    allowed: bool
    reason: str


def decide(policy: HttpPolicy | None, scheme: str, authority: str) -> HttpDecision:
    """Whether ``scheme://authority`` is covered (pure)."""
    url = f"{scheme}://{authority}"
    host = authority.rsplit("@", 1)[-1].split(":", 1)[0].strip("[]").lower()
    if host.endswith(VIRTUAL_SUFFIX) or host == VIRTUAL_SUFFIX[1:]:
        return HttpDecision(url, False, VIRTUAL_REFUSAL)
    rules: Sequence[str] = policy.allow if policy is not None else ()
    if scheme not in ("http", "https"):
        return HttpDecision(url, False, f"scheme {scheme} is not http or https")
    for rule in rules:
        try:
            if covers(rule, url):
                return HttpDecision(url, True, f"covered by `{rule}`")
        except ValueError:
            continue
    return HttpDecision(url, False, "no network.allow rule covers it" if rules else "the component has no network grant")


_gate: wc.Component | None = None
_gate_lock = threading.Lock()
_local = threading.local()


def gate_component(engine: wasmtime.Engine) -> wc.Component:
    """The compiled gate (compiled once per process from :data:`GATE_WAT`)."""
    global _gate
    with _gate_lock:
        if _gate is None:
            _gate = wc.Component(engine, GATE_WAT)
        return _gate


def add_http(linker: wc.Linker) -> None:
    """Link ``wasi:http/types`` (wasmtime's) and our checking ``outgoing-handler.handle``."""
    linker.add_wasi_http()
    linker.allow_shadowing = True
    with linker.root() as root:
        for version in HANDLER_VERSIONS:
            with root.add_instance(f"wasi:http/outgoing-handler@{version}") as inst:
                inst.add_func("handle", _handle)
    linker.allow_shadowing = False


def real_linker(engine: wasmtime.Engine) -> wc.Linker:
    """A linker with wasmtime's own wasi:http (for the gate only)."""
    linker = wc.Linker(engine)
    linker.add_wasip2()
    linker.add_wasi_http()
    return linker


def bind(store: wasmtime.Store, linker: wc.Linker, policy: HttpPolicy | None, name: str,
         on_http: Callable[[HttpDecision], None] | None) -> None:
    """Instantiate the gate in ``store`` and say, for this thread, whose requests ``handle`` sees."""
    gate = gate_component(linker_engine(linker))
    inst = linker.instantiate(store, gate)
    funcs = {n: inst.get_func(store, n) for n in ("scheme", "authority", "set-scheme", "set-authority", "forward")}
    _local.state = (funcs, policy, name, on_http)


def linker_engine(_linker: wc.Linker) -> wasmtime.Engine:
    from murmur.components.engine import engine

    return engine()


def unbind() -> None:
    _local.state = None


def current() -> Any:
    """This thread's binding (to :func:`restore` for a later call into the same store)."""
    return getattr(_local, "state", None)


def restore(state: Any) -> None:
    """Bind this thread to a store's gate again (a hook's kept store)."""
    _local.state = state


def _scheme_text(value: Any) -> str:
    if value is None:
        return "https"  # wasi:http's default scheme when none is set
    tag = getattr(value, "tag", value)
    if tag == "other":
        return str(getattr(value, "payload", "other")).lower()
    return str(tag).lower()


def _handle(store: Any, request: Any, options: Any) -> Any:
    state = getattr(_local, "state", None)
    if state is None:
        return wc.Variant(DENIED)
    funcs, policy, _name, on_http = state
    scheme = funcs["scheme"](store, request)
    funcs["scheme"].post_return(store)
    authority = funcs["authority"](store, request)
    funcs["authority"].post_return(store)
    verdict = decide(policy, _scheme_text(scheme), str(authority or ""))
    relay: str | None = None
    name = _virtual_name(str(authority or ""))
    peers = policy.peers if policy is not None else None
    if name is not None and peers is not None and name in peers.relays:
        verdict, relay = _virtual(policy, peers, name, verdict.url)
    if on_http is not None:
        on_http(verdict)
    if not verdict.allowed:
        return wc.Variant(DENIED)
    if relay is not None:  # through this session's relay, which attaches the edge's token
        funcs["set-scheme"](store, request, wc.Variant("HTTP"))
        funcs["set-scheme"].post_return(store)
        funcs["set-authority"](store, request, relay)
        funcs["set-authority"].post_return(store)
    out = funcs["forward"](store, request, options)
    funcs["forward"].post_return(store)
    return out


def _virtual_name(authority: str) -> str | None:
    host = authority.rsplit("@", 1)[-1].split(":", 1)[0].lower()
    return host[: -len(VIRTUAL_SUFFIX)] if host.endswith(VIRTUAL_SUFFIX) else None


def _virtual(policy: HttpPolicy, peers: Any, name: str, url: str) -> tuple[HttpDecision, str | None]:
    """A callee's virtual address: resolve it (≤ 10 s), check the real door URL against the
    component's allow rules; the decision names only the virtual address."""
    from urllib.parse import urlsplit

    real = peers.resolve(name)
    if real is None:
        return HttpDecision(url, False, f"member {name}'s door did not become known in time"), None
    parts = urlsplit(real)
    checked = decide(HttpPolicy(policy.allow), parts.scheme, parts.netloc)
    if not checked.allowed:
        return HttpDecision(url, False, f"member {name}'s door is not covered by network.allow"), None
    return HttpDecision(url, True, f"member {name}, through this session"), peers.relays[name]
