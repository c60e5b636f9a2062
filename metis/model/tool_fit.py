"""Freeform tools on a provider without custom tools, and strict tools on a model without
strict tool use (docs/contract.md §10).

A freeform tool's input is text. Where the provider has custom tools (OpenAI's), it goes as
one, its grammar enforced; elsewhere it goes as a function of one string, ``input``, which is
the same call (``{"input": "<the text>"}``); a grammar nothing there would enforce is an unmet
need, refused before sending.
"""

from __future__ import annotations

from collections.abc import Callable

from metis.model.capabilities import AdapterCapabilities
from metis.model.request import CanonicalRequest

STRICT_FLAG = "tool.strict"
"""The dropped-content block type of a ``strict`` flag a provider or model cannot take."""
NO_STRICT_TOOLS = "the model has no strict tool use; the tool is sent without it"


def fit_tools(
    request: CanonicalRequest, caps: AdapterCapabilities
) -> tuple[CanonicalRequest, list[str]]:
    """``request`` with its freeform tools as functions where ``caps`` has no custom tools,
    and the unmet needs: each freeform tool with a grammar there."""
    if caps.supports_custom_tools or not any(t.freeform for t in request.tools):
        return request, []
    problems = [
        f"tool {t.name!r} takes text held to a {t.freeform.syntax} grammar, which only "
        "custom tools enforce"
        for t in request.tools
        if t.freeform is not None and t.freeform.syntax is not None
    ]
    tools = [t.model_copy(update={"freeform": None}) if t.freeform else t for t in request.tools]
    return request.model_copy(update={"tools": tools}), problems


def fit_strict_tools(
    request: CanonicalRequest, caps: AdapterCapabilities, drop: Callable[[str, str], None]
) -> CanonicalRequest:
    """``request`` with the ``strict`` flag taken off its tools where ``caps`` has no strict
    tool use, each ``strict=True`` reported to ``drop(block_type, reason)`` (the tool still
    goes, its input unchecked by the provider; ``strict=False`` is what goes there anyway)."""
    if caps.supports_strict_tools or all(t.strict is None for t in request.tools):
        return request
    for t in request.tools:
        if t.strict:
            drop(STRICT_FLAG, f"tool {t.name!r}: {NO_STRICT_TOOLS}")
    unflagged = {"strict": None}
    tools = [t if t.strict is None else t.model_copy(update=unflagged) for t in request.tools]
    return request.model_copy(update={"tools": tools})
