"""The Responses API's ``response`` object and its output items, written from a canonical reply
(:mod:`metis.gateway.responses_api` streams them): messages with their annotations, reasoning
with its summary and encrypted content, function calls, and the items only the Responses API
makes (a hosted tool's call, a compaction item) as it wrote them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from metis.gateway.chat_write import openai_tier
from metis.gateway.inbound import Inbound
from metis.gateway.reasoning_items import encrypted, reasoning_id, with_text
from metis.gateway.server_written import responses_item
from metis.gateway.sse import dumps, new_id, now
from metis.model.block import ProviderRaw
from metis.model.citation import Citation
from metis.model.content import (
    ContentBlock,
    OpaqueBlock,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage
from metis.model.server_tools import ServerToolCallBlock, ServerToolResultBlock

RESPONSES = "openai_responses"
Ids = Callable[[str], str]
"""Names an output item given its id's prefix (``msg_``, ``fc_``, ``rs_``)."""


def usage(tokens: TokenUsage) -> dict[str, Any]:
    """The usage object; the cache writes (``cache_write_tokens``) when there were any."""
    total_input = tokens.total_input_tokens
    details: dict[str, Any] = {"cached_tokens": tokens.cached_input_tokens}
    if tokens.cache_creation_input_tokens:
        details["cache_write_tokens"] = tokens.cache_creation_input_tokens
    return {
        "input_tokens": total_input,
        "input_tokens_details": details,
        "output_tokens": tokens.output_tokens,
        "output_tokens_details": {"reasoning_tokens": tokens.reasoning_tokens},
        "total_tokens": total_input + tokens.output_tokens,
    }


def own(raw: ProviderRaw | None) -> dict[str, Any] | None:
    """What the Responses API wrote of an item (or annotation) it made; None for others'."""
    if raw is None or raw.provider != RESPONSES or not raw.data:
        return None
    return dict(raw.data)


def annotation(cited: Citation) -> dict[str, Any] | None:
    """A citation as an ``output_text`` annotation: the API's own, or a URL's at its span."""
    kept = own(cited.provider_raw)
    if kept is not None or not cited.url or cited.span is None:
        return kept
    span = {"start_index": cited.span.start, "end_index": cited.span.end}
    return {"type": "url_citation", **span, "url": cited.url, "title": cited.title}


