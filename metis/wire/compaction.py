"""Compaction by the provider (:class:`metis.model.request.Compaction`) on the two wires that
have it, and the compaction blocks it leaves in a conversation (docs/sessions.md).

- Anthropic Messages: the ``compact_20260112`` context-management edit under the
  ``compact-2026-01-12`` beta; the reply holds a ``compaction`` block (the summary, or null when
  the pass failed), streamed as ``compaction_delta`` deltas. Anthropic takes no trigger under
  :data:`ANTHROPIC_MIN_TRIGGER` tokens: a lower one is sent as that.
- OpenAI Responses: ``context_management: [{type: "compaction", compact_threshold}]``; the
  output holds a ``compaction`` item whose ``encrypted_content`` only OpenAI reads. The
  explicit form, ``POST /responses/compact``, is :mod:`metis.adapter.compaction`.

A compaction block is an :class:`~metis.model.OpaqueBlock` of kind ``compaction``: it goes back
only to the provider that made it and is dropped with one WARN anywhere else
(docs/contract.md §8). The provider reads the conversation from its latest compaction block on:
what precedes it no longer counts against the window (:func:`window_start`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metis.errors import ProtocolError
from metis.model.block import ProviderRaw
from metis.model.content import Message, OpaqueBlock, Role, TextBlock
from metis.model.history import History, history_of
from metis.model.request import Compaction
from metis.model.response import TokenUsage
from metis.wire.read import UntrueCount, object_value, said_untrue, split_input, token_count
from metis.wire.unicode_text import clean_value

COMPACTION = "compaction"
"""The kind of a compaction block, on both wires."""
ANTHROPIC_BETA = "compact-2026-01-12"
ANTHROPIC_EDIT = "compact_20260112"
ANTHROPIC_MIN_TRIGGER = 50_000


def anthropic_fields(compaction: Compaction) -> dict[str, Any]:
    """The Messages API body fields that ask for compaction."""
    edit: dict[str, Any] = {
        "type": ANTHROPIC_EDIT,
        "trigger": {
            "type": "input_tokens",
            "value": max(compaction.trigger_tokens, ANTHROPIC_MIN_TRIGGER),
        },
    }
    if compaction.instructions is not None:
        edit["instructions"] = compaction.instructions
    return {"context_management": {"edits": [edit]}}


def anthropic_asks(body: dict[str, Any]) -> bool:
    """Whether a Messages API body asks for compaction (it then needs the beta)."""
    management = body.get("context_management")
    edits = management.get("edits") if isinstance(management, dict) else None
    return isinstance(edits, list) and any(
        isinstance(edit, dict) and edit.get("type") == ANTHROPIC_EDIT for edit in edits
    )


RESPONSES_COMPACT_FIELDS = (
    "model",
    "input",
    "instructions",
    "previous_response_id",
    "prompt_cache_key",
    "prompt_cache_options",
    "service_tier",
)
"""What ``POST /responses/compact`` takes of a create request's body."""


def responses_compact_body(body: dict[str, Any]) -> dict[str, Any]:
    """The compact request for the conversation a Responses create ``body`` would send."""
    return {k: v for k, v in body.items() if k in RESPONSES_COMPACT_FIELDS}


