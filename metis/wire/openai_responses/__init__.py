"""The OpenAI Responses codec (``POST /v1/responses``).

Encoding lives in :mod:`metis.wire.openai_responses.encode`, reading replies in
:mod:`metis.wire.openai_responses.read` (whose docstring tells how a reply is read).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from metis.errors import AdapterError
from metis.model.content import ContentBlock
from metis.model.events import StreamEvent
from metis.model.request import CanonicalRequest
from metis.wire.builder import MessageBuilder
from metis.wire.codec import CodecFactory, EncodeContext
from metis.wire.http_errors import openai_http_error
from metis.wire.openai_responses.encode import assistant_items, encode_request, silent
from metis.wire.openai_responses.errors import body_error, pending_error, responses_error
from metis.wire.openai_responses.read import ResponsesParser
from metis.wire.read import required_list
from metis.wire.responses_settings import check_settings

IncludeMode = Literal["auto", "always", "never"]


class OpenAIResponsesCodec:
    """``store``: keep replies on OpenAI's side (the API's default). The ``continuation``
    stage needs it to send ``previous_response_id``; without it every turn sends the whole
    transcript, and nothing is retained by OpenAI beyond its abuse-monitoring window.

    ``include_encrypted_reasoning``: ask for reasoning as encrypted content, which is what lets
    a reasoning item go back in a later request whether or not replies are stored. Models that
    do not reason (gpt-4o, gpt-4.1) refuse the request with a 400 when it is asked for, so
    ``auto`` asks exactly when the request asks for reasoning (``thinking``), which such a model
    refuses anyway; ``always`` suits a stack serving only reasoning models (gpt-5 and the
    o-series reason even unasked), ``never`` one that wants no reasoning back.

    ``file_urls``: the server fetches ``input_file`` parts by URL (Azure's does not)."""

    name = "openai_responses"
    supports_compaction = True

    def __init__(
        self,
        store: bool = True,
        include_encrypted_reasoning: IncludeMode = "auto",
        file_urls: bool = True,
    ) -> None:
        self.store = store
        self.include_encrypted_reasoning = include_encrypted_reasoning
        self.file_urls = file_urls

    def encode(self, request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
        mode = self.include_encrypted_reasoning
        return encode_request(
            request,
            call,
            store=self.store,
            include_encrypted_reasoning=mode == "always"
            or (mode == "auto" and request.thinking is not None),
            file_urls=self.file_urls,
        )

    def output_items(
        self, content: list[ContentBlock], call: EncodeContext
    ) -> list[dict[str, Any]]:
        """The input items a reply's content becomes when a later request sends it back."""
        return assistant_items(content, call.provider, "reply", silent)

    def stream_parser(self, builder: MessageBuilder) -> ResponsesParser:
        return ResponsesParser(builder)

    def parse_body(self, body: dict[str, Any], builder: MessageBuilder) -> Sequence[StreamEvent]:
        error = body.get("error")
        if error or body.get("status") == "failed":
            raise body_error({"error": error})
        if (pending := pending_error(body)) is not None:
            raise pending
        required_list(body, "output", "response")
        ResponsesParser(builder).finish(body)  # every item is one it has not seen
        return builder.take()

    def error_from_http(self, status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
        return openai_http_error(status, headers, body, responses_error)


def _build(**settings: Any) -> OpenAIResponsesCodec:
    check_settings(settings)
    return OpenAIResponsesCodec(**settings)


codec = CodecFactory(_build)
"""Registered in ``metis.wire.codec``; a stack may set ``store``,
``include_encrypted_reasoning`` and ``file_urls`` in its ``codec_settings``."""
