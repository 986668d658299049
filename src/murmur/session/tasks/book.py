"""The session's tasks: records, their event logs, and the one place a task changes state.

Every state change goes through :meth:`TaskBook.apply`, which asks the pure state machine
(:mod:`murmur.session.states`) and, when the change is allowed, updates the task, appends the
stream events a watcher must see (an ``artifact`` event before a ``completed`` status), wakes
every watcher, and on a terminal state calls the book's terminal callbacks exactly once. A late
completion after a cancel is therefore refused here, never half-applied.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import trio

from murmur.ids import new_id
from murmur.session.states import TaskEvent, TaskState, step
from murmur.session.tasks import held

MAX_KEPT_TASKS = 1000  # finished tasks kept for GetTask/ListTasks; older ones are forgotten


def rfc3339_now() -> str:
    """The wall clock as RFC 3339 UTC with microseconds and a ``Z``."""
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@attrs.frozen
class StreamEvent:
    """One entry of a task's event log (what a stream watcher is sent after the snapshot).

    Attributes:
        kind (str): ``status`` | ``artifact``.
        state (TaskState): the state after the event (``status``) or at the time (``artifact``).
        message (str | None): the status message text (``status`` events).
        timestamp (str): RFC 3339 time of the event.
        artifact (dict[str, Any] | None): the artifact (``artifact`` events).
        append (bool): the artifact's parts extend the one of the same ``artifactId`` sent
            before (a component's chunks after the first).
        last_chunk (bool): the artifact is complete (false for chunks).
    """

    kind: str
    state: TaskState
    message: str | None
    timestamp: str
    artifact: dict[str, Any] | None = None
    append: bool = False
    last_chunk: bool = True


CHUNK_ARTIFACTS = {False: "text", True: "thinking"}
"""The artifact a component's ``emit-chunk`` / ``emit-thinking-chunk`` pieces are streamed as."""


PROMPT_ARTIFACT = "prompt"


@attrs.define(eq=False)
class InputSlot:
    """A one-shot slot for the answer to a task's question (spec/conversations.md)."""

    answer: str | None = None
    filled: trio.Event = attrs.field(factory=trio.Event)

    def give(self, text: str) -> bool:
        """Deliver ``text``; False when an answer was already given."""
        if self.filled.is_set():
            return False
        self.answer = text
        self.filled.set()
        return True

    async def wait(self) -> str:
        """The answer, once given."""
        await self.filled.wait()
        assert self.answer is not None
        return self.answer


@attrs.define(eq=False)
class Task:
    """One task held by the session.

    Attributes:
        id (str): ``tsk_…``.
        context_id (str): ``ctx_…`` (the caller's, or minted).
        text (str): the task text given to the workload.
        origin, trust, lane (str): classification (spec/session.md "Tasks").
        source (str): ``a2a`` | ``task_md``.
        message (dict[str, Any]): the user message as received (wire shape), or a synthesised one.
        owner (str | None): the credential that started it when tasks are owner-scoped
            (formation tokens ``member:<name>``); None otherwise.
        launch (bool): the ``--task`` task or the idle run (a deciding task).
        metadata (dict[str, Any]): wire ``metadata``.
        spilled (held.Spilled | None): where the answer is read from once it left memory
            (:mod:`murmur.session.tasks.held`); the door serves :meth:`restored` copies.
        held_bytes (int): bytes a finished task holds, counted when it ended.
        prompt (str | None): the question of a task in ``input-required`` (its ``prompt``
            artifact); None otherwise.
        reply (InputSlot | None): where the answer to that question is delivered.
        traceparent (str | None): the caller's W3C ``traceparent`` header (a door task);
            its ``task_start`` joins that trace (spec/trace.md "Trace ids").
    """

    id: str
    context_id: str
    text: str
    origin: str
    trust: str
    lane: str
    source: str
    message: dict[str, Any]
    owner: str | None = None
    launch: bool = False
    metadata: dict[str, Any] = attrs.field(factory=dict)
    state: TaskState = TaskState.SUBMITTED
    status_message: str | None = None
    timestamp: str = attrs.field(factory=rfc3339_now)
    artifacts: list[dict[str, Any]] = attrs.field(factory=list)
    events: list[StreamEvent] = attrs.field(factory=list)
    started: bool = False
    cancel_reason: str | None = None
    scope: trio.CancelScope | None = None
    start_event_id: str | None = None
    spilled: held.Spilled | None = None
    held_bytes: int = 0
    prompt: str | None = None
    reply: InputSlot | None = None
    traceparent: str | None = None
    _changed: trio.Event = attrs.field(factory=trio.Event)

    @property
    def terminal(self) -> bool:
        """Whether the task has ended."""
        return self.state.terminal

    def changed(self) -> trio.Event:
        """An event set at the next change of this task (take it before checking the log)."""
        return self._changed

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    # -- what the book holds of it (spec/door.md "Memory"; bounds in :mod:`.held`) ----------

    def answer(self) -> str | None:
        """The ``response`` artifact's text of a completed task still held, or None."""
        if self.state is not TaskState.COMPLETED or self.spilled is not None:
            return None
        for art in self.artifacts:
            if art.get("artifactId") == "response":
                parts = art.get("parts") or [{}]
                text = parts[0].get("text")
                return text if isinstance(text, str) else None
        return None

    def count_held_bytes(self) -> int:
        """Bytes the task holds in memory: its text, its message and its status text or answer.

        The message is counted as its compact JSON; an answer that is also the status message
        (a completed task) is counted once.
        """
        message = len(json.dumps(self.message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass"))
        extra = [text for art in self.artifacts for part in art.get("parts") or ()
                 if isinstance(text := part.get("text"), str) and text is not self.status_message]
        return held.text_bytes(self.text) + message + held.text_bytes(self.status_message) + sum(map(held.text_bytes, extra))

    def should_spill(self, recorded_bytes: int) -> bool:
        """Whether the answer, now on disk as ``recorded_bytes`` bytes, should leave memory.

        Only a completed task's ``response`` answer larger than :data:`~.held.SPILL_ABOVE` bytes,
        and only when the file holds at least the answer (a shorter file is not this answer).
        """
        answer = self.answer()
        if answer is None:
            return False
        size = held.text_bytes(answer)
        return size > held.SPILL_ABOVE and recorded_bytes >= size

    def spill(self, path: Path) -> None:
        """Drop the answer from memory; it is read back from ``path`` when needed.

        The artifact keeps its id and name with an empty text part; the completed status event
        and the status message lose their text. :meth:`restored` puts them back.
        """
        answer = self.answer()
        if answer is None:
            return
        self.spilled = held.Spilled(path, held.text_bytes(answer))
        placeholder: dict[str, Any] = {"artifactId": "response", "name": "response", "parts": [{"text": ""}]}
        self.artifacts = [placeholder if a.get("artifactId") == "response" else a for a in self.artifacts]
        self.events = [_with_answer(ev, placeholder, None) for ev in self.events]
        self.status_message = None

    def restored(self, answer: str) -> Task:
        """A copy of a spilled task with ``answer`` put back (for serialising; not held)."""
        artifact: dict[str, Any] = {"artifactId": "response", "name": "response", "parts": [{"text": answer}]}
        return attrs.evolve(
            self,
            artifacts=[artifact if a.get("artifactId") == "response" else a for a in self.artifacts],
            events=[_with_answer(ev, artifact, answer) for ev in self.events],
            status_message=answer,
            spilled=None,
        )


def _with_answer(ev: StreamEvent, artifact: dict[str, Any], answer: str | None) -> StreamEvent:
    """``ev`` with the ``response`` artifact and the completed status's text replaced."""
    if ev.kind == "artifact" and ev.artifact is not None and ev.artifact.get("artifactId") == "response":
        return attrs.evolve(ev, artifact=artifact)
    if ev.kind == "status" and ev.state is TaskState.COMPLETED:
        return attrs.evolve(ev, message=answer)
    return ev


TerminalCallback = Callable[[Task], None]


class TaskBook:
    """Every task of one session, by id, in arrival order.

    Finished tasks are kept for ``GetTask``/``ListTasks`` within two bounds: ``keep`` tasks
    and ``max_held`` bytes of what they hold (:meth:`Task.count_held_bytes`); past either, the oldest
    finished tasks are forgotten (never the one that has just ended). A large answer leaves
    memory once its records file is written (:meth:`answer_recorded`).

    Args:
        now (Callable[[], str]): RFC 3339 clock for status timestamps (injectable).
        keep (int): finished tasks kept before the oldest are forgotten.
        max_held (int): bytes finished tasks may hold before the oldest are forgotten.
    """

    def __init__(
        self,
        *,
        now: Callable[[], str] = rfc3339_now,
        keep: int = MAX_KEPT_TASKS,
        max_held: int = held.MAX_HELD_BYTES,
    ) -> None:
        self._tasks: dict[str, Task] = {}
        self._now = now
        self._keep = keep
        self._max_held = max_held
        self._held = 0
        self._on_terminal: list[TerminalCallback] = []

    @property
    def held_total(self) -> int:
        """Bytes the finished tasks kept hold (the sum of their ``held_bytes``)."""
        return self._held

    def answer_recorded(self, task: Task, path: Path, nbytes: int) -> None:
        """``path`` now holds ``nbytes`` bytes of ``task``'s outcome: drop a large answer.

        Called once the records writer has written ``out/result_<tsk>.txt``; a task already
        forgotten, not completed, or with a small answer is left alone.
        """
        if self._tasks.get(task.id) is not task or not task.should_spill(nbytes):
            return
        task.spill(path)
        before, task.held_bytes = task.held_bytes, task.count_held_bytes()
        self._held += task.held_bytes - before

    def recorder(self, task: Task, path: Path, body: str) -> Callable[[], None] | None:
        """The records writer's ``then`` for ``task``'s result file (None when it cannot spill).

        Called from Trio; the returned callback runs on the writer thread and hands
        :meth:`answer_recorded` back to the Trio thread (never blocking: the Trio thread may
        itself be waiting for the writer).
        """
        if len(body) * 4 <= held.SPILL_ABOVE:  # a UTF-8 character is at most 4 bytes: cannot spill
            return None
        token = trio.lowlevel.current_trio_token()
        nbytes = held.text_bytes(body)

        def recorded() -> None:
            try:
                token.run_sync_soon(self.answer_recorded, task, path, nbytes)
            except trio.RunFinishedError:
                pass  # the session has ended: nothing is served any more

        return recorded

    def on_terminal(self, callback: TerminalCallback) -> None:
        """Call ``callback(task)`` once for every task that reaches a terminal state."""
        self._on_terminal.append(callback)

    def new(
        self,
        *,
        text: str,
        message: dict[str, Any],
        origin: str,
        trust: str,
        lane: str,
        source: str,
        context_id: str | None = None,
        owner: str | None = None,
        launch: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> Task:
        """Create a task in state ``submitted`` (minting ``tsk_``/``ctx_`` ids as needed)."""
        task = Task(
            id=new_id("tsk"),
            context_id=context_id or new_id("ctx"),
            text=text,
            origin=origin,
            trust=trust,
            lane=lane,
            source=source,
            message=message,
            owner=owner,
            launch=launch,
            metadata=dict(metadata or {}),
            timestamp=self._now(),
        )
        self._tasks[task.id] = task
        self._forget_old()
        return task

    def get(self, task_id: str) -> Task | None:
        """The task with this id, or None."""
        return self._tasks.get(task_id)

    def __iter__(self) -> Iterator[Task]:
        return iter(list(self._tasks.values()))

    def __len__(self) -> int:
        return len(self._tasks)

    def apply(
        self,
        task: Task,
        event: TaskEvent,
        *,
        message: str | None = None,
        answer: str | None = None,
    ) -> bool:
        """Apply ``event`` to ``task`` if the state machine allows it.

        Args:
            task (Task): the task.
            event (TaskEvent): what happened.
            message (str | None): the status message (failure text, cancel reason, rejection).
            answer (str | None): the answer of a completion (becomes the ``response`` artifact
                and the status message).

        Returns:
            bool: whether the task changed. ``False`` means the event was refused (the task
            already ended, or the event does not apply to its state) and nothing was touched.
        """
        nxt = step(task.state, event)
        if nxt is None:
            return False
        now = self._now()
        if event is TaskEvent.START:
            task.started = True
        if event is TaskEvent.CANCEL:
            task.cancel_reason = message
        event_message = message
        if event is TaskEvent.ASK:  # the prompt is an artifact; the status carries no message
            task.prompt = message
            task.artifacts = [a for a in task.artifacts if a.get("artifactId") != PROMPT_ARTIFACT]
            task.artifacts.append({"artifactId": PROMPT_ARTIFACT, "name": PROMPT_ARTIFACT,
                                   "parts": [{"text": message or "", "mediaType": "text/plain"}]})
            message = None
        elif task.prompt is not None:  # answered, failed or cancelled while waiting
            task.prompt = None
            task.artifacts = [a for a in task.artifacts if a.get("artifactId") != PROMPT_ARTIFACT]
            if event is TaskEvent.ANSWER:
                event_message, message = "resumed", None
        if nxt is TaskState.COMPLETED and answer is not None:
            artifact = {"artifactId": "response", "name": "response", "parts": [{"text": answer}]}
            task.artifacts.append(artifact)
            task.events.append(StreamEvent("artifact", task.state, None, now, artifact))
            message = event_message = answer
        task.state = nxt
        task.status_message = message
        task.timestamp = now
        task.events.append(StreamEvent("status", nxt, event_message, now))
        task._notify()
        if nxt.terminal:
            task.held_bytes = task.count_held_bytes()
            self._held += task.held_bytes
            for cb in list(self._on_terminal):
                cb(task)
            self._forget_old(spare=task)
        return True

    def chunk(self, task: Task, text: str, *, thinking: bool, source: str) -> bool:
        """Stream one component chunk of a running ``task`` (spec/door.md "Chunks"): an
        ``artifactUpdate`` of the ``text`` (or ``thinking``) artifact, ``append`` after the
        task's first one, ``lastChunk: false``. Stream-only: GetTask's ``artifacts`` do not keep
        chunks. False (nothing sent) when the task has ended."""
        if task.terminal:
            return False
        name = CHUNK_ARTIFACTS[thinking]
        first = not any(ev.artifact is not None and ev.artifact.get("artifactId") == name for ev in task.events)
        artifact = {"artifactId": name, "name": name, "parts": [{"text": text}],
                    "metadata": {"murmur": {"source": source}}}
        task.events.append(StreamEvent("artifact", task.state, None, self._now(), artifact,
                                       append=not first, last_chunk=False))
        task._notify()
        return True

    def _forget_old(self, spare: Task | None = None) -> None:
        """Forget the oldest finished tasks beyond ``keep`` tasks or ``max_held`` bytes."""
        excess = len(self._tasks) - self._keep
        if excess <= 0 and self._held <= self._max_held:
            return
        for task in [t for t in self._tasks.values() if t.terminal and t is not spare]:
            if excess <= 0 and self._held <= self._max_held:
                break
            del self._tasks[task.id]
            self._held -= task.held_bytes
            excess -= 1
