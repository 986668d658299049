"""Untrusted-content fences: how outside text reaches the model.

Specification: ``spec/agent.md`` "Untrusted content".

Text the capsule did not write itself — an untrusted task, a tool result, a member's answer —
reaches the model between an opening and a closing marker::

    <untrusted-content source=tool:ls>
    ...content...
    </untrusted-content>

A closing marker forged inside the content (any case, any spacing, with or without
attributes) is rewritten to :data:`NEUTRALISED` first, so the content can never end its own
fence early. Pure functions, no I/O.
"""

from __future__ import annotations

import re

CLOSE = "</untrusted-content>"
NEUTRALISED = "<!MURMUR-NEUTRALISED!/untrusted-content>"

# Anything a model could read as a closing marker: `</untrusted-content>`, `< / UNTRUSTED-content >`,
# `</untrusted-content foo="bar">`.
_FORGED_CLOSE = re.compile(r"<\s*/\s*untrusted-content\b[^>]*>", re.IGNORECASE)

# Source labels are ours (task:<origin>, tool:<name>, member:<name>); keep them one safe token.
_SOURCE_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/-]")


def neutralise(content: str) -> str:
    """Rewrite every forged closing marker in ``content`` to :data:`NEUTRALISED`.

    Args:
        content (str): untrusted text.

    Returns:
        str: the same text with no substring a model could read as a closing marker.
    """
    return _FORGED_CLOSE.sub(NEUTRALISED, content)


def fence(content: str, source: str) -> str:
    """Wrap untrusted ``content`` in markers naming its ``source``.

    Args:
        content (str): the untrusted text (a tool result, task text, member answer).
        source (str): where it came from: ``task:<origin>``, ``tool:<name>`` or
            ``member:<name>``; characters outside ``[A-Za-z0-9_.:/-]`` become ``_``.

    Returns:
        str: ``<untrusted-content source=…>\\n<neutralised content>\\n</untrusted-content>``.
    """
    label = _SOURCE_UNSAFE.sub("_", source)
    return f"<untrusted-content source={label}>\n{neutralise(content)}\n{CLOSE}"
