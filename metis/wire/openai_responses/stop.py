"""A Responses reply's stop reason, read from its final response (metis.wire.openai_responses.read
says which, docs/contract.md §3)."""

from __future__ import annotations

from typing import Any

from metis.model.response import StopKind, StopReason
from metis.wire.read import object_value

_INCOMPLETE = {"max_output_tokens": StopKind.MAX_TOKENS, "content_filter": StopKind.CONTENT_FILTER}


def stop_reason(response: dict[str, Any], refusal: str | None, tools: bool) -> StopReason:
    """``refusal``: the words of the reply's refusal parts (None: it has none), the
    explanation of a refusal when the reply completed; ``tools``: it holds a function call."""
    status = response.get("status")
    if status is None and response.get("incomplete_details"):
        status = "incomplete"
    if status in ("completed", None):  # None: a whole reply naming none (OpenRouter's)
        raw = status or ""
        if refusal is not None:
            return StopReason(kind=StopKind.REFUSAL, raw=raw, explanation=refusal or None)
        if tools:
            return StopReason(kind=StopKind.TOOL_USE, raw=raw)
        return StopReason(kind=StopKind.END_TURN, raw=raw)
    if status == "incomplete":
        details = object_value(
            response.get("incomplete_details") or {}, "response.incomplete_details"
        )
        reason = details.get("reason")
        raw = reason if isinstance(reason, str) else status
        return StopReason(kind=_INCOMPLETE.get(raw, StopKind.PROVIDER_SPECIFIC), raw=raw)
    if status == "cancelled":
        return StopReason(kind=StopKind.CANCELLED, raw=status)
    raw_status = status if isinstance(status, str) else None
    return StopReason(kind=StopKind.PROVIDER_SPECIFIC, raw=raw_status)
