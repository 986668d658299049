"""The a2a-sdk reference server with an echo agent, on uvicorn (the peer of benchmarks/door.py).

Usage: ``python benchmarks/_a2a_reference.py PORT``. Needs ``a2a-sdk[http-server]`` and
``uvicorn`` (the ``bench`` extra). Answers every message with a completed task whose artifact
is ``echo: <text>``, the same answer the murmur echo capsule gives.
"""

from __future__ import annotations

import sys

import uvicorn
from a2a.helpers.proto_helpers import new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events.event_queue_v2 import EventQueue
from a2a.server.request_handlers.default_request_handler_v2 import DefaultRequestHandlerV2
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill, Part
from starlette.applications import Starlette


class EchoExecutor(AgentExecutor):
    """Echo the text parts back as an artifact, then complete."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Create the task, add the echo artifact, complete it."""
        message = context.message
        assert message is not None
        task = context.current_task or new_task_from_user_message(message)
        if context.current_task is None:
            await event_queue.enqueue_event(task)
        text = "\n".join(p.text for p in message.parts if p.HasField("text"))
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        await updater.add_artifact([Part(text=f"echo: {text}")], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        """Nothing to cancel: every task ends at once."""


def app(port: int) -> Starlette:
    """The Starlette app: card + JSON-RPC on /."""
    card = AgentCard(
        name="Echo Agent",
        description="Echoes text back as an artifact (a2a-sdk reference server).",
        version="0.0.1",
        supported_interfaces=[
            AgentInterface(url=f"http://127.0.0.1:{port}/", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echo the input.", tags=["echo"])],
    )
    handler = DefaultRequestHandlerV2(agent_executor=EchoExecutor(), task_store=InMemoryTaskStore(), agent_card=card)
    routes = create_agent_card_routes(card) + create_jsonrpc_routes(handler, "/")
    return Starlette(routes=routes)


if __name__ == "__main__":
    PORT = int(sys.argv[1])
    uvicorn.run(app(PORT), host="127.0.0.1", port=PORT, log_level="warning")
