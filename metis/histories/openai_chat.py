"""Stored histories in OpenAI Chat Completions ``messages`` form, in and out."""

from __future__ import annotations

import copy
import html
import json
from collections.abc import Iterable, Mapping
from typing import Any

from metis.adapter.sendable import first_unsendable
from metis.errors import InvalidRequestError
from metis.histories.blocks import CHAT, Export, chat_annotations, chat_opaque_part
from metis.histories.files import from_chat_audio, from_chat_file, split_data_url, to_chat_parts
from metis.histories.reading import (
    Ids,
    built,
    dropped,
    history,
    items,
    mapping,
    message,
    role_shown,
    stored_history,
    text,
    tool_input,
)
from metis.model.content import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    Message,
    OpaqueBlock,
    ProviderRaw,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.dicts import MessageDict
from metis.model.media import AudioBlock, DocumentBlock, VideoBlock
from metis.stages.policy.tool_shim.tags import RESULT, RESULT_CLOSE
from metis.wire.builder import INVALID_ARGUMENTS
from metis.wire.json_limits import loads
from metis.wire.media import project_attachments
from metis.wire.opaque import place_of
from metis.wire.openai_chat.encode import freeform_text
from metis.wire.openai_chat.media import image_url
from metis.wire.openai_chat.read import REASONING_DETAILS
from metis.wire.openai_chat.server_tools import annotation_citations

_EXPORT = Export(CHAT, "OpenAI Chat export")
_IMPORT = "OpenAI Chat import"
_CUSTOM = ProviderRaw(provider=CHAT, data={"type": "custom"})
"""A freeform tool's call: it goes back to Chat as one (docs/contract.md §10)."""


def from_openai_chat(messages: Iterable[Any], *, ids: Ids | None = None) -> list[Message]:
    """Canonical messages from a Chat Completions ``messages`` list; ``ids`` maps the tool ids
    read to canonical ones (default: a new id for each)."""
    ids = Ids() if ids is None else ids
    out: list[Message] = []
    called: dict[str, str] = {}  # legacy function calls awaiting their result: name -> id
    for i, raw in enumerate(stored_history(messages)):
        from_openai_chat_turn(out, raw, f"messages[{i}]", ids, called)
    return out


def from_openai_chat_turn(
    out: list[Message], raw: Any, where: str, ids: Ids, called: dict[str, str]
) -> None:
    """One message of a Chat ``messages`` list read onto ``out`` (a tool result joins the
    tool message before it); ``called`` holds the legacy function calls awaiting their
    result (name -> id)."""
    item = mapping(raw, where)
    role = item.get("role")
    if role in ("system", "developer"):
        out.append(Message(role=Role.SYSTEM, content=_parts(item.get("content"), where)))
    elif role == "user":
        out.append(Message(role=Role.USER, content=_parts(item.get("content"), where)))
    elif role == "assistant":
        content = _assistant(item, where, ids)
        if item.get("function_call") is not None:
            content.append(_function_call(item["function_call"], where, ids, called))
        out.append(Message(role=Role.ASSISTANT, content=content))
    elif role == "tool":
        _tool_result(out, item, where, ids(item.get("tool_call_id"), f"{where}.tool_call_id"))
    elif role == "function":
        name = text(item, "name", where)
        if name in called:
            _tool_result(out, item, where, called.pop(name))
        else:
            out.append(Message.user(_unpaired(name, item, where)))
    else:
        raise InvalidRequestError(
            f"{where}.role: expected system, developer, user, assistant, tool or function, "
            f"got {role_shown(role)}"
        )


def _tool_result(out: list[Message], item: Mapping[str, Any], where: str, call_id: str) -> None:
    result = ToolResultBlock(tool_use_id=call_id, content=_text(item.get("content"), where))
    if out and out[-1].role is Role.TOOL:  # parallel results: one canonical message
        out[-1] = Message(role=Role.TOOL, content=[*out[-1].content, result])
    else:
        out.append(Message(role=Role.TOOL, content=[result]))


def _function_call(raw: Any, where: str, ids: Ids, called: dict[str, str]) -> ToolUseBlock:
    """A legacy ``function_call`` (deprecated function calling): a tool call without an id,
    answered by the next ``role: function`` message of its name."""
    at = f"{where}.function_call"
    name = text(mapping(raw, at), "name", at)
    given = tool_input(raw.get("arguments"), f"{at}.arguments")
    called[name] = ids(f"function_call:{where}", at)
    return ToolUseBlock(id=called[name], name=name, input=given)


