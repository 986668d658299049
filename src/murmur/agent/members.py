"""``call-member`` on the agent side: outstanding calls, tool results, the continuation.

Pure bookkeeping and text (``spec/agent.md`` "Results the model reads" and "Member
answers and the continuation"):

* a call's tool result is a summary line, the call's data fenced under
  ``tool:call-member``, then a runtime note after the fence;
* a second call to a member whose earlier call from this task has not been delivered yet is
  refused (calls to different members never block each other);
* when the model ends a turn with turns left and calls outstanding, the task waits for every
  answer and continues once with one user message built by :func:`continuation_text`.

The sending, the busy re-offers and the polling belong to the formation services
(:class:`murmur.workload.TaskServices`); this module only shapes what the model reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from murmur.agent.fence import fence
from murmur.agent.tools import json_text

__all__ = ["MemberCalls", "call_result", "continuation_text"]

_OUTSTANDING = ("started", "busy")


@attrs.define
class MemberCalls:
    """Member calls of one task not yet delivered to the model, in the order made.

    Attributes:
        pending (dict[str, str]): call id → member name.
    """

    pending: dict[str, str] = attrs.field(factory=dict)

    def refusal(self, member: str, callees: Sequence[str]) -> str | None:
        """Why a call to ``member`` is refused now, or None when it may be sent."""
        if member not in callees:
            names = ", ".join(callees) if callees else "none"
            return f"`{member}` is not a member this member may call (callees: {names})"
        if member in self.pending.values():
            return (
                f"a call to {member} from this task is still unanswered; end your turn to "
                "receive its answer before calling it again"
            )
        return None

    def add(self, call_id: str, member: str) -> None:
        """Record an outstanding call."""
        self.pending[call_id] = member

    def take(self) -> list[tuple[str, str]]:
        """Every outstanding (call id, member), emptying the record."""
        out = list(self.pending.items())
        self.pending.clear()
        return out

    def __bool__(self) -> bool:
        return bool(self.pending)


def call_result(data: Mapping[str, object]) -> tuple[str, bool, bool]:
    """The model's view of one ``call_member`` service answer (pure).

    Args:
        data (Mapping): the service's mapping: ``call_id``, ``member``, ``status``
            (``started`` | ``busy`` | ``rejected`` | ``failed``), ``task_id`` when started,
            ``reason`` when rejected or failed.

    Returns:
        tuple[str, bool, bool]: (text, is_error, outstanding). ``outstanding`` is true for
        ``started`` and ``busy`` (the runtime keeps offering a busy member the task).
    """
    status = str(data.get("status", "failed"))
    member = str(data.get("member", "?"))
    outstanding = status in _OUTSTANDING
    head = f"{'passed' if outstanding else 'failed'}: Called {member}: {status}"
    if status == "started":
        note = "The member holds the task. Its answer arrives when you end your turn."
    elif status == "busy":
        note = (
            "The member is busy; the runtime keeps offering it the task. Its answer (or why "
            "there is none) arrives when you end your turn."
        )
    else:
        note = "Nothing is outstanding for this call."
    return f"{head}\n{fence(json_text(data), 'tool:call-member')}\n[runtime] {note}", not outstanding, outstanding


def continuation_text(
    asked: Sequence[tuple[str, str]], answers: Mapping[str, Mapping[str, object]]
) -> str:
    """The one user message a task continues with after its member calls ended (pure).

    Args:
        asked (Sequence[tuple[str, str]]): (call id, member) in the order the calls were made.
        answers (Mapping[str, Mapping]): call id → the service's answer: ``status``
            (``completed`` | ``failed`` | ``canceled`` | ``rejected`` | ``timed_out`` |
            ``unreachable`` | ``abandoned`` | ``no_answer``) and ``output`` (the member's
            text, or why there is none).

    Returns:
        str: one block per call — ``[call-member] call <id> to <member> ended <status>:``
        (``, with no answer from <member>`` unless completed) and the output fenced under
        ``member:<name>`` — then a line naming the members without an answer, then a
        closing runtime line.
    """
    blocks: list[str] = []
    silent: list[str] = []
    for call_id, member in asked:
        answer = answers.get(call_id, {})
        status = str(answer.get("status", "unreachable"))
        output = str(answer.get("output", "") or "")
        head = f"[call-member] call {call_id} to {member} ended {status}"
        if status != "completed":
            head += f", with no answer from {member}"
            silent.append(member)
        blocks.append(f"{head}:\n{fence(output, f'member:{member}')}")
    tail = [f"No answer from: {', '.join(silent)}." if silent else "Every member answered."]
    n = len(asked)
    tail.append(
        f"[runtime] {n} member call(s) of this task ended; continue the task with "
        f"{'this answer' if n == 1 else 'these answers'}."
    )
    return "\n\n".join(blocks) + "\n\n" + "\n".join(tail)
