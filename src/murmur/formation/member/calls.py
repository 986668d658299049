"""``call-member``: giving another formation member work, for plans and agents.

Specification: ``spec/formation.md`` "``call-member``" (statuses, the busy schedule, answers,
the records ``a2a_send``, ``member_call_busy``, ``member_call_start``, ``member_call``, origin
``peer`` and the trust header).

One :class:`CallEngine` per member session. :meth:`CallEngine.services` hands each task its
``call_member`` / ``member_answer`` functions (:class:`murmur.workload.TaskServices`).
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
member's task. An offer cut before its answer came back (the deadline, the grace, a cancel) is
cancelled by its ``messageId`` (``CancelTask`` with ``metadata.messageId``), since the member
may have taken it without the caller learning its task id. The call's deadline is the session's
delegation bound (:func:`murmur.timing.delegation_bound`), the deadline of the call's scope:
whatever the call is doing then is cut short, a request in flight included
(:func:`murmur.formation.member.call_policy.deadline_ending` says how it ends: still busy ->
``rejected``, still running -> ``timed_out``).

Tokens, door URLs and ports never reach a result, a record or a log: every record and every
reason names the callee's virtual address ``http://<name>.formation.invalid``, and reasons are
built here, never copied from an exception (:func:`scrub` is a second line of defence).

This module is the engine. Its pure pieces live beside it (:mod:`.call_policy`, :mod:`.offers`,
:mod:`.reach`, :mod:`.addresses`); requests go through :mod:`murmur.a2a`.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import attrs
import trio

from murmur import timing, tracectx
from murmur.a2a import requests
from murmur.errors import MurmurError
from murmur.formation.member.addresses import AddressBook, virtual_address
from murmur.formation.member.call_policy import (
    IN_FLIGHT_GRACE,
    busy_wait,
    cut_output,
    deadline_ending,
    no_door,
    scrub,
)
from murmur.formation.member.reach import reaches_door
from murmur.ids import new_id
from murmur.session import BUSY_MESSAGE, ORIGIN_HEADER, TRUST_HEADER, TraceWriteError
from murmur.workload import TaskServices, TraceSink

from .offers import NO_ANSWER, Offer, Poll, SendReply, classify_get, classify_send

if TYPE_CHECKING:
    import httpx

    from murmur.a2a import A2AClient

__all__ = ["CallEngine", "CallRefused", "MemberCall"]

_log = logging.getLogger("murmur.formation.member.calls")


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
        scope (trio.CancelScope): the call's scope; its ``deadline`` is the call's deadline
            (``trio.current_time()`` seconds), narrowed to the in-flight grace or cancelled when
            the calling task ends (``abandoning``).
        member_task_id (str | None): the member's task id once it took the task.
        status (str | None): the final status once ended.
        output (str): the answer (completed) or why there is none; cut at 64 KiB.
        truncated (bool): whether ``output`` was cut.
        duration_ms (int): call start to end.
        first (dict | None): what ``call_member`` returned.
        delivered (bool | None): None until recorded; then whether the answer reached the task.
        offers (int): offers sent so far.
        last_busy (bool): the last offer was answered busy.
    """

    call_id: str
    member: str
    task_id: str
    trust: str
    text: str
    started: float
    scope: trio.CancelScope
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
    in_flight: bool = False
    offers: int = 0
    last_busy: bool = False
    abandoning: bool = False
    taken_late: bool = False
    cut_mid_offer: bool = False


def _default_jitter() -> float:
    return random.uniform(0.0, timing.BUSY_JITTER)


