"""The OpenAI Responses codec (``POST /v1/responses``).

Encoding lives in :mod:`metis.providers.openai_responses_encode`. This module reads replies.

A reply is a list of output items, each announced by ``response.output_item.added`` and
closed by ``response.output_item.done``, with the item's ``output_index`` on every event in
between; the parser uses that index as the builder's key. ``message`` items give text
(``output_text`` and ``refusal`` parts), ``function_call`` items tool calls, ``reasoning``
items thinking: the summary text (its parts joined by a blank line) with the encrypted
content as the signature, so ``thinking_filter`` sends it back only to the model that made it.
Every other item (web search, file search, MCP, code interpreter, image generation, tool
search, whatever comes next) has no canonical form: it is dropped whole with one WARN, and
all its events are ignored.

As each item is done, its block gets the item it came from in ``provider_raw.data`` (item
``id``, a message's ``phase``, a reasoning item's summary parts, a call's ``call_id``) for a
faithful round trip, kept however the reply ends (a cancel or an error too); when the reply
completes, a reasoning item whose following item was not kept is marked ``unpaired``.

The final response's output is matched to the items the stream announced by ``output_index``
(its position in ``output``), then by item ``id``, so an item streamed once is never added
twice, whatever gaps the stream's indices had; only items the stream never announced are read
from it.

Stop reasons: there is no finish reason. A ``completed`` reply stops with ``refusal`` when it
refused, ``tool_use`` when it holds a function call, else ``end_turn``, all with raw
``"completed"``, whatever other items it holds (a dropped item never decides the stop: a reply
that ends on a compaction item ends its turn like any other). An ``incomplete`` reply stops by
its ``incomplete_details.reason`` (``max_output_tokens`` -> ``max_tokens``, ``content_filter``
-> ``content_filter``, others provider-specific), which is also the raw string.
``response.failed`` and ``error`` events raise classified errors. Usage:
``input_tokens`` includes cached and cache-written tokens; canonical input is the rest. As the
recordings show, ``encrypted_content`` differs between ``.added``, ``.done`` and the final
response (a fresh encryption each time); the one on ``.done`` is kept, as clients send back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from metis.errors import AdapterError, ErrorClass, ProtocolError, StackError
from metis.model.content import ContentBlock
from metis.model.events import MessageComplete
from metis.model.request import CanonicalRequest
from metis.model.response import StopKind, StopReason
from metis.pipeline.call import Call
from metis.providers.codec import CodecFactory
from metis.providers.http_errors import body_excerpt, http_error, json_body, openai_error_fields
from metis.providers.message_builder import MessageBuilder
from metis.providers.openai_responses_encode import assistant_items, encode_request, silent
from metis.providers.openai_responses_items import CANONICAL_ITEMS, with_items
from metis.providers.wire_read import token_count

_TEXT_DELTA = "response.output_text.delta"
_INCOMPLETE = {"max_output_tokens": StopKind.MAX_TOKENS, "content_filter": StopKind.CONTENT_FILTER}
_CODE_CLASSES = {
    "rate_limit_exceeded": ErrorClass.RATE_LIMIT,
    "insufficient_quota": ErrorClass.RATE_LIMIT,  # not retryable: see _error
    "context_length_exceeded": ErrorClass.CONTEXT_OVERFLOW,
    "invalid_api_key": ErrorClass.AUTH,
    "server_error": ErrorClass.SERVER_ERROR,
    "server_is_overloaded": ErrorClass.OVERLOADED,
    "vector_store_timeout": ErrorClass.SERVER_ERROR,
}
_TYPE_CLASSES = {
    "invalid_request_error": ErrorClass.INVALID_REQUEST,
    "server_error": ErrorClass.SERVER_ERROR,
    "rate_limit_error": ErrorClass.RATE_LIMIT,
}
_MALFORMED = (KeyError, TypeError, IndexError, AttributeError, ValueError)

IncludeMode = Literal["auto", "always", "never"]


class _Everything(set[Any]):
    def __contains__(self, item: object) -> bool:
        return True


_EVERYTHING = _Everything()


class OpenAIResponsesCodec:
    """``store``: keep replies on OpenAI's side (the API's default). The ``continuation``
    stage needs it to send ``previous_response_id``; without it every turn sends the whole
    transcript, and nothing is retained by OpenAI beyond its abuse-monitoring window.

    ``include_encrypted_reasoning``: ask for reasoning as encrypted content, which is what lets
    a reasoning item go back in a later request whether or not replies are stored. Models that
    do not reason (gpt-4o, gpt-4.1) refuse the request with a 400 when it is asked for, so
    ``auto`` asks exactly when the request asks for reasoning (``thinking``), which such a model
    refuses anyway; ``always`` suits a stack serving only reasoning models (gpt-5 and the
    o-series reason even unasked), ``never`` one that wants no reasoning back."""

    name = "openai_responses"

    def __init__(
        self, store: bool = True, include_encrypted_reasoning: IncludeMode = "auto"
    ) -> None:
        self.store = store
        self.include_encrypted_reasoning = include_encrypted_reasoning

    def encode(self, request: CanonicalRequest, call: Call) -> dict[str, Any]:
        mode = self.include_encrypted_reasoning
        return encode_request(
            request,
            call,
            store=self.store,
            include_encrypted_reasoning=mode == "always"
            or (mode == "auto" and request.thinking is not None),
        )

    def output_items(self, content: list[ContentBlock], call: Call) -> list[dict[str, Any]]:
        """The input items a reply's content becomes when a later request sends it back."""
        return assistant_items(content, call.provider, "reply", silent)

    def stream_parser(self, builder: MessageBuilder) -> ResponsesParser:
        return ResponsesParser(builder)

    def parse_body(self, body: dict[str, Any], builder: MessageBuilder) -> None:
        error = body.get("error")
        if error or body.get("status") == "failed":
            raise _error(None, {}, *(openai_error_fields({"error": error}) or ("", None, None)))
        try:
            if not isinstance(body["output"], list):
                raise TypeError(f"output is a {type(body['output']).__name__}, not a list")
            builder.start(body.get("id"), body.get("model"))
            ResponsesParser(builder).finish(body)  # every item is one it has not seen
        except _MALFORMED as exc:
            raise _malformed("response body", exc, body) from None

    def error_from_http(self, status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
        data = json_body(body)
        info = openai_error_fields(data) if data is not None else None
        if info is None:  # HTML from a proxy, an empty body, JSON of some other shape
            info = (body_excerpt(body) if body.strip() else "", None, None)
        request_id = next((v for k, v in headers.items() if k.lower() == "x-request-id"), None)
        return _error(status, headers, *info, request_id=request_id)


class ResponsesParser:
    """Feeds Responses stream events (parsed SSE ``data:`` objects) to a builder."""

    __slots__ = ("_builder", "_done", "_dropped", "_fed", "_ids", "_items", "_refused", "_tools")

    def __init__(self, builder: MessageBuilder) -> None:
        self._builder = builder
        self._done = False
        self._items: dict[int, tuple[str, dict[str, Any] | None]] = {}  # index -> (type, raw)
        self._ids: dict[int, Any] = {}  # index -> item id
        self._dropped: set[Any] = set()  # indices of items outside the canonical model
        self._fed: set[Any] = set()  # function calls whose arguments arrived in fragments
        self._tools = False
        self._refused = False

    def feed(self, obj: dict[str, Any]) -> None:
        try:
            if obj["type"] == _TEXT_DELTA:  # the hot path
                index, delta = obj["output_index"], obj["delta"]
                if delta.__class__ is str and index not in self._dropped:
                    self._builder.text(index, delta)
                    return
            self._event(obj)
        except _MALFORMED as exc:
            raise _malformed(f"{obj.get('type')!r} event", exc, obj) from None

    def end(self) -> None:
        if not self._done:
            raise ProtocolError("openai_responses stream ended before the response did")

    def _event(self, obj: dict[str, Any]) -> None:
        kind = obj["type"]
        builder = self._builder
        if self._done:
            return  # nothing belongs to a reply after its response.completed
        if kind.startswith("response.output_item."):
            index, item = obj["output_index"], obj["item"]
            if kind == "response.output_item.added":
                self._added(index, item)
            elif kind == "response.output_item.done":
                self._finished(index, item)
            return
        index = obj.get("output_index")
        if index in self._dropped:
            return
        if kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            builder.thinking(index, _str(obj["delta"]))
        elif kind == "response.function_call_arguments.delta":
            if fragment := _str(obj["delta"]):
                builder.tool_input(index, fragment)
                self._fed.add(index)
        elif kind == "response.reasoning_summary_part.added":
            if obj.get("summary_index") and builder.has_block(index):
                builder.thinking(index, "\n\n")
        elif kind == _TEXT_DELTA:  # reached only when the hot path refused it
            builder.text(index, _str(obj["delta"]))
        elif kind == "response.refusal.delta":
            builder.text(index, _str(obj["delta"]))
            self._refused = True
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            response = obj["response"]
            builder.start(response.get("id"), response.get("model"))
        elif kind in ("response.completed", "response.incomplete"):
            self.finish(obj["response"])
        elif kind == "response.failed":
            error = obj["response"].get("error")
            raise _error(None, {}, *(openai_error_fields({"error": error}) or ("", None, None)))
        elif kind == "error":
            raise _error(None, {}, *(openai_error_fields(obj) or (_dump(obj), None, None)))
        # content parts, *.done events, annotations and the events of dropped items: nothing

    def item(self, index: int, item: dict[str, Any]) -> None:
        """A whole item, as a non-streamed body (or a stream's final response) gives it."""
        self._added(index, item)
        self._finished(index, item)

    def _added(self, index: int, item: dict[str, Any]) -> None:
        if index in self._items:
            return
        kind = _str(item["type"])
        builder = self._builder
        self._items[index] = (kind, None)
        self._ids[index] = item.get("id")
        if kind == "function_call":
            builder.tool_start(index, _str(item["call_id"]), _str(item["name"]))
            self._tools = True
            if arguments := _arguments(item.get("arguments")):
                builder.tool_input(index, arguments)
                self._fed.add(index)
        elif kind not in CANONICAL_ITEMS:
            self._dropped.add(index)
            reason = f"OpenAI Responses {kind!r} items have no canonical form"
            builder.warn(kind, reason, message_id=builder.message_id)

    def _finished(self, index: int, item: dict[str, Any]) -> None:
        self._added(index, item)  # a server that skipped .added
        kind, raw = self._items[index]
        if index in self._dropped or raw is not None:
            return
        builder = self._builder
        if kind == "message":
            if not builder.has_block(index):  # no deltas came: the item holds the text
                for part in item.get("content") or ():
                    text = part.get("text") if part["type"] == "output_text" else None
                    if part["type"] == "refusal":
                        text, self._refused = part.get("refusal"), True
                    if text:
                        builder.text(index, _str(text))
            raw = {"id": item.get("id"), "phase": item.get("phase")}
        elif kind == "reasoning":
            summary, content = item.get("summary") or [], item.get("content") or []
            if not builder.has_block(index):
                texts = [p["text"] for p in (*summary, *content) if p.get("text")]
                if texts:
                    builder.thinking(index, _str("\n\n".join(texts)))
            if signature := item.get("encrypted_content"):
                builder.thinking_signature(index, _str(signature))
            raw = {"id": item.get("id"), "summary": summary, "content": content or None}
        else:  # function_call
            if index not in self._fed and (arguments := _arguments(item.get("arguments"))):
                builder.tool_input(index, arguments)
            builder.close(index)
            raw = {"id": item.get("id"), "call_id": item.get("call_id")}
        self._items[index] = (kind, raw)
        canonical = builder.index_of(index)
        if canonical is not None:  # kept now, so an early end (cancel, error) keeps it too
            builder.keep_raw(canonical, {k: v for k, v in raw.items() if v is not None})

    def finish(self, response: dict[str, Any]) -> None:
        builder = self._builder
        builder.start(response.get("id"), response.get("model"))
        for position, item in enumerate(response.get("output") or ()):
            if not self._seen(position, item):  # an item the stream never announced
                index = position if position not in self._items else max(self._items) + 1
                self.item(index, item)
        _usage(builder, response.get("usage"))
        builder.stop(self._stop_reason(response))
        builder.finish()
        self._done = True
        final = builder.out[-1]
        if isinstance(final, MessageComplete):
            final.final_content = with_items(
                final.final_content, self._items, self._dropped, builder
            )
        self._dropped = _EVERYTHING  # the hot path now hands every delta to _event

    def _seen(self, position: int, item: dict[str, Any]) -> bool:
        """Whether the final response's ``item`` at ``position`` is one the stream gave."""
        item_id = item.get("id")
        if item_id is None:
            return position in self._items  # nothing but its position to go by
        if position in self._items and self._ids[position] in (None, item_id):
            return True
        return item_id in self._ids.values()

    def _stop_reason(self, response: dict[str, Any]) -> StopReason:
        status = response.get("status")
        if status == "completed":
            if self._refused:
                return StopReason(kind=StopKind.REFUSAL, raw=status)
            if self._tools:
                return StopReason(kind=StopKind.TOOL_USE, raw=status)
            return StopReason(kind=StopKind.END_TURN, raw=status)
        if status == "incomplete":
            reason = (response.get("incomplete_details") or {}).get("reason")
            raw = reason if isinstance(reason, str) else status
            return StopReason(kind=_INCOMPLETE.get(raw, StopKind.PROVIDER_SPECIFIC), raw=raw)
        if status == "cancelled":
            return StopReason(kind=StopKind.CANCELLED, raw=status)
        raw_status = status if isinstance(status, str) else None
        return StopReason(kind=StopKind.PROVIDER_SPECIFIC, raw=raw_status)


def _build(**settings: Any) -> OpenAIResponsesCodec:
    allowed: dict[str, tuple[Any, ...]] = {
        "store": (True, False),
        "include_encrypted_reasoning": ("auto", "always", "never"),
    }
    for key, value in settings.items():
        if key not in allowed:
            raise StackError(
                f"codec 'openai_responses': unknown setting {key!r} (its settings: "
                f"{', '.join(allowed)})"
            )
        if value not in allowed[key] or type(value) is not type(allowed[key][0]):
            choices = ", ".join(str(v).lower() for v in allowed[key])
            raise StackError(f"codec 'openai_responses': {key} is one of {choices}")
    return OpenAIResponsesCodec(**settings)


codec = CodecFactory(_build)
"""Registered in ``metis.providers.codec``; a stack may set ``store`` and
``include_encrypted_reasoning`` in ``encode``'s ``settings``."""


def _usage(builder: MessageBuilder, usage: Any) -> None:
    """Canonical input counts uncached input only; OpenAI's ``input_tokens`` counts it all."""
    if not usage:
        return
    details = usage.get("input_tokens_details") or {}
    provider = builder.provider
    cached = token_count(details.get("cached_tokens") or 0, "cached_tokens", provider)
    written = token_count(details.get("cache_write_tokens") or 0, "cache_write_tokens", provider)
    total = token_count(usage.get("input_tokens") or 0, "input_tokens", provider)
    builder.usage(
        input_tokens=max(0, total - cached - written),
        output_tokens=usage.get("output_tokens") or 0,
        cached_input_tokens=cached,
        cache_creation_input_tokens=written,
    )


def _arguments(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, dict):  # a few compatible servers send an object, not a string
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    raise TypeError(f"function call arguments are a {type(value).__name__}, not a string")


def _str(value: Any) -> str:
    if value.__class__ is not str:
        raise TypeError(f"expected a string, got {type(value).__name__}")
    return str(value)


def _malformed(what: str, exc: Exception, obj: Any) -> ProtocolError:
    detail = f"missing key {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
    return ProtocolError(f"openai_responses sent a malformed {what} ({detail}): {_dump(obj)}")


def _dump(obj: Any) -> str:
    return json.dumps(obj, default=repr)[:200]


# Errors ------------------------------------------------------------------------------------


def _error(
    status: int | None,
    headers: Mapping[str, str],
    message: str,
    code: str | None,
    kind: str | None,
    request_id: str | None = None,
) -> AdapterError:
    """An HTTP status decides unless the code says more; in a stream, the type decides."""
    cls = _CODE_CLASSES.get(code or "")
    if cls is None and status is None:
        cls = _TYPE_CLASSES.get(kind or "")
        if cls is None and (code or "").startswith(("invalid_", "unsupported_")):
            cls = ErrorClass.INVALID_REQUEST
    return http_error(
        status,
        headers,
        message
        or ("" if status else f"openai_responses reported {code or kind or 'an error'} alone"),
        error_class=cls,
        code=code or kind,
        request_id=request_id,
        retryable=False if code == "insufficient_quota" else None,  # out of credit
    )
