"""``call-member``: giving another formation member work, for plans and agents.

Seed 004, "Giving a member work"; contract sheet section 7.2 (statuses, the busy schedule,
answers), section 5 (``a2a_send``, ``member_call_busy``, ``member_call_start``,
``member_call``) and section 6.5 (origin ``peer`` and the trust header).

One :class:`CallEngine` per member session. :meth:`CallEngine.services` hands each task its
``call_member`` / ``member_answer`` functions (:class:`murmur.session.workload.TaskServices`).
A call::

    call_member(member, text)
      ├─ wait ≤ 10 s for the callee's door URL on the formation channel (AddressBook)
      ├─ check the URL against this capsule's capabilities.network.allow
      ├─ offer 1: SendMessage (returnImmediately) with the edge's token, origin peer,
      │           the calling task's trust class, messageId msg_<call id>
      │     taken  -> member_call_start; the tool returns "started"
      │     busy   -> member_call_busy; the tool returns "busy"; re-offers go on in the
      │               background: 1 s, 2 s, 4 s, 8 s, 8 s … after each refusal, + ≤250 ms jitter
      │     other rejection -> "rejected"; refused/error -> "failed"
      │     no answer -> offered once more; two unanswered offers in a row -> unreachable
      └─ once taken: GetTask every 500 ms until the task ends (two failed reads in a row ->
         unreachable); the answer is cut at 64 KiB.

``member_answer(call_id)`` waits for the call to end and delivers its answer
(``member_call`` with ``delivered: true``). When the calling task ends first, every call it
made that has not ended is ``abandoned`` and every answer not delivered is recorded with
``delivered: false``; an offer in flight at that moment is waited for at most 6 s, and a task
the member took in it is cancelled with ``CancelTask`` — the only case the runtime cancels a
member's task. The call's deadline is ``lifecycle.delegation_deadline_secs``
(``MURMUR_DELEGATION_TIMEOUT_SECS`` overrides it): still busy then -> ``rejected``, still
running -> ``timed_out``.

Tokens, door URLs and ports never reach a result, a record or a log: every record and every
reason names the callee's virtual address ``http://<name>.formation.invalid``, and reasons are
built here, never copied from an exception (:func:`scrub` is a second line of defence).

Pure pieces (no I/O): :func:`busy_wait`, :func:`reaches_door`, :func:`reaches_member_doors`,
:func:`classify_send`, :func:`classify_get`, :func:`cut_output`, :func:`scrub`.
"""

from __future__ import annotations

import enum
import json
import logging
import math
import os
import random
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol
from urllib.parse import urlsplit

import attrs
import trio

from murmur import timing
from murmur.errors import MurmurError
from murmur.ids import new_id
from murmur.manifest.netallow import NetEntry, entry_covers, parse_net_entry, url_target
from murmur.session.lifecycle import BUSY_MESSAGE
from murmur.session.origin import ORIGIN_HEADER, TRUST_HEADER
from murmur.session.trace import TraceWriteError
from murmur.session.workload import TaskServices, TraceSink

OUTPUT_CAP = 64 * 1024
"""Bytes of a member's answer kept (UTF-8); longer answers are cut and marked."""

CUT_MARKER = "\n[murmur: the answer was cut at 64 KiB]"
"""Appended to an answer cut at :data:`OUTPUT_CAP`."""

IN_FLIGHT_GRACE = 6.0
"""Seconds an offer in flight when the calling task ends is still waited for."""

REQUEST_TIMEOUT = 10.0
"""Seconds one request to a member's door may take before it counts as unanswered."""

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1"})
"""Bare ``network.allow`` hosts that reach a member door (doors bind 127.0.0.1)."""

REJECTED_PREFIX = "task rejected: "

_A2A_VERSION = "1.0"
_log = logging.getLogger("murmur.formation.calls")
_TERMINAL = {
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_REJECTED": "rejected",
}
_PENDING = frozenset({"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"})


# --- pure pieces -------------------------------------------------------------------------------


def virtual_address(member: str) -> str:
    """A member's virtual address, the only address records and messages name."""
    return f"http://{member}.formation.invalid"


