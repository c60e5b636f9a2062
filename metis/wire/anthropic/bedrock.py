"""Anthropic's Messages format on Bedrock's InvokeModel (``/model/{modelId}/invoke`` and
``/invoke-with-response-stream``).

The body is the Messages API's, with the model in the URL instead of the body, no ``stream``
field (the path says it) and ``anthropic_version: bedrock-2023-05-31`` (Bedrock's "Anthropic
Claude Messages API" page). A streamed answer is AWS event-stream frames whose ``chunk``
events carry each Anthropic event as base64 JSON in ``bytes``; they are unwrapped here and fed
to the Anthropic parser. Errors are AWS's (metis/wire/bedrock_converse/errors.py).
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from metis.errors import ProtocolError
from metis.model.events import StreamEvent
from metis.model.request import CanonicalRequest
from metis.model.response import StopReason
from metis.wire import anthropic, json_limits
from metis.wire.anthropic import read as anthropic_read
from metis.wire.bedrock_converse import errors as aws_errors
from metis.wire.builder import NO_EVENTS, MessageBuilder
from metis.wire.codec import Codec, EncodeContext
from metis.wire.json_limits import JSONLimitError

ANTHROPIC_VERSION = "bedrock-2023-05-31"


def encode(request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
    body = anthropic.encode(request, call)
    body.pop("model", None)
    body.pop("stream", None)
    return {"anthropic_version": ANTHROPIC_VERSION, **body}


class InvokeStreamParser:
    """Unwraps InvokeModelWithResponseStream ``chunk`` events for the Anthropic parser."""

    __slots__ = ("_inner", "_provider")

    def __init__(self, builder: MessageBuilder) -> None:
        self._inner = anthropic_read.AnthropicStreamParser(builder)
        self._provider = builder.provider

    def feed(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        chunk = obj.get("chunk")
        if chunk is None:
            return NO_EVENTS  # an event type newer than this codec
        return self._inner.feed(unwrap_chunk(chunk, self._provider))

    def end(self) -> Sequence[StreamEvent]:
        return self._inner.end()

    def interrupt(self, reason: StopReason) -> Sequence[StreamEvent]:
        return self._inner.interrupt(reason)


def unwrap_chunk(chunk: Any, provider: str) -> dict[str, Any]:
    """The provider event inside a ``chunk`` event's base64 ``bytes``."""
    data = chunk.get("bytes") if chunk.__class__ is dict else None
    event = _base64_json(data) if data.__class__ is str else _NOTHING
    if event is _NOTHING:
        raise ProtocolError(
            f"bedrock sent a chunk event that does not hold base64 JSON: {repr(chunk)[:200]}",
            provider=provider,
        )
    if not isinstance(event, dict):
        raise ProtocolError(
            f"bedrock sent a chunk holding a JSON {type(event).__name__}", provider=provider
        )
    return event


_NOTHING: Any = object()


def _base64_json(data: str) -> Any:
    """The JSON value ``data`` encodes in base64, or ``_NOTHING`` when it does not hold one."""
    try:
        decoded = base64.b64decode(data, validate=True)
    except ValueError:  # bad base64 (binascii.Error)
        return _NOTHING
    try:
        return json_limits.loads(decoded)
    except JSONLimitError as exc:  # what every other framing refuses (NaN, past 100 levels)
        raise ProtocolError(f"bedrock sent a chunk holding JSON metis refuses: {exc}") from None
    except ValueError:  # invalid JSON or UTF-8
        return _NOTHING


class BedrockAnthropicCodec:
    name = "bedrock_anthropic"
    encode = staticmethod(encode)
    stream_parser = staticmethod(InvokeStreamParser)
    parse_body = staticmethod(anthropic_read.parse_body)
    error_from_http = staticmethod(aws_errors.error_from_http)


codec: Codec = BedrockAnthropicCodec()
