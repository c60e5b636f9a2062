"""The OpenAI Chat Completions codec (docs/contract.md §7).

``encode`` builds the body of ``POST /v1/chat/completions``; the messages are made in
:mod:`metis.wire.openai_chat.encode`.

The stream parser (:mod:`metis.wire.openai_chat.stream`) reads ``chat.completion.chunk``
objects. As recorded traffic shows, a tool call's ``id`` and ``name`` come only on the first
fragment of its ``index`` (with ``arguments: ""``), ``finish_reason`` has a chunk of its own,
and usage follows it in a last chunk whose ``choices`` is empty; so the message finishes only
when the body ends. A ``tool_calls[]`` entry
of ``type: "custom"`` (a freeform tool's call: ``custom.name`` and ``custom.input``, streamed
in the same shape, openai/openai-openapi#576) is a tool call whose input is ``{"input": text}``
(:mod:`metis.wire.freeform`).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from pydantic import ValidationError

from metis.errors import AdapterError, ProtocolError, StackError
from metis.model.content import Message, Role
from metis.model.events import StreamEvent
from metis.model.media_fit import current_turn_start
from metis.model.memo import MessageMemo
from metis.model.request import CanonicalRequest
from metis.wire.builder import MessageBuilder
from metis.wire.codec import Codec, EncodeContext
from metis.wire.encoded_messages import encoded, encoded_history
from metis.wire.freeform import whole_input
from metis.wire.http_errors import openai_http_error
from metis.wire.knobs.sampling import sampling_fields
from metis.wire.openai_chat.audio import read_audio
from metis.wire.openai_chat.encode import (
    ReasoningReplay,
    assistant_message,
    named_tool_choice,
    tool_definition,
    user_messages,
)
from metis.wire.openai_chat.errors import body_error, chat_error, dump
from metis.wire.openai_chat.grammar_calls import notified_error
from metis.wire.openai_chat.quirks import NAMES as QUIRK_NAMES
from metis.wire.openai_chat.quirks import NO_QUIRKS, ChatQuirks, reasoning_fields
from metis.wire.openai_chat.read import (
    read_content,
    read_reasoning,
    read_usage,
    stop_reason,
    tool_call_id,
    unnumbered_pieces,
)
from metis.wire.openai_chat.server_tools import (
    annotation_citations,
    search_fields,
    source_list,
    unread,
)
from metis.wire.openai_chat.stream import REASONING, TEXT, ChatStreamParser, choice_index
from metis.wire.openai_chat.tool_calls import (
    CUSTOM_RAW,
    SIGNATURE,
    arguments,
    custom_input,
    message_calls,
    required_name,
    thought_signature,
)
from metis.wire.read import (
    object_value,
    optional_text,
    required_list,
    required_object,
)
from metis.wire.server_replay import messages_for_provider
from metis.wire.strict_schema import schema_name

_MEMO: MessageMemo[list[dict[str, Any]]] = MessageMemo()
_TOOL_CHOICE = {"auto": "auto", "any": "required", "none": "none"}


class OpenAIChatCodec:
    """``reasoning``: how a stack sends reasoning back (DeepSeek's ``reasoning_content``, see
    :class:`~metis.wire.openai_chat.encode.ReasoningReplay`); unset, it never is."""

    name = "openai_chat"

    def __init__(
        self, reasoning: ReasoningReplay | None = None, quirks: ChatQuirks = NO_QUIRKS
    ) -> None:
        self.reasoning, self.quirks = reasoning, quirks

    def configured(self, **settings: Any) -> OpenAIChatCodec:
        """This codec with a stack's ``encode`` settings (``reasoning_field``,
        ``reasoning_placeholder``; ``thinking_switch``, ``reasoning_tokens_apart``)."""
        quirks = {k: settings.pop(k) for k in list(settings) if k in QUIRK_NAMES}
        try:
            replay = ReasoningReplay(**settings) if settings else None
            return OpenAIChatCodec(replay, ChatQuirks(**quirks))
        except ValidationError as exc:
            raise StackError(f"codec 'openai_chat' settings: {exc}") from None

    def encode(self, request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
        messages: list[dict[str, Any]] = []
        if request.system_prompt:
            messages.append({"role": "system", "content": request.system_prompt})
        custom = frozenset(tool.name for tool in request.tools if tool.freeform)
        history = partial(self._history, request.messages, custom)
        messages += encoded_history(request.messages, (self, custom), call, history)
        body: dict[str, Any] = {
            "model": call.wire_model,
            "messages": messages,
            "max_completion_tokens": request.max_output_tokens,
            "stream": bool(request.stream),
        }
        if request.tools:
            body["tools"] = [tool_definition(tool) for tool in request.tools]
            choice = request.tool_choice
            if choice is not None:
                body["tool_choice"] = (
                    named_tool_choice(choice.name, custom)
                    if choice.name is not None
                    else _TOOL_CHOICE[choice.type]
                )
            if request.parallel_tool_calls is not None:
                body["parallel_tool_calls"] = request.parallel_tool_calls
        if request.server_tools:
            searching = search_fields(request, call)
            if own := searching.pop("tools", []):
                body["tools"] = body.get("tools", []) + own
            body.update(searching)
        if request.stop_sequences:
            body["stop"] = list(request.stop_sequences)
        body.update(sampling_fields(request))
        if request.output_schema is not None:
            schema = copy.deepcopy(request.output_schema)
            name = schema_name(schema.get("title"))
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema},
            }
        if request.thinking is not None:
            body.update(reasoning_fields(request.thinking, self.quirks))
        return body

    def _history(
        self, history: list[Message], custom: frozenset[str], call: EncodeContext
    ) -> list[dict[str, Any]]:
        """The wire messages of a whole history, each message's kept for the next call."""
        messages: list[dict[str, Any]] = []
        start = current_turn_start(history)
        for i, message in enumerate(messages_for_provider(history, call)):
            message_id = message.id or f"messages[{i}]"
            key = (self, custom, i >= start)
            make = partial(self._message, message, message_id, custom=custom, current=i >= start)
            wire: list[dict[str, Any]] = encoded(_MEMO, message, key, call, make)
            messages.extend(wire)
        return messages

    def _message(
        self,
        message: Message,
        message_id: str,
        call: EncodeContext,
        custom: frozenset[str],
        current: bool,
    ) -> list[dict[str, Any]]:
        """The wire messages of one history message (a user's tool results go apart)."""
        if message.role is Role.ASSISTANT:
            return [assistant_message(message, message_id, call, self.reasoning, custom)]
        return user_messages(message, message_id, call, current)

    def stream_parser(self, builder: MessageBuilder) -> ChatStreamParser:
        return ChatStreamParser(builder, self.quirks)

    def parse_body(self, body: dict[str, Any], builder: MessageBuilder) -> Sequence[StreamEvent]:
        if "error" in body:
            raise body_error(body)
        builder.start(
            optional_text(body, "id", "response"), optional_text(body, "model", "response")
        )
        choices = required_list(body, "choices", "response")
        if not choices:
            raise ProtocolError(f"openai_chat response has no choices: {dump(body)}")
        choice = unnumbered_pieces(choices) or object_value(
            min(choices, key=choice_index), "response.choices[0]"
        )
        if "message" not in choice and choice.get("finish_reason") is not None:
            message: dict[str, Any] = {}  # Azure's content filter leaves the message out
        else:
            message = required_object(choice, "message", "choices[0]")
        read_reasoning(builder, message, REASONING)
        if content := message.get("content"):
            read_content(builder, content, TEXT, REASONING)
        refusal = optional_text(message, "refusal", "message")
        finish = optional_text(choice, "finish_reason", "choices[0]")
        calls = message_calls(message)
        if self.quirks.notify_error_text and (said := notified_error(calls)) is not None:
            builder.text(TEXT, said)  # TGI's notify_error call: the reply's text
            calls = []
        native = choice.get("native_finish_reason")
        stop = stop_reason(finish, bool(refusal), bool(calls), native, refusal)
        if refusal and stop.explanation is None:  # not a refusal's end: the reply's text
            builder.text(TEXT, refusal)
        if (audio := message.get("audio")) is not None:
            read_audio(builder, audio, {}, "message")
        cited_here = annotation_citations(message.get("annotations"), partial(unread, builder))
        for cited in cited_here + source_list(body):
            builder.citation(TEXT, cited)
        for i, item in enumerate(calls):
            item = object_value(item, "message.tool_calls[]")
            key, custom = ("tool", i), item.get("type") == "custom"
            function = required_object(item, "custom" if custom else "function", "tool_calls[]")
            builder.tool_start(key, tool_call_id(item), required_name(function, "name"))
            if signature := thought_signature(item, "message.tool_calls[]"):
                builder.keep_raw(builder.index_of(key) or 0, {SIGNATURE: signature})
            if custom:
                builder.tool_input(key, whole_input(custom_input(function.get("input"))))
                builder.keep_raw(builder.index_of(key) or 0, CUSTOM_RAW)
            else:  # TGI 1.4 names them "parameters"
                given = function.get("arguments", function.get("parameters"))
                builder.tool_input(key, arguments(given))
            builder.close(key)
        if usage := body.get("usage"):
            apart = self.quirks.reasoning_tokens_apart
            tier = body.get("service_tier")
            read_usage(builder, object_value(usage, "response.usage"), apart, tier)
        builder.stop(stop)
        builder.finish()
        return builder.take()

    def error_from_http(self, status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
        return openai_http_error(status, headers, body, chat_error)


codec: Codec = OpenAIChatCodec()