def busy_wait(refusals: int, *, first: float = timing.BUSY_FIRST_WAIT, cap: float = timing.BUSY_MAX_WAIT) -> float:
    """Seconds to wait after the ``refusals``-th refusal in a row before the next offer.

    1 s after the first, doubling after each later one, never more than 8 s (jitter is added
    by the caller).

    Args:
        refusals (int): how many offers have been refused so far (>= 1).
    """
    return float(min(first * 2.0 ** max(refusals - 1, 0), cap))


def _loopback_as_one(entry: NetEntry) -> NetEntry:
    """``entry`` with ``localhost`` spelled ``127.0.0.1``: both name the one loopback host."""
    return attrs.evolve(entry, host="127.0.0.1") if entry.host in LOOPBACK_HOSTS else entry


def reaches_door(allow: Iterable[str], url: str) -> bool:
    """Whether one of ``allow`` (``capabilities.network.allow``) reaches the door ``url``.

    Coverage is :func:`murmur.manifest.netallow.entry_covers` (a bare host covers every
    scheme and port; ``host:port`` that port; a URL entry only its own scheme, host and
    port), except that ``localhost`` and ``127.0.0.1`` name the same loopback host.
    Unparseable entries reach nothing.
    """
    target = url_target(url)
    if target is None:
        return False
    target = _loopback_as_one(target)
    for entry in allow:
        parsed = parse_net_entry(entry)
        if parsed is not None and entry_covers(_loopback_as_one(parsed), target):
            return True
    return False


def reaches_member_doors(allow: Iterable[str]) -> bool:
    """Whether ``allow`` can reach a member door at all: a bare loopback host (W-RUN-008).

    Doors listen on loopback ``http`` at a port chosen at launch, so only an entry without a
    port reaches them whatever the port is.
    """
    for entry in allow:
        parsed = parse_net_entry(entry)
        if parsed is not None and parsed.host in LOOPBACK_HOSTS and parsed.port is None and parsed.scheme in (None, "http"):
            return True
    return False


def scrub(text: str, secrets_: Iterable[tuple[str, str]]) -> str:
    """``text`` with every secret replaced: ``(secret, replacement)`` pairs, longest first."""
    for secret, replacement in sorted(secrets_, key=lambda p: -len(p[0])):
        if secret:
            text = text.replace(secret, replacement)
    return text


def cut_output(text: str, cap: int = OUTPUT_CAP) -> tuple[str, bool]:
    """``(text cut to cap UTF-8 bytes + CUT_MARKER, True)``, or ``(text, False)`` if it fits."""
    data = text.encode("utf-8")
    if len(data) <= cap:
        return text, False
    return data[:cap].decode("utf-8", "ignore") + CUT_MARKER, True


class Offer(enum.Enum):
    """What one SendMessage offer came to."""

    TAKEN = "taken"  # the door holds the task
    BUSY = "busy"  # REJECTED with exactly "task rejected: capsule is busy"
    REJECTED = "rejected"  # REJECTED for another reason
    FAILED = "failed"  # refused (401/403), a JSON-RPC error, nonsense
    UNANSWERED = "unanswered"  # no answer at all (connection, timeout, 5xx)


@attrs.frozen
class SendReply:
    """A classified SendMessage reply.

    Attributes:
        offer (Offer): the outcome.
        task_id (str | None): the member's task id, when the reply named one.
        context_id (str | None): its context id.
        state (str | None): the wire state (``TASK_STATE_…``) when a task came back.
        reason (str): why, for REJECTED / FAILED / UNANSWERED (no URL, port or token).
    """

    offer: Offer
    task_id: str | None = None
    context_id: str | None = None
    state: str | None = None
    reason: str = ""


def _json_obj(body: bytes) -> dict[str, Any] | None:
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    return obj if isinstance(obj, dict) else None


def _status_text(task: Mapping[str, Any]) -> str:
    status = task.get("status")
    message = status.get("message") if isinstance(status, dict) else None
    parts = message.get("parts") if isinstance(message, dict) else None
    return _texts(parts)


def _texts(parts: object) -> str:
    if not isinstance(parts, list):
        return ""
    return "".join(str(p["text"]) for p in parts if isinstance(p, dict) and isinstance(p.get("text"), str))


