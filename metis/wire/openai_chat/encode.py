"""Encoding for the OpenAI Chat Completions codec: the messages of ``POST /v1/chat/completions``.

The system prompt comes first; each tool result is its own ``role: tool`` message (``is_error``
as an ``"Error: "`` prefix: the wire has no flag); tool calls are ``tool_calls`` with
JSON-string arguments. Reasoning goes back in the stack's ``reasoning_field`` when it names one
(DeepSeek's ``reasoning_content``), and only to the provider and model that produced it, as
does a call's thought signature (Gemini's ``extra_content.google.thought_signature``). An
image or file in a tool result (a tool message holds text only) follows in the user message
after the tool messages, a note in the result naming it. What the wire cannot hold (other
thinking, media in an assistant turn) is dropped whole with one ``call.warn_dropped`` record.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from metis.catalog.knobs import openai_cache_generation
from metis.model.content import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    OpaqueBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)
from metis.model.request import ToolDefinition
from metis.wire.codec import EncodeContext
from metis.wire.encoded_messages import sent_schema
from metis.wire.media import project_attachments
from metis.wire.opaque import own_item, place_of, sent_back
from metis.wire.openai_cache import BREAKPOINT, hinted, text_part
from metis.wire.openai_chat.audio import audio_reference, is_audio
from metis.wire.openai_chat.media import media_parts
from metis.wire.openai_chat.read import REASONING_DETAILS, content_chunks
from metis.wire.openai_chat.tool_calls import SIGNATURE


class ReasoningReplay(BaseModel):
    """How reasoning goes back to a provider that wants it (a stack's ``encode`` settings)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    reasoning_field: str | None = Field(default=None, min_length=1)
    """The assistant-message field for this model's own reasoning (``reasoning_content``)."""
    reasoning_in_content: bool = False
    """Send this model's own reasoning inside ``content`` as typed chunks (``{"type":
    "thinking", "thinking": [...]}`` then ``{"type": "text", ...}``), as Mistral replays it."""

    @model_validator(mode="after")
    def _one_way(self) -> ReasoningReplay:
        if (self.reasoning_field is None) == (not self.reasoning_in_content):
            raise ValueError("set one of reasoning_field or reasoning_in_content")
        return self

    reasoning_placeholder: str | None = None
    """What an assistant turn with tool calls but none of this model's reasoning (a turn made
    elsewhere) carries in that field instead. DeepSeek's thinking mode requires the field on
    every such turn (400 "The reasoning_content in the thinking mode must be passed back to
    the API"), and V4 refuses it empty, so its stack sets a single space."""


def user_messages(
    message: Message, message_id: str, call: EncodeContext, current: bool = False
) -> list[dict[str, Any]]:
    """Tool results first, each its own ``role: tool`` message, then the rest as one turn: the
    images and files of the tool results (a tool message holds text only), then the message's
    own content. ``current``: the message is in the turn being sent (docs/contract.md §9)."""
    out: list[dict[str, Any]] = []
    attached: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    system = message.role is Role.SYSTEM  # system_hoist normally leaves none; keep it in place
    breakpoints = not system and openai_cache_generation(call.wire_model) == "breakpoints"
    for block in message.content:
        if isinstance(block, ToolResultBlock) and not system:
            projected = project_attachments(block)
            out.append(_tool_message(projected.result))
            for part in projected.attachments:
                attached += media_parts(part, call, message_id, current)
        elif isinstance(block, TextBlock):
            parts.append(text_part("text", block, breakpoints and hinted(message, block)))
        elif isinstance(block, ImageBlock | DocumentBlock | AudioBlock | VideoBlock) and not system:
            parts += media_parts(block, call, message_id, current)
        else:
            _drop(call, block.type, message.role, message_id)
    parts = attached + parts
    if system:
        out.append({"role": "system", "content": "".join(p["text"] for p in parts)})
    elif len(parts) == 1 and parts[0]["type"] == "text" and BREAKPOINT not in parts[0]:
        out.append({"role": "user", "content": parts[0]["text"]})
    elif parts or not out:
        out.append({"role": "user", "content": parts or ""})
    return out


def _tool_message(block: ToolResultBlock) -> dict[str, Any]:
    text = block.text
    content = "Error: " + text if block.is_error else text
    return {"role": "tool", "tool_call_id": block.tool_use_id, "content": content}


def assistant_message(
    message: Message,
    message_id: str,
    call: EncodeContext,
    replay: ReasoningReplay | None,
    custom: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """``custom``: the names of the request's freeform tools, whose calls go as custom calls."""
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[dict[str, Any]] = []
    kept: dict[str, Any] = {}  # reasoning_details entries with no canonical form; the audio
    chunked = False  # the reply held content chunks with no canonical form
    for block in message.content:
        if isinstance(block, TextBlock):
            texts.append(block.text)
        elif isinstance(block, OpaqueBlock):
            item = sent_back(block, call, message_id)
            if item is not None and place_of(block) == REASONING_DETAILS:
                kept.setdefault("reasoning_details", []).append(item)
            elif item is not None and is_audio(block, place_of(block)):
                kept["audio"] = audio_reference(item)
            elif item is not None:
                chunked = True
        elif isinstance(block, ToolUseBlock) and _is_custom(block, call, custom):
            text = freeform_text(block.input)
            calls.append(
                {"id": block.id, "type": "custom", "custom": {"name": block.name, "input": text}}
            )
        elif isinstance(block, ToolUseBlock):
            calls.append(_function_call(block, call))
        elif (
            isinstance(block, ThinkingBlock)
            and replay is not None
            and call.produced(block.provider_raw)
        ):
            reasoning.append(block.thinking)
        else:
            _drop(call, block.type, message.role, message_id)
    content = "".join(texts) if texts else (None if calls else "")
    out: dict[str, Any] = {"role": "assistant", "content": content}
    in_content = replay is not None and replay.reasoning_in_content
    if (in_content and reasoning) or chunked:
        out["content"] = content_chunks(
            message.content,
            lambda block: in_content and call.produced(block.provider_raw),
            lambda block: copy.deepcopy(own_item(block, call.provider)),
        )
    elif replay is not None and replay.reasoning_field is not None:
        said = "".join(reasoning)
        if not said and calls and replay.reasoning_placeholder is not None:
            said = replay.reasoning_placeholder
        if said:
            out[replay.reasoning_field] = said
    if calls:
        out["tool_calls"] = calls
    return out | kept


def _encode_arguments(block: ToolUseBlock, call: EncodeContext) -> str:
    raw = block.provider_raw  # arguments that were not a JSON object go back as received
    if raw is not None and raw.provider == call.provider:
        kept = raw.data.get("arguments")
        if isinstance(kept, str):
            return kept
    return json.dumps(block.input, separators=(",", ":"), ensure_ascii=False)


def _function_call(block: ToolUseBlock, call: EncodeContext) -> dict[str, Any]:
    function = {"name": block.name, "arguments": _encode_arguments(block, call)}
    return {"id": block.id, "type": "function", "function": function} | _signed(block, call)


def _signed(block: ToolUseBlock, call: EncodeContext) -> dict[str, Any]:
    """A call's thought signature, back where Gemini's OpenAI-compatible endpoint sent it, only
    to the provider and model that made it (docs/contract.md §7)."""
    raw = block.provider_raw
    if raw is None or not call.produced(raw):
        return {}
    signature = raw.data.get(SIGNATURE)
    if not isinstance(signature, str):
        return {}
    return {"extra_content": {"google": {"thought_signature": signature}}}


def tool_definition(tool: ToolDefinition) -> dict[str, Any]:
    if tool.freeform is not None:  # the SDK's ChatCompletionCustomToolParam
        custom: dict[str, Any] = {"name": tool.name}
        if tool.description:
            custom["description"] = tool.description
        if tool.freeform.syntax is not None:
            grammar = {"definition": tool.freeform.definition, "syntax": tool.freeform.syntax}
            custom["format"] = {"type": "grammar", "grammar": grammar}
        else:
            custom["format"] = {"type": "text"}
        return {"type": "custom", "custom": custom}
    function: dict[str, Any] = {"name": tool.name}
    if tool.description:
        function["description"] = tool.description
    function["parameters"] = sent_schema(tool.input_schema)
    if tool.strict is not None:  # else the strict_schema stage decides
        function["strict"] = tool.strict
    return {"type": "function", "function": function}


def _drop(call: EncodeContext, block_type: str, role: Role, message_id: str) -> None:
    reason = f"openai_chat cannot carry a {block_type} block in a {role.value} message"
    call.warn_dropped(block_type, reason, message_id=message_id)


def named_tool_choice(name: str, custom: frozenset[str]) -> dict[str, Any]:
    """The ``tool_choice`` forcing the tool ``name`` (a custom one by its own form)."""
    if name in custom:
        return {"type": "custom", "custom": {"name": name}}
    return {"type": "function", "function": {"name": name}}


def freeform_text(tool_input: dict[str, Any]) -> str:
    """A freeform call's text: its ``input`` (docs/contract.md §10); any other input, as JSON."""
    text = tool_input.get("input")
    if isinstance(text, str) and len(tool_input) == 1:
        return text
    return json.dumps(tool_input, separators=(",", ":"), ensure_ascii=False)


def _is_custom(block: ToolUseBlock, call: EncodeContext, custom: frozenset[str]) -> bool:
    """A call of a freeform tool the request declares, or one this provider made as custom."""
    raw = block.provider_raw
    made = raw is not None and raw.provider == call.provider and raw.data.get("type") == "custom"
    return block.name in custom or made
