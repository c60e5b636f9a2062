"""The schema-driven codec (the package's docstring, :mod:`metis.wire.schema`, describes its
settings): a :class:`~metis.wire.codec.Codec` whose wire format is its settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from metis.errors import AdapterError, CapabilityError
from metis.model.events import StreamEvent
from metis.model.request import CanonicalRequest
from metis.wire import json_limits
from metis.wire.builder import MessageBuilder
from metis.wire.codec import CodecFactory, EncodeContext
from metis.wire.http_errors import body_excerpt, http_error, own_status
from metis.wire.knobs.fit import report_one_call_a_turn
from metis.wire.schema import gemini_tools, gemini_turns
from metis.wire.schema.compiled import Compiled, load_settings
from metis.wire.schema.encode import Encoder
from metis.wire.schema.parse import SchemaParser
from metis.wire.schema.paths import first, resolve, seconds
from metis.wire.schema.usual import UsualChunk


class SchemaCodec:
    """A :class:`~metis.wire.codec.Codec` whose wire format is its settings."""

    def __init__(self, **settings: Any) -> None:
        self.schema: Compiled = load_settings(settings)
        self.name = self.schema.settings.name
        self._encoder = Encoder(self.schema)
        stream = self.schema.stream
        lone = stream.lone_text_key
        self._usual = UsualChunk.of(
            stream,
            lone if lone not in self.schema.messages.echo else None,
            self.schema.error_path,
            gemini_tools.READ_APART if self.name == "gemini" else None,
        )

    def encode(self, request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
        body = self._encoder.encode(request, call)
        if self.name == "gemini":
            gemini_turns.anchor_calls(body, call)
        if not self.schema.body.uses("parallel_tool_calls"):
            report_one_call_a_turn(request, call)
        if request.server_tools:
            if self.name != "gemini":
                raise CapabilityError(
                    f"{call.model} cannot serve this request: {self.name} runs no server tools",
                    provider=call.provider,
                    request_id=call.request_id,
                )
            gemini_tools.add_declarations(body, request, call)
        return body

    def stream_parser(self, builder: MessageBuilder) -> SchemaParser:
        return self._parser(builder, streamed=True)

    def parse_body(self, body: dict[str, Any], builder: MessageBuilder) -> Sequence[StreamEvent]:
        parser = self._parser(builder, streamed=False)
        try:  # the events stay in the builder until the end (the usage, read last) is read
            parser.feed(body)
            return parser.end()
        except AdapterError:
            parser.read_pending_usage()  # for the message the reader ends with the error
            raise

    def error_from_http(self, status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
        data = _json(body)
        error = self._error(data, status, headers)
        if error is not None:
            return error
        return http_error(status, headers, body_excerpt(body) if body.strip() else "")

    def _parser(self, builder: MessageBuilder, streamed: bool) -> SchemaParser:
        s = self.schema
        return SchemaParser(
            self.name,
            s.stream if streamed else s.response,
            s.messages.echo,
            s.error_path,
            self._stream_error,
            builder,
            streamed,
            gemini_tools.GeminiParts() if self.name == "gemini" else None,
            self._usual if streamed else None,
        )

    def _stream_error(self, obj: dict[str, Any]) -> AdapterError:
        """An error object inside a 200 body or stream: no HTTP status."""
        error = self._error(obj, None, {})
        assert error is not None  # the parser calls this only when the error object is there
        return error

    def _error(
        self, data: Any, status: int | None, headers: Mapping[str, str]
    ) -> AdapterError | None:
        s = self.schema
        error = resolve(data, s.error_path) if isinstance(data, dict) else None
        if not isinstance(error, dict):
            return None
        message = resolve(error, s.error_message)
        codes = [first(error, path) for path in s.error_codes]
        codes = [str(code) for code in codes if isinstance(code, str | int) and code != ""]
        classes = s.settings.error_schema.classes
        decisive = next((code for code in codes if code in classes), None)
        cls = classes[decisive] if decisive is not None else None
        if status is None:  # in a 200 body or stream: the status it says it is, if any
            status = own_status(error)  # (Gemini's numeric ``code``; docs/contract.md §4)
        request_id = None
        header = s.settings.error_schema.request_id_header
        if header:
            request_id = next((v for k, v in headers.items() if k.lower() == header.lower()), None)
        result = http_error(
            status,
            headers,
            message if isinstance(message, str) else "",
            error_class=cls,
            code=decisive or (codes[0] if codes else None),
            request_id=request_id,
        )
        if result.retry_after_seconds is None and s.error_retry is not None:
            result.retry_after_seconds = seconds(first(error, s.error_retry))
        return result


def _json(body: bytes) -> Any:
    """The JSON error body; a list (some Google endpoints wrap errors in one) gives its first
    item."""
    try:
        value = json_limits.loads(body)
    except ValueError:  # invalid JSON or UTF-8, NaN, nesting too deep: no JSON error body
        return None
    if isinstance(value, list) and value and isinstance(value[0], dict):
        return value[0]
    return value


codec = CodecFactory(SchemaCodec)
