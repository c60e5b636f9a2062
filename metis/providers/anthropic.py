"""The Anthropic Messages codec (``POST /v1/messages``, docs/contract.md §8).

Sans-IO: :func:`encode` builds the JSON body from a canonical request; the stream parser and
:meth:`AnthropicCodec.parse_body` turn Anthropic's objects into canonical events by driving a
:class:`~metis.providers.message_builder.MessageBuilder`; :meth:`AnthropicCodec.error_from_http`
classifies an error answer.

Anthropic numbers its content blocks itself (``index``) and the parser uses that number as the
builder's key. Blocks the canonical model has no room for (server tools, MCP calls, code
execution and their results, whatever Anthropic adds next) are dropped whole, with one WARN
each, together with all their deltas.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from metis.errors import AdapterError, ErrorClass, ProtocolError
from metis.model.content import (
    Base64ImageSource,
    ContentBlock,
    ImageBlock,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.model.response import StopKind, StopReason
from metis.pipeline.call import Call
from metis.providers.anthropic_rules import model_traits
from metis.providers.codec import Codec
from metis.providers.http_errors import body_excerpt, http_error, json_body
from metis.providers.message_builder import MessageBuilder
from metis.stages.empty_content import EMPTY_ERROR_RESULT

log = logging.getLogger("metis")

_STOP_KINDS: dict[str, StopKind] = {
    kind.value: kind
    for kind in StopKind
    if kind.value
    in ("end_turn", "max_tokens", "stop_sequence", "tool_use", "pause_turn", "refusal")
}
_STOP_KINDS["model_context_window_exceeded"] = StopKind.MAX_TOKENS  # the context filled up

_ERROR_CLASSES = {
    "overloaded_error": ErrorClass.OVERLOADED,
    "rate_limit_error": ErrorClass.RATE_LIMIT,
    "authentication_error": ErrorClass.AUTH,
    "permission_error": ErrorClass.AUTH,
    "request_too_large": ErrorClass.CONTEXT_OVERFLOW,
    "invalid_request_error": ErrorClass.INVALID_REQUEST,
    "not_found_error": ErrorClass.INVALID_REQUEST,
    "api_error": ErrorClass.SERVER_ERROR,
    "timeout_error": ErrorClass.SERVER_ERROR,
}

_MALFORMED = (KeyError, TypeError, IndexError, AttributeError, ValueError)


# Encoding ----------------------------------------------------------------------------------


def encode(request: CanonicalRequest, call: Call) -> dict[str, Any]:
    body: dict[str, Any] = {"model": call.wire_model, "max_tokens": request.max_output_tokens}
    system = _system(request, call)
    if system:
        body["system"] = system
    body["messages"] = _messages(request, call)
    if request.tools:
        body["tools"] = [_tool(tool) for tool in request.tools]
        choice = _tool_choice(request)
        if choice is not None:
            body["tool_choice"] = choice
    if request.stop_sequences:
        body["stop_sequences"] = list(request.stop_sequences)
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.thinking is not None:
        body["thinking"] = _thinking(request.thinking.budget_tokens, call)
    if request.output_schema is not None:
        body["output_config"] = {"format": {"type": "json_schema", "schema": request.output_schema}}
    body["stream"] = bool(request.stream)
    return body


def _system(request: CanonicalRequest, call: Call) -> str:
    parts = [request.system_prompt or ""]
    for i, message in enumerate(request.messages):
        if message.role is Role.SYSTEM:  # system_hoist normally leaves none behind
            log.warning(
                "anthropic encode: SYSTEM message %s was not hoisted; sending it as system text",
                message.id or f"messages[{i}]",
            )
            parts.append(message.text())
    return "\n\n".join(part for part in parts if part)


def _messages(request: CanonicalRequest, call: Call) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, message in enumerate(request.messages):
        if message.role is Role.SYSTEM:
            continue
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        message_id = message.id or f"messages[{i}]"
        blocks = [b for block in message.content if (b := _block(block, call, message_id))]
        if not blocks:  # Anthropic rejects empty content; nothing was sendable
            continue
        if out and out[-1]["role"] == role:  # Anthropic wants user and assistant to alternate
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for message_out in out:
        if message_out["role"] == "user":  # tool results must open a user turn (stable sort)
            message_out["content"].sort(key=lambda b: b["type"] != "tool_result")
    return out


def _block(block: ContentBlock, call: Call, message_id: str) -> dict[str, Any] | None:
    if isinstance(block, TextBlock):
        # Anthropic refuses text blocks that are empty or only whitespace.
        return {"type": "text", "text": block.text} if block.text.strip() else None
    if isinstance(block, ImageBlock):
        return _image(block)
    if isinstance(block, ToolUseBlock):
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if isinstance(block, ToolResultBlock):
        return _tool_result(block)
    if isinstance(block, ThinkingBlock):
        if not block.signature:
            call.warn_dropped(
                "thinking", "Anthropic accepts only signed thinking blocks", message_id=message_id
            )
            return None
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    return {"type": "redacted_thinking", "data": block.data}


def _image(block: ImageBlock) -> dict[str, Any]:
    source = block.source
    if isinstance(source, Base64ImageSource):
        wire = {"type": "base64", "media_type": source.media_type, "data": source.data}
    else:
        wire = {"type": "url", "url": source.url}
    return {"type": "image", "source": wire}


def _tool_result(block: ToolResultBlock) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "tool_result", "tool_use_id": block.tool_use_id}
    content: str | list[dict[str, Any]]
    if isinstance(block.content, str):
        content = block.content
    else:
        content = [
            _image(part) if isinstance(part, ImageBlock) else {"type": "text", "text": part.text}
            for part in block.content
            if isinstance(part, ImageBlock) or part.text
        ]
    if block.is_error:
        out["content"] = content or EMPTY_ERROR_RESULT  # Anthropic rejects an empty error
        out["is_error"] = True
    elif content:
        out["content"] = content
    return out


def _tool(tool: ToolDefinition) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tool.name}
    if tool.description:
        out["description"] = tool.description
    out["input_schema"] = tool.input_schema
    return out


def _thinking(budget_tokens: int, call: Call) -> dict[str, Any]:
    """Manual thinking with the request's budget, or adaptive where the model thinks only
    that way."""
    if "enabled" not in model_traits(call.wire_model).thinking_modes:
        return {"type": "adaptive"}
    return {"type": "enabled", "budget_tokens": budget_tokens}


def _tool_choice(request: CanonicalRequest) -> dict[str, Any] | None:
    choice = request.tool_choice
    out: dict[str, Any]
    if choice is None:
        if request.parallel_tool_calls is not False:
            return None
        out = {"type": "auto"}
    elif choice.type == "tool":
        out = {"type": "tool", "name": choice.name}
    else:
        out = {"type": choice.type}
    if request.parallel_tool_calls is False and out["type"] != "none":
        out["disable_parallel_tool_use"] = True  # tool_choice none takes no such field
    return out


# Parsing -----------------------------------------------------------------------------------


class AnthropicStreamParser:
    """Feeds Anthropic's stream events (parsed SSE ``data:`` objects) to a builder."""

    __slots__ = ("_builder", "_done", "_dropped", "_fragments", "_inputs", "_started", "_warned")

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._done = False
        self._started = False
        self._dropped: set[Any] = set()  # indices of blocks outside the canonical model
        self._inputs: dict[Any, dict[str, Any]] = {}  # tool inputs given whole at block start
        self._fragments: set[Any] = set()  # tool indices that received input_json_delta text
        self._warned: set[str] = set()  # unknown delta types already reported

    def feed(self, obj: dict[str, Any]) -> None:
        try:
            if obj["type"] == "content_block_delta":
                delta = obj["delta"]
                if delta["type"] == "text_delta":  # the hot path
                    index = obj["index"]
                    text = delta["text"]
                    if text.__class__ is str and index not in self._dropped:
                        self._builder.text(index, text)
                        return
                self._delta(obj["index"], delta)
            else:
                self._event(obj)
        except _MALFORMED as exc:
            raise _malformed(obj, exc, self._builder.provider) from None

    def end(self) -> None:
        if not self._done:
            raise ProtocolError(
                "anthropic stream ended before message_stop", provider=self._builder.provider
            )

    def _event(self, obj: dict[str, Any]) -> None:
        kind = obj["type"]
        builder = self._builder
        if kind == "content_block_start":
            self._start_block(obj["index"], obj["content_block"])
        elif kind == "content_block_stop":
            self._stop_block(obj["index"])
        elif kind == "message_start":
            self._message_start(obj["message"])
        elif kind == "message_delta":
            _stop(builder, obj["delta"].get("stop_reason"))
            usage = obj.get("usage")
            _usage(builder, usage)
            if usage and usage.get("output_tokens") is not None:
                builder.output_count_pending = False
        elif kind == "message_stop":
            self._done = True
            builder.finish()
        elif kind == "error":
            raise _stream_error(obj, builder.provider)
        # ping, and event types newer than this codec: nothing to do

    def _message_start(self, message: dict[str, Any]) -> None:
        """The message's id, model, usage so far (its output count a placeholder until
        ``message_delta``) and any content it already holds, as blocks 0, 1, ..."""
        builder, message_id = self._builder, message.get("id")
        if self._started:
            open_id = builder.message_id
            if self._done or message_id is None or open_id is None or message_id == open_id:
                return  # a repeat (or nothing to tell the two apart by): ignored
            raise ProtocolError(
                f"anthropic started message {message_id!r} while {builder.message_id!r} was open",
                provider=builder.provider,
            )
        self._started = True
        builder.start(message_id, message.get("model"))
        _usage(builder, message.get("usage"))
        builder.output_count_pending = True
        for index, block in enumerate(message.get("content") or ()):
            self._start_block(index, block)
            self._stop_block(index)

    def _start_block(self, index: Any, block: dict[str, Any]) -> None:
        kind = block["type"]
        builder = self._builder
        if kind == "text":
            if text := _str(block.get("text", "")):
                builder.text(index, text)
        elif kind == "thinking":
            if thinking := _str(block.get("thinking", "")):
                builder.thinking(index, thinking)
            if signature := _str(block.get("signature", "")):
                builder.thinking_signature(index, signature)
        elif kind == "redacted_thinking":
            builder.redacted_thinking(index, _str(block["data"]))
        elif kind == "tool_use":
            builder.tool_start(index, _str(block["id"]), _str(block["name"]))
            given = block.get("input")
            if given:
                if not isinstance(given, dict):
                    raise TypeError(f"tool_use input is a {type(given).__name__}")
                self._inputs[index] = given
        else:
            self._dropped.add(index)
            builder.warn(
                kind,
                f"Anthropic {kind!r} blocks have no canonical form",
                message_id=builder.message_id,
            )

    def _delta(self, index: Any, delta: dict[str, Any]) -> None:
        if index in self._dropped:
            return
        kind = delta["type"]
        builder = self._builder
        if kind == "input_json_delta":
            fragment = _str(delta["partial_json"])
            builder.tool_input(index, fragment)
            if fragment:
                self._fragments.add(index)
        elif kind == "thinking_delta":
            builder.thinking(index, _str(delta["thinking"]))
        elif kind == "signature_delta":
            builder.thinking_signature(index, _str(delta["signature"]))
        elif kind == "text_delta":  # reached only when the hot path refused it
            builder.text(index, _str(delta["text"]))
        elif kind != "citations_delta" and kind not in self._warned:
            self._warned.add(kind)
            builder.warn(
                kind, f"unknown delta type {kind!r} ignored", message_id=builder.message_id
            )

    def _stop_block(self, index: Any) -> None:
        if index in self._dropped:
            return
        given = self._inputs.pop(index, None)
        if given is not None and index not in self._fragments:
            self._builder.tool_end(index, given)
        else:
            self._builder.close(index)


