"""OpenAI Responses requests read into the canonical form: ``input`` (a string, or items:
messages with text, image, file and audio parts, ``function_call`` and ``custom_tool_call``
with their outputs, ``compaction`` items kept whole for the provider that made them,
reasoning items with their encrypted content: :mod:`metis.gateway.reasoning_items`),
``instructions``, function and custom tools, the tool choice
(:mod:`metis.gateway.openai_tools`), ``text.format``, ``reasoning.effort``. Other items with
no canonical form (reasoning with no encrypted content, references to stored items, hosted
tools) are left out and reported; OpenAI's own ``web_search_call`` and
``code_interpreter_call`` items, which no other provider replays, are reported too and what
they did goes as text. The emulator reads its Responses requests through
:func:`read_responses` too."""

from __future__ import annotations

import mimetypes
from collections.abc import Mapping
from functools import partial
from typing import Any

from metis.errors import InvalidRequestError
from metis.gateway.chat_api import output_format
from metis.gateway.inbound import (
    Inbound,
    KeptIds,
    body_object,
    effort_thinking,
    flag,
    model_name,
    optional_int,
    tool_definition,
    unknown_fields,
)
from metis.gateway.kept_turns import kept
from metis.gateway.openai_kept import responses_run
from metis.gateway.openai_tools import (
    custom_tool,
    responses_tool_choice,
    tool_and_sampling_fields,
)
from metis.gateway.provenance import restored
from metis.gateway.reasoning_items import asks_encrypted, read_reasoning
from metis.gateway.server_tools import LABELS, responses_tool, unmapped_options
from metis.gateway.server_written import RESPONSES_MARKS, written_blocks, written_item
from metis.gateway.unread import responses_unread
from metis.histories.blocks import opaque, stored
from metis.histories.files import from_chat_audio, split_data_url
from metis.histories.openai_chat import call_arguments
from metis.histories.reading import built, mapping, text
from metis.model.content import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from metis.model.media import Base64Source, DocumentBlock, FileIdSource, URLSource
from metis.wire.builder import INVALID_ARGUMENTS

READ = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "temperature",
        "top_p",
        "max_output_tokens",
        "stream",
        "text",
        "reasoning",
        "previous_response_id",
        "store",
        "include",
    }
)
HELD_ELSEWHERE = {
    "conversation": "this gateway holds no conversations (the Conversations API is not served "
    "here) and cannot give the model its items; send them as input, or continue a response "
    "with previous_response_id",
    "prompt": "a prompt template is held by OpenAI, which does not serve this model; send its "
    "instructions and input instead",
}
"""Fields naming content another server holds, which the model would go without: refused on
a translated request, not left out (a passed-through one goes to the server that holds it)."""
ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM}
ROLES["developer"] = Role.SYSTEM
CALLS = frozenset({"function_call", "custom_tool_call"})
OUTPUTS = frozenset({"function_call_output", "custom_tool_call_output"})
COMPACTION = "compaction"
RESPONSES = "openai_responses"
"""Who made the compaction items a client sends back: the Responses API (the stack of that
name; docs/sessions.md "Compaction by the provider")."""


def read_responses(
    raw: Any, *, messages_apart: bool = False, later: bool = False, held: bool = False
) -> Inbound:
    """A Responses API request body (parsed JSON) in canonical terms. ``options`` keep what
    the reply echoes and what the gateway's state needs (``previous_response_id``, ``store``);
    ``messages_apart`` as :func:`read_input`'s; ``later`` as
    :func:`metis.gateway.anthropic_api.read_messages`'s; ``held``: the reader holds what
    :data:`HELD_ELSEWHERE` names (the emulator, standing in for OpenAI), else it is refused."""
    body = body_object(raw)
    model = model_name(body)
    for name, why in () if held else HELD_ELSEWHERE.items():
        if body.get(name) is not None:  # the model would answer without what it names
            raise InvalidRequestError(f"{name}: {why}")
    ignored = unknown_fields(body, READ)
    messages = restored(
        read_input(body.get("input"), ignored, messages_apart=messages_apart, model=model)
    )
    fields: dict[str, Any] = {}
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise InvalidRequestError("instructions: expected a string")
    if instructions:
        fields["system_prompt"] = instructions
    labels = _tool_fields(body, ignored, fields)
    reasoning = body.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, Mapping) else None
    if (thinking := effort_thinking(effort, "reasoning.effort")) is not None:
        fields["thinking"] = thinking
    text_options = body.get("text")
    fmt = text_options.get("format") if isinstance(text_options, Mapping) else None
    schema, json_mode = output_format(fmt, "text.format")
    if schema is not None:
        fields["output_schema"] = schema
    if json_mode:
        ignored.append("text.format (json_object)")
    previous = body.get("previous_response_id")
    if previous is not None and not isinstance(previous, str):
        raise InvalidRequestError("previous_response_id: expected a string")
    echoed = ("instructions", "tool_choice", "text", "reasoning", "metadata")
    options = {key: body.get(key) for key in echoed}
    options.update(previous_response_id=previous, store=flag(body, "store", True))
    options["encrypted_reasoning"] = asks_encrypted(body.get("include"), ignored)
    options.update(tools=body.get("tools") or [], max_output_tokens=body.get("max_output_tokens"))
    options.update(limit_field="max_output_tokens", **{LABELS: labels})
    return Inbound(
        model=model,
        messages=messages,
        stream=flag(body, "stream"),
        max_output_tokens=optional_int(body, "max_output_tokens"),
        fields=fields,
        ignored=ignored,
        options=options,
        unread=partial(responses_unread, body),
    ).finished(later)


