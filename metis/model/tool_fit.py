"""Freeform tools on a provider without custom tools (docs/contract.md §10).

A freeform tool's input is text. Where the provider has custom tools (OpenAI's), it goes as
one, its grammar enforced; elsewhere it goes as a function of one string, ``input``, which is
the same call (``{"input": "<the text>"}``); a grammar nothing there would enforce is an unmet
need, refused before sending.
"""

from __future__ import annotations

from metis.model.capabilities import AdapterCapabilities
from metis.model.request import CanonicalRequest


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