def _auth_reason(status: int, body: bytes) -> str:
    obj = _json_obj(body) or {}
    code = obj.get("error")
    what = code if isinstance(code, str) and code.isascii() and len(code) < 64 else "refused"
    return f"the member's door refused the call ({status} {what})"


def classify_send(status: int, body: bytes) -> SendReply:
    """Classify one SendMessage HTTP reply (pure).

    Args:
        status (int): the HTTP status.
        body (bytes): the response body.
    """
    if status in (401, 403):
        return SendReply(Offer.FAILED, reason=_auth_reason(status, body))
    if status != 200:
        if status >= 500:
            return SendReply(Offer.UNANSWERED, reason=f"the member's door answered HTTP {status}")
        return SendReply(Offer.FAILED, reason=f"the member's door answered HTTP {status}")
    obj = _json_obj(body)
    if obj is None:
        return SendReply(Offer.UNANSWERED, reason="the member's door sent a reply that is not JSON")
    if "error" in obj:
        err = obj["error"] if isinstance(obj["error"], dict) else {}
        code = err.get("code")
        return SendReply(Offer.FAILED, reason=f"the member's door refused the task (JSON-RPC error {code})")
    result = obj.get("result")
    task = result.get("task") if isinstance(result, dict) else None
    if not isinstance(task, dict) or not isinstance(task.get("id"), str):
        return SendReply(Offer.FAILED, reason="the member's door answered without a task")
    status_obj = task.get("status")
    state = status_obj.get("state") if isinstance(status_obj, dict) else None
    ctx = task.get("contextId") if isinstance(task.get("contextId"), str) else None
    tid = task["id"]
    if state == "TASK_STATE_REJECTED":
        text = _status_text(task)
        if text == BUSY_MESSAGE:
            return SendReply(Offer.BUSY, tid, ctx, state, text)
        return SendReply(Offer.REJECTED, tid, ctx, state, text.removeprefix(REJECTED_PREFIX) or "rejected")
    if state in _PENDING or state in _TERMINAL:
        return SendReply(Offer.TAKEN, tid, ctx, state)
    return SendReply(Offer.FAILED, tid, ctx, None, "the member's door answered with an unknown task state")


@attrs.frozen
class Poll:
    """A classified GetTask reply.

    Attributes:
        ok (bool): False for a failed read (counts toward ``unreachable``).
        status (str | None): the call's final status once the task has ended
            (``completed``, ``failed``, ``canceled``, ``rejected``, ``no_answer``), else None.
        output (str): the answer (completed) or the status message (otherwise), uncut.
    """

    ok: bool
    status: str | None = None
    output: str = ""


def classify_get(status: int, body: bytes) -> Poll:
    """Classify one GetTask HTTP reply (pure)."""
    if status != 200:
        return Poll(False)
    obj = _json_obj(body)
    result = obj.get("result") if obj is not None else None
    if not isinstance(result, dict):
        return Poll(False)
    st = result.get("status")
    state = st.get("state") if isinstance(st, dict) else None
    if state in _PENDING:
        return Poll(True)
    final = _TERMINAL.get(state) if isinstance(state, str) else None
    if final is None:
        return Poll(False)
    if final == "completed":
        answer = ""
        for art in result.get("artifacts") or ():
            if isinstance(art, dict) and art.get("artifactId") == "response":
                answer = _texts(art.get("parts"))
                break
        return Poll(True, final, answer or _status_text(result))
    meta = result.get("metadata")
    murmur = meta.get("murmur") if isinstance(meta, dict) else None
    if final == "failed" and isinstance(murmur, dict) and murmur.get("noAnswer") is True:
        final = "no_answer"
    return Poll(True, final, _status_text(result))


def traceparent() -> str:
    """A fresh W3C ``traceparent`` value (version 00, sampled)."""
    return f"00-{secrets.token_hex(16)}-{secrets.token_hex(8)}-01"


# --- transport ---------------------------------------------------------------------------------


class TransportError(Exception):
    """A request got no HTTP answer (connection refused, reset, timed out).

    Its message never names the URL.
    """