def read_input(
    raw: Any, ignored: list[str], *, messages_apart: bool = False, model: str | None = None
) -> list[Message]:
    """``input`` (a string or a list of items) as canonical messages; the items without a
    canonical form are named in ``ignored``. ``messages_apart``: each message item stays a
    message of its own, not joined to the one before it of the same role (the emulator reads
    the last one as what the user said). Each plain run of items is read once per content
    and ``model`` (:mod:`metis.gateway.openai_kept`)."""
    if isinstance(raw, str):
        return [Message.user(raw)]
    if not isinstance(raw, list):
        raise InvalidRequestError("input: expected a string or a list of items")
    ids = KeptIds()
    out: list[Message] = []
    start = 0
    while start < len(raw):
        stop = start if messages_apart else responses_run(raw, start)
        if stop == start:
            _item(out, raw[start], f"input[{start}]", ids, ignored, messages_apart)
            start += 1
            continue
        run = raw[start:stop]
        for message in kept("responses", model, run, partial(_items, run, start)):
            _add(out, message)
        start = stop
    return out


def _items(run: list[Any], start: int) -> list[Message]:
    """A plain run of items read alone (nothing of them is left out: ``ignored`` stays
    empty)."""
    out: list[Message] = []
    for i, value in enumerate(run, start):
        _item(out, value, f"input[{i}]", KeptIds(), [], False)
    return out


def _item(
    out: list[Message],
    value: Any,
    where: str,
    ids: KeptIds,
    ignored: list[str],
    messages_apart: bool,
) -> None:
    item = mapping(value, where)
    kind = item.get("type", "message")
    if not isinstance(kind, str):
        raise InvalidRequestError(f"{where}.type: expected a string")
    if kind == "message" and messages_apart:
        out.append(_message(item, where, ignored))
    elif kind == "message":
        _add(out, _message(item, where, ignored))
    elif kind in CALLS:
        _add(out, Message(role=Role.ASSISTANT, content=[_call(item, where, ids)]))
    elif kind == COMPACTION:  # OpenAI's to read: back to it as it came, dropped elsewhere
        block = opaque(kind, stored(item, where), RESPONSES)
        _add(out, Message(role=Role.ASSISTANT, content=[block]))
    elif kind == "reasoning" and (thought := read_reasoning(item, where)) is not None:
        _add(out, Message(role=Role.ASSISTANT, content=[thought]))
    elif written_item(item):  # the gateway's, for another provider: read as that one's
        _add(out, Message(role=Role.ASSISTANT, content=list(written_blocks(dict(item)))))
    elif kind in RESPONSES_MARKS:  # OpenAI's own: replayed by none, what it did goes as text
        _add(out, Message(role=Role.ASSISTANT, content=list(written_blocks(dict(item)))))
        ignored.append(f"{where} ({kind}) (OpenAI's own item: what it did goes as text)")
    elif kind in OUTPUTS:
        result = ToolResultBlock(
            tool_use_id=ids(item.get("call_id"), f"{where}.call_id"),
            content=_output_text(item.get("output"), f"{where}.output"),
        )
        _add(out, Message(role=Role.TOOL, content=[result]))
    else:
        ignored.append(f"{where} ({str(kind)[:40]})")


def _call(item: Mapping[str, Any], where: str, ids: KeptIds) -> ToolUseBlock:
    """A function call, or a custom (freeform) tool's call with its text as ``input``, as
    Chat's are read (metis/histories/openai_chat.py)."""
    made = None
    if item.get("type") == "custom_tool_call":
        given: Any = {"input": text(item, "input", where)}
    else:
        arguments = item.get("arguments")
        given, made = call_arguments(arguments, f"{where}.arguments", "openai_responses")
    call_id = ids(item.get("call_id"), f"{where}.call_id")
    name = text(item, "name", where, None)
    wrong = None if made is None else INVALID_ARGUMENTS
    return ToolUseBlock(id=call_id, name=name, input=given, input_error=wrong, provider_raw=made)


def _add(out: list[Message], message: Message) -> None:
    """Consecutive items of one role are one canonical message (a turn's text and its calls,
    parallel results)."""
    if out and out[-1].role is message.role and message.role is not Role.SYSTEM:
        out[-1] = Message(role=message.role, content=[*out[-1].content, *message.content])
    else:
        out.append(message)


