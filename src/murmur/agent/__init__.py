"""Agent capsules: the inference loop, its transports and its runtime-provided tools.

Specification: ``spec/agent.md``. A capsule whose manifest has an ``inference`` block runs
its tasks through :class:`AgentWorkload` (build it with :func:`make_agent_workload` at
launch). Modules:

* :mod:`murmur.agent.config` — the ``inference`` block, checked once;
* :mod:`murmur.agent.loop` — the turn loop of one task;
* :mod:`murmur.agent.tools` / :mod:`murmur.agent.dispatch` — tools and their grants;
* :mod:`murmur.agent.members` — call-member answers and the continuation;
* :mod:`murmur.agent.fence` — untrusted-content markers;
* :mod:`murmur.agent.transports` — the OpenAI-compatible, Anthropic and process drivers.

Other packages import what is in ``__all__`` from here; each name's module is imported on
first use (the workload imports every transport and httpx, which a plan capsule never needs).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from murmur import lazy

if TYPE_CHECKING:
    from murmur.agent.agent_workload import AgentWorkload, make_agent_workload

__all__ = ["AgentWorkload", "make_agent_workload"]

__getattr__ = lazy.face(__name__, {"agent_workload": ["AgentWorkload", "make_agent_workload"]})