def _unpaired(name: str, item: Mapping[str, Any], where: str) -> str:
    """A ``role: function`` message no ``function_call`` before it asked for, which OpenAI
    takes as the function's result all the same: the user's text, in the tool-result syntax
    a model without tool calling reads (metis.stages.policy.tool_shim), since every API the
    canonical form is written in pairs a tool result with its call (Chat's ``role: tool``
    too)."""
    content = _text(item.get("content"), where)
    return f'{RESULT} name="{html.escape(name)}">{content}{RESULT_CLOSE}'


def _parts(content: Any, where: str) -> list[ContentBlock]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextBlock(text=content)]
    blocks: list[ContentBlock] = []
    for j, raw in enumerate(items(content, f"{where}.content")):
        at = f"{where}.content[{j}]"
        part = mapping(raw, at)
        kind = part.get("type")
        if kind == "text":
            blocks.append(TextBlock(text=text(part, "text", at, None)))
        elif kind == "image_url":
            url = mapping(part.get("image_url"), f"{at}.image_url").get("url")
            blocks.append(ImageBlock(source=_image_source(url, f"{at}.image_url.url")))
        elif kind == "file":
            blocks.append(from_chat_file(part, at))
        elif kind == "input_audio":
            blocks.append(from_chat_audio(part, at))
        elif (kept := chat_opaque_part(part, kind, at)) is not None:  # back to Chat as it came
            blocks.append(kept)
    return blocks


def _cited(blocks: list[ContentBlock], annotations: Any, where: str) -> list[ContentBlock]:
    """The message's ``annotations`` (a stored reply's url citations) on its text; another
    annotation, or citations with no one text to count their spans in, said and left out."""
    at_annotations = f"{where}.annotations"
    cited = annotation_citations(
        annotations, lambda kind: dropped(f"annotation {kind}", at_annotations, _IMPORT)
    )
    texts = [i for i, b in enumerate(blocks) if isinstance(b, TextBlock)]
    if cited and len(texts) != 1:  # spans count in the one text of the message
        why = f"its spans count in one text; the message has {len(texts)}"
        dropped("citation", at_annotations, _IMPORT, why)
    if not cited or len(texts) != 1:
        return blocks
    at = texts[0]
    block = blocks[at]
    assert isinstance(block, TextBlock)
    return [*blocks[:at], block.model_copy(update={"citations": cited}), *blocks[at + 1 :]]


def _text(content: Any, where: str) -> str:
    return "".join(b.text for b in _parts(content, where) if isinstance(b, TextBlock))


def _assistant(item: Mapping[str, Any], where: str, ids: Ids) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    reasoning = item.get("reasoning_content") or item.get("reasoning")
    if isinstance(reasoning, str) and reasoning:
        blocks.append(ThinkingBlock(thinking=reasoning))
    blocks.extend(_cited(_parts(item.get("content"), where), item.get("annotations"), where))
    if item.get("audio") is not None:  # a spoken reply OpenAI keeps, named by its id
        dropped("audio", f"{where}.audio", _IMPORT, "an audio reply kept by id")
    calls = item.get("tool_calls")
    for k, raw in enumerate(items(calls, f"{where}.tool_calls") if calls is not None else []):
        at = f"{where}.tool_calls[{k}]"
        if mapping(raw, at).get("type") == "custom":  # a freeform call: its text as the input
            custom = mapping(raw.get("custom"), f"{at}.custom")
            name = text(custom, "name", f"{at}.custom")
            given: Any = {"input": text(custom, "input", f"{at}.custom")}
            made: ProviderRaw | None = _CUSTOM
        else:
            function = mapping(raw.get("function"), f"{at}.function")
            name = text(function, "name", f"{at}.function")
            given, made = call_arguments(function.get("arguments"), f"{at}.function.arguments")
        tool_id = ids(raw.get("id"), f"{at}.id")
        wrong = INVALID_ARGUMENTS if made is not None and made is not _CUSTOM else None
        blocks.append(
            ToolUseBlock(id=tool_id, name=name, input=given, input_error=wrong, provider_raw=made)
        )
    return blocks


