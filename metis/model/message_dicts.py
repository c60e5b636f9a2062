"""Messages given as plain dicts, checked with the message's place in the conversation.

A misspelt role or key in a dict would otherwise be a validation error with no index, or a
key silently ignored; here it is an :class:`~metis.errors.InvalidRequestError` that names
the message (``messages[2]``), the block (``messages[2].content[0]``) and the nearest valid
name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from metis.core.model_fields import EXTRA, unknown_field_hint
from metis.core.suggest import did_you_mean
from metis.errors import InvalidRequestError
from metis.model.content import (
    AudioBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    OpaqueBlock,
    RedactedThinkingBlock,
    Role,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)

_ROLES = [role.value for role in Role]
# Other APIs' names for a role, said outright: no spelling is near them.
_OTHER_APIS_ROLES = {
    "developer": "system",
    "human": "user",
    "model": "assistant",
    "ai": "assistant",
    "function": "tool",
}
# What only OpenAI Chat's messages have: such a history is read by metis.histories.
_OPENAI_CHAT_KEYS = {"tool_calls", "tool_call_id", "function_call", "refusal"}
_OPENAI_CHAT_BLOCKS = {"image_url", "input_audio"}
_OPENAI_CHAT = "; a message in OpenAI Chat's form is read by metis.histories.from_openai_chat"
_BLOCKS: dict[str, type[BaseModel]] = {
    str(block.model_fields["type"].default): block
    for block in (
        TextBlock,
        ImageBlock,
        DocumentBlock,
        AudioBlock,
        VideoBlock,
        ToolUseBlock,
        ToolResultBlock,
        ThinkingBlock,
        RedactedThinkingBlock,
        ServerToolCallBlock,
        ServerToolResultBlock,
        OpaqueBlock,
    )
}
_TAGS = {*_BLOCKS, "url", "base64", "file"}


def as_messages(messages: Iterable[object]) -> list[Message]:
    """Each of ``messages`` as a :class:`Message`; a dict is checked first (module docstring)."""
    return [
        message if isinstance(message, Message) else message_from_dict(message, index)
        for index, message in enumerate(messages)
    ]


def message_from_dict(value: Any, index: int | str) -> Message:
    """The message ``messages[index]`` given as a dict (``index`` a string: the place itself)."""
    where = index if isinstance(index, str) else f"messages[{index}]"
    if not isinstance(value, Mapping):
        hint = ""
        if isinstance(getattr(value, "message", None), Message):  # a reply, not its message
            hint = "; a reply goes into the history as its .message"
        elif isinstance(value, str):  # where one message is a Message, not its text
            hint = f"; a user's text is metis.Message.user({value[:20]!r})"
        elif isinstance(value, list | tuple):
            hint = "; a list where one message goes: give its messages (session.add(*messages))"
        raise _error(f"{where}: expected a Message or a dict, got {type(value).__name__}{hint}")
    _known_keys(value, Message, where, "a message")
    if "role" not in value:
        raise _error(f"{where}: no 'role' (one of {', '.join(_ROLES)})")
    role = value["role"]
    if role not in _ROLES:
        hint = (
            f"; did you mean {_OTHER_APIS_ROLES[role]!r}?"
            if isinstance(role, str) and role in _OTHER_APIS_ROLES
            else did_you_mean(str(role), _ROLES)
        )
        raise _error(f"{where}: unknown role {role!r}{hint} (roles: {', '.join(_ROLES)})")
    if "content" not in value:
        raise _error(f"{where}: no 'content' (a string, or a list of content blocks)")
    content = value["content"]
    if not isinstance(content, str | list | tuple):
        hint = _OPENAI_CHAT if content is None else ""  # Chat's assistant content may be null
        raise _error(
            f"{where}.content: expected a string or a list of content blocks, got "
            f"{type(content).__name__} {content!r:.60}{hint}"
        )
    if isinstance(content, list):
        for position, block in enumerate(content):
            if isinstance(block, Mapping):
                _check_block(block, f"{where}.content[{position}]")
    try:
        return Message.model_validate(value)
    except ValidationError as exc:
        raise _error(_described(exc, where)) from None


def _check_block(block: Mapping[str, Any], where: str) -> None:
    kind = block.get("type")
    if kind not in _BLOCKS:
        hint = did_you_mean(str(kind), _BLOCKS) if isinstance(kind, str) else ""
        hint = _OPENAI_CHAT if kind in _OPENAI_CHAT_BLOCKS else hint
        shown = "no 'type'" if kind is None else f"unknown block type {kind!r}"
        raise _error(f"{where}: {shown}{hint} (types: {', '.join(_BLOCKS)})")
    _known_keys(block, _BLOCKS[kind], where, f"a {kind} block")
    parts = block.get("content") if kind == "tool_result" else None
    if isinstance(parts, list):
        for position, part in enumerate(parts):
            if isinstance(part, Mapping):
                _check_block(part, f"{where}.content[{position}]")


def _known_keys(value: Mapping[str, Any], model: type[BaseModel], where: str, what: str) -> None:
    fields = sorted(model.model_fields, key=lambda name: (name != "type", name == "provider_raw"))
    for key in value:
        if key not in model.model_fields:
            hint = _OPENAI_CHAT if key in _OPENAI_CHAT_KEYS else did_you_mean(str(key), fields)
            raise _error(f"{where}: unknown key {key!r}{hint} ({what} has {', '.join(fields)})")


def _described(exc: ValidationError, where: str) -> str:
    errors = exc.errors()
    # ``content: str | list[...]``: when the list was given, the string branch's error is noise.
    in_list = [e for e in errors if "str" not in e["loc"]]
    return "; ".join(_problem(where, e) for e in in_list or errors)


def _problem(where: str, error: ErrorDetails) -> str:
    loc = error["loc"]
    if error["type"] == EXTRA and loc:  # a misspelt key below a block (a source's, a cache's)
        hint = unknown_field_hint(Message, loc)
        return f"{_path(where, loc[:-1])}: unknown key {loc[-1]!r}{hint}"
    return f"{_path(where, loc)}: {error['msg']}"


def _path(where: str, loc: tuple[int | str, ...]) -> str:
    """``where`` and pydantic's location, without the union tags pydantic puts in it."""
    path, previous = where, None
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part.startswith(("list[", "tagged-union[")):
            continue
        elif not (part in _TAGS and (isinstance(previous, int) or previous == "source")):
            path += f".{part}"
        previous = part
    return path


def _error(message: str) -> InvalidRequestError:
    return InvalidRequestError(message)
