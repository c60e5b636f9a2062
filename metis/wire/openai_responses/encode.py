"""Encoding for the OpenAI Responses codec: a canonical request becomes ``POST /v1/responses``.

The conversation is a flat list of input items. A user (or tool) message becomes its tool
results as ``function_call_output`` items followed by one ``user`` message of ``input_text``,
``input_image`` and ``input_file`` parts (metis/wire/openai_responses/files.py); an assistant
message becomes, block by block, ``reasoning``, ``message`` (``output_text``) and
``function_call`` items in their original order. The system prompt is
``instructions``. ``is_error`` has no wire form and becomes an ``"Error: "`` prefix, as on
Chat Completions.

Blocks this provider produced carry the item they came from in ``provider_raw.data`` (the
parser puts it there): the item ``id``, a message's ``phase``, a reasoning item's summary
parts. They go back with the block, so a reasoning item's encrypted content meets the id it
was issued for and is followed by the very items it led to. A reasoning item that would be
followed by anything else is dropped with one WARN, since OpenAI refuses "a reasoning item
without its required following item" with a 400.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from metis.catalog.knobs import openai_cache_generation
from metis.model.content import (
    AudioBlock,
    Base64ImageSource,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    OpaqueBlock,
    Role,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolResultContent,
    ToolUseBlock,
    VideoBlock,
)
from metis.model.media import FileIdSource
from metis.model.media_fit import current_turn_start
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.wire.codec import EncodeContext
from metis.wire.compaction import responses_fields
from metis.wire.encoded_messages import sent_schema
from metis.wire.knobs.forms import effort_of
from metis.wire.media import refuse_block
from metis.wire.opaque import elsewhere, own_item
from metis.wire.openai_cache import hinted, text_part
from metis.wire.openai_responses.custom import CUSTOM_CALL, custom_call, custom_tool, is_custom
from metis.wire.openai_responses.files import file_parts
from metis.wire.openai_responses.server_tools import declarations, includes
from metis.wire.server_replay import messages_for_provider
from metis.wire.strict_schema import schema_name, strict_schema_or_reason

Drop = Callable[[str, str, str], None]
"""``drop(block_type, reason, message_id)``: one WARN for content left out."""

_TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}


def encode_request(
    request: CanonicalRequest,
    call: EncodeContext,
    *,
    store: bool,
    include_encrypted_reasoning: bool,
    file_urls: bool = True,
) -> dict[str, Any]:
    if request.stop_sequences:  # a setting left out, not a refusal (docs/contract.md §13)
        call.warn_dropped(
            "stop_sequences", "the OpenAI Responses API takes no stop sequences; they were not sent"
        )
    body: dict[str, Any] = {"model": call.wire_model}
    if request.system_prompt:
        body["instructions"] = request.system_prompt
    custom = frozenset(tool.name for tool in request.tools if tool.freeform)
    body["input"] = input_items(
        messages_for_provider(request.messages, call),
        call.provider,
        _warner(call),
        refuse=_refuser(call),
        file_urls=file_urls,
        custom=custom,
        breakpoints=openai_cache_generation(call.wire_model) == "breakpoints",
    )
    if request.tools or request.server_tools:
        body["tools"] = [_tool(t) for t in request.tools] + declarations(request, call)
        choice = request.tool_choice
        if choice is not None:
            body["tool_choice"] = (
                {"type": "custom" if choice.name in custom else "function", "name": choice.name}
                if choice.type == "tool"
                else _TOOL_CHOICE[choice.type]
            )
        if request.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = request.parallel_tool_calls
    body["max_output_tokens"] = request.max_output_tokens
    for name in ("temperature", "top_p"):  # Responses takes no other sampling setting
        if getattr(request, name) is not None:
            body[name] = getattr(request, name)
    if request.output_schema is not None:
        body["text"] = {"format": _json_schema_format(request.output_schema)}
    if request.thinking is not None:
        body["reasoning"] = {"effort": effort_of(request.thinking)}
        if request.thinking.display != "omitted":  # no summary asked: none comes back
            body["reasoning"]["summary"] = request.thinking.summary or "auto"
    include = ["reasoning.encrypted_content"] if include_encrypted_reasoning else []
    if include := include + includes(request):
        body["include"] = include
    if request.compaction is not None:
        body.update(responses_fields(request.compaction))
    body["store"] = store
    body["stream"] = bool(request.stream)
    return body


def input_items(
    messages: Sequence[Message],
    provider: str,
    drop: Drop,
    *,
    refuse: Drop | None = None,
    file_urls: bool = True,
    custom: frozenset[str] = frozenset(),
    breakpoints: bool = False,
) -> list[dict[str, Any]]:
    """The conversation as input items. A file with no form here is refused with ``refuse``
    in the turn being sent (docs/contract.md §9), and dropped with ``drop`` before it.
    ``custom``: the request's freeform tools, whose calls and results go as custom ones;
    ``breakpoints``: the caller's cache hints on text go as ``prompt_cache_breakpoint``."""
    items: list[dict[str, Any]] = []
    start = current_turn_start(messages)
    custom_ids: set[str] = set()
    for i, message in enumerate(messages):
        message_id = message.id or f"messages[{i}]"
        if message.role is Role.ASSISTANT:
            made = assistant_items(message.content, provider, message_id, drop, custom)
            custom_ids |= {item["call_id"] for item in made if item["type"] == CUSTOM_CALL}
            items.extend(made)
        else:
            files = _Files(
                drop, refuse if refuse is not None and i >= start else drop, file_urls, breakpoints
            )
            items.extend(_user_items(message, message_id, files, custom_ids))
    return items


