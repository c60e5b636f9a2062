"""The fields a client sent inside its messages, content parts and tools that the gateway's
readers leave out, each named by where it is (``messages[2].content[0].foo``), as the request's
own unknown fields are (:func:`metis.gateway.inbound.unknown_fields`).

Each level is checked against the keys its reader maps: a field of the API that metis does not
map (a system prompt's or a tool's ``cache_control``, Chat's ``name``, an image's ``detail``)
is left out as an unknown one is, and named. A field given as null or empty asks for nothing
and is not named. A block kept whole (a server tool's, a compaction, a part of a type metis
does not read) keeps every field and is not looked into. One set check per object: the names
are built only for a request that has such a field."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.gateway.inbound import EMPTY
from metis.histories.anthropic import CACHEABLE

Known = dict[Any, frozenset[str]]
"""The keys read, by the ``type`` of the object (None: an object without one)."""

_CACHED = frozenset({"type"})  # every block type below: its type is read


def _keys(*names: str) -> frozenset[str]:
    return _CACHED | frozenset(names)


ANTHROPIC_BLOCKS: Known = {
    "text": _keys("text", "citations"),
    "image": _keys("source"),
    "document": _keys("source", "title", "context", "citations"),
    "tool_use": _keys("id", "name", "input"),
    "tool_result": _keys("tool_use_id", "content", "is_error"),
    "thinking": _keys("thinking", "signature"),
    "redacted_thinking": _keys("data"),
}
"""The blocks of a system prompt and a tool result's parts: a ``cache_control`` there is named
(the system prompt is sent as one text, cached at the stack's own breakpoint)."""
HINTED_BLOCKS: Known = {
    kind: keys | {"cache_control"} if kind in CACHEABLE else keys
    for kind, keys in ANTHROPIC_BLOCKS.items()
}
"""A message's own blocks: ``cache_control`` is read as the block's cache hint (but a thinking
block's, which Anthropic takes none on, is named)."""
ANTHROPIC_TOOL = _keys("name", "description", "input_schema", "strict")
ANTHROPIC_MESSAGE = frozenset({"role", "content"})
ANTHROPIC_THINKING = _keys("budget_tokens", "display")
ANTHROPIC_OUTPUT = frozenset({"format", "effort"})
ANTHROPIC_CHOICE = _keys("name", "disable_parallel_tool_use")

CHAT_MESSAGES: Known = {
    "system": frozenset({"role", "content"}),
    "developer": frozenset({"role", "content"}),
    "user": frozenset({"role", "content"}),
    "assistant": frozenset(
        {"role", "content", "tool_calls", "function_call", "reasoning_content", "reasoning"}
        | {"annotations", "audio"}
    ),
    "tool": frozenset({"role", "content", "tool_call_id"}),
    "function": frozenset({"role", "content", "name"}),
}
CHAT_PARTS: Known = {
    "text": _keys("text"),
    "image_url": _keys("image_url"),
    "file": _keys("file"),
    "input_audio": _keys("input_audio"),
}
CHAT_INNER = {
    "image_url": frozenset({"url"}),
    "file": frozenset({"file_data", "file_id", "filename"}),
}
CHAT_CALLS: Known = {
    "function": _keys("id", "function", "extra_content"),  # provenance.signed_calls reads it
    "custom": _keys("id", "custom"),
}
CHAT_FUNCTION_CALL = frozenset({"name", "arguments"})
CHAT_TOOLS: Known = {"function": _keys("function"), "custom": _keys("custom")}
CHAT_FUNCTION = frozenset({"name", "description", "parameters", "strict"})

_ECHOED = _keys("id", "status")  # an output item sent back: its id and status identify it
RESPONSES_ITEMS: Known = {
    "message": _ECHOED | {"role", "content"},
    "function_call": _ECHOED | {"call_id", "name", "arguments"},
    "custom_tool_call": _ECHOED | {"call_id", "name", "input"},
    "function_call_output": _ECHOED | {"call_id", "output"},
    "custom_tool_call_output": _ECHOED | {"call_id", "output"},
    "reasoning": _ECHOED | {"summary", "encrypted_content", "content"},
}
RESPONSES_PARTS: Known = {
    "input_text": _keys("text"),
    "output_text": _keys("text"),
    "text": _keys("text"),
    "refusal": _keys("refusal"),
    "input_image": _keys("image_url", "file_id"),
    "input_file": _keys("file_id", "file_url", "file_data", "filename"),
    "input_audio": _keys("input_audio"),
}
RESPONSES_TOOLS: Known = {
    "function": _keys("name", "description", "parameters", "strict"),
    "custom": _keys("name", "description", "format"),
}
RESPONSES_REASONING = frozenset({"effort", "summary"})


def anthropic_unread(body: Mapping[str, Any]) -> list[str]:
    """What the Messages reader left out inside ``body``'s messages, system, tools, thinking
    and tool choice."""
    out: list[str] = []
    system = body.get("system")
    if isinstance(system, list):
        _blocks(system, "system", ANTHROPIC_BLOCKS, out)
    for i, message in enumerate(_list(body.get("messages"))):
        where = f"messages[{i}]"
        _check(message, ANTHROPIC_MESSAGE, where, out)
        content = message.get("content")
        if isinstance(content, list):
            hinted = HINTED_BLOCKS if message.get("role") != "system" else ANTHROPIC_BLOCKS
            _blocks(content, f"{where}.content", hinted, out)
            for j, block in enumerate(content):
                tool_result = isinstance(block, Mapping) and block.get("type") == "tool_result"
                inner = block.get("content") if tool_result else None
                if isinstance(inner, list):
                    _blocks(inner, f"{where}.content[{j}].content", ANTHROPIC_BLOCKS, out)
    for i, tool in enumerate(_list(body.get("tools"))):
        if tool.get("type", "custom") == "custom":
            _check(tool, ANTHROPIC_TOOL, f"tools[{i}]", out)
    _check(body.get("thinking"), ANTHROPIC_THINKING, "thinking", out)
    _check(body.get("output_config"), ANTHROPIC_OUTPUT, "output_config", out)
    _check(body.get("tool_choice"), ANTHROPIC_CHOICE, "tool_choice", out)
    return out


def chat_unread(body: Mapping[str, Any]) -> list[str]:
    """What the Chat Completions reader left out inside ``body``'s messages and tools."""
    out: list[str] = []
    for i, message in enumerate(_list(body.get("messages"))):
        where = f"messages[{i}]"
        known = _of(CHAT_MESSAGES, message.get("role"))
        if known is None:
            continue
        _check(message, known, where, out)
        content = message.get("content")
        if isinstance(content, list):
            for j, part in enumerate(_blocks(content, f"{where}.content", CHAT_PARTS, out)):
                kind = part.get("type") if isinstance(part, Mapping) else None
                if isinstance(kind, str) and kind in CHAT_INNER:
                    _check(part.get(kind), CHAT_INNER[kind], f"{where}.content[{j}].{kind}", out)
        _annotations(message.get("annotations"), where, out)
        for k, call in enumerate(_list(message.get("tool_calls"))):
            at = f"{where}.tool_calls[{k}]"
            _check(call, _of(CHAT_CALLS, call.get("type", "function")) or _CACHED, at, out)
            _check(call.get("function"), CHAT_FUNCTION_CALL, f"{at}.function", out)
    for i, tool in enumerate(_list(body.get("tools"))):
        known = _of(CHAT_TOOLS, tool.get("type", "function"))
        if known is not None:
            _check(tool, known, f"tools[{i}]", out)
            _check(tool.get("function"), CHAT_FUNCTION, f"tools[{i}].function", out)
    return out


def responses_unread(body: Mapping[str, Any]) -> list[str]:
    """What the Responses reader left out inside ``body``'s input items, tools and reasoning."""
    out: list[str] = []
    items = body.get("input")
    for i, item in enumerate(_list(items)):
        where = f"input[{i}]"
        known = _of(RESPONSES_ITEMS, item.get("type", "message"))
        if known is None:
            continue  # kept whole, or named whole by the reader
        _check(item, known, where, out)
        content = item.get("content")
        if item.get("type", "message") == "message" and isinstance(content, list):
            _blocks(content, f"{where}.content", RESPONSES_PARTS, out)
    for i, tool in enumerate(_list(body.get("tools"))):
        known = _of(RESPONSES_TOOLS, tool.get("type"))
        if known is not None:
            _check(tool, known, f"tools[{i}]", out)
    _check(body.get("reasoning"), RESPONSES_REASONING, "reasoning", out)
    return out


CITED = "url_citation"
"""The one annotation type a Chat message's ``annotations`` has a canonical form for (its text's
citation, metis.histories.openai_chat)."""


def _annotations(annotations: Any, where: str, out: list[str]) -> None:
    """Each annotation of an assistant message that is no URL citation (OpenRouter's ``file``,
    which it gives back to skip parsing a PDF again; any other a Chat-compatible service
    sends), named with its type: the translated path leaves it out."""
    for k, note in enumerate(annotations if isinstance(annotations, list) else ()):
        kind = note.get("type") if isinstance(note, Mapping) else None
        if kind != CITED:
            shown = kind if isinstance(kind, str) else type(note).__name__
            out.append(f"{where}.annotations[{k}] ({shown[:60]} annotation: no canonical form)")


def _of(known: Known, kind: Any) -> frozenset[str] | None:
    """The keys read of an object of type ``kind`` (any value a client sent)."""
    return known.get(kind) if isinstance(kind, str) else None


def _list(value: Any) -> list[Mapping[str, Any]]:
    """The objects of a list the reader took (anything else in it, it refused)."""
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def _blocks(blocks: list[Any], where: str, known: Known, out: list[str]) -> list[Mapping[str, Any]]:
    """Checks each block of a known type; returns the blocks, objects or not, as read."""
    for j, block in enumerate(blocks):
        if isinstance(block, Mapping):
            keys = _of(known, block.get("type"))
            if keys is not None:
                _check(block, keys, f"{where}[{j}]", out)
    return blocks


def _check(value: Any, known: frozenset[str], where: str, out: list[str]) -> None:
    if isinstance(value, Mapping) and not known.issuperset(value):
        out.extend(
            f"{where}.{key}"[:200]
            for key, item in value.items()
            if key not in known and item not in EMPTY
        )
