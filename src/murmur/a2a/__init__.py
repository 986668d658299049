"""The runtime's A2A client: how murmur itself calls a door (``spec/a2a-client.md``).

* :mod:`~murmur.a2a.requests`: the JSON-RPC bodies and headers (pure);
* :mod:`~murmur.a2a.replies`: what an answer means — JSON-RPC error, the task, its state (pure);
* :mod:`~murmur.a2a.door_client`: :func:`loopback_client`, the one ``httpx.AsyncClient`` factory
  (no proxies from the environment), and :class:`A2AClient`, which bounds each request.

Other packages import from here, not from the modules. The door's own side of the wire (what
it parses and answers) is :mod:`murmur.session.wire`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy
from murmur.a2a import replies, requests

if TYPE_CHECKING:
    from murmur.a2a.door_client import A2AClient, loopback_client
    from murmur.a2a.replies import Fault, Reply, TaskView

__all__ = ["A2AClient", "Fault", "Reply", "TaskView", "loopback_client", "replies", "requests"]

# The client (and httpx with it) loads on first use: a formation member that makes no call
# never pays for it (tests/cli/test_startup_imports.py).
__getattr__ = lazy.face(__name__, {"door_client": ["A2AClient", "loopback_client"], "replies": ["Fault", "Reply", "TaskView"]})