class Transport(Protocol):
    """Posts one JSON body to a member's door."""

    async def post(self, url: str, headers: Mapping[str, str], body: bytes, *, timeout: float) -> tuple[int, bytes]:
        """``(HTTP status, body)``; raises :class:`TransportError` when nothing answered."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


class HttpxTransport:
    """The production transport: one ``httpx.AsyncClient`` (no proxies from the environment,
    no redirects). httpx's own request log is held at WARNING so no door URL reaches a log."""

    def __init__(self) -> None:
        import httpx

        logging.getLogger("httpx").setLevel(max(logging.WARNING, logging.getLogger("httpx").level))
        self._httpx = httpx
        self._client = httpx.AsyncClient(trust_env=False, follow_redirects=False)

    async def post(self, url: str, headers: Mapping[str, str], body: bytes, *, timeout: float) -> tuple[int, bytes]:
        """POST ``body`` to ``url``; see :class:`Transport`."""
        try:
            resp = await self._client.post(url, content=body, headers=dict(headers), timeout=timeout)
        except self._httpx.HTTPError:
            raise TransportError("the member's door did not answer") from None
        return resp.status_code, resp.content

    async def aclose(self) -> None:
        """Close the client."""
        await self._client.aclose()


# --- addresses ---------------------------------------------------------------------------------


class AddressBook:
    """Callees' door URLs as they arrive on the formation channel.

    :meth:`update` may be called before Trio runs (the first channel read happens while the
    session is prepared); :meth:`wait` is called in Trio.
    """

    def __init__(self, callees: Iterable[str]) -> None:
        self.callees = tuple(callees)
        self._urls: dict[str, str] = {}
        self._changed: trio.Event | None = None

    def update(self, urls: Mapping[str, str]) -> None:
        """Learn URLs; names that are not callees are ignored. A later URL replaces one."""
        for name, url in urls.items():
            if name in self.callees:
                self._urls[name] = url
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def get(self, name: str) -> str | None:
        """The URL known now, or None."""
        return self._urls.get(name)

    def urls(self) -> dict[str, str]:
        """Every URL known now."""
        return dict(self._urls)

    async def wait(self, name: str, timeout: float) -> str | None:
        """The URL of ``name``, waiting up to ``timeout`` seconds; None when none arrived."""
        deadline = trio.current_time() + timeout
        while (url := self._urls.get(name)) is None:
            if self._changed is None:
                self._changed = trio.Event()
            changed = self._changed
            with trio.move_on_at(deadline):
                await changed.wait()
            if trio.current_time() >= deadline:
                return self._urls.get(name)
        return url


# --- the engine --------------------------------------------------------------------------------


class CallRefused(MurmurError):
    """A call refused before anything is sent (a tool error; nothing is recorded)."""


@attrs.define(eq=False)
class MemberCall:
    """The state of one call (mutable; owned by the engine).

    Attributes:
        call_id (str): ``mcl_…``.
        member (str): the callee.
        task_id (str): the calling task.
        trust (str): the calling task's trust class.
        text (str): the task text sent.
        started (float): ``trio.current_time()`` when the call was made.
        deadline (float): when a busy call becomes ``rejected`` and a held one ``timed_out``.
        member_task_id (str | None): the member's task id once it took the task.
        status (str | None): the final status once ended.
        output (str): the answer (completed) or why there is none; cut at 64 KiB.
        truncated (bool): whether ``output`` was cut.
        duration_ms (int): call start to end.
        first (dict | None): what ``call_member`` returned.
        delivered (bool | None): None until recorded; then whether the answer reached the task.
    """

    call_id: str
    member: str
    task_id: str
    trust: str
    text: str
    started: float
    deadline: float
    member_task_id: str | None = None
    status: str | None = None
    output: str = ""
    truncated: bool = False
    duration_ms: int = 0
    first: dict[str, Any] | None = None
    delivered: bool | None = None
    first_ready: trio.Event = attrs.field(factory=trio.Event)
    ended: trio.Event = attrs.field(factory=trio.Event)
    done: trio.Event = attrs.field(factory=trio.Event)
    scope: trio.CancelScope = attrs.field(factory=trio.CancelScope)
    in_flight: bool = False
    abandoning: bool = False
    taken_late: bool = False


def _default_jitter() -> float:
    return random.uniform(0.0, timing.BUSY_JITTER)


