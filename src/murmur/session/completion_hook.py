"""A completion addressed to a session: the request the door classifies, the verdict its hook
gives (spec/door.md "Completions", spec/delegation.md "Exactly one reporter").

The door hands a ``completion``-origin ``SendMessage`` to the session's completion handler (the
delegation runtime's, or :func:`default_completion_handler`) and acts on the verdict.
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

from murmur.session import wire
from murmur.session.wire import RpcError

__all__ = ["CompletionHandler", "CompletionRequest", "CompletionVerdict", "default_completion_handler"]


@attrs.frozen
class CompletionRequest:
    """A request classified ``completion`` that is addressed to this session.

    Attributes:
        delegation_id (str | None): ``x-murmur-delegation-id``.
        trust (str): the inherited trust class.
        message (wire.InboundMessage): the checked message (its text carries the fields).
    """

    delegation_id: str | None
    trust: str
    message: wire.InboundMessage


@attrs.frozen
class CompletionVerdict:
    """What the completion hook decided.

    Attributes:
        accept (bool): false refuses it with ``error`` (default ``-31002``).
        run_as_task (bool): queue it as a ``completion``-origin task in the bg lane.
        context_id (str | None): the context the task runs under (the delegating one).
        text (str | None): the task text (default: the message text).
        error (RpcError | None): the refusal when ``accept`` is false.
    """

    accept: bool
    run_as_task: bool = True
    context_id: str | None = None
    text: str | None = None
    error: RpcError | None = None


CompletionHandler = Callable[[CompletionRequest], CompletionVerdict]


def default_completion_handler(req: CompletionRequest) -> CompletionVerdict:
    """Without a delegation module: run every well-addressed completion as a bg-lane task."""
    return CompletionVerdict(accept=True, run_as_task=True, context_id=req.message.context_id)