def assistant_items(
    content: Sequence[ContentBlock],
    provider: str,
    message_id: str,
    drop: Drop,
    custom: frozenset[str] = frozenset(),
) -> list[dict[str, Any]]:
    """One assistant turn's items, in block order (also what a reply's content becomes when
    it is sent back, which the ``continuation`` stage relies on)."""
    items: list[dict[str, Any]] = []
    for block in content:
        raw = block.provider_raw
        mine = raw.data if raw is not None and raw.provider == provider else {}
        if isinstance(block, TextBlock):
            if block.text:
                items.append(_message_item(block.text, mine))
        elif isinstance(block, ToolUseBlock) and is_custom(block, mine, custom):
            items.append(custom_call(block, mine))
        elif isinstance(block, ToolUseBlock):
            items.append(_function_call(block, mine))
        elif isinstance(block, ServerToolCallBlock):
            if isinstance(mine.get("item"), dict):  # the item, whole, from the call block
                items.append(copy.deepcopy(mine["item"]))
        elif isinstance(block, ServerToolResultBlock):
            pass  # its item went back with its call
        elif isinstance(block, OpaqueBlock):  # back as it came, only to where it came from
            item = own_item(block, provider)
            if item is None:
                drop(block.kind, elsewhere(block), message_id)
            else:
                items.append(item)
        elif isinstance(block, ThinkingBlock):
            reasoning = _reasoning_item(block, mine)
            if isinstance(reasoning, str):
                drop(block.type, reasoning, message_id)
            else:
                items.append(reasoning)
        else:
            reason = f"OpenAI Responses cannot carry a {block.type} block in an assistant turn"
            drop(block.type, reason, message_id)
    return _paired(items, message_id, drop)


def _paired(items: list[dict[str, Any]], message_id: str, drop: Drop) -> list[dict[str, Any]]:
    kept: list[dict[str, Any]] = []
    for i, item in enumerate(items):
        if item.get("type") == "reasoning":  # an item kept whole may have lost its type
            following = items[i + 1].get("type", "") if i + 1 < len(items) else None
            if following is None or following == "reasoning":  # it must lead to an item
                reason = "a reasoning item must be followed by the message or call it led to"
                drop("thinking", reason, message_id)
                continue
        kept.append(item)
    return kept


def _message_item(text: str, mine: dict[str, Any]) -> dict[str, Any]:
    """This provider's own message goes back as the output message it was (id, status,
    ``output_text``); any other assistant text as an input message with plain string content,
    the form the API documents for assistant turns it did not produce (an output message
    requires its id and status)."""
    if not isinstance(mine.get("id"), str):
        return {"type": "message", "role": "assistant", "content": text}
    item: dict[str, Any] = {"type": "message", "role": "assistant", "id": mine["id"]}
    item["status"] = "completed"
    if isinstance(mine.get("phase"), str):
        item["phase"] = mine["phase"]
    item["content"] = [{"type": "output_text", "text": text, "annotations": []}]
    return item


def _function_call(block: ToolUseBlock, mine: dict[str, Any]) -> dict[str, Any]:
    kept = mine.get("arguments")  # arguments that were not a JSON object go back as received
    arguments = (
        kept
        if isinstance(kept, str)
        else json.dumps(block.input, separators=(",", ":"), ensure_ascii=False)
    )
    item: dict[str, Any] = {"type": "function_call"}
    # The item id only where the call id is still the one OpenAI issued with it.
    if isinstance(mine.get("id"), str) and mine.get("call_id") == block.id:
        item["id"] = mine["id"]
    item.update(call_id=block.id, name=block.name, arguments=arguments)
    return item