def call_deadline_secs(manifest_secs: int, environ: Mapping[str, str] | None = None) -> float:
    """``MURMUR_DELEGATION_TIMEOUT_SECS`` when a positive integer, else ``manifest_secs``."""
    raw = (os.environ if environ is None else environ).get("MURMUR_DELEGATION_TIMEOUT_SECS", "")
    if raw.isdigit() and int(raw) > 0:
        return float(raw)
    return float(manifest_secs)


class CallEngine:
    """Every ``call-member`` call of one member session.

    Args:
        member (str): this member's roster name.
        tokens (Mapping[str, str]): callee -> the edge's formation token (roster order).
        addresses (AddressBook): callees' door URLs.
        network_allow (Sequence[str]): this capsule's ``capabilities.network.allow``.
        deadline_secs (float): a call's deadline, seconds from the call.
        transport (Transport | None): how requests are sent (default :class:`HttpxTransport`,
            made when the engine runs).
        jitter (Callable[[], float]): seconds added to each busy wait (0-0.25 s by default).
        poll_interval (float): GetTask interval (0.5 s).
        address_wait (float): how long a call waits for a door URL (10 s).
        request_timeout (float): one request's bound.
        in_flight_grace (float): the ≤6 s wait for an offer in flight at task end.

    Use: run :meth:`run` for the session's life (a session watcher), call :meth:`bind` with the
    session's trace once it exists, hand :meth:`services` to each task, call
    :meth:`task_ended` when a task ends, and await :meth:`drain` before ``session_end``.
    """

    def __init__(
        self,
        *,
        member: str,
        tokens: Mapping[str, str],
        addresses: AddressBook,
        network_allow: Sequence[str],
        deadline_secs: float = timing.CHILD_WATCH,
        transport: Transport | None = None,
        jitter: Callable[[], float] = _default_jitter,
        poll_interval: float = timing.MEMBER_POLL,
        address_wait: float = timing.DOOR_URL_WAIT,
        request_timeout: float = REQUEST_TIMEOUT,
        in_flight_grace: float = IN_FLIGHT_GRACE,
    ) -> None:
        self.member = member
        self._tokens = dict(tokens)
        self.callees = tuple(self._tokens)
        self.addresses = addresses
        self._allow = tuple(network_allow)
        self._deadline_secs = deadline_secs
        self._transport = transport
        self._jitter = jitter
        self._poll = poll_interval
        self._address_wait = address_wait
        self._request_timeout = request_timeout
        self._grace = in_flight_grace
        self._trace: TraceSink | None = None
        self._parent: str | None = None
        self._nursery: trio.Nursery | None = None
        self._ready = trio.Event()
        self._calls: dict[str, MemberCall] = {}
        self._by_task: dict[str, list[MemberCall]] = {}
        self._ended_tasks: set[str] = set()
        self._rpc_id = 0

    # -- wiring ----------------------------------------------------------------------------

    def bind(self, trace: TraceSink, session_event_id: str | None) -> None:
        """Where records go: the session's trace, under its ``session_start`` record."""
        self._trace = trace
        self._parent = session_event_id

    async def run(self) -> None:
        """Hold the nursery calls run in, for the session's life (cancel to stop)."""
        if self._transport is None:
            self._transport = HttpxTransport()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._ready.set()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            with trio.CancelScope(shield=True):
                await self._transport.aclose()

    def services(self, task_id: str, trust: str, *, entry_member: bool = False) -> TaskServices:
        """The task's services: ``call_member`` and ``member_answer`` bound to ``task_id``."""

        async def call_member(member: str, text: str) -> Mapping[str, object]:
            return await self.call(task_id, trust, member, text)

        async def member_answer(call_id: str) -> Mapping[str, object]:
            return await self.answer(task_id, call_id)

        return TaskServices(
            call_member=call_member,
            member_answer=member_answer,
            callees=self.callees,
            entry_member=entry_member,
        )

    # -- the calls -------------------------------------------------------------------------

    def calls_of(self, task_id: str) -> list[MemberCall]:
        """The calls ``task_id`` made, in order (for tests and diagnostics)."""
        return list(self._by_task.get(task_id, ()))

    async def call(self, task_id: str, trust: str, member: str, text: str) -> Mapping[str, object]:
        """Make a call from ``task_id``; returns as soon as the first offer has an outcome.

        Returns:
            Mapping: ``{call_id, member, status}`` with ``status`` ``started`` (+ ``task_id``,
            the member's), ``busy``, ``rejected`` or ``failed`` (+ ``reason``).

        Raises:
            CallRefused: ``member`` is not a callee; the task has ended; or an earlier call
                from this task to ``member`` has not been delivered. Nothing is sent or recorded.
        """
        if member not in self._tokens:
            names = ", ".join(self.callees) or "none"
            raise CallRefused(f"'{member}' is not a member this member may call (callees: {names})")
        if task_id in self._ended_tasks:
            raise CallRefused("the calling task has ended")
        for earlier in self._by_task.get(task_id, ()):
            if earlier.member == member and not earlier.delivered:
                raise CallRefused(
                    f"a call to {member} from this task is still unanswered; receive its "
                    "answer before calling it again"
                )
        await self._ready.wait()
        assert self._nursery is not None
        now = trio.current_time()
        call = MemberCall(
            call_id=new_id("mcl"),
            member=member,
            task_id=task_id,
            trust=trust,
            text=text,
            started=now,
            deadline=now + self._deadline_secs,
        )
        self._calls[call.call_id] = call
        self._by_task.setdefault(task_id, []).append(call)
        self._nursery.start_soon(self._drive, call)
        await call.first_ready.wait()
        assert call.first is not None
        if call.first["status"] in ("rejected", "failed") and task_id not in self._ended_tasks:
            self._record(call, delivered=True)  # the tool result is the answer
        return dict(call.first)

    async def answer(self, task_id: str, call_id: str) -> Mapping[str, object]:
        """Wait for a call of ``task_id`` to end and deliver its answer.

        Returns:
            Mapping: ``{call_id, member, status, output, truncated}`` (+ ``task_id``, the
            member's, when it held the task).

        Raises:
            CallRefused: no such call from this task.
        """
        call = self._calls.get(call_id)
        if call is None or call.task_id != task_id:
            raise CallRefused(f"this task made no call {call_id}")
        await call.ended.wait()
        self._record(call, delivered=True)
        out: dict[str, object] = {
            "call_id": call.call_id,
            "member": call.member,
            "status": call.status,
            "output": call.output,
            "truncated": call.truncated,
        }
        if call.member_task_id is not None:
            out["task_id"] = call.member_task_id
        return out

    def task_ended(self, task_id: str) -> None:
        """The calling task ended: abandon its open calls, record undelivered answers.

        Synchronous and quick (safe in a cancelled scope's ``finally``). An offer in flight
        keeps up to :data:`IN_FLIGHT_GRACE` seconds; the rest happens in the background.
        """
        self._ended_tasks.add(task_id)
        for call in self._by_task.get(task_id, ()):
            if call.status is not None:
                self._record(call, delivered=False)
                continue
            if call.abandoning:
                continue
            call.abandoning = True
            if call.in_flight:
                call.scope.deadline = min(call.scope.deadline, trio.current_time() + self._grace)
            else:
                call.scope.cancel()

    async def drain(self, timeout: float | None = None) -> None:
        """Wait until every call of an ended task is recorded.

        Args:
            timeout (float | None): seconds; by default the in-flight grace plus one
                ``CancelTask`` (16 s), inside the session's 20 s wind-down guard.
        """
        bound = timeout if timeout is not None else self._grace + self._request_timeout
        with trio.move_on_after(bound):
            for call in list(self._calls.values()):
                if call.task_id in self._ended_tasks:
                    await call.done.wait()

    # -- driving one call ------------------------------------------------------------------

    async def _drive(self, call: MemberCall) -> None:
        try:
            with call.scope:
                try:
                    await self._offer_and_follow(call)
                except Exception as exc:  # a runtime bug must not take the session down
                    _log.error("call %s to %s failed inside the runtime: %s", call.call_id, call.member, type(exc).__name__)
                    self._end(call, "failed", "the call failed inside the runtime")
            if call.status is None:  # abandoned (the calling task ended) or cut short
                if call.taken_late and call.member_task_id is not None:
                    await self._cancel_late_take(call)
                self._end(call, "abandoned", f"the calling task ended before {call.member} answered")
        finally:
            if call.status is None:
                self._end(call, "abandoned", f"the calling task ended before {call.member} answered")
            self._first(call, "failed", reason=call.output)
            if call.task_id in self._ended_tasks:
                self._record(call, delivered=False)
            call.done.set()

    async def _offer_and_follow(self, call: MemberCall) -> None:
        url = self.addresses.get(call.member)
        if url is None:
            url = await self.addresses.wait(call.member, min(self._address_wait, max(call.deadline - trio.current_time(), 0)))
        if url is None:
            self._end(
                call,
                "failed",
                f"the door of {call.member} ({virtual_address(call.member)}) did not arrive on "
                "the formation channel in time",
            )
            return
        if not reaches_door(self._allow, url):
            self._end(
                call,
                "failed",
                f"capabilities.network.allow does not reach {virtual_address(call.member)}: "
                "member doors listen on loopback http at a port chosen at launch; declare the "
                "bare host `localhost`",
            )
            return
        if not await self._offers(call, url):
            return
        await self._follow(call, url)

    async def _offers(self, call: MemberCall, url: str) -> bool:
        """Offer until taken (True) or ended otherwise (False)."""
        refusals = 0
        unanswered = 0
        offer = 0
        while True:
            offer += 1
            call.in_flight = True
            try:
                reply = await self._send(call, url)
            finally:
                call.in_flight = False
            if call.abandoning:
                if reply.offer is Offer.TAKEN:
                    call.member_task_id = reply.task_id
                    call.taken_late = True
                return False
            if reply.offer is Offer.TAKEN:
                call.member_task_id = reply.task_id
                self._emit(
                    "member_call_start",
                    task_id=call.task_id,
                    call_id=call.call_id,
                    member=call.member,
                    member_task_id=reply.task_id,
                )
                self._first(call, "started", task_id=reply.task_id)
                return True
            if reply.offer is Offer.REJECTED:
                self._end(call, "rejected", reply.reason)
                return False
            if reply.offer is Offer.FAILED:
                self._end(call, "failed", reply.reason)
                return False
            if reply.offer is Offer.BUSY:
                unanswered = 0
                self._emit(
                    "member_call_busy",
                    task_id=call.task_id,
                    call_id=call.call_id,
                    member=call.member,
                    offer=offer,
                    waited_ms=self._ms_since(call.started),
                    message=BUSY_MESSAGE,
                )
                self._first(call, "busy")
            else:
                unanswered += 1
                if unanswered >= 2:
                    self._end(
                        call,
                        "unreachable",
                        f"{call.member} ({virtual_address(call.member)}) did not answer two offers in a row",
                    )
                    return False
            refusals += 1
            wake = trio.current_time() + busy_wait(refusals) + self._jitter()
            if wake >= call.deadline:
                await trio.sleep_until(call.deadline)
                if reply.offer is Offer.BUSY:
                    self._end(call, "rejected", f"{call.member} stayed busy until the call's deadline")
                else:
                    self._end(call, "unreachable", f"{call.member} did not answer before the call's deadline")
                return False
            await trio.sleep_until(wake)

    async def _follow(self, call: MemberCall, url: str) -> None:
        failed_reads = 0
        with trio.move_on_at(call.deadline):
            while True:
                await trio.sleep(self._poll)
                poll = await self._get(call, url)
                if not poll.ok:
                    failed_reads += 1
                    if failed_reads >= 2:
                        self._end(
                            call,
                            "unreachable",
                            f"{call.member} ({virtual_address(call.member)}) stopped answering "
                            "about its task",
                        )
                        return
                    continue
                failed_reads = 0
                if poll.status is not None:
                    self._end(call, poll.status, poll.output)
                    return
        self._end(call, "timed_out", f"{call.member} did not finish before the call's deadline")

    # -- requests --------------------------------------------------------------------------

    def _headers(self, call: MemberCall, tp: str) -> dict[str, str]:
        return {
            "content-type": "application/json",
            "A2A-Version": _A2A_VERSION,
            "Authorization": f"Bearer {self._tokens[call.member]}",
            ORIGIN_HEADER: "peer",
            TRUST_HEADER: call.trust,
            "traceparent": tp,
        }

    def _body(self, method: str, params: Mapping[str, object]) -> bytes:
        self._rpc_id += 1
        return json.dumps(
            {"jsonrpc": "2.0", "id": self._rpc_id, "method": method, "params": params},
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode("utf-8")

    async def _post(self, call: MemberCall, url: str, body: bytes, tp: str) -> tuple[int, bytes] | None:
        assert self._transport is not None
        try:
            return await self._transport.post(url, self._headers(call, tp), body, timeout=self._request_timeout)
        except TransportError:
            return None

    async def _send(self, call: MemberCall, url: str) -> SendReply:
        message_id = f"msg_{call.call_id}"
        params = {
            "message": {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": call.text}]},
            "configuration": {"returnImmediately": True},
        }
        tp = traceparent()
        got = await self._post(call, url, self._body("SendMessage", params), tp)
        if got is None:
            reply = SendReply(Offer.UNANSWERED, reason="the member's door did not answer")
        else:
            reply = classify_send(*got)
        fields: dict[str, object] = {"peer_url": virtual_address(call.member), "message_id": message_id}
        if reply.task_id is not None:
            fields["task_id"] = reply.task_id
        if reply.context_id is not None:
            fields["context_id"] = reply.context_id
        fields["traceparent"] = tp
        fields["trust"] = call.trust
        self._emit("a2a_send", **fields)
        return reply

    async def _get(self, call: MemberCall, url: str) -> Poll:
        assert call.member_task_id is not None
        body = self._body("GetTask", {"id": call.member_task_id, "historyLength": 0})
        got = await self._post(call, url, body, traceparent())
        return Poll(False) if got is None else classify_get(*got)

    async def _cancel_late_take(self, call: MemberCall) -> None:
        assert call.member_task_id is not None
        body = self._body("CancelTask", {"id": call.member_task_id})
        url = self.addresses.get(call.member)
        if url is None:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(self._request_timeout):
            await self._post(call, url, body, traceparent())

    # -- bookkeeping -----------------------------------------------------------------------

    def _first(self, call: MemberCall, status: str, *, task_id: str | None = None, reason: str = "") -> None:
        if call.first is not None:
            return
        first: dict[str, Any] = {"call_id": call.call_id, "member": call.member, "status": status}
        if task_id is not None:
            first["task_id"] = task_id
        if status in ("rejected", "failed"):
            first["reason"] = self._clean(reason)
        call.first = first
        call.first_ready.set()

    def _end(self, call: MemberCall, status: str, output: str) -> None:
        if call.status is not None:
            return
        call.status = status
        call.output, call.truncated = cut_output(self._clean(output))
        call.duration_ms = self._ms_since(call.started)
        if call.first is None:
            self._first(call, "rejected" if status == "rejected" else "failed", reason=call.output)
        call.ended.set()

    def _record(self, call: MemberCall, *, delivered: bool) -> None:
        if call.delivered is not None or call.status is None:
            return
        call.delivered = delivered
        fields: dict[str, object] = {"task_id": call.task_id, "call_id": call.call_id, "member": call.member}
        if call.member_task_id is not None:
            fields["member_task_id"] = call.member_task_id
        fields.update(
            status=call.status,
            duration_ms=call.duration_ms,
            output=call.output,
            truncated=call.truncated,
            delivered=delivered,
        )
        self._emit("member_call", **fields)

    def _clean(self, text: str) -> str:
        pairs = [(token, "[formation token]") for token in self._tokens.values()]
        for name, url in self.addresses.urls().items():
            pairs.append((url, virtual_address(name)))
            netloc = urlsplit(url).netloc
            if netloc:
                pairs.append((netloc, f"{name}.formation.invalid"))
        return scrub(text, pairs)

    def _emit(self, event_type: str, **fields: object) -> None:
        if self._trace is None:
            return
        try:
            self._trace.emit(event_type, parent_id=self._parent, **fields)
        except TraceWriteError:
            pass  # the session is already winding down (E-RUN-007)

    @staticmethod
    def _ms_since(t0: float) -> int:
        return max(0, math.floor((trio.current_time() - t0) * 1000))