def text_item(
    text: str,
    status: str = "completed",
    item_id: str | None = None,
    annotations: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    part = {"type": "output_text", "annotations": annotations or [], "logprobs": [], "text": text}
    content = [] if status == "in_progress" else [part]
    return {
        "id": item_id or new_id("msg_"),
        "type": "message",
        "status": status,
        "content": content,
        "role": "assistant",
    }


def refusal_item(explanation: str, item_id: str | None = None) -> dict[str, Any]:
    """A message of a refusal's words, as the Responses API writes a refusal: a ``refusal``
    part (another provider's explanation of its refusal, Anthropic's ``stop_details``)."""
    return {
        "id": item_id or new_id("msg_"),
        "type": "message",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": explanation}],
        "role": "assistant",
    }


def reasoning_item(
    item_id: str, thinking: str, encrypted_content: str | None = None
) -> dict[str, Any]:
    """A reasoning item (its id: :func:`metis.gateway.reasoning_items.reasoning_id`);
    ``encrypted_content`` where the request asked for it (``include``)."""
    summary = [{"type": "summary_text", "text": thinking}] if thinking else []
    item = {"id": item_id, "type": "reasoning", "summary": summary}
    if encrypted_content:
        item["encrypted_content"] = encrypted_content
    return item


def call_item(
    call_id: str, name: str, arguments: str, status: str = "completed", item_id: str | None = None
) -> dict[str, Any]:
    return {
        "id": item_id or new_id("fc_"),
        "type": "function_call",
        "status": status,
        "arguments": arguments,
        "call_id": call_id,
        "name": name,
    }


def summarized(inbound: Inbound) -> bool:
    """Whether the request asked for its reasoning's summary (``reasoning.summary``): a
    reasoning item's summary is written only then, as the API writes it (``[]`` otherwise)."""
    reasoning = inbound.options.get("reasoning")
    return isinstance(reasoning, Mapping) and reasoning.get("summary") not in (None, "none")


def output_items(
    content: list[ContentBlock], inbound: Inbound, response_id: str, ids: Ids | None = None
) -> list[dict[str, Any]]:
    """The output items of ``content``; ``ids`` names them when the caller does."""
    asked = inbound.options.get("encrypted_reasoning") is True
    summary = summarized(inbound)
    items = []
    thoughts = 0
    for block in content:
        if isinstance(block, ThinkingBlock | RedactedThinkingBlock):
            thinking = getattr(block, "thinking", "")
            sealed = encrypted(block, block.provider_raw) if asked else None
            if sealed and not summary:
                sealed = with_text(thinking, sealed)
            item_id = ids("rs_") if ids else reasoning_id(response_id, thoughts)
            items.append(reasoning_item(item_id, thinking if summary else "", sealed))
            thoughts += 1
        elif isinstance(block, TextBlock):
            cited = [a for a in map(annotation, block.citations or ()) if a]
            items.append(text_item(block.text, "completed", ids and ids("msg_"), cited))
        elif isinstance(block, ToolUseBlock):
            arguments, fc_id = dumps(block.input), ids and ids("fc_")
            items.append(call_item(block.id, block.name, arguments, "completed", fc_id))
        elif isinstance(block, OpaqueBlock) and (kept := own(block.provider_raw)):
            items.append(kept["item"])  # a hosted tool's call, a compaction item
        elif isinstance(block, ServerToolCallBlock) and (item := server_item(block, content)):
            items.append(item)
    return items


def reply_items(
    response: CanonicalResponse, inbound: Inbound, response_id: str
) -> list[dict[str, Any]]:
    """The output items of a whole reply: its content's, and a refusal item where its stop
    explains its refusal."""
    explained = response.stop_reason.explanation
    refused = [refusal_item(explained)] if explained is not None else []
    return output_items(response.content, inbound, response_id) + refused


def server_item(
    call: ServerToolCallBlock, content: list[ContentBlock] | ServerToolResultBlock | None
) -> dict[str, Any] | None:
    """A server tool's call as its output item: the API's own as it came, another provider's
    written with its result (``content``: the reply's blocks, or the result itself)."""
    kept = own(call.provider_raw)
    if kept is not None:
        return kept.get("item") if isinstance(kept.get("item"), dict) else None
    if isinstance(content, list):
        found = (b for b in content if isinstance(b, ServerToolResultBlock))
        content = next((b for b in found if b.tool_call_id == call.id), None)
    return responses_item(call, content)


ECHO_SAMPLING = ("parallel_tool_calls", "temperature", "top_p")
"""What the echo takes of the canonical fields (the request's others it takes as written)."""


def echo_of(asked: Mapping[str, Any]) -> dict[str, Any]:
    """What the ``response`` object says the request asked: ``asked``, the request's fields (a
    field not given, its default)."""
    reasoning = asked.get("reasoning")
    effort = reasoning if isinstance(reasoning, Mapping) else {}
    return {
        "instructions": asked.get("instructions"),
        "max_output_tokens": asked.get("max_output_tokens"),
        "parallel_tool_calls": asked.get("parallel_tool_calls", True),
        "previous_response_id": asked.get("previous_response_id"),
        "reasoning": {"effort": effort.get("effort"), "summary": effort.get("summary")},
        "store": asked.get("store", True),
        "temperature": asked.get("temperature", 1.0),
        "text": asked.get("text") or {"format": {"type": "text"}},
        "tool_choice": asked.get("tool_choice") or "auto",
        "tools": asked.get("tools") or [],
        "top_p": asked.get("top_p", 1.0),
        "truncation": asked.get("truncation", "disabled"),
        "metadata": asked.get("metadata") or {},
    }


CUT_ITEMS = frozenset({"message", "function_call"})
"""The items the API marks ``incomplete`` when the reply was cut short while writing them."""


def cut_short(stop: StopReason | None) -> bool:
    """Whether a reply ending so is ``incomplete`` (its output limit, or a content filter)."""
    return stop is not None and stop.kind in (StopKind.MAX_TOKENS, StopKind.CONTENT_FILTER)


def response_object(
    inbound: Inbound,
    model: str,
    response_id: str,
    output: list[dict[str, Any]],
    stop: StopReason | None,
    tokens: TokenUsage | None,
    echo: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The ``response`` object; ``stop`` None: still in progress. ``echo``: what the request
    asked (:func:`echo_of`), when the caller read it itself."""
    told = echo
    if told is None:
        sampling = {k: inbound.fields[k] for k in ECHO_SAMPLING if k in inbound.fields}
        told = echo_of({**inbound.options, **sampling})
    incomplete = cut_short(stop)
    status = "in_progress" if stop is None else "incomplete" if incomplete else "completed"
    if incomplete and output and output[-1].get("type") in CUT_ITEMS:
        output = [*output[:-1], {**output[-1], "status": "incomplete"}]
    reason = "max_output_tokens" if stop and stop.kind is StopKind.MAX_TOKENS else "content_filter"
    head = {"id": response_id, "object": "response", "created_at": now(), "status": status}
    return {
        **head,
        "background": False,
        "error": None,
        "incomplete_details": {"reason": reason} if incomplete else None,
        "instructions": told["instructions"],
        "max_output_tokens": told["max_output_tokens"],
        "model": model,
        "output": output,
        **{k: told[k] for k in ECHOED},
        **({"service_tier": tier} if tokens and (tier := openai_tier(tokens)) else {}),
        "usage": usage(tokens) if tokens is not None else None,
        "user": None,
        "metadata": told["metadata"],
    }


ECHOED = (
    "parallel_tool_calls",
    "previous_response_id",
    "reasoning",
    "store",
    "temperature",
    "text",
    "tool_choice",
    "tools",
    "top_p",
    "truncation",
)
