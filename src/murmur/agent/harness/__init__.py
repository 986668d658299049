"""Agent CLIs run by ``inference.transport: process``.

* :mod:`murmur.agent.harness.protocol` — the contract: request, invocation, events, parser;
* :mod:`murmur.agent.harness.claude` — Claude Code (``claude -p --output-format stream-json``);
* :mod:`murmur.agent.harness.codex` — Codex (``codex exec --json``).

Design: spec/agent.md, "Process transport".
"""
