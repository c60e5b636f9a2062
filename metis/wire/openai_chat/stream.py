"""Reading a streamed Chat Completions reply: ``chat.completion.chunk`` objects (see
:mod:`metis.wire.openai_chat` for what the recordings show of them) -> canonical events."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from functools import partial
from typing import Any

from metis.errors import ProtocolError
from metis.model.citation import Citation
from metis.model.events import StreamEvent
from metis.model.response import StopKind, StopReason
from metis.model.tier import service_tier
from metis.wire.builder import MessageBuilder
from metis.wire.openai_chat.audio import kept_audio, read_audio
from metis.wire.openai_chat.errors import body_error
from metis.wire.openai_chat.quirks import NO_QUIRKS, ChatQuirks
from metis.wire.openai_chat.read import (
    read_content,
    read_reasoning,
    read_usage,
    stop_reason,
)
from metis.wire.openai_chat.server_tools import annotation_citations, source_list, unread
from metis.wire.openai_chat.tool_calls import StreamedToolCalls, legacy_fragment, listed
from metis.wire.read import malformed, object_value, optional_text, text_value

TEXT, REASONING = "text", "reasoning"
"""The builder keys of a reply's text and reasoning."""


def choice_index(choice: Any) -> int:
    """A choice's ``index`` (0 where it has none, or not a number)."""
    index = choice.get("index", 0) if isinstance(choice, dict) else 0
    return index if isinstance(index, int) and not isinstance(index, bool) else 0


class ChatStreamParser:
    """One streamed reply's ``chat.completion.chunk`` objects -> canonical events."""

    __slots__ = (
        "_apart", "_audio", "_builder", "_calls", "_end_token", "_finished", "_index",
        "_notify_error", "_one", "_refusal", "_sources",
    )  # fmt: skip

    def __init__(self, builder: MessageBuilder, quirks: ChatQuirks = NO_QUIRKS) -> None:
        self._builder, self._apart = builder, quirks.reasoning_tokens_apart
        self._one = quirks.one_choice  # every chunk's first choice is the reply's
        self._end_token = quirks.end_token_text  # an eos_token chunk's text is the token's
        self._calls = StreamedToolCalls(builder, quirks.grammar_tool_calls)
        self._notify_error = quirks.notify_error_text  # its call is the reply's text
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
                            return builder.take_text(TEXT, content)  # the hot path
                        if not self._end_token_text(choice):
                            builder.text(TEXT, content)
                    else:
                        self._delta(
                            {**delta, "content": None} if self._end_token_text(choice) else delta
                        )
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

    def _end_token_text(self, choice: dict[str, Any]) -> bool:
        """The choice's content is the end-of-sequence token's own text (TGI 1.4.0 to 2.0.1)."""
        return self._end_token and choice.get("finish_reason") == "eos_token"

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
            self._builder.citation(TEXT, cited)
        self._builder.finish()
        return self._builder.take()

    def end_marked(self) -> Sequence[StreamEvent]:
        """``[DONE]`` ended the stream: a reply some servers send with no ``finish_reason``
        at all (Snowflake Cortex, as pydantic-ai's recordings show) is whole, ended by its
        tool calls or as a turn's end."""
        if not self._finished:
            self._notified_as_text()
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
        read_reasoning(builder, delta, REASONING, "delta")
        if content := delta.get("content"):
            read_content(builder, content, TEXT, REASONING, "delta")
        if refusal := optional_text(delta, "refusal", "delta"):
            self._refusal.append(refusal)  # its stop's explanation, or text (_finish)
        for cited in annotation_citations(delta.get("annotations"), partial(unread, builder)):
            builder.citation(TEXT, cited)
        for item in listed(delta.get("tool_calls"), "delta.tool_calls"):
            self._calls.fragment(object_value(item, "delta.tool_calls[]"))
        if (legacy := legacy_fragment(delta)) is not None:
            self._calls.fragment(legacy)
        if (audio := delta.get("audio")) is not None:
            read_audio(builder, audio, self._audio, "delta")

    def _finish(self, reason: str, native: Any = None) -> None:
        self._notified_as_text()
        words = "".join(self._refusal)
        stop = stop_reason(reason, bool(words), self._calls.any, native, words)
        if stop.explanation is None:
            self._refused_as_text()
        self._finish_with(stop)

    def _notified_as_text(self) -> None:
        """TGI's ``notify_error`` call, the reply's whole grammar text: its message is the
        reply's text (metis/wire/openai_chat/grammar_calls.py)."""
        if self._notify_error and (said := self._calls.notified_error()) is not None:
            self._builder.text(TEXT, said)

    def _refused_as_text(self) -> None:
        """Refusal words of a reply that did not end as a refusal: the reply's text."""
        if self._refusal:
            self._builder.text(TEXT, "".join(self._refusal))
            self._refusal.clear()

    def _finish_with(self, stop: StopReason) -> None:
        self._finished = True
        self._calls.tell_all()
        self._builder.stop(stop)
        cut_off = self._builder.stop_reason is not None and (
            self._builder.stop_reason.kind is StopKind.MAX_TOKENS
        )
        self._calls.close_all(cut_off)