def _message(item: Mapping[str, Any], where: str, ignored: list[str]) -> Message:
    role = item.get("role")
    if not isinstance(role, str) or role not in ROLES:
        raise InvalidRequestError(f"{where}.role: expected user, assistant, system or developer")
    content = item.get("content")
    if isinstance(content, str):
        return Message(role=ROLES[role], content=content)
    if not isinstance(content, list):
        raise InvalidRequestError(f"{where}.content: expected a string or a list of parts")
    blocks: list[ContentBlock] = []
    for j, raw in enumerate(content):
        at = f"{where}.content[{j}]"
        part = mapping(raw, at)
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            blocks.append(TextBlock(text=text(part, "text", at, None)))
        elif kind == "refusal":
            blocks.append(TextBlock(text=text(part, "refusal", at, None)))
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            blocks.append(built(ImageBlock, at, source=image_source(part["image_url"])))
        elif kind == "input_image" and isinstance(part.get("file_id"), str):
            source = FileIdSource(file_id=part["file_id"], provider="openai")
            blocks.append(built(ImageBlock, at, source=source))
        elif kind == "input_file":
            blocks.append(input_file(part, at))
        elif kind == "input_audio":
            blocks.append(from_chat_audio(part, at))
        else:
            raise InvalidRequestError(f"{at}.type: {str(kind)[:40]!r} cannot be read")
    return Message(role=ROLES[role], content=blocks)


def image_source(url: str) -> Base64ImageSource | URLImageSource:
    """A ``data:`` URL as inline base64 data, any other as a URL."""
    if url.startswith("data:") and ";base64," in url:
        media_type, _, payload = url[5:].partition(";base64,")
        return Base64ImageSource(media_type=media_type, data=payload)
    return URLImageSource(url=url)


def input_file(part: Mapping[str, Any], where: str) -> DocumentBlock:
    """An ``input_file`` part: ``file_id`` (an OpenAI file), ``file_url``, or ``file_data`` (a
    data URL; bare base64 is taken as a PDF, as Chat's ``file`` part is)."""
    name = part.get("filename") if isinstance(part.get("filename"), str) else None
    source: FileIdSource | URLSource | Base64Source
    if "file_id" in part:
        file_id = text(part, "file_id", where, None)
        guessed = mimetypes.guess_type(name)[0] if name else None
        source = FileIdSource(file_id=file_id, provider="openai", media_type=guessed)
    elif "file_url" in part:
        url = text(part, "file_url", where, None)
        guessed = mimetypes.guess_type(name or url.split("?")[0])[0]
        source = URLSource(url=url, media_type=guessed)
    else:
        data = text(part, "file_data", where, None)
        if data.startswith("data:"):
            media_type, encoded = split_data_url(data, f"{where}.file_data")
            source = Base64Source(media_type=media_type, data=encoded)
        else:
            source = Base64Source(media_type="application/pdf", data=data)
    return built(DocumentBlock, where, source=source, title=name)


def _output_text(raw: Any, where: str) -> str:
    if isinstance(raw, str):
        return raw
    if isinstance(raw, list):
        parts = [mapping(p, f"{where}[{k}]") for k, p in enumerate(raw)]
        return "".join(str(p.get("text", "")) for p in parts)
    raise InvalidRequestError(f"{where}: expected a string or a list of parts")


def _tool_fields(body: Mapping[str, Any], ignored: list[str], fields: dict[str, Any]) -> list[str]:
    """The tools, the tool choice and sampling into ``fields``; how each server tool is named
    when the model cannot take it."""
    server: dict[str, Any] = {}
    tools = _tools(body.get("tools"), ignored, server)
    if server:
        fields["server_tools"] = list(server.values())
    choice = responses_tool_choice(body.get("tool_choice"), ignored)
    fields.update(tool_and_sampling_fields(body, tools, choice))
    return list(server)


def _tools(raw: Any, ignored: list[str], server: dict[str, Any]) -> list[Any]:
    """The function and custom tools; the hosted tools metis has a form for in ``server``
    (metis.gateway.server_tools), by how each is named when the model cannot take it, and the
    others named in ``ignored``."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InvalidRequestError("tools: expected a list of tools")
    tools = []
    for i, value in enumerate(raw):
        tool = mapping(value, f"tools[{i}]")
        if tool.get("type") == "custom":
            tools.append(custom_tool(tool, f"tools[{i}]"))
            continue
        if tool.get("type") != "function":
            label = f"tools[{i}] ({str(tool.get('type'))[:40]})"
            if (declared := responses_tool(tool, f"tools[{i}]")) is not None:
                server[label] = declared
                ignored.extend(unmapped_options(tool, f"tools[{i}]"))
            else:
                ignored.append(label)
            continue
        schema = tool.get("parameters")
        tools.append(
            tool_definition(
                tool.get("name"), tool.get("description"), schema, f"tools[{i}]", tool.get("strict")
            )
        )
    return tools