def parse_body(body: dict[str, Any], builder: MessageBuilder) -> None:
    """A non-streamed Messages response, through the same block handling as the stream."""
    try:
        if body.get("type") == "error":
            raise _stream_error(body, builder.provider)
        parser = AnthropicStreamParser(builder)
        builder.start(body.get("id"), body.get("model"))
        for index, block in enumerate(body["content"]):
            parser._start_block(index, block)
            parser._stop_block(index)
        _usage(builder, body.get("usage"))
        _stop(builder, body.get("stop_reason"))
        builder.finish()
    except _MALFORMED as exc:
        raise _malformed(body, exc, builder.provider, "message body") from None


def stop_reason(raw: str) -> StopReason:
    return StopReason(kind=_STOP_KINDS.get(raw, StopKind.PROVIDER_SPECIFIC), raw=raw)


def _stop(builder: MessageBuilder, raw: Any) -> None:
    if raw is not None:
        builder.stop(stop_reason(_str(raw)))


def _usage(builder: MessageBuilder, usage: Any) -> None:
    if usage:
        builder.usage(
            input_tokens=usage.get("input_tokens"),
            output_tokens=usage.get("output_tokens"),
            cached_input_tokens=usage.get("cache_read_input_tokens"),
            cache_creation_input_tokens=usage.get("cache_creation_input_tokens"),
        )


