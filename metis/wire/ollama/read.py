"""Reading Ollama's native chat answers (``POST /api/chat``, NDJSON when streamed).

Sans-IO. The parser reads one JSON object per line. As the recordings show, text comes as
``message.content`` fragments, reasoning as ``message.thinking``, tool calls whole in one line
(with an ``id`` only on newer servers: one is minted when absent), and the last line has
``done: true``, ``done_reason`` and the token counts. An ``{"error": ...}`` line inside a 200
stream is raised classified as the same failure answered with its HTTP status is: by its text,
and by a ``status`` the line carries. A message field not named above (``images`` a model
made, ...) is kept whole as an opaque block (docs/contract.md §8). Every value read from the
server is checked by :mod:`metis.wire.read`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from metis.core.ids import new_ulid
from metis.errors import AdapterError, ErrorClass, ProtocolError, redact
from metis.model.events import StreamEvent
from metis.model.response import StopKind, StopReason
from metis.wire.builder import MessageBuilder
from metis.wire.http_errors import body_excerpt, http_error, json_body, says_context_overflow
from metis.wire.opaque import merge_fragment
from metis.wire.read import (
    counts_of,
    malformed,
    object_value,
    optional_list,
    optional_object,
    required_object,
    required_text,
    text_value,
    token_count,
)

_TEXT, _THINKING = "text", "thinking"
_READ = frozenset({"role", "content", "thinking", "tool_calls", "tool_name"})
_NOTHING: tuple[Any, ...] = (None, "", [], {})
_CAPABILITY = re.compile(
    r"does not support (tools|thinking|chat|completion|generate|insert|vision|images)"
    r"|missing data required for image input",
    re.IGNORECASE,
)
_MISSING_MODEL = re.compile(r"model ['\"]([^'\"]+)['\"] not found", re.IGNORECASE)
_RATE_LIMITED = re.compile(r"too many requests|rate.?limit|usage limit|\b429\b", re.I)
"""What Ollama (its cloud models: "you've reached your weekly usage limit") answers with a 429."""
_OUT_OF_MEMORY = re.compile(r"requires more system memory|out of memory|unable to allocate", re.I)


# Parsing -----------------------------------------------------------------------------------


class OllamaStreamParser:
    """Feeds Ollama's chat objects (NDJSON lines, or one whole body) to a builder."""

    __slots__ = ("_builder", "_calls", "_done", "_opaque")

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._calls = 0
        self._done = False
        self._opaque: dict[str, dict[str, Any]] = {}  # message fields with no canonical form

    def feed(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        builder = self._builder
        message = obj.get("message")
        if message.__class__ is dict and not self._done and obj.get("done") is False:
            content = message.get("content")
            if len(message) == 2 and content.__class__ is str:
                if not builder.started:
                    builder.start(None, _model(obj))
                if content:
                    return builder.take_text(_TEXT, content)  # the hot path: a bare fragment
                return builder.take()
        self._object(obj)
        return builder.take()

    def end(self) -> Sequence[StreamEvent]:
        if not self._done:
            raise ProtocolError(
                "ollama stream ended before its done line", provider=self._builder.provider
            )
        return self._builder.take()

    def interrupt(self, reason: StopReason) -> Sequence[StreamEvent]:
        self._builder.finish(reason)
        return self._builder.take()

    def _object(self, obj: dict[str, Any]) -> None:
        if "error" in obj:
            status = _line_status(obj.get("status"))
            raise _error(status, {}, obj.get("error"), provider=self._builder.provider)
        if self._done:
            raise ProtocolError(
                f"ollama sent a line after its done line: {_dump(obj)}",
                provider=self._builder.provider,
            )
        builder = self._builder
        if not builder.started:
            builder.start(None, _model(obj))
        message = optional_object(obj, "message", "line")
        if message is not None:
            self._message(message)
        if obj.get("done") is True:
            self._finish(obj)

    def _message(self, message: dict[str, Any]) -> None:
        builder = self._builder
        thinking = message.get("thinking")
        if thinking:
            builder.thinking(_THINKING, text_value(thinking, "message.thinking"))
        content = message.get("content")
        if content:
            builder.text(_TEXT, text_value(content, "message.content"))
        for item in optional_list(message, "tool_calls", "message"):
            self._tool_call(object_value(item, "message.tool_calls[]"))
        for field, value in message.items():
            if field not in _READ and value not in _NOTHING:
                self._opaque_field(field, value)

    def _opaque_field(self, field: str, value: Any) -> None:
        """A message field this codec does not know (images a model made, ...): kept whole
        (its streamed pieces merged), to go back only to this provider."""
        item = self._opaque.get(field)
        if item is None:
            item = self._opaque[field] = {field: copy.deepcopy(value)}
        else:
            merge_fragment(item, {field: value})
        self._builder.opaque(("field", field), field, item)

    def _tool_call(self, item: dict[str, Any]) -> None:
        function = required_object(item, "function", "message.tool_calls[]")
        name = required_text(function, "name", "message.tool_calls[].function")
        if not name:
            raise ProtocolError("message.tool_calls[].function.name is empty")
        tool_id = item.get("id")
        if not isinstance(tool_id, str) or not tool_id:
            tool_id = f"call_{new_ulid()}"  # older servers issue no ids
        key = ("tool", self._calls)
        self._calls += 1
        builder = self._builder
        builder.tool_start(key, tool_id, name)
        arguments = function.get("arguments")
        if isinstance(arguments, dict):
            raw = json.dumps(arguments, ensure_ascii=False, separators=(",", ":"))
            builder.tool_input(key, raw)
            builder.tool_end(key, arguments)
        elif isinstance(arguments, str):  # a JSON string, as compatible servers send
            builder.tool_input(key, arguments)
            builder.close(key)
        elif arguments is None:
            builder.tool_end(key, {})
        else:
            raise malformed("message.tool_calls[].function.arguments", "an object", arguments)

    def _finish(self, obj: dict[str, Any]) -> None:
        self._done = True
        prompt, output = obj.get("prompt_eval_count"), obj.get("eval_count")
        if prompt is not None or output is not None:
            with counts_of(self._builder):
                self._builder.usage(
                    _count(prompt, "prompt_eval_count"), _count(output, "eval_count"), 0, 0
                )
        self._builder.stop(stop_reason(obj.get("done_reason"), self._calls > 0))
        self._builder.finish()


def parse_body(body: dict[str, Any], builder: MessageBuilder) -> Sequence[StreamEvent]:
    """A non-streamed answer: one object, ``done: true``, through the same handling."""
    parser = OllamaStreamParser(builder)
    parser._object(body)
    if not builder.completed:
        raise ProtocolError(f"ollama answered without done: true: {_dump(body)}")
    return builder.take()


def stop_reason(raw: Any, called: bool) -> StopReason:
    """``stop`` is the end of the turn, or a tool turn when the message holds tool calls (a
    stop sequence also says ``stop``); ``length`` is the token limit; anything else (``load``,
    ``unload``, none at all from old servers) is provider-specific."""
    if raw is not None and raw.__class__ is not str:
        raise malformed("done_reason", "a string", raw)
    if raw == "length":
        return StopReason(kind=StopKind.MAX_TOKENS, raw=raw)
    if called and raw in ("stop", None):
        return StopReason(kind=StopKind.TOOL_USE, raw=raw)
    if raw == "stop":
        return StopReason(kind=StopKind.END_TURN, raw=raw)
    return StopReason(kind=StopKind.PROVIDER_SPECIFIC, raw=raw)


def _model(obj: dict[str, Any]) -> str | None:
    model = obj.get("model")
    return model if isinstance(model, str) else None


def _count(value: Any, field: str) -> int:
    if value is None:
        return 0
    if value.__class__ is not int:
        raise malformed(field, "a whole number", value)
    return token_count(value, field)


def _dump(obj: Any) -> str:
    return json.dumps(obj, default=repr, ensure_ascii=False)[:200]


# Errors ------------------------------------------------------------------------------------


def error_from_http(status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
    data = json_body(body)
    message = data.get("error") if data is not None else None
    if not isinstance(message, str):
        message = body_excerpt(body) if body.strip() else ""
    return _error(status, headers, message)


def _line_status(value: Any) -> int | None:
    """An error line's ``status`` (what Ollama answers with when the stream has not begun),
    when it is an HTTP error status."""
    return value if value.__class__ is int and 400 <= value <= 599 else None


def _error(
    status: int | None, headers: Mapping[str, str], raw: Any, provider: str | None = None
) -> AdapterError:
    """Ollama's errors are bare strings (``{"error": "..."}``); the text says what happened."""
    message = raw if isinstance(raw, str) else _dump(raw)
    cls: ErrorClass | None = None
    retryable: bool | None = None
    shown = message
    missing = _MISSING_MODEL.search(message)
    if _CAPABILITY.search(message):
        cls = ErrorClass.CAPABILITY
    elif missing or (status == 404 and "model" in message and "not found" in message):
        model = missing.group(1) if missing else "<model>"
        cls = ErrorClass.INVALID_REQUEST
        shown = f"{message}; pull it first: `ollama pull {model}`"
    elif "server busy" in message:
        cls = ErrorClass.OVERLOADED  # 503 when the server's request queue is full
    elif status is None and _RATE_LIMITED.search(message):
        cls = ErrorClass.RATE_LIMIT  # in a stream: no 429 to say it
    elif _OUT_OF_MEMORY.search(message):
        cls, retryable = ErrorClass.SERVER_ERROR, False  # the model does not fit: retrying won't
    elif status in (None, 400) and says_context_overflow(message):
        cls = ErrorClass.CONTEXT_OVERFLOW  # a 400 answered; inside a stream, the text alone
    error = http_error(
        status, headers, shown, error_class=cls, retryable=retryable, provider=provider
    )
    error.provider_message = redact(message)
    return error