class CallEngine:
    """Every ``call-member`` call of one member session.

    Args:
        member (str): this member's roster name.
        tokens (Mapping[str, str]): callee -> the edge's formation token (roster order).
        addresses (AddressBook): callees' door URLs.
        network_allow (Sequence[str]): this capsule's ``capabilities.network.allow``.
        deadline_secs (float): a call's deadline, seconds from the call.
        transport (httpx.AsyncBaseTransport | None): None for real HTTP through
            :class:`murmur.a2a.A2AClient` (made when the engine runs); tests pass
            ``httpx.MockTransport``.
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
        transport: httpx.AsyncBaseTransport | None = None,
        jitter: Callable[[], float] = _default_jitter,
        poll_interval: float = timing.MEMBER_POLL,
        address_wait: float = timing.DOOR_URL_WAIT,
        request_timeout: float = timing.A2A_REQUEST,
        in_flight_grace: float = IN_FLIGHT_GRACE,
    ) -> None:
        self.member = member
        self._tokens = dict(tokens)
        self.callees = tuple(self._tokens)
        self.addresses = addresses
        self._allow = tuple(network_allow)
        self._deadline_secs = deadline_secs
        self._transport = transport
        self._client: A2AClient | None = None
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
        from murmur.a2a import A2AClient  # httpx loads with the first call

        self._client = client = A2AClient(timeout=self._request_timeout, transport=self._transport)
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._ready.set()
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self._client = None
            await client.aclose()

    def services(self, task_id: str, trust: str, *, entry_member: bool = False) -> TaskServices:
        """The task's services: ``call_member`` and ``member_answer`` bound to ``task_id``."""

        async def call_member(member: str, text: str) -> Mapping[str, object]:
            return await self.call(task_id, trust, member, text)

        async def member_answer(call_id: str) -> Mapping[str, object]:
            return await self.answer(task_id, call_id)

        async def peer_route(member: str) -> tuple[str, Mapping[str, str]] | None:
            return await self.route(member, trust)

        return TaskServices(
            call_member=call_member,
            member_answer=member_answer,
            peer_route=peer_route,
            callees=self.callees,
            entry_member=entry_member,
        )

    async def route(self, member: str, trust: str) -> tuple[str, Mapping[str, str]] | None:
        """A component's request to ``member``'s virtual address: the door URL (waited for up
        to 10 s) and the headers the edge attaches (the token, origin ``peer``, ``trust``);
        None for a member this one may not call, or when no URL arrived in time."""
        if member not in self._tokens:
            return None
        url = self.addresses.get(member) or await self.addresses.wait(member, self._address_wait)
        if url is None:
            return None
        return url, {"Authorization": f"Bearer {self._tokens[member]}", ORIGIN_HEADER: "peer",
                     TRUST_HEADER: trust or "untrusted"}

    # -- the calls -------------------------------------------------------------------------

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
            scope=trio.CancelScope(deadline=now + self._deadline_secs),
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
            if call.cut_mid_offer and call.member_task_id is None:
                await self._cancel_by_message(call)  # the member may have taken it: no work for nobody
            if call.status is None and not call.abandoning and call.scope.cancelled_caught:
                self._end(call, *self._deadline_ending(call))  # only the deadline cancels it then
            if call.status is None:  # abandoned (the calling task ended)
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

    @staticmethod
    def _deadline_ending(call: MemberCall) -> tuple[str, str]:
        return deadline_ending(call.member, virtual_address(call.member), held=call.member_task_id is not None,
                               offered=call.offers > 0, last_busy=call.last_busy)

    async def _offer_and_follow(self, call: MemberCall) -> None:
        """Runs in the call's scope: its deadline cuts any step short (see ``_drive``)."""
        url = self.addresses.get(call.member)
        if url is None:
            url = await self.addresses.wait(call.member, self._address_wait)
        if url is None:
            self._end(call, "failed", no_door(call.member, virtual_address(call.member)))
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
        while True:
            call.offers += 1
            call.last_busy = False  # an offer cut short by the deadline counts as unanswered
            call.in_flight = True
            try:
                reply = await self._send(call, url)
            except trio.Cancelled:
                call.cut_mid_offer = True  # no answer came back: the member may hold it
                raise
            finally:
                call.in_flight = False
            call.last_busy = reply.offer is Offer.BUSY
            if call.abandoning:
                if reply.offer is Offer.TAKEN:
                    call.member_task_id = reply.task_id
                    call.taken_late = True
                return False
            if reply.offer is Offer.TAKEN:
                call.member_task_id = reply.task_id
                self._emit("member_call_start", task_id=call.task_id, call_id=call.call_id,
                           member=call.member, member_task_id=reply.task_id)
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
                self._emit("member_call_busy", task_id=call.task_id, call_id=call.call_id, member=call.member,
                           offer=call.offers, waited_ms=self._ms_since(call.started), message=BUSY_MESSAGE)
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
            await trio.sleep(busy_wait(refusals) + self._jitter())

    async def _follow(self, call: MemberCall, url: str) -> None:
        failed_reads = 0
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

    # -- requests --------------------------------------------------------------------------

    def _headers(self, call: MemberCall, tp: str) -> dict[str, str]:
        extra = {ORIGIN_HEADER: "peer", TRUST_HEADER: call.trust, "traceparent": tp}
        return requests.headers(bearer=self._tokens[call.member], extra=extra)

    def _next_id(self) -> int:
        self._rpc_id += 1
        return self._rpc_id

    async def _post(self, call: MemberCall, url: str, body: dict[str, Any], tp: str) -> tuple[int, bytes] | None:
        assert self._client is not None
        reply = await self._client.post(requests.rpc_url(url), requests.encode(body), self._headers(call, tp))
        return None if reply is None else (reply.status, reply.body)

    async def _send(self, call: MemberCall, url: str) -> SendReply:
        message_id = f"msg_{call.call_id}"
        body = requests.send_message(call.text, message_id=message_id, rpc_id=self._next_id())
        tp = tracectx.outgoing()
        reply = NO_ANSWER  # also when the call's scope cuts the request short
        try:
            got = await self._post(call, url, body, tp)
            reply = NO_ANSWER if got is None else classify_send(*got)
        finally:
            self._record_send(call, message_id, tp, reply)
        return reply

    def _record_send(self, call: MemberCall, message_id: str, tp: str, reply: SendReply) -> None:
        fields: dict[str, object] = {"peer_url": virtual_address(call.member), "message_id": message_id}
        if reply.task_id is not None:
            fields["task_id"] = reply.task_id
        if reply.context_id is not None:
            fields["context_id"] = reply.context_id
        fields["traceparent"] = tp
        fields["trust"] = call.trust
        self._emit("a2a_send", **fields)

    async def _get(self, call: MemberCall, url: str) -> Poll:
        assert call.member_task_id is not None
        body = requests.get_task(call.member_task_id, history_length=0, rpc_id=self._next_id())
        got = await self._post(call, url, body, tracectx.outgoing())
        return Poll(False) if got is None else classify_get(*got)

    async def _cancel_late_take(self, call: MemberCall) -> None:
        await self._cancel(call, requests.cancel_task(str(call.member_task_id), rpc_id=self._next_id()))

    async def _cancel_by_message(self, call: MemberCall) -> None:
        """By the cut offer's ``messageId``: a door that took nothing answers "not found"."""
        await self._cancel(call, requests.cancel_by_message(f"msg_{call.call_id}", rpc_id=self._next_id()))

    async def _cancel(self, call: MemberCall, body: dict[str, Any]) -> None:
        url = self.addresses.get(call.member)
        if url is None or self._client is None:
            return
        with trio.CancelScope(shield=True), trio.move_on_after(self._request_timeout):
            await self._post(call, url, body, tracectx.outgoing())

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
