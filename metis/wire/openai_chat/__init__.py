"""The OpenAI Chat Completions codec (docs/contract.md §7).

``encode`` builds the body of ``POST /v1/chat/completions``; the messages are made in
:mod:`metis.wire.openai_chat.encode`.

The parser reads ``chat.completion.chunk`` objects. As recorded traffic shows, a tool call's
``id`` and ``name`` come only on the first fragment of its ``index`` (with ``arguments: ""``),
``finish_reason`` has a chunk of its own, and usage follows it in a last chunk whose
``choices`` is empty; so the message finishes only when the body ends. A ``tool_calls[]`` entry
of ``type: "custom"`` (a freeform tool's call: ``custom.name`` and ``custom.input``, streamed
in the same shape, openai/openai-openapi#576) is a tool call whose input is ``{"input": text}``
(:mod:`metis.wire.freeform`).
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

from pydantic import ValidationError

from metis.errors import AdapterError, ProtocolError, StackError
from metis.model.citation import Citation
from metis.model.content import Message, Role
from metis.model.events import StreamEvent
from metis.model.media_fit import current_turn_start
from metis.model.memo import MessageMemo
from metis.model.request import CanonicalRequest
from metis.model.response import StopKind, StopReason
from metis.model.tier import service_tier
from metis.wire.builder import MessageBuilder
from metis.wire.codec import Codec, EncodeContext
from metis.wire.encoded_messages import encoded, encoded_history
from metis.wire.freeform import whole_input
from metis.wire.http_errors import openai_http_error
from metis.wire.knobs.sampling import sampling_fields
from metis.wire.openai_chat.audio import kept_audio, read_audio
from metis.wire.openai_chat.encode import (
    ReasoningReplay,
    assistant_message,
    named_tool_choice,
    tool_definition,
    user_messages,
)
from metis.wire.openai_chat.errors import body_error, chat_error, dump
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
from metis.wire.openai_chat.tool_calls import (
    CUSTOM_RAW,
    SIGNATURE,
    StreamedToolCalls,
    arguments,
    custom_input,
    legacy_fragment,
    listed,
    message_calls,
    required_name,
    thought_signature,
)
from metis.wire.read import (
    malformed,
    object_value,
    optional_text,
    required_list,
    required_object,
    text_value,
)
from metis.wire.server_replay import messages_for_provider
from metis.wire.strict_schema import schema_name

_TEXT, _REASONING = "text", "reasoning"
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

    def stream_parser(self, builder: MessageBuilder) -> _StreamParser:
        return _StreamParser(builder, self.quirks)

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
        read_reasoning(builder, message, _REASONING)
        if content := message.get("content"):
            read_content(builder, content, _TEXT, _REASONING)
        refusal = optional_text(message, "refusal", "message")
        finish = optional_text(choice, "finish_reason", "choices[0]")
        calls = message_calls(message)
        native = choice.get("native_finish_reason")
        stop = stop_reason(finish, bool(refusal), bool(calls), native, refusal)
        if refusal and stop.explanation is None:  # not a refusal's end: the reply's text
            builder.text(_TEXT, refusal)
        if (audio := message.get("audio")) is not None:
            read_audio(builder, audio, {}, "message")
        cited_here = annotation_citations(message.get("annotations"), partial(unread, builder))
        for cited in cited_here + source_list(body):
            builder.citation(_TEXT, cited)
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


def choice_index(choice: Any) -> int:
    """A choice's ``index`` (0 where it has none, or not a number)."""
    index = choice.get("index", 0) if isinstance(choice, dict) else 0
    return index if isinstance(index, int) and not isinstance(index, bool) else 0


