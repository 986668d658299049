"""Handing a fresh child its task and reading its answer, over A2A (:mod:`murmur.a2a`).

Specification: ``spec/delegation.md`` "Launching a child" and "The call returns".

* :func:`deliver`: ``SendMessage`` (``returnImmediately``) of the task to the child's door,
  retried every 100 ms while the door comes up, within the delivery bound (30 s);
* :func:`read_answer`: ``GetTask`` polls from 50 ms, doubling up to 500 ms, until the task
  has ended — for a plan ``capsule`` step, which waits for the child's answer;
* :func:`answer_from_records`: the answer from the child's result file, once it has exited.

:func:`taken` and :func:`task_end` are the pure readings of the two answers.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import trio

from murmur import exitstatus, timing
from murmur.a2a import A2AClient, replies, requests
from murmur.ids import new_id

POLL_FIRST = 0.05  # GetTask polling starts here and doubles up to timing.MEMBER_POLL
RETRY_EVERY = 0.1  # delivery retry interval while the child's door comes up
_NOT_TAKEN = frozenset({replies.REJECTED, replies.FAILED, replies.CANCELED})


class Refused(Exception):
    """The child's door answered the delivery but did not take the task (the sentence says why)."""


def taken(answer: object) -> str:
    """The task id from a ``SendMessage`` answer (parsed JSON).

    Raises:
        Refused: a JSON-RPC error, no task, or a task that did not start.
    """
    if not isinstance(answer, dict):
        raise Refused("the child answered its task delivery without a JSON-RPC body")
    err = replies.fault(answer)
    if err is not None:
        raise Refused(f"the child refused its task: {err.message if err.message is not None else '(no message)'}")
    task = replies.sent_task(answer)
    if task is None or task.id is None:
        raise Refused("the child answered its task delivery without a task")
    if task.state in _NOT_TAKEN:
        raise Refused(f"the child did not take its task ({task.message_text.strip() or task.state})")
    return task.id


def task_end(answer: object) -> tuple[str, str] | None:
    """``(status, output)`` of an ended task from a ``GetTask`` answer; None while it runs.

    ``status`` is the end word (``completed`` | ``failed`` | ``canceled`` | ``rejected``);
    ``output`` the answer (completed, from the ``response`` artifact) or the status message.
    A JSON-RPC error is ``failed`` with the error's message.
    """
    if not isinstance(answer, dict):
        return None
    err = replies.fault(answer)
    if err is not None:
        return "failed", f"the child's task could not be read: {err.message if err.message is not None else '(no message)'}"
    task = replies.got_task(answer)
    word = task.end_word if task is not None else None
    if task is None or word is None:
        return None
    if word == "completed" and task.answer is not None:
        return word, task.answer
    return word, task.message_text.strip()


def _parsed(reply: replies.Reply | None) -> object | None:
    if reply is None:
        return None
    try:
        return reply.json()
    except ValueError:
        return None


async def deliver(
    url: str, text: str, *, bound: float, exited: trio.Event, transport: httpx.AsyncBaseTransport | None = None
) -> str | None:
    """Send the task ``text`` to the child's door ``url`` until it answers.

    Returns:
        str | None: the child's task id; None when the child exited first or ``bound``
        seconds passed (``exited`` tells which).

    Raises:
        Refused: the door answered and did not take the task.
    """
    body = requests.encode(requests.send_message(text, message_id=new_id("msg")))
    with trio.move_on_after(bound):
        async with A2AClient(transport=transport) as client:
            while not exited.is_set():
                answer = _parsed(await client.post(requests.rpc_url(url), body, requests.headers()))
                if answer is not None:
                    return taken(answer)
                with trio.move_on_after(RETRY_EVERY):
                    await exited.wait()
    return None


async def read_answer(
    url: str, task_id: str, *, exited: trio.Event, transport: httpx.AsyncBaseTransport | None = None
) -> tuple[str, str] | None:
    """Poll ``GetTask`` of ``task_id`` until it has ended: ``(status, output)`` (see
    :func:`task_end`); None once the child has exited (read :func:`answer_from_records`).
    Unbounded: the caller's scope bounds it."""
    body = requests.encode(requests.get_task(task_id))
    interval = POLL_FIRST
    async with A2AClient(transport=transport) as client:
        while not exited.is_set():
            answer = _parsed(await client.post(requests.rpc_url(url), body, requests.headers()))
            ended = task_end(answer) if answer is not None else None
            if ended is not None:
                return ended
            with trio.move_on_after(interval):
                await exited.wait()
            interval = min(interval * 2, timing.MEMBER_POLL)
    return None


def answer_from_records(records_dir: str | None, task_id: str, returncode: int | None) -> tuple[str, str]:
    """``(status, output)`` from the child's ``out/result_<task>.txt`` once it has exited."""
    how = exitstatus.describe(returncode)
    if records_dir is None:
        return "failed", f"the child ended ({how}) before its answer could be read"
    path = Path(records_dir) / "out" / f"result_{task_id}.txt"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return "failed", f"the child ended ({how}) before its answer could be read"
    text = text[:-1] if text.endswith("\n") else text
    for prefix, word in (("error: ", "failed"), ("canceled: ", "canceled")):
        if text.startswith(prefix):
            return word, text[len(prefix):]
    return "completed", text
