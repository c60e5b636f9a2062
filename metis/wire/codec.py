"""What a provider's wire format must supply, and where stacks find it by name.

A codec is sans-IO: pure code over dicts and bytes, testable without a network or an event
loop. ``encode`` makes the provider's JSON body from a canonical request; a parser turns the
provider's objects (SSE payloads, NDJSON lines or one JSON body) into canonical events by
driving a :class:`~metis.wire.builder.MessageBuilder`, and returns the events each object
made (``builder.take()``); ``error_from_http`` turns a non-2xx answer into a classified
:class:`~metis.errors.AdapterError`. :class:`~metis.wire.response_reader.ResponseReader` drives
a codec over one response.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from metis.errors import CapabilityError, StackError

if TYPE_CHECKING:  # the codecs load the model and the builder; naming a codec does not
    from metis.errors import AdapterError
    from metis.model.content import ProviderRaw
    from metis.model.events import StreamEvent
    from metis.model.request import CanonicalRequest
    from metis.model.response import StopReason
    from metis.wire.builder import MessageBuilder


class EncodeContext(Protocol):
    """What encoding needs of the call in progress (:class:`metis.pipeline.Call` is one): who
    is called, and where to report what the provider cannot take."""

    @property
    def request_id(self) -> str: ...

    @property
    def provider(self) -> str:
        """The adapter's name."""

    @property
    def model(self) -> str:
        """The canonical model id (``provider:name``)."""

    @property
    def wire_model(self) -> str:
        """The provider's name for the model."""

    def produced(self, origin: ProviderRaw | None) -> bool:
        """Whether content recorded as made by ``origin`` was made by this provider and model."""

    def warn_dropped(
        self, block_type: str, reason: str, message_id: str | None = None, **extra: Any
    ) -> None:
        """Report content the provider cannot take (it is left out of the request)."""


CANNOT_SERVE = "cannot serve this request: "
"""What a CapabilityError of a request the model or its wire cannot serve says before why."""


def refuse_request(call: EncodeContext, reason: str) -> NoReturn:
    """The CapabilityError for what this wire cannot carry of the request (a server tool, a
    tool's option), raised before anything is sent."""
    raise CapabilityError(
        f"{call.model} {CANNOT_SERVE}{reason}", provider=call.provider, request_id=call.request_id
    )


class StreamParser(Protocol):
    def feed(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        """Take one provider object; return the canonical events it made. An error object
        from the provider raises the matching AdapterError."""

    def end(self) -> Sequence[StreamEvent]:
        """The body ended: finish the message, or raise ProtocolError if it was cut short.

        A parser may also have ``end_marked()``, called instead when the body ended with its
        framing's own end marker (OpenAI's ``[DONE]``): the server said the reply is whole,
        so a message it never gave a stop reason ends all the same."""

    def interrupt(self, reason: StopReason) -> Sequence[StreamEvent]:
        """The reply was cut short (cancelled, or failed after it began): end the message
        with ``reason`` and what arrived, returning its last events."""


class Codec(Protocol):
    name: str

    def encode(self, request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]: ...

    def stream_parser(self, builder: MessageBuilder) -> StreamParser: ...

    def parse_body(self, body: dict[str, Any], builder: MessageBuilder) -> Sequence[StreamEvent]:
        """A whole non-streamed response: the same events a stream would give, finished."""

    def error_from_http(
        self, status: int, headers: Mapping[str, str], body: bytes
    ) -> AdapterError: ...


_LAZY: dict[str, str] = {
    "anthropic": "metis.wire.anthropic:codec",
    "bedrock_anthropic": "metis.wire.anthropic.bedrock:codec",
    "bedrock_converse": "metis.wire.bedrock_converse:codec",
    "openai_chat": "metis.wire.openai_chat:codec",
    "openai_responses": "metis.wire.openai_responses:codec",
    "ollama": "metis.wire.ollama:codec",
    "schema": "metis.wire.schema.schema_codec:codec",
}
_CODECS: dict[str, Any] = {}
_SETTINGS_CHECKS: dict[str, str] = {
    "openai_responses": "metis.wire.responses_settings:check_settings",
    "schema": "metis.wire.schema.compiled:load_settings",
}
"""Codecs whose settings can be checked without loading the codec (the others are built)."""


def rules_name(codec: str, settings: Mapping[str, Any] | None) -> str:
    """The pre-send rules of a dialect: the codec's name, or a configured codec's own name."""
    if settings and isinstance(settings.get("name"), str):
        return str(settings["name"])
    return codec


def register_codec(codec: Codec) -> Codec:
    _CODECS[codec.name] = codec
    return codec


def is_codec(name: str) -> bool:
    """Whether ``name`` is a registered codec (its module is not loaded to answer)."""
    return name in _CODECS or name in _LAZY


def check_codec_settings(name: str, settings: Mapping[str, Any]) -> None:
    """Raise what :func:`get_codec` would for ``settings``, loading the codec only when it has
    no check of its own (a StackError, or a ValidationError from its settings model)."""
    check = _SETTINGS_CHECKS.get(name)
    if check is None or name in _CODECS:
        get_codec(name, settings)
        return
    module, _, attr = check.partition(":")
    getattr(importlib.import_module(module), attr)(dict(settings))


def get_codec(name: str, settings: Mapping[str, Any] | None = None) -> Codec:
    """The codec registered as ``name``. A codec configured by its stack (the schema-driven
    one, say) is registered as a factory, and ``settings`` from the stack YAML are its
    arguments; a plain codec takes none."""
    if name not in _CODECS:
        if name not in _LAZY:
            known = ", ".join(sorted({*_CODECS, *_LAZY}))
            raise StackError(f"unknown codec {name!r}; known codecs: {known}")
        module, _, attr = _LAZY[name].partition(":")
        _CODECS[name] = getattr(importlib.import_module(module), attr)
    codec = _CODECS[name]
    if isinstance(codec, CodecFactory):
        return codec.build(dict(settings or {}))
    if settings:
        configured = getattr(codec, "configured", None)  # a codec with optional settings
        if configured is None:
            raise StackError(f"codec {name!r} takes no settings, got: {', '.join(settings)}")
        with_settings: Codec = configured(**settings)
        return with_settings
    plain: Codec = codec
    return plain


class CodecFactory:
    """Registered in place of a codec when each stack configures its own instance."""

    def __init__(self, build: Any) -> None:
        self._build = build

    def build(self, settings: dict[str, Any]) -> Codec:
        codec: Codec = self._build(**settings)
        return codec
