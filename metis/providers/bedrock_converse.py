"""The Bedrock Converse codec (``/model/{modelId}/converse`` and ``/converse-stream``).

Sans-IO. The stream arrives as AWS event-stream frames, which the ``decode`` stage turns into
``{event_type: payload}`` objects: ``messageStart``, ``contentBlockStart`` (tool calls only;
text and reasoning blocks begin with their first delta), ``contentBlockDelta`` (``text``,
``toolUse.input`` JSON fragments, ``reasoningContent`` text / signature / redactedContent),
``contentBlockStop``, ``messageStop`` (the stop reason) and ``metadata`` (usage, after the
stop). Converse numbers blocks itself (``contentBlockIndex``), and that number is the
builder's key. Exception frames were raised, classified, by ``decode`` already.
"""

from __future__ import annotations

import base64
from typing import Any

from metis.errors import ProtocolError
from metis.model.response import StopKind, StopReason
from metis.providers import aws_errors
from metis.providers.bedrock_converse_encode import encode
from metis.providers.codec import Codec
from metis.providers.message_builder import MessageBuilder

_STOP_KINDS: dict[str, StopKind] = {
    "end_turn": StopKind.END_TURN,
    "tool_use": StopKind.TOOL_USE,
    "max_tokens": StopKind.MAX_TOKENS,
    "stop_sequence": StopKind.STOP_SEQUENCE,
    "guardrail_intervened": StopKind.CONTENT_FILTER,
    "content_filtered": StopKind.CONTENT_FILTER,
}

_MALFORMED = (KeyError, TypeError, IndexError, AttributeError, ValueError)


class ConverseStreamParser:
    """Feeds ConverseStream events to a builder."""

    __slots__ = ("_builder", "_stopped", "_tool_inputs")

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._stopped = False
        self._tool_inputs: dict[Any, bool] = {}  # open tool blocks: did input arrive?

    def feed(self, obj: dict[str, Any]) -> None:
        try:
            delta = obj.get("contentBlockDelta")
            if delta is not None:
                self._delta(delta["contentBlockIndex"], delta["delta"])
            else:
                self._event(obj)
        except _MALFORMED as exc:
            raise _malformed(obj, exc, self._builder.provider) from None

    def end(self) -> None:
        if not self._stopped:
            raise ProtocolError(
                "bedrock stream ended before messageStop", provider=self._builder.provider
            )
        self._builder.finish()  # a stream without its metadata event: usage is estimated

    def _event(self, obj: dict[str, Any]) -> None:
        builder = self._builder
        if "messageStart" in obj:
            builder.start()
        elif "contentBlockStart" in obj:
            event = obj["contentBlockStart"]
            tool = event["start"].get("toolUse")
            if tool is not None:
                index = event["contentBlockIndex"]
                builder.tool_start(index, _str(tool["toolUseId"]), _str(tool["name"]))
                self._tool_inputs[index] = False
        elif "contentBlockStop" in obj:
            self._stop_block(obj["contentBlockStop"]["contentBlockIndex"])
        elif "messageStop" in obj:
            self._stopped = True
            builder.stop(stop_reason(_str(obj["messageStop"]["stopReason"])))
        elif "metadata" in obj:
            usage(builder, obj["metadata"].get("usage"))
            if self._stopped:
                builder.finish()
        # event types newer than this codec: nothing to do

    def _delta(self, index: Any, delta: dict[str, Any]) -> None:
        builder = self._builder
        if "text" in delta:
            text = _str(delta["text"])
            if text:  # some models open with an empty text delta; it is no block
                builder.text(index, text)
        elif "toolUse" in delta:
            fragment = _str(delta["toolUse"]["input"])
            builder.tool_input(index, fragment)
            if fragment and index in self._tool_inputs:
                self._tool_inputs[index] = True
        elif "reasoningContent" in delta:
            reasoning = delta["reasoningContent"]
            if "text" in reasoning:
                builder.thinking(index, _str(reasoning["text"]))
            if "signature" in reasoning:
                builder.thinking_signature(index, _str(reasoning["signature"]))
            if "redactedContent" in reasoning:
                builder.redacted_thinking(index, _bytes(reasoning["redactedContent"]))
        else:
            kind = next(iter(delta), "?")
            builder.warn(kind, f"unknown Converse delta {kind!r} ignored")

    def _stop_block(self, index: Any) -> None:
        had_input = self._tool_inputs.pop(index, None)
        if had_input is False:  # a tool called without arguments sends no input delta
            self._builder.tool_end(index, {})
        else:
            self._builder.close(index)


def parse_body(body: dict[str, Any], builder: MessageBuilder) -> None:
    """A Converse response: the same events a stream would give, finished."""
    try:
        builder.start()
        for index, block in enumerate(body["output"]["message"]["content"]):
            _whole_block(builder, index, block)
        usage(builder, body.get("usage"))
        builder.stop(stop_reason(_str(body["stopReason"])))
        builder.finish()
    except _MALFORMED as exc:
        raise _malformed(body, exc, builder.provider, "Converse response") from None


def _whole_block(builder: MessageBuilder, index: int, block: dict[str, Any]) -> None:
    if "text" in block:
        if text := _str(block["text"]):
            builder.text(index, text)
    elif "toolUse" in block:
        tool = block["toolUse"]
        given = tool.get("input") or {}
        if not isinstance(given, dict):
            raise TypeError(f"toolUse input is a {type(given).__name__}")
        builder.tool_start(index, _str(tool["toolUseId"]), _str(tool["name"]))
        builder.tool_end(index, given)
    elif "reasoningContent" in block:
        reasoning = block["reasoningContent"]
        if "redactedContent" in reasoning:
            builder.redacted_thinking(index, _bytes(reasoning["redactedContent"]))
        else:
            text = reasoning["reasoningText"]
            builder.thinking(index, _str(text.get("text", "")))
            if signature := text.get("signature"):
                builder.thinking_signature(index, _str(signature))
    else:
        kind = next(iter(block), "?")
        builder.warn(kind, f"Converse {kind!r} blocks have no canonical form")


def stop_reason(raw: str) -> StopReason:
    return StopReason(kind=_STOP_KINDS.get(raw, StopKind.PROVIDER_SPECIFIC), raw=raw)


def usage(builder: MessageBuilder, counts: Any) -> None:
    if counts:
        builder.usage(
            input_tokens=counts.get("inputTokens"),
            output_tokens=counts.get("outputTokens"),
            cached_input_tokens=counts.get("cacheReadInputTokens"),
            cache_creation_input_tokens=counts.get("cacheWriteInputTokens"),
        )


def _str(value: Any) -> str:
    if value.__class__ is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return str(value)


def _bytes(value: Any) -> str:
    """Redacted reasoning: base64 text on the wire; kept as that text."""
    text = _str(value)
    base64.b64decode(text, validate=True)  # binascii.Error is a ValueError: malformed
    return text


def _malformed(obj: Any, exc: Exception, provider: str, what: str | None = None) -> ProtocolError:
    if what is None:
        what = f"{next(iter(obj), '?')!r} event" if isinstance(obj, dict) and obj else "event"
    detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
    return ProtocolError(
        f"bedrock sent a malformed {what} ({detail}): {repr(obj)[:200]}", provider=provider
    )


class ConverseCodec:
    name = "bedrock_converse"
    encode = staticmethod(encode)
    stream_parser = staticmethod(ConverseStreamParser)
    parse_body = staticmethod(parse_body)
    error_from_http = staticmethod(aws_errors.error_from_http)


codec: Codec = ConverseCodec()