def call_arguments(
    value: Any, where: str, provider: str = CHAT
) -> tuple[dict[str, Any], ProviderRaw | None]:
    """A call's arguments. Text that is not a JSON object (a model wrote ``15 * 4``), which
    OpenAI takes back in a history, is kept as it came, for ``provider`` alone (it goes back
    as received, as a reply's are); the input is empty."""
    if isinstance(value, str):
        try:
            parsed = loads(value or "{}")
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return {}, ProviderRaw(provider=provider, data={"arguments": value})
    return tool_input(value, where), None


def _image_source(url: Any, where: str) -> Base64ImageSource | URLImageSource:
    if not isinstance(url, str) or not url:
        raise InvalidRequestError(f"{where}: expected an image URL")
    if url.startswith("data:"):
        media_type, data = split_data_url(url, where)
        return built(Base64ImageSource, where, media_type=media_type, data=data)
    return built(URLImageSource, where, url=url)


def to_openai_chat(messages: Iterable[Message | MessageDict]) -> list[dict[str, Any]]:
    """A Chat Completions ``messages`` list from canonical messages (or their dicts). A tool
    message holds text only: the images and files of a tool result follow in a user message,
    as metis sends them (docs/contract.md §9)."""
    out: list[dict[str, Any]] = []
    for i, value in enumerate(history(messages)):
        where = f"messages[{i}]"
        canonical = message(value, where)
        if canonical.role is Role.TOOL:
            out += _tool_messages(canonical, where)
            continue
        out.append(_entry(canonical, where))
    return out


def _entry(canonical: Message, where: str) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    details: list[dict[str, Any]] = []
    content = _EXPORT.own(canonical.content, where)  # server-tool results as text
    for j, block in enumerate(content):
        if isinstance(block, TextBlock):
            parts.append({"type": "text", "text": block.text})
        elif isinstance(block, ImageBlock | DocumentBlock | AudioBlock | VideoBlock):
            parts += _media(block, where)
        elif isinstance(block, ToolUseBlock):
            calls.append(_call(block, f"{where}.content[{j}]"))
        elif isinstance(block, OpaqueBlock):
            if (item := _EXPORT.opaque(block, where)) is not None:
                kept = copy.deepcopy(item)
                (details if place_of(block) == REASONING_DETAILS else parts).append(kept)
        else:
            dropped(block.type, where, "OpenAI Chat export")
    entry: dict[str, Any] = {"role": canonical.role.value, "content": _content(parts)}
    if calls:
        entry["tool_calls"] = calls
    if details:
        entry["reasoning_details"] = details
    texts = [b for b in content if isinstance(b, TextBlock)]
    if any(b.citations for b in texts) and (cited := chat_annotations(texts, where)):
        entry["annotations"] = cited
    return entry


def _tool_messages(canonical: Message, where: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    attached: list[dict[str, Any]] = []
    for block in canonical.content:
        if isinstance(block, ToolResultBlock):
            projected = project_attachments(block)
            result = {"role": "tool", "tool_call_id": block.tool_use_id}
            out.append({**result, "content": projected.result.text})
            for part in projected.attachments:
                attached += _media(part, where)
    if attached:
        out.append({"role": "user", "content": attached})
    return out


def _media(
    block: ImageBlock | DocumentBlock | AudioBlock | VideoBlock, where: str
) -> list[dict[str, Any]]:
    if isinstance(block, ImageBlock):
        url = image_url(block)
        if url is None:
            dropped("image", where, "OpenAI Chat export", "Chat takes no image by file id")
            return []
        return [{"type": "image_url", "image_url": {"url": url}}]
    return to_chat_parts(block, where)


def _call(block: ToolUseBlock, where: str) -> dict[str, Any]:
    problem = first_unsendable(block.input, f"{where}.input")
    if problem:
        raise InvalidRequestError(problem)
    raw = block.provider_raw
    if raw is not None and raw.provider == CHAT and raw.data.get("type") == "custom":
        custom = {"name": block.name, "input": freeform_text(block.input)}
        return {"id": block.id, "type": "custom", "custom": custom}
    arguments = json.dumps(block.input, ensure_ascii=False)
    function = {"name": block.name, "arguments": arguments}
    return {"id": block.id, "type": "function", "function": function}


def _content(parts: list[dict[str, Any]]) -> str | list[dict[str, Any]] | None:
    if not parts:
        return None
    if all(p.get("type") == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts
