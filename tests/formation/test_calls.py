"""call-member: the pure pieces and the engine against a scripted door (MockClock)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio
import trio.testing

from murmur.formation.member.addresses import AddressBook, virtual_address
from murmur.formation.member.call_policy import (
    CUT_MARKER,
    OUTPUT_CAP,
    busy_wait,
    cut_output,
    deadline_ending,
    scrub,
)
from murmur.formation.member.calls import CallRefused
from murmur.formation.member.offers import Offer, classify_get, classify_send
from murmur.formation.member.reach import reaches_door, reaches_member_doors
from murmur.timing import delegation_bound

from ._member_fakes import (
    BUSY,
    CRITIC_TOKEN,
    CRITIC_URL,
    WORKER_TOKEN,
    WORKER_URL,
    FakeDoor,
    busy,
    engine_running,
    make_engine,
    reply,
    send_body,
    slow,
    taken,
    task_body,
    unanswered,
)


class TestSchedule:
    def test_busy_waits_double_to_eight(self) -> None:
        """Waits after refusals 1..6: 1, 2, 4, 8, 8, 8 seconds."""
        assert [busy_wait(n) for n in range(1, 7)] == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]

    def test_deadline_override(self) -> None:
        """MURMUR_DELEGATION_TIMEOUT_SECS overrides the manifest's bound when positive."""
        assert delegation_bound(600, {"MURMUR_DELEGATION_TIMEOUT_SECS": "30"}) == 30
        assert delegation_bound(600, {"MURMUR_DELEGATION_TIMEOUT_SECS": "0"}) == 600
        assert delegation_bound(600, {"MURMUR_DELEGATION_TIMEOUT_SECS": "x"}) == 600


    @pytest.mark.parametrize(
        ("held", "offered", "last_busy", "status", "says"),
        [
            (True, True, False, "timed_out", "worker did not finish before the call's deadline"),
            (True, True, True, "timed_out", "worker did not finish before the call's deadline"),
            (False, False, False, "failed", "the door of worker (http://worker.formation.invalid) did not arrive"),
            (False, True, True, "rejected", "worker stayed busy until the call's deadline"),
            (False, True, False, "unreachable", "worker did not answer before the call's deadline"),
        ],
    )
    def test_deadline_ending(self, held: bool, offered: bool, last_busy: bool, status: str, says: str) -> None:
        """At the deadline: held -> timed_out; no URL yet -> failed; last busy -> rejected; else unreachable."""
        got = deadline_ending("worker", virtual_address("worker"), held=held, offered=offered, last_busy=last_busy)
        assert got[0] == status and got[1].startswith(says)


class TestReach:
    @pytest.mark.parametrize(
        ("allow", "url", "ok"),
        [
            (["localhost"], "http://127.0.0.1:41234", True),
            (["127.0.0.1"], "http://127.0.0.1:41234", True),
            (["localhost:41234"], "http://127.0.0.1:41234", True),
            (["localhost:41235"], "http://127.0.0.1:41234", False),
            (["http://localhost:41234"], "http://127.0.0.1:41234", True),
            (["https://localhost:41234"], "http://127.0.0.1:41234", False),
            (["http://localhost"], "http://127.0.0.1:41234", False),
            (["example.com"], "http://127.0.0.1:41234", False),
            ([], "http://127.0.0.1:41234", False),
        ],
    )
    def test_reaches_door(self, allow: list[str], url: str, ok: bool) -> None:
        """A bare host covers every port; host:port and URL entries only their own."""
        assert reaches_door(allow, url) is ok

    @pytest.mark.parametrize(
        ("allow", "ok"),
        [
            (["localhost"], True),
            (["127.0.0.1"], True),
            (["api.example.com", "localhost"], True),
            (["localhost:8080"], False),
            (["http://localhost"], False),
            (["api.example.com"], False),
            ([], False),
        ],
    )
    def test_reaches_member_doors(self, allow: list[str], ok: bool) -> None:
        """Only a bare loopback host reaches a door at a port chosen at launch (W-RUN-008)."""
        assert reaches_member_doors(allow) is ok


class TestClassify:
    def test_send_taken(self) -> None:
        """SUBMITTED / WORKING / an already-ended task: the member took it."""
        for state in ("SUBMITTED", "WORKING", "COMPLETED"):
            got = classify_send(200, send_body(state, tid="tsk_a"))
            assert (got.offer, got.task_id, got.context_id) == (Offer.TAKEN, "tsk_a", "ctx_member")

    def test_send_busy_only_with_the_exact_message(self) -> None:
        """REJECTED with exactly the busy message is busy; any other rejection is rejected."""
        assert classify_send(200, send_body("REJECTED", text=BUSY)).offer is Offer.BUSY
        other = classify_send(200, send_body("REJECTED", text="task rejected: the session is closing"))
        assert (other.offer, other.reason) == (Offer.REJECTED, "the session is closing")

    @pytest.mark.parametrize(
        ("status", "body", "offer"),
        [
            (401, b'{"error":"invalid_token","message":"x"}', Offer.FAILED),
            (403, b'{"error":"peer_not_accepted","message":"x"}', Offer.FAILED),
            (404, b"", Offer.FAILED),
            (503, b"", Offer.UNANSWERED),
            (200, b"not json", Offer.UNANSWERED),
            (200, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32601}}', Offer.FAILED),
            (200, b'{"jsonrpc":"2.0","id":1,"result":{}}', Offer.FAILED),
        ],
    )
    def test_send_failures(self, status: int, body: bytes, offer: Offer) -> None:
        """Refusals and errors fail; no answer at all (5xx, garbage) is unanswered."""
        assert classify_send(status, body).offer is offer

    def test_send_auth_reason_names_the_refusal(self) -> None:
        """A 403 reason names its error code and nothing of the request."""
        got = classify_send(403, b'{"error":"not_permitted","message":"m"}')
        assert got.reason == "the member's door refused the call (403 not_permitted)"

    @pytest.mark.parametrize(
        ("body", "expected"),
        [
            (task_body("WORKING"), (True, None, "")),
            (task_body("COMPLETED", answer="the answer", text="done"), (True, "completed", "the answer")),
            (task_body("COMPLETED", text="only status"), (True, "completed", "only status")),
            (task_body("FAILED", text="it broke"), (True, "failed", "it broke")),
            (task_body("FAILED", text="no answer: nope", no_answer=True), (True, "no_answer", "no answer: nope")),
            (task_body("CANCELED", text="CancelTask"), (True, "canceled", "CancelTask")),
            (b'{"jsonrpc":"2.0","id":1,"error":{"code":-32001}}', (False, None, "")),
            (b"garbage", (False, None, "")),
        ],
    )
    def test_get(self, body: bytes, expected: tuple[bool, str | None, str]) -> None:
        """GetTask: pending, each ending with its output, and failed reads."""
        got = classify_get(200, body)
        assert (got.ok, got.status, got.output) == expected

    def test_get_http_error_is_a_failed_read(self) -> None:
        """A non-200 GetTask is a failed read."""
        assert classify_get(500, b"").ok is False


class TestText:
    def test_cut_output(self) -> None:
        """Answers over 64 KiB are cut at a character boundary and marked."""
        assert cut_output("short") == ("short", False)
        text, cut = cut_output("é" * OUTPUT_CAP)
        assert cut and text.endswith(CUT_MARKER)
        assert len(text.removesuffix(CUT_MARKER).encode()) <= OUTPUT_CAP

    def test_scrub_and_virtual_address(self) -> None:
        """Secrets are replaced longest first; the virtual address names the member."""
        assert virtual_address("coder") == "http://coder.formation.invalid"
        pairs = [("127.0.0.1:4000", "coder.formation.invalid"), ("http://127.0.0.1:4000", "http://coder.formation.invalid")]
        assert scrub("at http://127.0.0.1:4000/ now", pairs) == "at http://coder.formation.invalid/ now"


