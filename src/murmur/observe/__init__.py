"""Seeing a run: a tree's traces read together (spec/trace.md "Reading traces").

Modules: :mod:`.records` (reading ``trace.jsonl``, one session's metrics), :mod:`.summary`
(``mur trace show``), :mod:`.compare` (``diff``, ``report``), :mod:`.address` (which
sessions an address names), :mod:`.tree` (a tree's sessions and spans, one model),
:mod:`.waterfall` (``show --tree``), :mod:`.page` (``mur trace view --html``), :mod:`.follow`
(``mur watch``), :mod:`.otlp` (OpenTelemetry export; the SDK is imported only there).

Everything here reads what sessions wrote; nothing here is on a session's path except
:mod:`.otlp`, and that only when export is configured.
"""

from __future__ import annotations
