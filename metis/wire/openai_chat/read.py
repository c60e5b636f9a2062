"""Reading the parts of a Chat Completions reply that compatible servers each shape their own way.

Sans-IO helpers for :mod:`metis.wire.openai_chat`'s parsers:

- ``content`` as a list of typed chunks (Mistral): ``{"type": "text", "text": ...}`` is text,
  ``{"type": "thinking", "thinking": [{"type": "text", "text": ...}, ...]}`` is reasoning.
  :func:`content_chunks` writes text and reasoning back in that form.
- reasoning as ``reasoning_text`` with its signature in ``reasoning_opaque`` (GitHub Copilot).
- reasoning as ``reasoning_details`` entries only (OpenRouter): ``reasoning.text`` (with an
  optional ``signature``) and ``reasoning.summary`` are thinking, ``reasoning.encrypted`` is
  opaque reasoning kept as a redacted block.
- ``finish_reason: "stop"`` on a reply with tool calls (a named ``tool_choice`` answered by a
  compatible server) is a ``tool_use`` stop.
- a whole reply with an empty ``finish_reason`` (Snowflake Cortex) or none (OpenRouter relaying
  some providers): its end, by its tool calls or as a turn's end.
- usage with cache writes (``prompt_tokens_details.cache_write_tokens``), and the web searches
  OpenRouter's web search made (``usage.server_tool_use_details.web_search_requests``).
- tool calls without an ``id``: one is minted; an ``id`` that is a whole number (Text Generation
  Inference 1.4) is read as its digits.
- one reply split into ``choices`` that name no ``index`` (GitHub Copilot: a Claude model's
  text in one, its tool calls in the next): read as the one reply they are pieces of.
- ``content`` as a JSON object (Cloudflare Workers AI's answer to a ``json_schema``
  ``response_format``): that object's JSON text, as OpenAI sends it.
- a content chunk or ``reasoning_details`` entry of a type not named above: kept whole as an
  opaque block (docs/contract.md §8), which goes back in the same place only to this provider.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from typing import Any

from metis.core.ids import new_ulid
from metis.model.content import ContentBlock, OpaqueBlock, TextBlock, ThinkingBlock
from metis.model.response import ServerToolRequests, StopKind, StopReason
from metis.model.tier import service_tier
from metis.wire.builder import MessageBuilder
from metis.wire.opaque import place_of
from metis.wire.read import (
    audio_counts,
    counts_of,
    list_value,
    malformed,
    object_value,
    optional_list,
    optional_text,
    required,
    required_text,
    split_input,
    text_value,
    token_count,
)

_LIMITS = frozenset({"length", "max_tokens", "max_output_tokens", "MAX_TOKENS"})
_STOPS = {
    raw: StopReason(kind=kind, raw=raw)
    for raw, kind in (
        ("stop", StopKind.END_TURN),
        ("length", StopKind.MAX_TOKENS),
        ("tool_calls", StopKind.TOOL_USE),
        ("function_call", StopKind.TOOL_USE),
        ("content_filter", StopKind.CONTENT_FILTER),
        ("stop_sequence", StopKind.STOP_SEQUENCE),  # Hugging Face TGI
        ("eos_token", StopKind.END_TURN),  # TGI 1.4
        ("eos", StopKind.END_TURN),  # Together AI: the model's end of sequence
        ("tool_call", StopKind.TOOL_USE),  # Azure AI Foundry serving DeepSeek-R1-0528
        ("end_turn", StopKind.END_TURN),  # OpenRouter relaying Anthropic's own word (2024)
        ("model_length", StopKind.MAX_TOKENS),  # Mistral: the model's context length reached
    )
}
CONTENT, REASONING_DETAILS = "content", "reasoning_details"
"""Where an opaque block of this dialect goes back: a ``content`` chunk or a
``reasoning_details`` entry of the assistant message."""
_ENDS = {raw: StopReason(kind=StopKind.TOOL_USE, raw=raw) for raw in ("stop", "eos_token")}
"""A reply's end (TGI 1.4 to 2.2's: ``eos_token``) that holds calls: the calls end it."""


def read_content(
    builder: MessageBuilder,
    content: Any,
    text_key: Hashable,
    thinking_key: Hashable,
    where: str = "message",
) -> None:
    """A message's (or a delta's: ``where``) ``content``: a string, a list of typed chunks,
    or a JSON object (read as its JSON text)."""
    if content.__class__ is str:
        if content:
            builder.text(text_key, content)
        return
    if content.__class__ is dict:
        builder.text(text_key, json.dumps(content, ensure_ascii=False, separators=(",", ":")))
        return
    if content.__class__ is not list:
        raise malformed(f"{where}.content", "a string or a list", content)
    where = f"{where}.content[]"
    for chunk in content:
        chunk = object_value(chunk, where)
        kind = required_text(chunk, "type", where)
        if kind == "text":
            if text := required_text(chunk, "text", where):
                builder.text(text_key, text)
        elif kind == "thinking":
            for part in _thinking_parts(required(chunk, "thinking", where), where):
                builder.thinking(thinking_key, part)
            if signature := optional_text(chunk, "signature", where):  # Mistral's ThinkChunk
                builder.thinking_signature(thinking_key, signature)
        else:  # references, images: kept whole, to go back only to this provider
            builder.opaque(object(), kind, chunk, place=CONTENT)


def _thinking_parts(thinking: Any, where: str) -> list[str]:
    if thinking.__class__ is str:
        return [thinking] if thinking else []
    parts = list_value(thinking, f"{where}.thinking")
    texts = (part.get("text") if part.__class__ is dict else part for part in parts)
    return [text_value(text, f"{where}.thinking[]") for text in texts if text]


def read_reasoning(
    builder: MessageBuilder, message: dict[str, Any], key: Hashable, where: str = "message"
) -> None:
    """DeepSeek's ``reasoning_content``, vLLM's and OpenRouter's ``reasoning``, GitHub
    Copilot's ``reasoning_text`` (its ``reasoning_opaque`` the signature); failing those, the
    text of OpenRouter's ``reasoning_details`` entries (which OpenRouter sends alongside
    ``reasoning``, with the same text: then only their signatures and encrypted data count)."""
    reasoning = (
        message.get("reasoning_content")
        or message.get("reasoning")
        or message.get("reasoning_text")
    )
    if reasoning:
        if reasoning.__class__ is not str:
            raise malformed(f"{where}.reasoning", "a string", reasoning)
        builder.thinking(key, reasoning)
    if opaque := message.get("reasoning_opaque"):
        builder.thinking_signature(key, text_value(opaque, f"{where}.reasoning_opaque"))
    if details := message.get("reasoning_details"):
        read_reasoning_details(builder, details, key, where, with_text=not reasoning)


def read_reasoning_details(
    builder: MessageBuilder, details: Any, key: Hashable, where: str, with_text: bool = True
) -> None:
    """OpenRouter's ``reasoning_details`` (in ``where``); ``with_text=False`` when the reply
    gave the same reasoning as plain text."""
    entries = list_value(details, f"{where}.reasoning_details")
    where = f"{where}.reasoning_details[]"
    for entry in entries:
        entry = object_value(entry, where)
        kind = required_text(entry, "type", where)
        if kind == "reasoning.text":
            if with_text and (text := optional_text(entry, "text", kind)):
                builder.thinking(key, text)
            if signature := optional_text(entry, "signature", kind):
                builder.thinking_signature(key, signature)
        elif kind == "reasoning.summary":
            if with_text and (summary := optional_text(entry, "summary", kind)):
                builder.thinking(key, summary)
        elif kind == "reasoning.encrypted":
            if data := optional_text(entry, "data", kind):
                builder.redacted_thinking(("encrypted", key), data)
        else:  # kept whole, to go back only to this provider
            builder.opaque(object(), kind, entry, place=REASONING_DETAILS)


def stop_reason(
    raw: str | None, refused: bool, calls: bool, native: Any = None, words: str | None = None
) -> StopReason:
    """``finish_reason`` read; ``refused``: the message has refusal ``words`` (a ``stop``
    with them is a refusal they explain, docs/contract.md §3); ``calls``: the reply holds tool
    calls. A whole reply that names
    none (OpenRouter's relays of some providers), or an empty one (Snowflake Cortex's), ended by
    its tool calls, or as a turn's end. ``native``: OpenRouter's ``native_finish_reason``, the
    upstream's own; where it names the output limit, the reply stopped there (OpenRouter says
    ``tool_calls`` for a reply cut inside its last call's arguments). A tool-call finish on a
    reply that holds no call (OpenRouter's structured replies) is the turn's end."""
    if native.__class__ is str and native in _LIMITS and raw != "length":
        return StopReason(kind=StopKind.MAX_TOKENS, raw=native)
    if not raw:
        return StopReason(kind=StopKind.TOOL_USE if calls else StopKind.END_TURN, raw=raw)
    if raw == "stop" and refused:
        return StopReason(kind=StopKind.REFUSAL, raw=raw, explanation=words or None)
    if raw in _ENDS and calls:  # what compatible servers answer to a named tool_choice
        return _ENDS[raw]
    known = _STOPS.get(raw) if raw is not None else None
    if known is not None and known.kind is StopKind.TOOL_USE and not calls:
        return StopReason(kind=StopKind.END_TURN, raw=raw)  # nothing to run: the turn ended
    return known or StopReason(kind=StopKind.PROVIDER_SPECIFIC, raw=raw)


def read_usage(
    builder: MessageBuilder, usage: dict[str, Any], reasoning_apart: bool = False, tier: Any = None
) -> None:
    """Canonical input counts uncached, unwritten tokens only; ``prompt_tokens`` counts all
    (but where it is smaller than the cached count alone: then it counts the rest). ``tier``:
    the reply's ``service_tier``, beside its usage.
    ``reasoning_apart``: ``completion_tokens`` leaves the reasoning tokens out (xAI), so they
    are added to make the output count; so they are too where ``total_tokens`` shows it
    (prompt + completion + reasoning: xAI's counts relayed by another endpoint) or where they
    outnumber the completion tokens (Vercel's AI Gateway relaying Gemini). Mistral says
    the tier inside ``usage`` (mistralai ``UsageInfo.service_tier``)."""
    builder.usage(service_tier=service_tier(usage.get("service_tier") if tier is None else tier))
    with counts_of(builder):
        details = object_value(
            usage.get("prompt_tokens_details") or usage.get("prompt_token_details") or {},
            "usage.prompt_tokens_details",
        )  # prompt_token_details: Mistral's other spelling
        provider = builder.provider
        cached = token_count(details.get("cached_tokens") or 0, "cached_tokens", provider)
        for own in ("prompt_cache_hit_tokens", "num_cached_tokens"):  # DeepSeek's, Mistral's
            if not cached and usage.get(own):
                cached = token_count(usage[own], own, provider)
        written = token_count(
            details.get("cache_write_tokens") or 0, "cache_write_tokens", provider
        )
        prompt = token_count(usage.get("prompt_tokens") or 0, "prompt_tokens", provider)
        if cached > prompt:  # a count that leaves the cached tokens out (Azure AI Foundry's Grok)
            prompt += cached
        uncached, cached, written = split_input(prompt, cached, written)
        output = object_value(
            usage.get("completion_tokens_details") or {}, "usage.completion_tokens_details"
        )
        reasoning = token_count(output.get("reasoning_tokens") or 0, "reasoning_tokens", provider)
        completion = token_count(usage.get("completion_tokens") or 0, "completion_tokens", provider)
        total = usage.get("total_tokens")
        if reasoning > completion or (reasoning and total == prompt + completion + reasoning):
            reasoning_apart = True  # more reasoning than completion tokens: not inside them
        builder.usage(
            input_tokens=uncached,
            output_tokens=completion + reasoning if reasoning_apart else completion,
            cached_input_tokens=cached,
            cache_creation_input_tokens=written,
            reasoning_tokens=reasoning,
            **audio_counts(details, output, provider),
        )
        server = object_value(
            usage.get("server_tool_use_details") or {}, "usage.server_tool_use_details"
        )
        if server.get("web_search_requests") is not None:
            searches = token_count(server["web_search_requests"], "web_search_requests", provider)
            builder.usage(server_tools=ServerToolRequests(web_search=searches))


def tool_call_id(item: dict[str, Any]) -> str:
    """The call's ``id``, or a minted one when the server sent none (or an empty one)."""
    value = item.get("id")
    if value is None or value == "":
        return f"call_{new_ulid()}"
    if value.__class__ is int:  # Text Generation Inference 1.4 numbered its calls
        return str(value)
    return text_value(value, "tool_calls[].id")


def content_chunks(
    content: list[ContentBlock],
    keep_thinking: Callable[[ThinkingBlock], bool],
    own_chunk: Callable[[OpaqueBlock], dict[str, Any] | None] = lambda block: None,
) -> list[dict[str, Any]]:
    """An assistant turn's text and reasoning as Mistral's typed content chunks, in order: the
    ``content`` to send back where a stack keeps reasoning, or where the reply held chunks with
    no canonical form. ``keep_thinking`` says which thinking blocks go (this model's own),
    ``own_chunk`` gives such a chunk as it came (None: it stays out); tool calls and other
    blocks are not content."""
    chunks: list[dict[str, Any]] = []
    for block in content:
        if isinstance(block, TextBlock) and block.text:
            chunks.append({"type": "text", "text": block.text})
        elif isinstance(block, ThinkingBlock) and block.thinking and keep_thinking(block):
            thought = {"type": "thinking", "thinking": [{"type": "text", "text": block.thinking}]}
            chunks.append({**thought, "signature": block.signature} if block.signature else thought)
        elif (
            isinstance(block, OpaqueBlock)
            and place_of(block) == CONTENT
            and (chunk := own_chunk(block)) is not None
        ):
            chunks.append(chunk)
    return chunks


def unnumbered_pieces(choices: list[Any]) -> dict[str, Any] | None:
    """Choices that name no ``index`` as the one choice they are pieces of (their text joined,
    their tool calls in order, the last finish reason); None when a choice names its index, or
    there is one choice, or a piece's content is not text."""
    if len(choices) < 2 or any(c.__class__ is not dict or "index" in c for c in choices):
        return None
    message: dict[str, Any] = {}
    texts: list[str] = []
    calls: list[Any] = []
    finish = None
    for choice in choices:
        piece = object_value(choice.get("message") or {}, "response.choices[].message")
        content = piece.get("content")
        if content is not None and content.__class__ is not str:
            return None
        texts.append(content or "")
        calls += optional_list(piece, "tool_calls", "response.choices[].message")
        message.update((k, v) for k, v in piece.items() if k not in message)
        finish = choice.get("finish_reason") or finish
    message["content"], message["tool_calls"] = "".join(texts), calls
    return {"message": message, "finish_reason": finish}