class TestAddressBook:
    async def test_waits_for_a_late_address(self, autojump_clock: trio.testing.MockClock) -> None:
        """A URL arriving within the wait is returned; names not called are ignored."""
        book = AddressBook(("worker",))

        async def later() -> None:
            await trio.sleep(3)
            book.update({"stranger": "http://127.0.0.1:1", "worker": WORKER_URL})

        async with trio.open_nursery() as n:
            n.start_soon(later)
            assert await book.wait("worker", 10) == WORKER_URL
        assert trio.current_time() == pytest.approx(3)
        assert book.get("stranger") is None

    async def test_keeps_waiting_through_other_names(self, autojump_clock: trio.testing.MockClock) -> None:
        """An update naming only another callee does not end the wait, nor restart its bound."""
        book = AddressBook(("worker", "critic"))

        async def later() -> None:
            await trio.sleep(2)
            book.update({"critic": CRITIC_URL})
            await trio.sleep(3)
            book.update({"worker": WORKER_URL})

        async with trio.open_nursery() as n:
            n.start_soon(later)
            assert await book.wait("worker", 10) == WORKER_URL
        assert trio.current_time() == pytest.approx(5)

    async def test_gives_up_after_the_wait(self, autojump_clock: trio.testing.MockClock) -> None:
        """No URL within the wait: None, after exactly the wait."""
        book = AddressBook(("worker",))
        assert await book.wait("worker", 10) is None
        assert trio.current_time() == pytest.approx(10)


def _no_secrets(*texts: Any) -> None:
    blob = json.dumps(texts)
    for secret in (WORKER_TOKEN, CRITIC_TOKEN, "127.0.0.1", "45123", "45124"):
        assert secret not in blob


