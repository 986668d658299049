"""Scripted model servers on loopback for e2e tests whose test body is synchronous.

:class:`ModelServers` runs :class:`tests.agent.scripted.ScriptedServer` instances in a Trio
loop on a thread of its own, so a sync test can drive real `mur run` processes while the
servers answer the real agent CLIs. Scripts are appended before the CLI asks (list appends
are atomic); the test reads ``requests`` and ``holding`` after a bounded wait. Scripted
OpenAI Responses servers (:class:`tests.agent.scripted_openai.ScriptedResponses`, for Codex)
can be served from the same loop (``responses=``, read back with :meth:`ModelServers.responses`).

``keys=`` makes them one provider: every server answers on one port (one endpoint origin, as a
real provider is one, so that a tree's sessions that name it share the root's key), and each
checks the credential as a real provider does (a request whose key is none of ``keys`` is
answered 401 in the provider's shape and recorded in its ``refused``). A request goes to the
OpenAI Responses server when its path ends ``/responses``, else to the Anthropic server whose
name's ``You are the <name>.`` its system prompt holds (else the first: side traffic).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager

import trio

from agent.scripted import Received, Reply, ScriptedServer, serve_requests
from agent.scripted_openai import ScriptedResponses


def claude_side(r: Received) -> Reply | None:
    """Claude Code's side traffic (HEAD probe, calls without tools) answered off-script."""
    if r.path.startswith("/v1/messages") and isinstance(r.body, dict) and r.body.get("tools"):
        return None
    if r.path.startswith("/v1/messages"):
        return Reply({"id": "msg_side", "type": "message", "role": "assistant",
                      "content": [{"type": "text", "text": "side"}], "stop_reason": "end_turn",
                      "usage": {"input_tokens": 0, "output_tokens": 0}})
    return Reply({})


class ModelServers:
    """Named scripted servers served from one background Trio loop."""

    def __init__(self, sides: dict[str, Callable[[Received], Reply | None] | None],
                 responses: tuple[str, ...] = (), keys: Collection[str] | None = None) -> None:
        self.servers = {name: ScriptedServer(side, keys=keys) for name, side in sides.items()}
        self.openai = {name: ScriptedResponses(keys=keys) for name in responses}
        self.shared = keys is not None
        self.port = 0
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None
        self._thread = threading.Thread(target=lambda: trio.run(self._main), daemon=True)

    def __getitem__(self, name: str) -> ScriptedServer:
        return self.servers[name]

    def responses(self, name: str) -> ScriptedResponses:
        """The scripted OpenAI Responses server ``name`` (Codex's endpoint is its ``base_url``)."""
        return self.openai[name]

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._scope = scope
            async with trio.open_nursery() as nursery:
                if self.shared:
                    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
                    self.port = listeners[0].socket.getsockname()[1]
                    for one in (*self.servers.values(), *self.openai.values()):
                        one.port = self.port
                    nursery.start_soon(trio.serve_listeners, self._connection, listeners)
                else:
                    for server in self.servers.values():
                        await nursery.start(server.serve)
                    for responses in self.openai.values():
                        await nursery.start(responses.serve)
                self._ready.set()
                await trio.sleep_forever()

    @property
    def url(self) -> str:
        """The one provider's origin (``keys=``)."""
        return f"http://127.0.0.1:{self.port}"

    async def _connection(self, stream: trio.SocketStream) -> None:
        async def respond(stream: trio.SocketStream, r: Received) -> bool:
            return await self._route(r).respond(stream, r)  # type: ignore[arg-type]

        await serve_requests(stream, respond)

    def _route(self, r: Received) -> ScriptedServer | ScriptedResponses:
        if r.path.split("?")[0].endswith("/responses") and self.openai:
            return next(iter(self.openai.values()))
        system = json.dumps(r.body.get("system")) if isinstance(r.body, dict) else ""
        for name, server in self.servers.items():
            if f"You are the {name}." in system:
                return server
        return next(iter(self.servers.values()))

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(30):
            raise AssertionError("the scripted model servers did not start")

    def stop(self) -> None:
        if self._token is not None and self._scope is not None:
            try:
                trio.from_thread.run_sync(self._scope.cancel, trio_token=self._token)
            except trio.RunFinishedError:
                pass
        self._thread.join(10)


@contextmanager
def model_servers(sides: dict[str, Callable[[Received], Reply | None] | None],
                  responses: tuple[str, ...] = (), keys: Collection[str] | None = None) -> Iterator[ModelServers]:
    servers = ModelServers(sides, responses, keys)
    servers.start()
    try:
        yield servers
    finally:
        servers.stop()