class _StreamParser:
    __slots__ = (
        "_apart", "_audio", "_builder", "_calls", "_finished", "_index", "_one", "_refusal",
        "_sources",
    )  # fmt: skip

    def __init__(self, builder: MessageBuilder, quirks: ChatQuirks = NO_QUIRKS) -> None:
        self._builder, self._apart = builder, quirks.reasoning_tokens_apart
        self._one = quirks.one_choice  # every chunk's first choice is the reply's
        self._calls = StreamedToolCalls(builder, quirks.grammar_tool_calls)
        self._refusal: list[str] = []  # the refusal's words so far
        self._finished = False
        self._sources: list[Citation] = []  # a reply's source list, as the last chunk gave it
        self._index: int | None = None  # the index of the choice read, once a chunk had one
        self._audio: dict[str, Any] = {}  # an audio reply's pieces so far

    def feed(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        if "error" in obj:  # its usage, if any, is kept with what arrived (OpenRouter's has)
            if (usage := obj.get("usage")).__class__ is dict:
                with contextlib.suppress(ProtocolError):
                    read_usage(self._builder, usage, self._apart)
            raise body_error(obj)
        builder = self._builder
        choices = obj.get("choices")
        if not builder.started and (choices or "prompt_filter_results" not in obj):
            # Azure's first chunk, its filter's verdicts on the prompt, names no message
            builder.start(optional_text(obj, "id", "chunk"), optional_text(obj, "model", "chunk"))
        if choices:
            if choices.__class__ is not list:
                raise malformed("chunk.choices", "a list", choices)
            choice = choices[0]
            if choice.__class__ is not dict:
                raise malformed("chunk.choices[0]", "an object", choice)
            if choice.get("index", 0) != self._index and not self._one:
                choice = self._choice(choices)
            if choice is not None:
                delta = choice.get("delta")
                if delta:
                    if delta.__class__ is not dict:
                        raise malformed("choices[0].delta", "an object", delta)
                    content = delta.get("content")
                    if content and len(delta) == 1 and content.__class__ is str:
                        if choice.get("finish_reason") is None and not obj.get("usage"):
                            return builder.take_text(_TEXT, content)  # the hot path
                        builder.text(_TEXT, content)
                    else:
                        self._delta(delta)
                if (finish := choice.get("finish_reason")) is not None:
                    native = choice.get("native_finish_reason")
                    self._finish(text_value(finish, "choices[0].finish_reason"), native)
                    # kept for a stream with no usage chunk; a usage chunk's tier replaces it
                    builder.usage(service_tier=service_tier(obj.get("service_tier")))
        usage = obj.get("usage")
        if not usage and (groq := obj.get("x_groq")).__class__ is dict:
            usage = groq.get("usage")  # Groq's own place, on the finish_reason chunk
        if usage:
            tier = obj.get("service_tier")
            read_usage(builder, object_value(usage, "chunk.usage"), self._apart, tier)
        if "citations" in obj:  # Perplexity repeats the list on every chunk
            self._sources = source_list(obj)
        return builder.take()

    def _choice(self, choices: list[Any]) -> dict[str, Any] | None:
        """The chunk's choice of the index read: the lowest of the first chunk with choices
        (0, but for a server that numbers its one choice otherwise); None when it has none."""
        for at, choice in enumerate(choices):
            if choice.__class__ is not dict:
                raise malformed(f"chunk.choices[{at}]", "an object", choice)
        if self._index is None:
            self._index = min(choice_index(choice) for choice in choices)
        return next((c for c in choices if choice_index(c) == self._index), None)

    def end(self) -> Sequence[StreamEvent]:
        if not self._finished:
            raise ProtocolError("openai_chat stream ended without a finish_reason")
        kept_audio(self._builder, self._audio)
        for cited in self._sources:
            self._builder.citation(_TEXT, cited)
        self._builder.finish()
        return self._builder.take()

    def end_marked(self) -> Sequence[StreamEvent]:
        """``[DONE]`` ended the stream: a reply some servers send with no ``finish_reason``
        at all (Snowflake Cortex, as pydantic-ai's recordings show) is whole, ended by its
        tool calls or as a turn's end."""
        if not self._finished:
            kind = StopKind.TOOL_USE if self._calls.any else StopKind.END_TURN
            self._refused_as_text()
            self._finish_with(StopReason(kind=kind))
        return self.end()

    def interrupt(self, reason: StopReason) -> Sequence[StreamEvent]:
        self._refused_as_text()
        self._calls.tell_all()
        kept_audio(self._builder, self._audio)
        self._builder.finish(reason)
        return self._builder.take()

    def _delta(self, delta: dict[str, Any]) -> None:
        builder = self._builder
        read_reasoning(builder, delta, _REASONING, "delta")
        if content := delta.get("content"):
            read_content(builder, content, _TEXT, _REASONING, "delta")
        if refusal := optional_text(delta, "refusal", "delta"):
            self._refusal.append(refusal)  # its stop's explanation, or text (_finish)
        for cited in annotation_citations(delta.get("annotations"), partial(unread, builder)):
            builder.citation(_TEXT, cited)
        for item in listed(delta.get("tool_calls"), "delta.tool_calls"):
            self._calls.fragment(object_value(item, "delta.tool_calls[]"))
        if (legacy := legacy_fragment(delta)) is not None:
            self._calls.fragment(legacy)
        if (audio := delta.get("audio")) is not None:
            read_audio(builder, audio, self._audio, "delta")

    def _finish(self, reason: str, native: Any = None) -> None:
        words = "".join(self._refusal)
        stop = stop_reason(reason, bool(words), self._calls.any, native, words)
        if stop.explanation is None:
            self._refused_as_text()
        self._finish_with(stop)

    def _refused_as_text(self) -> None:
        """Refusal words of a reply that did not end as a refusal: the reply's text."""
        if self._refusal:
            self._builder.text(_TEXT, "".join(self._refusal))
            self._refusal.clear()

    def _finish_with(self, stop: StopReason) -> None:
        self._finished = True
        self._calls.tell_all()
        self._builder.stop(stop)
        cut_off = self._builder.stop_reason is not None and (
            self._builder.stop_reason.kind is StopKind.MAX_TOKENS
        )
        self._calls.close_all(cut_off)


codec: Codec = OpenAIChatCodec()
