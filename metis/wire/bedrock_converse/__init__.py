"""The Bedrock Converse codec (``/model/{modelId}/converse`` and ``/converse-stream``).

Sans-IO. The stream arrives as AWS event-stream frames, which the ``decode`` stage turns into
``{event_type: payload}`` objects: ``messageStart``, ``contentBlockStart`` (tool calls only;
text and reasoning blocks begin with their first delta), ``contentBlockDelta`` (``text``,
``toolUse.input`` JSON fragments, ``reasoningContent`` text / signature / redactedContent),
``contentBlockStop``, ``messageStop`` (the stop reason) and ``metadata`` (usage, after the
stop). Converse numbers blocks itself (``contentBlockIndex``), and that number is the
builder's key. Exception frames were raised, classified, by ``decode`` already. Nova's
system tools (a ``toolUse`` of ``type: "server_tool_use"`` and the ``toolResult`` answering it)
become a server tool's call and result, never a call to run; ``citationsContent`` and
``citation`` deltas become citations (:mod:`metis.wire.bedrock_converse.server_tools`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from typing import Any

from metis.errors import ProtocolError
from metis.model.events import StreamEvent
from metis.model.response import StopKind, StopReason, UsageDetail
from metis.model.tier import service_tier
from metis.wire.bedrock_converse import errors as aws_errors
from metis.wire.bedrock_converse import server_tools as nova
from metis.wire.bedrock_converse.encode import encode
from metis.wire.builder import MessageBuilder
from metis.wire.codec import Codec
from metis.wire.opaque import merge_fragment
from metis.wire.partial_json import parse_object
from metis.wire.read import (
    counts_of,
    list_value,
    object_value,
    optional_object,
    optional_text,
    required_index,
    required_list,
    required_object,
    required_text,
    shown,
    text_value,
    token_count,
)

_STOP_KINDS: dict[str, StopKind] = {
    "end_turn": StopKind.END_TURN,
    "tool_use": StopKind.TOOL_USE,
    "max_tokens": StopKind.MAX_TOKENS,
    "stop_sequence": StopKind.STOP_SEQUENCE,
    "guardrail_intervened": StopKind.CONTENT_FILTER,
    "content_filtered": StopKind.CONTENT_FILTER,
    "model_context_window_exceeded": StopKind.MAX_TOKENS,  # as on Anthropic: the context filled
}

_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_BLOCK_START, _BLOCK_DELTA = "contentBlockStart", "contentBlockDelta"


class ConverseStreamParser:
    """Feeds ConverseStream events to a builder."""

    __slots__ = ("_builder", "_opaque", "_server", "_server_names", "_stopped", "_tool_inputs")

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._stopped = False
        self._tool_inputs: dict[int, bool] = {}  # open tool blocks: did input arrive?
        # open server blocks: index -> (the toolUse or toolResult start, its pieces)
        self._server: dict[int, tuple[dict[str, Any], list[Any]]] = {}
        self._server_names: dict[str, str] = {}  # server call id -> canonical name
        # open blocks with no canonical form (an image): index -> (kind, the block so far)
        self._opaque: dict[int, tuple[str, dict[str, Any]]] = {}

    def feed(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        builder = self._builder
        event = obj.get(_BLOCK_DELTA)
        if event is None:
            self._event(obj)
            return builder.take()
        if event.__class__ is dict:
            index, delta = event.get("contentBlockIndex"), event.get("delta")
            if index.__class__ is int and delta.__class__ is dict:
                text = delta.get("text")
                if text.__class__ is str:  # the hot path: a text delta
                    if text:  # some models open with an empty text delta; it is no block
                        return builder.take_text(index, text)
                    return builder.take()
        event = object_value(event, _BLOCK_DELTA)
        index = required_index(event, "contentBlockIndex", _BLOCK_DELTA)
        self._delta(index, required_object(event, "delta", _BLOCK_DELTA))
        return builder.take()

    def end(self) -> Sequence[StreamEvent]:
        if not self._stopped:
            raise ProtocolError(
                "bedrock stream ended before messageStop", provider=self._builder.provider
            )
        self._builder.finish()  # a stream without its metadata event: usage is estimated
        return self._builder.take()

    def interrupt(self, reason: StopReason) -> Sequence[StreamEvent]:
        for index, held in self._opaque.items():  # what arrived of them is kept
            self._builder.opaque(("opaque", index), *held)
        self._builder.finish(reason)
        return self._builder.take()

    def _event(self, obj: dict[str, Any]) -> None:
        builder = self._builder
        if "messageStart" in obj:
            builder.start()
        elif _BLOCK_START in obj:
            event = object_value(obj[_BLOCK_START], _BLOCK_START)
            start = required_object(event, "start", _BLOCK_START)
            tool = optional_object(start, "toolUse", "contentBlockStart.start")
            result = optional_object(start, "toolResult", "contentBlockStart.start")
            index = required_index(event, "contentBlockIndex", _BLOCK_START)
            if tool is not None and nova.is_server_call(tool):
                self._server[index] = ({"toolUse": tool}, [])
            elif result is not None:
                self._server[index] = ({"toolResult": result}, [])
            elif tool is not None:
                tool_id = required_text(tool, "toolUseId", "contentBlockStart.start.toolUse")
                builder.tool_start(index, tool_id, required_text(tool, "name", "toolUse"))
                self._tool_inputs[index] = False
            elif start:  # an image, or a block newer than this codec: kept whole
                self._opaque_piece(index, start)
        elif "contentBlockStop" in obj:
            event = object_value(obj["contentBlockStop"], "contentBlockStop")
            self._stop_block(required_index(event, "contentBlockIndex", "contentBlockStop"))
        elif "messageStop" in obj:
            event = object_value(obj["messageStop"], "messageStop")
            self._stopped = True
            builder.stop(_stop_of(event, "messageStop"))
        elif "metadata" in obj:
            metadata = object_value(obj["metadata"], "metadata")
            usage(builder, optional_object(metadata, "usage", "metadata"), metadata)
            if self._stopped:
                builder.finish()
        # event types newer than this codec: nothing to do

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        builder = self._builder
        if index in self._server:
            pieces = self._server[index][1]
            tool = delta.get("toolUse")
            pieces.extend([tool.get("input", "")] if isinstance(tool, dict) else [])
            pieces.extend(delta.get("toolResult") or [])
        elif "citation" in delta:
            cited = nova.citation(object_value(delta["citation"], "citation"))
            builder.citation(_cited_text(builder, index), cited)
        elif "text" in delta:
            text = text_value(delta["text"], "contentBlockDelta.delta.text")
            if text:  # some models open with an empty text delta; it is no block
                builder.text(index, text)
        elif "toolUse" in delta:
            tool = object_value(delta["toolUse"], "contentBlockDelta.delta.toolUse")
            fragment = required_text(tool, "input", "contentBlockDelta.delta.toolUse")
            builder.tool_input(index, fragment)
            if fragment and index in self._tool_inputs:
                self._tool_inputs[index] = True
        elif "reasoningContent" in delta:
            self._reasoning(index, delta["reasoningContent"])
        elif delta:  # an image's piece, or a delta newer than this codec: kept whole
            self._opaque_piece(index, delta)

    def _opaque_piece(self, index: int, piece: dict[str, Any]) -> None:
        """A start or delta of a block with no canonical form: the block's pieces, merged
        into its whole form (``{"image": {"format", "source": {"bytes"}}}``)."""
        if index in self._opaque:
            merge_fragment(self._opaque[index][1], piece)
            return
        kind = next(iter(piece))
        self._opaque[index] = (kind, copy.deepcopy(piece))
        if not self._builder.has_block(index):  # a block of its own: in its place now
            self._builder.opaque(("opaque", index), kind, piece)

    def _reasoning(self, index: int, reasoning: Any) -> None:
        where = "contentBlockDelta.delta.reasoningContent"
        reasoning = object_value(reasoning, where)
        builder = self._builder
        if "text" in reasoning:
            builder.thinking(index, required_text(reasoning, "text", where))
        if "signature" in reasoning:
            builder.thinking_signature(index, required_text(reasoning, "signature", where))
        if "redactedContent" in reasoning:
            builder.redacted_thinking(index, _base64(reasoning, where))

    def _stop_block(self, index: int) -> None:
        held = self._opaque.pop(index, None)
        if held is None or self._builder.has_block(index):
            self._close(index)
        if held is not None:  # after the block it came beside, if any
            self._builder.opaque(("opaque", index), *held)

    def _close(self, index: int) -> None:
        if index in self._server:
            start, pieces = self._server.pop(index)
            if "toolUse" in start:
                given = parse_object("".join(p for p in pieces if isinstance(p, str))) or {}
                self._server_call(index, start["toolUse"], given)
            else:
                whole = {**start["toolResult"], "content": pieces}
                self._builder.server_tool(index, nova.result_block(whole, self._server_names))
            return
        had_input = self._tool_inputs.pop(index, None)
        if had_input is False:  # a tool called without arguments sends no input delta
            self._builder.tool_end(index, {})
        else:
            self._builder.close(index)

    def _server_call(self, index: int, tool: dict[str, Any], given: dict[str, Any]) -> None:
        block = nova.call_block(tool, given)
        self._server_names[block.id] = block.name
        self._builder.server_tool(index, block)


def parse_body(body: dict[str, Any], builder: MessageBuilder) -> Sequence[StreamEvent]:
    """A Converse response: the same events a stream would give, finished."""
    builder.start()
    output = required_object(body, "output", "response")
    message = required_object(output, "message", "response.output")
    parser = ConverseStreamParser(builder)
    for index, block in enumerate(required_list(message, "content", "response.output.message")):
        block = object_value(block, "response.output.message.content[]")
        if not _server_block(parser, index, block):
            _whole_block(builder, index, block)
    usage(builder, optional_object(body, "usage", "response"), body)
    builder.stop(_stop_of(body, "response"))
    builder.finish()
    return builder.take()


def _server_block(parser: ConverseStreamParser, index: int, block: dict[str, Any]) -> bool:
    """A server tool's whole call or result (or cited text), read as the stream reads it;
    False for any other block."""
    tool, result = block.get("toolUse"), block.get("toolResult")
    if isinstance(tool, dict) and nova.is_server_call(tool):
        given = object_value(tool.get("input") or {}, "content[].toolUse.input")
        parser._server_call(index, tool, given)
    elif isinstance(result, dict):
        parser._builder.server_tool(index, nova.result_block(result, parser._server_names))
    elif isinstance(cited := block.get("citationsContent"), dict):
        for part in cited.get("content") or []:
            if isinstance(part, dict) and isinstance(part.get("text"), str) and part["text"]:
                parser._builder.text(index, part["text"])
        key = _cited_text(parser._builder, index)
        for raw in cited.get("citations") or []:
            parser._builder.citation(key, nova.citation(object_value(raw, "citations[]")))
    else:
        return False
    return True


def _cited_text(builder: MessageBuilder, index: int) -> int:
    """The block citations at ``index`` belong to: its own text, else the text just before it
    (Nova 2's web grounding sends a ``citationsContent`` of citations only after the text it
    grounds: https://docs.aws.amazon.com/nova/latest/nova2-userguide/web-grounding.html)."""
    if builder.text_of(index) or index == 0 or not builder.text_of(index - 1):
        return index
    return index - 1


def _whole_block(builder: MessageBuilder, index: int, block: dict[str, Any]) -> None:
    where = "content[]"
    if "text" in block:
        if text := required_text(block, "text", where):
            builder.text(index, text)
    elif "toolUse" in block:
        tool = required_object(block, "toolUse", where)
        given = object_value(tool.get("input") or {}, "content[].toolUse.input")
        tool_id = required_text(tool, "toolUseId", "content[].toolUse")
        builder.tool_start(index, tool_id, required_text(tool, "name", "content[].toolUse"))
        builder.tool_end(index, given)
    elif "reasoningContent" in block:
        where = "content[].reasoningContent"
        reasoning = required_object(block, "reasoningContent", "content[]")
        if "redactedContent" in reasoning:
            builder.redacted_thinking(index, _base64(reasoning, where))
        else:
            given = required_object(reasoning, "reasoningText", where)
            builder.thinking(index, optional_text(given, "text", f"{where}.reasoningText") or "")
            if signature := optional_text(given, "signature", f"{where}.reasoningText"):
                builder.thinking_signature(index, signature)
    elif block:  # an image, a document, or a block newer than this codec: kept whole
        builder.opaque(index, next(iter(block)), block)


def stop_reason(raw: str, sequence: str | None = None) -> StopReason:
    kind = _STOP_KINDS.get(raw, StopKind.PROVIDER_SPECIFIC)
    return StopReason(kind=kind, raw=raw, sequence=sequence)


def _stop_of(holder: dict[str, Any], where: str) -> StopReason:
    """``holder``'s stop reason (a response, or a stream's ``messageStop``), with the stop
    sequence the model's own fields name (``additionalModelResponseFields.stop_sequence``,
    returned when the request asked for ``/stop_sequence``). Those fields are any JSON value
    (AWS types them as a document): one that is not an object names no stop sequence."""
    raw = required_text(holder, "stopReason", where)
    fields = "additionalModelResponseFields"
    extra = holder.get(fields)
    sequence = None
    if isinstance(extra, dict):
        sequence = optional_text(extra, "stop_sequence", f"{where}.{fields}")
    return stop_reason(raw, sequence)


def usage(builder: MessageBuilder, counts: dict[str, Any] | None, holder: Any = None) -> None:
    """``counts``, and the tier that served the reply, ``serviceTier.type`` of ``holder`` (the
    response, or the stream's ``metadata`` event)."""
    tier = holder.get("serviceTier") if holder.__class__ is dict else None
    if tier.__class__ is dict:
        builder.usage(service_tier=service_tier(tier.get("type")))
    if counts:
        with counts_of(builder):
            builder.usage(
                input_tokens=counts.get("inputTokens"),
                output_tokens=counts.get("outputTokens"),
                cached_input_tokens=counts.get("cacheReadInputTokens"),
                cache_creation_input_tokens=counts.get("cacheWriteInputTokens"),
                **_hour_writes(counts.get("cacheDetails"), builder.provider),
            )


def _hour_writes(details: Any, provider: str) -> UsageDetail:
    """The cache writes kept an hour: the ``cacheDetails`` entries of ttl ``1h``, summed."""
    if details is None:
        return {}
    hour = 0
    for entry in list_value(details, "usage.cacheDetails"):
        entry = object_value(entry, "usage.cacheDetails[]")
        if entry.get("ttl") == "1h":
            hour += token_count(entry.get("inputTokens"), "cacheDetails[].inputTokens", provider)
    return {"cache_creation_1h_input_tokens": hour}


def _base64(reasoning: dict[str, Any], where: str) -> str:
    """Redacted reasoning: base64 text on the wire; kept as that text."""
    text = required_text(reasoning, "redactedContent", where)
    if not _BASE64.fullmatch(text):
        raise ProtocolError(f"{where}.redactedContent: expected base64 text, got {shown(text)}")
    return text


class ConverseCodec:
    name = "bedrock_converse"
    encode = staticmethod(encode)
    stream_parser = staticmethod(ConverseStreamParser)
    parse_body = staticmethod(parse_body)
    error_from_http = staticmethod(aws_errors.error_from_http)


codec: Codec = ConverseCodec()
