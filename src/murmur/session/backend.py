"""The door backend: what the A2A door asks of its session (spec/door.md "Methods", "The card").

:class:`SessionBackend` is the session's side of
:class:`~murmur.session.door.DoorBackend`: it turns a checked message into a task and hands
it to admission (:class:`~murmur.session.tasks.desk.Intake`), cancels through the runner,
answers task look-ups from the book, builds the agent card once per kind, and asks the
completion handler about completions.
"""

from __future__ import annotations

from typing import Any

from murmur.session import wire
from murmur.session.auth import Principal
from murmur.session.completion_hook import CompletionHandler, CompletionRequest, CompletionVerdict
from murmur.session.origin import Classification
from murmur.session.setup import SessionSetup
from murmur.session.states import TaskState
from murmur.session.tasks.book import Task, TaskBook
from murmur.session.tasks.desk import Intake
from murmur.session.tasks.runner import Runner
from murmur.session.trace import SessionTrace
from murmur.session.wire import RpcError


class SessionBackend:
    """The door's view of one session.

    Args:
        setup (SessionSetup): the session's setup (manifest, policy).
        book (TaskBook): the session's tasks.
        intake (Intake): admission.
        runner (Runner): the runner (cancels a task).
        trace (SessionTrace): where ``a2a_task_received`` is written.
        authenticated (bool): whether the door checks bearer tokens (shown on the card).
        completion (CompletionHandler): decides completion-origin requests.

    Attributes:
        session_id (str): ``ses_…``.
        url (str | None): the door's base URL once bound (the card's ``url``).
    """

    def __init__(
        self,
        setup: SessionSetup,
        book: TaskBook,
        intake: Intake,
        runner: Runner,
        trace: SessionTrace,
        *,
        authenticated: bool,
        completion: CompletionHandler,
    ) -> None:
        self._setup = setup
        self._book = book
        self._intake = intake
        self._runner = runner
        self._trace = trace
        self._authenticated = authenticated
        self._completion = completion
        self._cards: dict[bool, dict[str, Any]] = {}
        self._by_message: dict[tuple[str | None, str], str] = {}  # (owner, messageId) -> task id
        self.session_id = setup.session_id
        self.url: str | None = None

    @property
    def serves_tasks(self) -> bool:
        """False under ``task_acceptance: none``."""
        return self._setup.policy.serves_tasks

    @property
    def accepts_peer_tasks(self) -> bool:
        """``exports.peer_tasks.accept``."""
        return self._setup.manifest.accepts_peer_tasks

    def get_task(self, task_id: str) -> Task | None:
        """The task with this id, or None."""
        return self._book.get(task_id)

    def all_tasks(self) -> list[Task]:
        """Every task held, in arrival order."""
        return list(self._book)

    def card(self, *, extended: bool) -> dict[str, Any]:
        """The agent card (public or extended; spec/door.md "The card"), built once per kind."""
        if extended not in self._cards:
            m = self._setup.manifest
            self._cards[extended] = wire.agent_card(
                name=m.name,
                version=m.version,
                url=(self.url or "http://127.0.0.1:0") + "/",
                session_id=self.session_id,
                serves_tasks=self.serves_tasks,
                authenticated=self._authenticated,
                peer_tasks=m.accepts_peer_tasks,
                capsule_params={
                    "tools": [],
                    "shell": list(m.shell_allow),
                    "network": list(m.network_allow),
                    "planes": [],
                },
                description=m.description,
                extended=extended,
            )
        return self._cards[extended]

    def completion(self, req: CompletionRequest) -> CompletionVerdict:
        """Ask the completion hook about a well-addressed completion."""
        return self._completion(req)

    def submit(
        self, msg: wire.InboundMessage, cls: Classification, principal: Principal, *, context_id: str | None
    ) -> Task:
        """Take a task from the door: admitted (queued) or rejected (busy / closing).

        Admission is decided before the task is made, and acted on after its
        ``a2a_task_received`` record.

        Returns:
            Task: the new task, ``submitted`` or ``rejected``.
        """
        admission = self._intake.decide()
        task = self._book.new(
            text=msg.text,
            message=msg.message,
            origin=cls.origin,
            trust=cls.trust,
            lane=cls.lane,
            source="a2a",
            context_id=context_id,
            owner=principal.credential if principal.is_formation_member else None,
            metadata={},
        )
        fields: dict[str, Any] = {
            "task_id": task.id,
            "context_id": task.context_id,
            "message_id": msg.message.get("messageId"),
        }
        if principal.member is not None:
            fields["caller_member"] = principal.member
        if cls.delegation_id is not None:
            fields["delegation_id"] = cls.delegation_id
        task.traceparent = cls.traceparent
        fields["traceparent_from_caller"] = cls.traceparent
        self._trace.emit("a2a_task_received", **fields)
        self._intake.settle(task, admission)
        mid = msg.message.get("messageId")
        if isinstance(mid, str) and task.state is not TaskState.REJECTED:
            self._by_message[(task.owner, mid)] = task.id
        return task

    def task_for_message(self, message_id: str, owner: str | None) -> str | None:
        """The id of the task accepted from a message ``message_id`` sent by ``owner`` (a
        formation credential, or None for any other caller); None when no such task was taken."""
        return self._by_message.get((owner, message_id))

    def cancel(self, task: Task, reason: str) -> bool:
        """Cancel a task that has not ended (see :meth:`Runner.cancel`)."""
        return self._runner.cancel(task, reason)

    def forget_session(self, context_id: str | None) -> None:
        """``x-murmur-forget-session``: drop the context's agent CLI session (the workload's
        ``forget_session``), traced as ``harness_session_forgotten``.

        Raises:
            RpcError: ``-32602`` naming ``E-RUN-039`` when the workload runs no agent CLI.
        """
        forget = getattr(self._setup.workload, "forget_session", None)
        inf = self._setup.manifest.inference
        if forget is None or inf is None or inf.transport.value != "process":
            raise RpcError(wire.INVALID_PARAMS, "E-RUN-039: x-murmur-forget-session applies only to transport: process "
                           "(an agent CLI's own session); drop the header")
        dropped = forget(context_id) if context_id else None
        self._trace.emit("harness_session_forgotten", context=context_id, dropped=dropped, requested_by="header")

    def answer(self, task: Task, text: str) -> bool:
        """Deliver ``text`` to a task waiting in ``input-required`` (see :class:`Asking`)."""
        return self._runner.asking.answer(task, text)