class TestCallEngine:
    async def test_started_then_completed(self, autojump_clock: trio.testing.MockClock) -> None:
        """Taken at once: started; polled every 500 ms; the answer is delivered and recorded."""
        door = FakeDoor([taken()], [reply(200, task_body("WORKING")), reply(200, task_body("COMPLETED", answer="42"))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "what is six times seven")
            assert first == {"call_id": first["call_id"], "member": "worker", "status": "started", "task_id": "tsk_member"}
            answer = await engine.answer("tsk_caller", str(first["call_id"]))
        assert answer["status"] == "completed" and answer["output"] == "42" and answer["task_id"] == "tsk_member"
        assert door.times("GetTask") == pytest.approx([0.5, 1.0])
        assert sink.types() == ["a2a_send", "member_call_start", "member_call"]
        rec = sink.of("member_call")[0]
        assert rec["delivered"] is True and rec["status"] == "completed" and rec["duration_ms"] == 1000
        assert all(r["parent_id"] == "evt_session" for r in sink.records)
        _no_secrets(first, answer, sink.records)

    async def test_request_shape(self, autojump_clock: trio.testing.MockClock) -> None:
        """SendMessage carries the edge's token, origin peer, the task's trust, msg_<call id>."""
        door = FakeDoor([taken()], [reply(200, task_body("COMPLETED", answer="ok"))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "untrusted", "critic", "review")
            await engine.answer("tsk_caller", str(first["call_id"]))
        send = door.requests[0]
        assert send.url == "http://127.0.0.1:45124/"
        assert send.headers["Authorization"] == f"Bearer {CRITIC_TOKEN}"
        assert send.headers["x-murmur-task-origin"] == "peer"
        assert send.headers["x-murmur-task-trust"] == "untrusted"
        assert send.headers["A2A-Version"] == "1.0"
        msg = send.params["message"]
        assert msg["messageId"] == f"msg_{first['call_id']}" and msg["parts"] == [{"text": "review"}]
        assert send.params["configuration"] == {"returnImmediately": True}
        a2a = sink.of("a2a_send")[0]
        assert a2a["peer_url"] == "http://critic.formation.invalid" and a2a["trust"] == "untrusted"
        assert door.requests[1].params == {"id": "tsk_member", "historyLength": 0}

    async def test_busy_schedule(self, autojump_clock: trio.testing.MockClock) -> None:
        """Busy: the tool returns at once; re-offers 1, 2, 4, 8 s (+ jitter) after each refusal."""
        door = FakeDoor([busy(), busy(), busy(), busy(), taken()], [reply(200, task_body("COMPLETED", answer="done"))])
        engine, sink = make_engine(door, jitter=0.1)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            assert first["status"] == "busy" and trio.current_time() == 0
            answer = await engine.answer("tsk_caller", str(first["call_id"]))
        assert door.times("SendMessage") == pytest.approx([0, 1.1, 3.2, 7.3, 15.4])
        busy_recs = sink.of("member_call_busy")
        assert [r["offer"] for r in busy_recs] == [1, 2, 3, 4]
        assert [r["waited_ms"] for r in busy_recs] == [0, 1100, 3200, 7300]
        assert all(r["message"] == BUSY for r in busy_recs)
        assert sink.of("member_call_start")[0]["member_task_id"] == "tsk_member"
        assert answer["status"] == "completed"

    async def test_busy_until_deadline_is_rejected(self, autojump_clock: trio.testing.MockClock) -> None:
        """Still busy when the call's deadline passes: rejected, never held."""
        door = FakeDoor([busy()] * 10)
        engine, sink = make_engine(door, deadline=10)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            answer = await engine.answer("tsk_caller", str(first["call_id"]))
        assert answer["status"] == "rejected" and "task_id" not in answer
        assert trio.current_time() == pytest.approx(10)
        assert len(door.times("SendMessage")) == 4  # 0, 1.1, 3.2, 7.3
        assert "member_task_id" not in sink.of("member_call")[0]

    async def test_other_rejection(self, autojump_clock: trio.testing.MockClock) -> None:
        """Another rejection: rejected at once, reason without `task rejected: `, recorded delivered."""
        door = FakeDoor([reply(200, send_body("REJECTED", text="task rejected: the session is closing"))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
        assert first["status"] == "rejected" and first["reason"] == "the session is closing"
        rec = sink.of("member_call")[0]
        assert (rec["status"], rec["delivered"]) == ("rejected", True)

    async def test_refused_by_the_door(self, autojump_clock: trio.testing.MockClock) -> None:
        """401/403 at the door: failed with the door's error code, nothing retried."""
        door = FakeDoor([reply(403, b'{"error":"peer_not_accepted","message":"no"}')])
        engine, _sink = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
        assert first["status"] == "failed" and "403 peer_not_accepted" in str(first["reason"])
        assert door.methods() == ["SendMessage"]

    async def test_two_unanswered_offers_are_unreachable(self, autojump_clock: trio.testing.MockClock) -> None:
        """No answer twice in a row: unreachable (the tool says failed); once is retried."""
        door = FakeDoor([unanswered(), unanswered()])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
        assert first["status"] == "failed" and "did not answer two offers" in str(first["reason"])
        assert sink.of("member_call")[0]["status"] == "unreachable"
        assert door.times("SendMessage") == pytest.approx([0, 1.1])
        _no_secrets(first, sink.records)

        door = FakeDoor([unanswered(), taken()], [reply(200, task_body("COMPLETED", answer="y"))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
        assert first["status"] == "started"

    async def test_polling_unreachable_after_two_failed_reads(self, autojump_clock: trio.testing.MockClock) -> None:
        """One failed read is survived; two in a row end the call unreachable."""
        bad = reply(500, b"")
        door = FakeDoor([taken()], [bad, reply(200, task_body("WORKING")), bad, bad])
        engine, _ = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            answer = await engine.answer("tsk_caller", str(first["call_id"]))
        assert answer["status"] == "unreachable"
        assert len(door.times("GetTask")) == 4

    async def test_held_past_deadline_times_out(self, autojump_clock: trio.testing.MockClock) -> None:
        """Held but still running at the call's deadline: timed_out (and not cancelled)."""
        door = FakeDoor([taken()], [reply(200, task_body("WORKING"))])
        engine, _ = make_engine(door, deadline=30)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            answer = await engine.answer("tsk_caller", str(first["call_id"]))
        assert answer["status"] == "timed_out" and trio.current_time() == pytest.approx(30)
        assert "CancelTask" not in door.methods()

    async def test_offer_hanging_at_the_deadline_is_cut(self, autojump_clock: trio.testing.MockClock) -> None:
        """The deadline is the call's scope's: an offer still in flight then is cut at the deadline
        (not at the 10 s request bound) and the call ends unreachable."""
        door = FakeDoor([slow(60, taken())])
        engine, sink = make_engine(door, deadline=5)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            assert trio.current_time() == pytest.approx(5)
        assert first["status"] == "failed" and first["reason"] == "worker did not answer before the call's deadline"
        rec = sink.of("member_call")[0]
        assert (rec["status"], rec["duration_ms"], rec["delivered"]) == ("unreachable", 5000, True)
        assert door.methods() == ["SendMessage", "CancelTask"]  # the cut offer, by its messageId
        assert door.requests[1].params == {"metadata": {"messageId": f"msg_{first['call_id']}"}}
        (send,) = sink.of("a2a_send")  # every offer is recorded, one cut short too
        assert send["peer_url"] == "http://worker.formation.invalid" and "task_id" not in send

    async def test_re_offer_hanging_at_the_deadline_is_cut(self, autojump_clock: trio.testing.MockClock) -> None:
        """Busy, then a re-offer in flight at the deadline: cut then; an unanswered offer is unreachable."""
        door = FakeDoor([busy(), slow(60, taken())])
        engine, sink = make_engine(door, deadline=5)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            answer = await engine.answer("tsk_caller", str(first["call_id"]))
            assert trio.current_time() == pytest.approx(5)
        assert first["status"] == "busy" and answer["status"] == "unreachable"
        assert door.times("SendMessage") == pytest.approx([0, 1.1])
        assert len(sink.of("a2a_send")) == 2 and door.methods()[-1] == "CancelTask"
        assert door.requests[-1].params == {"metadata": {"messageId": f"msg_{first['call_id']}"}}

    async def test_poll_hanging_at_the_deadline_is_cut(self, autojump_clock: trio.testing.MockClock) -> None:
        """Held, with a GetTask in flight at the deadline: cut then, timed_out."""
        door = FakeDoor([taken()], [slow(60, reply(200, task_body("COMPLETED", answer="late")))])
        engine, _ = make_engine(door, deadline=3)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            answer = await engine.answer("tsk_caller", str(first["call_id"]))
            assert trio.current_time() == pytest.approx(3)
        assert answer["status"] == "timed_out" and answer["output"] == "worker did not finish before the call's deadline"

    async def test_deadline_before_the_address_arrives(self, autojump_clock: trio.testing.MockClock) -> None:
        """A deadline shorter than the 10 s address wait ends the wait at the deadline: failed."""
        door = FakeDoor([])
        engine, _ = make_engine(door, urls={}, deadline=4)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            assert trio.current_time() == pytest.approx(4)
        assert first["status"] == "failed" and "did not arrive on the formation channel" in str(first["reason"])
        assert door.requests == []

    async def test_long_answer_is_cut(self, autojump_clock: trio.testing.MockClock) -> None:
        """An answer over 64 KiB is cut, marked, and `truncated` is recorded."""
        door = FakeDoor([taken()], [reply(200, task_body("COMPLETED", answer="x" * (OUTPUT_CAP + 10)))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            answer = await engine.answer("tsk_caller", str(first["call_id"]))
        assert answer["truncated"] is True and str(answer["output"]).endswith(CUT_MARKER)
        assert sink.of("member_call")[0]["truncated"] is True

    async def test_no_address_in_time(self, autojump_clock: trio.testing.MockClock) -> None:
        """No door URL on the channel within 10 s: failed, naming only the virtual address."""
        door = FakeDoor([])
        engine, _sink = make_engine(door, urls={})
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
        assert trio.current_time() == pytest.approx(10)
        assert first["status"] == "failed" and "http://worker.formation.invalid" in str(first["reason"])
        assert door.requests == []

    async def test_network_allow_must_reach_the_door(self, autojump_clock: trio.testing.MockClock) -> None:
        """A grant that does not reach the door: failed before any request, no port named."""
        door = FakeDoor([])
        engine, sink = make_engine(door, allow=("api.example.com",))
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
        assert first["status"] == "failed" and "localhost" in str(first["reason"])
        assert door.requests == []
        _no_secrets(first, sink.records)


class TestRefusals:
    async def test_not_a_callee(self, autojump_clock: trio.testing.MockClock) -> None:
        """A member not in the callees is refused before anything is sent or recorded."""
        engine, sink = make_engine(FakeDoor([]))
        async with engine_running(engine):
            with pytest.raises(CallRefused, match=r"callees: worker, critic"):
                await engine.call("tsk_caller", "trusted", "stranger", "x")
        assert sink.records == []

    async def test_second_call_to_an_unanswered_member(self, autojump_clock: trio.testing.MockClock) -> None:
        """A second call to a member with an undelivered call is refused; others are not blocked."""
        door = FakeDoor([taken("tsk_1"), taken("tsk_2"), taken("tsk_3")], [reply(200, task_body("COMPLETED", answer="a"))])
        engine, _ = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            with pytest.raises(CallRefused, match="still unanswered"):
                await engine.call("tsk_caller", "trusted", "worker", "again")
            other = await engine.call("tsk_caller", "trusted", "critic", "y")
            assert other["status"] == "started"
            await engine.answer("tsk_caller", str(first["call_id"]))
            again = await engine.call("tsk_caller", "trusted", "worker", "again")
            assert again["status"] == "started"

    async def test_after_the_task_ended(self, autojump_clock: trio.testing.MockClock) -> None:
        """A call from a task that has ended is refused."""
        engine, _ = make_engine(FakeDoor([]))
        async with engine_running(engine):
            engine.task_ended("tsk_caller")
            with pytest.raises(CallRefused, match="has ended"):
                await engine.call("tsk_caller", "trusted", "worker", "x")

    async def test_answer_of_another_task(self, autojump_clock: trio.testing.MockClock) -> None:
        """A task cannot wait for another task's call."""
        door = FakeDoor([taken()], [reply(200, task_body("WORKING"))])
        engine, _ = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            with pytest.raises(CallRefused):
                await engine.answer("tsk_other", str(first["call_id"]))
            engine.task_ended("tsk_caller")


class TestTaskEnds:
    async def test_abandoned_between_offers(self, autojump_clock: trio.testing.MockClock) -> None:
        """The task ends while the member is busy: abandoned at once, nothing cancelled."""
        door = FakeDoor([busy(), busy()])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            await engine.call("tsk_caller", "trusted", "worker", "x")
            await trio.sleep(0.5)
            engine.task_ended("tsk_caller")
            await engine.drain()
        rec = sink.of("member_call")[0]
        assert (rec["status"], rec["delivered"]) == ("abandoned", False)
        assert trio.current_time() == pytest.approx(0.5)
        assert door.methods() == ["SendMessage"]

    async def test_abandoned_while_held(self, autojump_clock: trio.testing.MockClock) -> None:
        """The task ends while the member works on it: abandoned, its task is not cancelled."""
        door = FakeDoor([taken()], [reply(200, task_body("WORKING"))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            await engine.call("tsk_caller", "trusted", "worker", "x")
            await trio.sleep(2)
            engine.task_ended("tsk_caller")
            await engine.drain()
        rec = sink.of("member_call")[0]
        assert rec["status"] == "abandoned" and rec["member_task_id"] == "tsk_member"
        assert "CancelTask" not in door.methods()

    async def test_offer_in_flight_taken_is_cancelled(self, autojump_clock: trio.testing.MockClock) -> None:
        """An offer in flight when the task ends is waited for; a task taken then is cancelled."""
        door = FakeDoor([busy(), slow(3, taken("tsk_late"))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            await engine.call("tsk_caller", "trusted", "worker", "x")
            await trio.sleep(1.5)  # the second offer went out at 1.1 and answers at 4.1
            engine.task_ended("tsk_caller")
            await engine.drain()
        cancel = [r for r in door.requests if r.method == "CancelTask"]
        assert len(cancel) == 1 and cancel[0].params == {"id": "tsk_late"} and cancel[0].at == pytest.approx(4.1)
        rec = sink.of("member_call")[0]
        assert (rec["status"], rec["member_task_id"], rec["delivered"]) == ("abandoned", "tsk_late", False)
        assert sink.of("member_call_start") == []

    async def test_offer_in_flight_waited_at_most_six_seconds(self, autojump_clock: trio.testing.MockClock) -> None:
        """An offer still unanswered 6 s after the task ended is given up and cancelled by its
        messageId (the member may have taken it); no task id is known to cancel."""
        door = FakeDoor([busy(), slow(9, taken("tsk_late"))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            await engine.call("tsk_caller", "trusted", "worker", "x")
            await trio.sleep(1.5)
            engine.task_ended("tsk_caller")
            await engine.drain()
            assert trio.current_time() == pytest.approx(7.5)
        cancels = [r.params for r in door.requests if r.method == "CancelTask"]
        assert len(cancels) == 1 and "id" not in cancels[0] and cancels[0]["metadata"]["messageId"].startswith("msg_mcl_")
        assert sink.of("member_call")[0]["status"] == "abandoned"

    async def test_first_offer_in_flight_when_the_task_is_cancelled(self, autojump_clock: trio.testing.MockClock) -> None:
        """A task cancelled during its first offer: the offer is still settled (CancelTask)."""
        door = FakeDoor([slow(2, taken("tsk_late"))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            with trio.move_on_after(1):
                await engine.call("tsk_caller", "trusted", "worker", "x")
            engine.task_ended("tsk_caller")
            await engine.drain()
        assert [r.method for r in door.requests] == ["SendMessage", "CancelTask"]
        assert sink.of("member_call")[0]["status"] == "abandoned"

    async def test_ended_but_undelivered(self, autojump_clock: trio.testing.MockClock) -> None:
        """An answer that arrived but was never taken is recorded with delivered false."""
        door = FakeDoor([taken()], [reply(200, task_body("COMPLETED", answer="late"))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            await engine.call("tsk_caller", "trusted", "worker", "x")
            await trio.sleep(2)
            assert sink.of("member_call") == []
            engine.task_ended("tsk_caller")
        rec = sink.of("member_call")[0]
        assert (rec["status"], rec["output"], rec["delivered"]) == ("completed", "late", False)


class TestRobustness:
    async def test_unexpected_error_fails_the_call_only(self, autojump_clock: trio.testing.MockClock) -> None:
        """An unexpected exception in a call ends that call failed; the engine keeps working."""

        def boom() -> Any:
            raise RuntimeError("http://127.0.0.1:45123 exploded")

        door = FakeDoor([boom, taken()], [reply(200, task_body("COMPLETED", answer="fine"))])
        engine, sink = make_engine(door)
        async with engine_running(engine):
            first = await engine.call("tsk_caller", "trusted", "worker", "x")
            assert first["status"] == "failed" and first["reason"] == "the call failed inside the runtime"
            second = await engine.call("tsk_caller", "trusted", "critic", "y")
            assert (await engine.answer("tsk_caller", str(second["call_id"])))["output"] == "fine"
        _no_secrets(first, sink.records)
