"""Chat Completions replies written from canonical ones: the whole completion and its chunks
(``data:`` lines, the role first, a tool call's id and name on its first fragment only, the
text's ``annotations`` in one chunk after it, the finish_reason chunk, the usage chunk with
``choices: []`` when ``stream_options.include_usage`` asks, then ``data: [DONE]``). The
emulator writes its Chat replies here too."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.gateway.provenance import call_signature
from metis.gateway.sse import DONE, BlockWriter, data, dumps, new_id, now, object_head, quoted
from metis.histories.blocks import chat_annotations
from metis.model.content import TextBlock, ThinkingBlock, ToolUseBlock
from metis.model.events import (
    CitationDelta,
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage
from metis.model.tier import TierKind

FINISH = {
    StopKind.MAX_TOKENS: "length",
    StopKind.TOOL_USE: "tool_calls",
    StopKind.CONTENT_FILTER: "content_filter",
    StopKind.REFUSAL: "content_filter",
}


def usage(tokens: TokenUsage) -> dict[str, Any]:
    """The usage object; the cache writes (``cache_write_tokens``) when there were any, and
    the audio parts of the prompt and the completion."""
    prompt = tokens.total_input_tokens
    details: dict[str, Any] = {
        "cached_tokens": tokens.cached_input_tokens,
        "audio_tokens": tokens.input_audio_tokens,
    }
    if tokens.cache_creation_input_tokens:
        details["cache_write_tokens"] = tokens.cache_creation_input_tokens
    return {
        "prompt_tokens": prompt,
        "completion_tokens": tokens.output_tokens,
        "total_tokens": prompt + tokens.output_tokens,
        "prompt_tokens_details": details,
        "completion_tokens_details": {
            "reasoning_tokens": tokens.reasoning_tokens,
            "audio_tokens": tokens.output_audio_tokens,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


OPENAI_TIERS = frozenset({"default", "flex", "priority", "scale", "fast"})
"""The words OpenAI's replies name the tier that served them by."""
_OPENAI_WORDS = {TierKind.STANDARD: "default", TierKind.RESERVED: "scale"}


def openai_tier(tokens: TokenUsage) -> str | None:
    """The reply's ``service_tier`` as OpenAI names it: OpenAI's own word, else the tier's
    (``default`` for the standard one), a word of no tier metis knows as the provider's."""
    tier = tokens.service_tier
    if tier is None:
        return None
    if tier.raw in OPENAI_TIERS or tier.kind is TierKind.OTHER:
        return tier.raw
    return _OPENAI_WORDS.get(tier.kind, tier.kind.value)


def finish_reason(reason: StopReason) -> str:
    """A refusal in words ends with ``stop`` beside its ``refusal``, as OpenAI's do (the
    openai SDK's ``parse`` raises at ``content_filter`` before reading the refusal); one of
    no words, as a content filter's stop."""
    if reason.explanation is not None and reason.kind is StopKind.REFUSAL:
        return "stop"
    return FINISH.get(reason.kind, "stop")


def write_completion(
    response: CanonicalResponse,
    model: str,
    legacy: bool = False,
    completion_id: str | None = None,
) -> dict[str, Any]:
    """The Chat Completions reply body for ``response``, naming ``model`` as the client did;
    ``legacy``: a tool call as deprecated function calling's ``function_call`` (the first)."""
    texts = [b for b in response.content if isinstance(b, TextBlock)]
    message: dict[str, Any] = {
        "role": "assistant",
        "content": "".join(b.text for b in texts) if texts else None,
        "refusal": response.stop_reason.explanation,
        "annotations": chat_annotations(texts, "content"),
    }
    thoughts = [b.thinking for b in response.content if isinstance(b, ThinkingBlock)]
    if thoughts:
        message["reasoning_content"] = "".join(thoughts)
    calls = [
        {
            "id": b.id,
            "type": "function",
            "function": {"name": b.name, "arguments": dumps(b.input)},
            **call_signature(b),
        }
        for b in response.content
        if isinstance(b, ToolUseBlock)
    ]
    finish = finish_reason(response.stop_reason)
    if calls and legacy:
        message["function_call"] = calls[0]["function"]
        finish = "function_call" if finish == "tool_calls" else finish
    elif calls:
        message["tool_calls"] = calls
    choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}
    return {
        "id": completion_id or new_id("chatcmpl-"),
        "object": "chat.completion",
        "created": now(),
        "model": model,
        "choices": [choice],
        "usage": usage(response.usage),
        **_tier_member(response.usage),
    }


def _tier_member(tokens: TokenUsage) -> dict[str, str]:
    tier = openai_tier(tokens)
    return {} if tier is None else {"service_tier": tier}


