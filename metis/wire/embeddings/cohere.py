"""Cohere's embed API v2 (``POST /v2/embed``, docs.cohere.com/reference/embed), and the same
body through Bedrock's InvokeModel (without ``model``; docs.aws.amazon.com/bedrock model
parameters, Cohere Embed).

``input_type`` is required by every v3+ model; a call that names none embeds documents. Images
go as ``inputs: [{content: [{type: image_url, image_url: {url: <data URL>}}]}]`` (embed-v4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.model.embeddings import ImageInput
from metis.wire.embeddings.base import EmbedBatch, EmbedCodec, Embedded, tokens, vectors
from metis.wire.read import malformed, optional_object

INPUT_TYPES = {
    "query": "search_query",
    "document": "search_document",
    "classification": "classification",
    "clustering": "clustering",
}


def cohere_body(batch: EmbedBatch, input_types: Mapping[str, str]) -> dict[str, Any]:
    body: dict[str, Any] = {
        "input_type": input_types.get(batch.input_type or "document", "search_document"),
        "embedding_types": ["float"],
        "truncate": "END" if batch.truncate else "NONE",
    }
    if batch.has_images:
        body["inputs"] = [{"content": [_part(item)]} for item in batch.inputs]
    else:
        body["texts"] = list(batch.texts)
    if batch.dimensions is not None:
        body["output_dimension"] = batch.dimensions
    return body


def _part(item: str | ImageInput) -> dict[str, Any]:
    if isinstance(item, ImageInput):
        return {"type": "image_url", "image_url": {"url": item.data_url}}
    return {"type": "text", "text": item}


def cohere_vectors(body: dict[str, Any], count: int) -> list[list[float]]:
    """v3 answers ``embeddings: [[...]]``; v4 and ``embedding_types`` ``{float: [[...]]}``."""
    found = body.get("embeddings")
    if found.__class__ is dict:
        return vectors(found.get("float"), "embeddings.float", count)
    if found.__class__ is list:
        return vectors(found, "embeddings", count)
    raise malformed("embeddings", "a list of vectors or {float: [...]}", found)


class CohereEmbeddings(EmbedCodec):
    name = "cohere"
    input_types = INPUT_TYPES
    takes_images = True
    truncates = True
    max_inputs = 96

    def encode(self, batch: EmbedBatch) -> dict[str, Any]:
        return {"model": batch.model, **cohere_body(batch, self.input_types)}

    def decode(
        self, body: dict[str, Any], headers: Mapping[str, str], batch: EmbedBatch
    ) -> Embedded:
        meta = optional_object(body, "meta", "response") or {}
        billed = optional_object(meta, "billed_units", "meta") or {}
        return Embedded(
            cohere_vectors(body, len(batch.inputs)),
            tokens(billed.get("input_tokens"), "meta.billed_units.input_tokens", self.name),
        )