def responses_compacted(answer: Any, provider: str, model: str) -> list[Message]:
    """The conversation ``POST /responses/compact`` answered (its user messages, then one
    compaction item) as messages: a user message of text parts as text; any other item (the
    compaction item, a message with other parts) kept whole, in its place, as an opaque block
    of ``provider``'s in an assistant message, which sends it back as it came. A lone UTF-16
    surrogate in any of its strings is U+FFFD, as in a reply."""
    output = clean_value(answer.get("output")) if isinstance(answer, dict) else None
    if not isinstance(output, list) or not all(isinstance(item, dict) for item in output):
        raise ProtocolError(
            f"the compact endpoint answered without an output list: {str(answer)[:200]!r}",
            provider=provider,
        )
    if not any(item.get("type") == COMPACTION for item in output):
        raise ProtocolError(
            "the compact endpoint answered without a compaction item", provider=provider
        )
    messages: list[Message] = []
    for item in output:
        text = _text_parts(item) if item.get("role") == "user" else None
        if text is not None:
            messages.append(Message(role=Role.USER, content=text))
            continue
        kind = str(item.get("type") or "message")
        raw = ProviderRaw(provider=provider, model=model, data={"item": item})
        block = OpaqueBlock(kind=kind, provider_raw=raw)  # goes back as the item it is
        if messages and messages[-1].role is Role.ASSISTANT:
            messages[-1] = messages[-1].model_copy(
                update={"content": [*messages[-1].content, block]}
            )
        else:
            messages.append(Message(role=Role.ASSISTANT, content=[block]))
    return messages


def responses_compact_usage(answer: Any, provider: str) -> TokenUsage | None:
    """What ``POST /responses/compact`` says the pass spent (its ``usage``, counted as a
    Responses reply's: the input it reports includes the cached part), or None when it says
    nothing, or a count below zero, which cannot be true (a warning says it: the pass's usage
    is then estimated, as a reply's is: metis.wire.read.counts_of)."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if usage is None:
        return None
    try:
        return _compact_usage(object_value(usage, "usage"), provider)
    except UntrueCount as error:  # says nothing of the history: its usage is estimated
        said_untrue(provider, error)
        return None


def _compact_usage(usage: dict[str, Any], provider: str) -> TokenUsage:
    inputs = object_value(usage.get("input_tokens_details") or {}, "usage.input_tokens_details")
    outputs = object_value(usage.get("output_tokens_details") or {}, "usage.output_tokens_details")
    total = token_count(usage.get("input_tokens") or 0, "usage.input_tokens", provider)
    cached = token_count(inputs.get("cached_tokens") or 0, "cached_tokens", provider)
    written = token_count(inputs.get("cache_write_tokens") or 0, "cache_write_tokens", provider)
    uncached, cached, written = split_input(total, cached, written)
    return TokenUsage(
        input_tokens=uncached,
        output_tokens=token_count(usage.get("output_tokens") or 0, "usage.output_tokens", provider),
        cached_input_tokens=cached,
        cache_creation_input_tokens=written,
        reasoning_tokens=token_count(
            outputs.get("reasoning_tokens") or 0, "reasoning_tokens", provider
        ),
    )


def _text_parts(item: dict[str, Any]) -> list[TextBlock] | None:
    """A user message item's text parts, when it holds nothing else."""
    content = item.get("content")
    if isinstance(content, str) and content:
        return [TextBlock(text=content)]
    if not isinstance(content, list) or not content:
        return None
    parts = [
        p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "input_text"
    ]
    if len(parts) != len(content) or not all(isinstance(t, str) and t for t in parts):
        return None
    return [TextBlock(text=t) for t in parts if isinstance(t, str)]


def responses_fields(compaction: Compaction) -> dict[str, Any]:
    """The Responses API body fields that ask for compaction."""
    return {
        "context_management": [{"type": COMPACTION, "compact_threshold": compaction.trigger_tokens}]
    }


def is_compaction(block: object, provider: str | None = None) -> bool:
    """Whether ``block`` is a compaction block (made by ``provider``, if named)."""
    return (
        isinstance(block, OpaqueBlock)
        and block.kind == COMPACTION
        and (provider is None or block.provider_raw.provider == provider)
    )


def window_start(
    messages: Sequence[Message], providers: Sequence[str], history: History | None = None
) -> int:
    """Where the conversation ``providers`` read begins: the message holding the latest
    compaction block one of them made (0 when none did). ``history``: the record of
    ``messages``, when the caller has it."""
    for i in reversed((history or history_of(messages)).opaque_at):
        if any(is_compaction(b, p) for b in messages[i].content for p in providers):
            return i
    return 0