def _reasoning_item(block: ThinkingBlock, mine: dict[str, Any]) -> dict[str, Any] | str:
    """The reasoning item, or why there can be none."""
    item_id = mine.get("id")
    if not block.signature or not isinstance(item_id, str):
        return "OpenAI takes back only reasoning items it issued, with their encrypted content"
    if mine.get("unpaired"):
        return "the item that followed this reasoning has no canonical form and was not kept"
    summary = mine.get("summary")
    if not isinstance(summary, list):
        summary = [{"type": "summary_text", "text": block.thinking}] if block.thinking else []
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": summary}
    if isinstance(mine.get("content"), list):
        item["content"] = mine["content"]
    item["encrypted_content"] = block.signature
    return item


@dataclass(frozen=True, slots=True)
class _Files:
    drop: Drop
    refuse: Drop
    """For a file this wire cannot carry: ``drop`` in an older turn, a refusal in the turn sent."""
    urls: bool
    breakpoints: bool = False


def _user_items(
    message: Message, message_id: str, files: _Files, custom_ids: set[str]
) -> list[dict[str, Any]]:
    """Tool results first, each its own item, then the rest as one message."""
    out: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    system = message.role is Role.SYSTEM  # system_hoist normally leaves none; keep it in place
    for block in message.content:
        if isinstance(block, ToolResultBlock) and not system:
            output = _tool_output(block, message_id, files)
            if block.tool_use_id in custom_ids:  # the answer to a custom call
                output["type"] = "custom_tool_call_output"
            out.append(output)
        elif isinstance(block, TextBlock):
            mark = files.breakpoints and not system and hinted(message, block)
            parts.append(text_part("input_text", block, mark))
        elif isinstance(block, ImageBlock | DocumentBlock | AudioBlock | VideoBlock) and not system:
            parts += _media(block, message_id, files)
        else:
            role = message.role.value
            reason = f"OpenAI Responses cannot carry a {block.type} block in a {role} message"
            files.drop(block.type, reason, message_id)
    if parts:
        out.append({"type": "message", "role": "system" if system else "user", "content": parts})
    return out


def _media(block: ToolResultContent, message_id: str, files: _Files) -> list[dict[str, Any]]:
    if isinstance(block, TextBlock):
        return [{"type": "input_text", "text": block.text}]
    if isinstance(block, ImageBlock):
        return [_image(block)]
    wire = file_parts(block, file_urls=files.urls)
    if isinstance(wire, str):
        files.refuse(block.type, wire, message_id)
        return []
    return wire


def _tool_output(block: ToolResultBlock, message_id: str, files: _Files) -> dict[str, Any]:
    output: str | list[dict[str, Any]]
    if isinstance(block.content, str) or all(isinstance(p, TextBlock) for p in block.content):
        text = block.text
        output = "Error: " + text if block.is_error else text
    else:  # images and files too: the output is a list of input parts
        output = [wire for p in block.content for wire in _media(p, message_id, files)]
        if block.is_error:
            output.insert(0, {"type": "input_text", "text": "Error:"})
    return {"type": "function_call_output", "call_id": block.tool_use_id, "output": output}


def _image(block: ImageBlock) -> dict[str, Any]:
    source = block.source
    if isinstance(source, FileIdSource):
        return {"type": "input_image", "file_id": source.file_id, "detail": "auto"}
    if isinstance(source, Base64ImageSource):
        url = f"data:{source.media_type};base64,{source.data}"
    else:
        url = source.url
    return {"type": "input_image", "image_url": url, "detail": "auto"}  # detail is required


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    if tool.freeform is not None:
        return custom_tool(tool)
    out: dict[str, Any] = {"type": "function", "name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["parameters"] = sent_schema(tool.input_schema)
    # The API's default is strict: true, which refuses most schemas as written: a tool goes
    # strict only when it asks to, its schema then made strict (and the nulls strict mode makes
    # the model send for optional keys taken out again) by the strict_schema stage.
    out["strict"] = tool.strict is True
    return out


def _json_schema_format(schema: dict[str, Any]) -> dict[str, Any]:
    strict, _ = strict_schema_or_reason(schema)
    return {
        "type": "json_schema",
        "name": schema_name(schema.get("title")),
        "schema": strict if strict is not None else copy.deepcopy(schema),
        "strict": strict is not None,
    }


def _warner(call: EncodeContext) -> Drop:
    def drop(block_type: str, reason: str, message_id: str) -> None:
        call.warn_dropped(block_type, reason, message_id=message_id)

    return drop


def _refuser(call: EncodeContext) -> Drop:
    def refuse(block_type: str, reason: str, message_id: str) -> None:
        refuse_block(call, block_type, reason, message_id)

    return refuse


def silent(block_type: str, reason: str, message_id: str) -> None:
    """A ``Drop`` that says nothing (re-encoding a reply the caller already has)."""
