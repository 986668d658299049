"""Capability routing: who can run what, and where a blocked command can be sent.

Specification: ``spec/routing.md``. Layers:

* :mod:`murmur.routing.model` — the frozen value types (what is installed and running, the
  formation, holders, routes, the ranking key);
* :mod:`murmur.routing.index` — the pure decisions: who holds a binary or a label, which
  routes exist from a capsule or member, ready or blocked, and their order;
* :mod:`murmur.routing.refusal` — the denied-binary message a capsule is given (pure);
* :mod:`murmur.routing.gather` — the I/O edge: stores, running records, a roster, and the
  ready routes of a running member.
"""
