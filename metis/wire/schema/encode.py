"""Canonical request -> provider JSON, driven by ``message_schema`` and ``request_schema``.

Each content block is rendered with its template; a block with no template (an image where the
schema has no ``image_template``, say) is dropped whole with one ``call.warn_dropped``. Files
and the media of tool results are rendered by :mod:`metis.wire.schema.files`. Tool results need
the called tool's name on some wires (``{tool_name}``), found by id in the request's own
history, else by position among the calls of the assistant turn before. The body's own fields
(tools, tool choice, sampling...) are :mod:`metis.wire.schema.body`'s.
"""

from __future__ import annotations

import copy
import json
import logging
from dataclasses import dataclass
from typing import Any

from metis.errors import InvalidRequestError
from metis.model.content import (
    AudioBlock,
    Base64ImageSource,
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    Message,
    OpaqueBlock,
    ProviderRaw,
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
from metis.model.media import FileIdSource
from metis.model.media_fit import current_turn_start
from metis.model.request import CanonicalRequest
from metis.wire.codec import EncodeContext
from metis.wire.media import AFTER_THE_RESULTS, NEXT_MESSAGE, Attachment, cannot_carry
from metis.wire.opaque import sent_back
from metis.wire.schema.body import body_values, merge
from metis.wire.schema.compiled import Compiled
from metis.wire.schema.files import file_parts, result_media
from metis.wire.schema.paths import OMIT, set_path
from metis.wire.server_replay import messages_for_provider

log = logging.getLogger("metis")

Part = dict[str, Any]


class _Turn:
    """One wire message being built: its role, its parts, its separate tool calls."""

    __slots__ = ("calls", "direct", "parts", "role", "texts")

    def __init__(self, role: str) -> None:
        self.role = role
        self.parts: list[Any] = []
        self.texts: list[str | None] = []  # the text of each part, None for other parts
        self.calls: list[Any] = []
        self.direct: Part | None = None  # a whole message (a ``direct`` tool result)


@dataclass(frozen=True, slots=True)
class _At:
    """The message a block is in, the call, and whether it is in the turn being sent."""

    where: str
    call: EncodeContext
    current: bool


class Encoder:
    def __init__(self, schema: Compiled) -> None:
        self.s = schema
        self.m = schema.messages
        self._messages_key = schema.messages_key

    def encode(self, request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
        names = _tool_names(request)
        system = self._system_text(request, call)
        turns: list[_Turn] = []
        previous_calls: list[str] = []
        start = current_turn_start(request.messages)
        for i, message in enumerate(messages_for_provider(request.messages, call)):
            if message.role is Role.SYSTEM:
                continue
            at = _At(message.id or f"messages[{i}]", call, i >= start)
            turns.extend(self._message(message, at, names, previous_calls))
            if message.role is Role.ASSISTANT:
                previous_calls = [b.name for b in message.content if isinstance(b, ToolUseBlock)]
        body: dict[str, Any] = {}
        mode = self.m.system_prompt.mode
        if system and mode == "top_level":
            set_path(body, self.s.system_key, self._wrap_system(system))
        elif system and mode == "role":
            turn = _Turn(self.m.role_map.get("system", "system"))
            self._add_text(turn, system)
            turns.insert(0, turn)
        elif system:
            self._prepend(turns, system)
        set_path(body, self._messages_key, [self._render_turn(t) for t in self._merged(turns)])
        rendered = self.s.body.render(body_values(self.s, request, call))
        if isinstance(rendered, dict):
            merge(body, rendered)
        return body

    # Messages --------------------------------------------------------------------------------

    def _message(
        self, message: Message, at: _At, names: dict[str, str], previous_calls: list[str]
    ) -> list[_Turn]:
        message_id, call = at.where, at.call
        role = self.m.role_map.get(
            "assistant" if message.role is Role.ASSISTANT else message.role.value
        ) or self.m.role_map.get("user", "user")
        turn = _Turn(role)
        results: list[_Turn] = []
        result_turn: _Turn | None = None
        position = 0
        following: list[Attachment] = []  # media of the results, after them (files.py)
        one_turn = self.m.tool_result.wrap_mode != "direct"  # the results' and their media's
        following_at = AFTER_THE_RESULTS if one_turn else NEXT_MESSAGE
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                name = names.get(block.tool_use_id)
                if name is None and position < len(previous_calls):
                    name = previous_calls[position]
                position += 1
                media = result_media(block, self.s, call.wire_model, following_at)
                following += media.following
                part = self._tool_result(media.result, name, message_id, call)
                if part is OMIT:
                    continue
                if media.nested and isinstance(part, dict) and self.s.media_path:
                    set_path(part, self.s.media_path, media.nested)
                if self.m.tool_result.wrap_mode == "direct":
                    direct = _Turn(self.m.tool_result.role)
                    direct.direct = {self.m.role_key: direct.role, **part}
                    results.append(direct)
                else:
                    if result_turn is None:
                        result_turn = _Turn(self.m.tool_result.role)
                        results.append(result_turn)
                    result_turn.parts.append(part)
                    result_turn.texts.append(None)
            else:
                self._block(block, turn, at)
        for extra in following:
            self._block(extra, result_turn or turn, at)
        return [*results, turn]

    def _block(self, block: ContentBlock | Attachment, turn: _Turn, at: _At) -> None:
        s, call, message_id = self.s, at.call, at.where
        if isinstance(block, DocumentBlock | AudioBlock | VideoBlock):
            parts = file_parts(block, s, call.provider)
            if isinstance(parts, str):
                cannot_carry(call, block, parts, message_id, at.current)
            else:
                turn.parts += parts
                turn.texts += [None] * len(parts)
            return
        if isinstance(block, ServerToolCallBlock | ServerToolResultBlock):
            raw = block.provider_raw  # the model's own part (messages_for_provider saw to it)
            if raw is not None and isinstance(raw.data.get("part"), dict):
                turn.parts.append(copy.deepcopy(raw.data["part"]))
                turn.texts.append(None)
            return
        if isinstance(block, OpaqueBlock):  # a part as this provider gave it, only to it
            if (item := sent_back(block, call, message_id)) is not None:
                turn.parts.append(item)
                turn.texts.append(None)
            return
        if isinstance(block, TextBlock):
            echo = self._echo(block.provider_raw, call)
            if not block.text and not echo:
                return  # providers refuse empty text parts; nothing is lost
            text_part = self._add_text(turn, block.text)
            if echo and isinstance(text_part, dict):
                text_part.update(echo)
            return
        part: Any = OMIT
        if isinstance(block, ToolUseBlock):
            if s.tool_call is not None:
                part = s.tool_call.render(_call_values(block))
                if isinstance(part, dict):
                    part.update(self._echo(block.provider_raw, call) or self._foreign(block, call))
                    (turn.calls if self.m.tool_calls_key else turn.parts).append(part)
                    if not self.m.tool_calls_key:
                        turn.texts.append(None)
                    return
        elif isinstance(block, ImageBlock):
            part = self._image(block, call)
        elif isinstance(block, ThinkingBlock):
            if s.thinking is not None:
                part = s.thinking.render({"thinking": block.thinking, "signature": block.signature})
        elif isinstance(block, RedactedThinkingBlock) and s.redacted is not None:
            part = s.redacted.render({"data": block.data})
        if part is OMIT:
            reason = f"{call.provider} has no wire form for a {block.type} block here"
            call.warn_dropped(block.type, reason, message_id=message_id)
            return
        turn.parts.append(part)
        turn.texts.append(None)

    def _image(self, block: ImageBlock, call: EncodeContext) -> Any:
        source = block.source
        values: dict[str, str | None]
        if isinstance(source, Base64ImageSource):
            values = {"media_type": source.media_type, "data": source.data}
            template = self.s.image
        elif isinstance(source, FileIdSource):  # as a file by id is: the URI and its type
            values = {"media_type": block.media_type(), "url": source.file_id}
            template = self.s.file_uri
        else:
            values = {"url": source.url}
            template = self.s.image_url
        if template is None:
            return OMIT
        part = template.render(values)
        if isinstance(part, dict):  # an image the model made: its signature goes back
            part.update(self._echo(block.provider_raw, call))
        return part

    def _add_text(self, turn: _Turn, text: str) -> Any:
        part = self.s.text.render({"text": text}) if self.s.text is not None else text
        turn.parts.append(part)
        turn.texts.append(text)
        return part

    def _tool_result(
        self, block: ToolResultBlock, name: str | None, message_id: str, call: EncodeContext
    ) -> Any:
        result = self.m.tool_result
        template = self.s.tool_error if block.is_error and self.s.tool_error else self.s.tool_result
        if template is None:
            call.warn_dropped(
                "tool_result", f"{call.provider} has no wire form for tool results", message_id
            )
            return OMIT
        text = block.text  # its media were moved out (files.py)
        if block.is_error and template is not self.s.tool_error:
            text = result.error_prefix + text
        if name is None and template.uses("tool_name"):
            raise InvalidRequestError(
                f"{call.provider} needs the tool name of each result, and no call in the "
                f"history has id {block.tool_use_id!r} ({message_id})",
                provider=call.provider,
            )
        return template.render(
            {
                "tool_call_id": block.tool_use_id,
                "tool_name": name,
                "content": text,
                "is_error": block.is_error,
            }
        )

    def _echo(self, raw: ProviderRaw | None, call: EncodeContext) -> dict[str, Any]:
        if raw is None or not self.m.echo or not call.produced(raw):
            return {}
        return {key: raw.data[key] for key in self.m.echo if key in raw.data}

    def _foreign(self, block: ToolUseBlock, call: EncodeContext) -> dict[str, Any]:
        fields = self.m.foreign_tool_call_fields
        if not fields or call.produced(block.provider_raw):
            return {}
        return dict(fields)

    # Turns -----------------------------------------------------------------------------------

    def _merged(self, turns: list[_Turn]) -> list[_Turn]:
        out: list[_Turn] = []
        for turn in turns:
            if turn.direct is None and not turn.parts and not turn.calls:
                continue  # nothing sendable was left in it
            last = out[-1] if out else None
            if (
                self.m.merge_same_role
                and last is not None
                and last.direct is None
                and turn.direct is None
                and last.role == turn.role
            ):
                last.parts.extend(turn.parts)
                last.texts.extend(turn.texts)
                last.calls.extend(turn.calls)
            else:
                out.append(turn)
        return out

    def _render_turn(self, turn: _Turn) -> Part:
        if turn.direct is not None:
            return turn.direct
        message: Part = {self.m.role_key: turn.role}
        content: Any = turn.parts or (None if turn.calls else [])
        if self.m.content_wrap == "string" and all(t is not None for t in turn.texts):
            content = "".join(t or "" for t in turn.texts) if turn.texts else None
        message[self.m.content_key] = content
        if turn.calls and self.m.tool_calls_key:
            message[self.m.tool_calls_key] = turn.calls
        return message

    def _system_text(self, request: CanonicalRequest, call: EncodeContext) -> str:
        parts = [request.system_prompt or ""]
        for i, message in enumerate(request.messages):
            if message.role is Role.SYSTEM:  # system_hoist normally leaves none behind
                log.warning(
                    "%s encode: SYSTEM message %s was not hoisted; sending it as system text",
                    call.provider,
                    message.id or f"messages[{i}]",
                )
                parts.append(message.text)
        return "\n\n".join(part for part in parts if part)

    def _wrap_system(self, text: str) -> Any:
        wrap = self.m.system_prompt.wrap
        if wrap == "string":
            return text
        part = self.s.text.render({"text": text}) if self.s.text is not None else text
        return {"parts": [part]} if wrap == "parts" else [part]

    def _prepend(self, turns: list[_Turn], system: str) -> None:
        user = self.m.role_map.get("user", "user")
        for turn in turns:
            if turn.role == user and turn.direct is None:
                part = self.s.text.render({"text": system}) if self.s.text is not None else system
                turn.parts.insert(0, part)
                turn.texts.insert(0, system)
                return
        turn = _Turn(user)
        self._add_text(turn, system)
        turns.insert(0, turn)


def _call_values(block: ToolUseBlock) -> dict[str, Any]:
    return {
        "id": block.id,
        "name": block.name,
        "input": block.input,
        "input_json": json.dumps(block.input, separators=(",", ":"), ensure_ascii=False),
    }


def _tool_names(request: CanonicalRequest) -> dict[str, str]:
    return {
        block.id: block.name
        for message in request.messages
        for block in message.content
        if isinstance(block, ToolUseBlock)
    }