def _str(value: Any) -> str:
    if value.__class__ is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return str(value)


def _malformed(obj: Any, exc: Exception, provider: str, what: str | None = None) -> ProtocolError:
    if what is None:
        kind = obj.get("type") if isinstance(obj, dict) else None
        what = f"{kind!r} event" if isinstance(kind, str) else "event"
    detail = f"missing key {exc}" if isinstance(exc, KeyError) else str(exc)
    return ProtocolError(
        f"anthropic sent a malformed {what} ({detail}): {repr(obj)[:200]}", provider=provider
    )


# Errors ------------------------------------------------------------------------------------


def _error_fields(data: Any) -> tuple[str | None, str]:
    """``(error.type, error.message)`` from an Anthropic error object, or ``(None, "")``."""
    error = data.get("error") if isinstance(data, dict) else None
    if not isinstance(error, dict):
        return None, ""
    kind, message = error.get("type"), error.get("message")
    return (kind if isinstance(kind, str) else None), (message if isinstance(message, str) else "")


def _stream_error(obj: dict[str, Any], provider: str) -> AdapterError:
    """An ``error`` event in a 200 stream, or an error-typed 200 body: no HTTP status."""
    kind, message = _error_fields(obj)
    request_id = obj.get("request_id")
    return http_error(
        None,
        {},
        message or f"anthropic reported {kind or 'an error'} without a message",
        error_class=_ERROR_CLASSES.get(kind or ""),
        code=kind,
        request_id=request_id if isinstance(request_id, str) else None,
        provider=provider,
    )


def error_from_http(status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
    data = json_body(body)
    kind, message = _error_fields(data)
    if not message:
        message = body_excerpt(body)
    request_id = data.get("request_id") if data else None
    if not isinstance(request_id, str):
        request_id = next((v for k, v in headers.items() if k.lower() == "request-id"), None)
    return http_error(
        status,
        headers,
        message,
        error_class=_ERROR_CLASSES.get(kind) if kind else None,
        code=kind,
        request_id=request_id,
    )


class AnthropicCodec:
    name = "anthropic"
    encode = staticmethod(encode)
    stream_parser = staticmethod(AnthropicStreamParser)
    parse_body = staticmethod(parse_body)
    error_from_http = staticmethod(error_from_http)


codec: Codec = AnthropicCodec()