class ChunkStream(BlockWriter):
    """The canonical events of one call as Chat Completions streams them. ``completion_id``
    when the caller names it; ``more``: what every chunk carries after the model (the
    service tier, a system fingerprint), when the caller knows it."""

    def __init__(
        self,
        model: str,
        include_usage: bool,
        legacy: bool = False,
        completion_id: str | None = None,
        more: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.legacy = legacy  # tool calls as deprecated function calling's function_call
        self.base: dict[str, Any] = {
            "id": completion_id or new_id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": now(),
            "model": model,
            **(more or {}),
        }
        self.include_usage = include_usage
        self.started = False  # the role's chunk is written
        self.calls = 0  # tool calls opened: the index of the next one
        self.cited: list[dict[str, Any]] = []  # the open text's annotations, written at its end
        # _chunk(delta) around a delta written from a template (_string_chunk)
        self.head = b"data: " + object_head(self.base) + b'"choices":[{"index":0,"delta":'
        usage_member = b',"usage":null' if include_usage else b""
        self.tail = b',"logprobs":null,"finish_reason":null}]' + usage_member + b"}\n\n"

    def _chunk(self, delta: dict[str, Any] | None, finish: str | None = None) -> bytes:
        choices = (
            []
            if delta is None
            else [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        )
        chunk: dict[str, Any] = {**self.base, "choices": choices}
        if self.include_usage:
            chunk["usage"] = None
        return data(chunk)

    def written(self, item: StreamEvent) -> bytes:
        """The first chunk names the role, once, with the reply's first content, as OpenAI
        writes it: ``content: ""`` before text, ``content: null`` beside a first tool call (a
        client that reads ``""`` as text would see an empty text part in a tool call's turn).
        Reasoning first opens with ``content: null, reasoning_content: ""``, and what follows
        it comes without the role again (as DeepSeek streams it)."""
        if self.started or isinstance(item, (MessageStart, ToolUseStart)):
            return super().written(item)
        self.started = True
        if isinstance(item, ThinkingDelta):
            opening = {"role": "assistant", "content": None, "reasoning_content": ""}
        else:
            opening = {"role": "assistant", "content": "", "refusal": None}
        return self._chunk(opening) + super().written(item)

    def open_block(self, kind: str, item: StreamEvent) -> bytes:
        if not isinstance(item, ToolUseStart):
            return b""
        role = {} if self.started else {"role": "assistant", "content": None}
        self.started = True
        function = {"name": item.tool_name, "arguments": ""}
        if self.legacy:  # one call only: the others have no place in the reply
            self.calls += 1
            if self.calls > 1:
                return b""
            return self._chunk({**role, "function_call": function, **_refusal(role)})
        opened = {"index": self.calls, "id": item.tool_use_id, "type": "function"}
        self.calls += 1
        call = {**opened, "function": function}
        return self._chunk({**role, "tool_calls": [call], **_refusal(role)})

    def _string_chunk(self, delta_head: bytes, text: str, delta_tail: bytes = b"}") -> bytes:
        """``_chunk(delta)`` for a delta of one string member, from a template: most of a
        stream's chunks."""
        return b"".join((self.head, delta_head, quoted(text), delta_tail, self.tail))

    def text(self, item: TextDelta) -> bytes:
        return self._string_chunk(b'{"content":', item.text) if item.text else b""

    def text_template(self) -> tuple[bytes, bytes]:
        return self.head + b'{"content":', b"}" + self.tail

    def thinking_template(self) -> tuple[bytes, bytes]:
        return self.head + b'{"reasoning_content":', b"}" + self.tail

    def input_template(self) -> tuple[bytes, bytes] | None:
        if self.legacy:
            return None
        head = b'{"tool_calls":[{"index":%d,"function":{"arguments":' % (self.calls - 1)
        return self.head + head, b"}}]}" + self.tail

    def citation(self, item: CitationDelta) -> bytes:
        self.cited += chat_annotations([TextBlock(text="", citations=[item.citation])], "content")
        return b""

    def thinking(self, item: ThinkingDelta) -> bytes:
        if not item.thinking:
            return b""
        return self._string_chunk(b'{"reasoning_content":', item.thinking)

    def tool_input(self, item: ToolUseInputDelta) -> bytes:
        if self.legacy:
            arguments = {"function_call": {"arguments": item.partial_json}}
            return self._chunk(arguments) if self.calls == 1 else b""
        head = b'{"tool_calls":[{"index":%d,"function":{"arguments":' % (self.calls - 1)
        return self._string_chunk(head, item.partial_json, b"}}]}")

    def close_block(self, kind: str, end: ToolUseEnd | None) -> bytes:
        if kind == "tool" and end is not None and not self.input_written and not end.final_input:
            # a call without arguments: "{}", as OpenAI streams it (a client parses what it
            # gathered, and "" is no JSON)
            empty = ToolUseInputDelta(end.content_block_index, end.tool_use_id, "{}")
            return self.tool_input(empty)
        cited, self.cited = self.cited, []
        return self._chunk({"annotations": cited}) if cited else b""

    def complete(self, item: MessageComplete) -> bytes:
        finish = finish_reason(item.stop_reason)
        if "service_tier" not in self.base:  # known at the end: on the last chunks
            self.base.update(_tier_member(item.usage))
        if self.legacy and finish == "tool_calls":
            finish = "function_call"
        out = b"" if self.legacy else self._signatures(item.final_content)
        explained = item.stop_reason.explanation
        out += self._chunk({"refusal": explained}) if explained else b""
        out += self._chunk({}, finish)
        if self.include_usage:
            out += data({**self.base, "choices": [], "usage": usage(item.usage)})
        return out + DONE

    def error(self, status: int, body: dict[str, Any]) -> bytes:
        return data(body)

    def _signatures(self, content: list[Any]) -> bytes:
        """The calls' thought signatures, known whole at the end, each on a fragment of its
        call (by ``index``, with empty arguments: the openai SDK's stream helper asserts a
        function fragment has a ``function``) before the finish."""
        calls = [block for block in content if isinstance(block, ToolUseBlock)]
        signed = [
            {"index": index, "function": {"arguments": ""}, **extra}
            for index, block in enumerate(calls)
            if (extra := call_signature(block))
        ]
        return self._chunk({"tool_calls": signed}) if signed else b""


def _refusal(role: dict[str, Any]) -> dict[str, Any]:
    """The first chunk's ``refusal: null``, after the tool call as OpenAI orders it."""
    return {"refusal": None} if role else {}
