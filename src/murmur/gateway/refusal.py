"""What the gateway answers when it refuses a call: a body in the provider's own error shape.

Specification: ``spec/gateway.md`` "What it refuses". Pure. Each client surfaces these as it
surfaces the provider's own errors: Anthropic's ``{"type":"error","error":{"type","message"}}``,
OpenAI's ``{"error":{"message","type","code"}}``. Every message starts with its code and
ends with its hint (``FALLBACK_HINTS``), so the client's own error line says what to change.
"""

from __future__ import annotations

import json

import attrs

from murmur.diagnostics import FALLBACK_HINTS

__all__ = ["Refusal", "body_for"]


@attrs.frozen
class Refusal:
    """One refusal: HTTP status, diagnostic code, the sentence, and the kind of error."""

    status: int
    code: str
    message: str
    kind: str = "permission_error"


def body_for(refusal: Refusal, *, anthropic: bool) -> bytes:
    """The JSON error body, in the Anthropic or OpenAI shape."""
    hint = FALLBACK_HINTS.get(refusal.code)
    text = f"{refusal.code}: {refusal.message}" + (f" (hint: {hint})" if hint else "")
    if anthropic:
        obj: dict[str, object] = {"type": "error", "error": {"type": refusal.kind, "message": text}}
    else:
        obj = {"error": {"message": text, "type": refusal.kind, "code": refusal.code}}
    return json.dumps(obj).encode()
