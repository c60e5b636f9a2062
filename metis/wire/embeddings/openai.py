"""OpenAI's embeddings wire and the ones shaped like it: OpenAI and Azure OpenAI
(``POST /v1/embeddings``, platform.openai.com/docs/api-reference/embeddings), Mistral
(``output_dimension`` for the size, docs.mistral.ai/api embeddings), any OpenAI-compatible
server (vLLM, llama.cpp, TEI), and Voyage (``input_type``, ``truncation``,
``output_dimension``; docs.voyageai.com/reference/embeddings-api).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from metis.wire.embeddings.base import EmbedBatch, EmbedCodec, Embedded, indexed, only_texts, tokens
from metis.wire.read import object_value, optional_text


class OpenAIEmbeddings(EmbedCodec):
    """``{model, input: [str], encoding_format: "float", dimensions?}`` ->
    ``{data: [{index, embedding}], model, usage: {prompt_tokens}}``. OpenAI refuses more than
    2,048 inputs a request (the API reference)."""

    name = "openai"
    dimensions_key: ClassVar[str] = "dimensions"
    max_inputs = 2048

    def encode(self, batch: EmbedBatch) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": batch.model,
            "input": only_texts(self.name, batch),
            "encoding_format": "float",
        }
        if batch.dimensions is not None:
            body[self.dimensions_key] = batch.dimensions
        return body

    def decode(
        self, body: dict[str, Any], headers: Mapping[str, str], batch: EmbedBatch
    ) -> Embedded:
        usage = body.get("usage")
        used = object_value(usage, "usage") if usage is not None else {}
        counted = used.get("prompt_tokens", used.get("total_tokens"))
        return Embedded(
            indexed(body.get("data"), "data", len(batch.inputs)),
            tokens(counted, "usage.prompt_tokens", self.name),
            optional_text(body, "model", "response"),
        )


class MistralEmbeddings(OpenAIEmbeddings):
    """Mistral names the size ``output_dimension`` (codestral-embed; mistral-embed has one)."""

    name = "mistral"
    dimensions_key = "output_dimension"
    max_inputs = 512


class VoyageEmbeddings(OpenAIEmbeddings):
    """Voyage: ``input_type`` query/document, ``truncation`` (true by default on Voyage's
    side, so it is always sent), ``output_dimension``; 1,000 inputs a request."""

    name = "voyage"
    dimensions_key = "output_dimension"
    input_types = {"query": "query", "document": "document"}
    truncates = True
    max_inputs = 1000

    def encode(self, batch: EmbedBatch) -> dict[str, Any]:
        body = super().encode(batch)
        del body["encoding_format"]  # Voyage's is base64-or-null; float is its default
        body["truncation"] = batch.truncate
        if (kind := self.wire_input_type(batch.input_type)) is not None:
            body["input_type"] = kind
        return body
