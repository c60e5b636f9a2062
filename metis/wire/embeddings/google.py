"""Google's embedding wires.

- Gemini API: ``POST /v1beta/models/{model}:batchEmbedContents`` with
  ``{requests: [{model: "models/{model}", content: {parts}, taskType?,
  outputDimensionality?}]}`` -> ``{embeddings: [{values}]}`` (ai.google.dev/api/embeddings);
  it reports no token count, so the usage is estimated.
- Vertex AI: ``POST .../publishers/google/models/{model}:predict`` with
  ``{instances: [{content, task_type?}], parameters: {outputDimensionality?, autoTruncate}}``
  -> ``{predictions: [{embeddings: {values, statistics: {token_count}}}]}``
  (cloud.google.com/vertex-ai/generative-ai/docs/model-reference/text-embeddings-api).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any

from metis.errors import AdapterError, ErrorClass, ProtocolError
from metis.model.embeddings import ImageInput
from metis.wire.embeddings.base import (
    EmbedBatch,
    EmbedCodec,
    Embedded,
    generic_error,
    only_texts,
    tokens,
    vector,
)
from metis.wire.http_errors import delay_seconds, http_error, json_body
from metis.wire.read import malformed, object_value

_CLASSES = {
    "API_KEY_INVALID": ErrorClass.AUTH,
    "PERMISSION_DENIED": ErrorClass.AUTH,
    "UNAUTHENTICATED": ErrorClass.AUTH,
    "RESOURCE_EXHAUSTED": ErrorClass.RATE_LIMIT,
    "UNAVAILABLE": ErrorClass.OVERLOADED,
    "INTERNAL": ErrorClass.SERVER_ERROR,
    "DEADLINE_EXCEEDED": ErrorClass.SERVER_ERROR,
}


def google_error(status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
    """A google.rpc status answer (the Gemini API's and Vertex AI's): the class from a
    detail's ``reason`` (``API_KEY_INVALID``) or the ``status`` name, the wait from a
    ``RetryInfo`` detail (as the gemini chat stack's error schema reads them)."""
    data = json_body(body)
    error = data.get("error") if data is not None else None
    if not isinstance(error, dict):
        return generic_error(status, headers, body)
    listed = error.get("details")
    details = [d for d in listed if isinstance(d, dict)] if isinstance(listed, list) else []
    codes = [d.get("reason") for d in details] + [error.get("status")]
    code = next((c for c in codes if isinstance(c, str) and c in _CLASSES), None)
    code = code or next((c for c in codes if isinstance(c, str)), None)
    found = http_error(
        status,
        headers,
        str(error.get("message") or ""),
        error_class=_CLASSES.get(code or ""),
        code=code,
    )
    delay = next((d.get("retryDelay") for d in details if d.get("retryDelay")), None)
    if isinstance(delay, str) and delay.endswith("s"):
        with contextlib.suppress(ValueError):
            seconds = delay_seconds(float(delay[:-1]))
            if seconds is not None:
                found.retry_after_seconds = seconds
    return found


TASK_TYPES = {
    "query": "RETRIEVAL_QUERY",
    "document": "RETRIEVAL_DOCUMENT",
    "similarity": "SEMANTIC_SIMILARITY",
    "classification": "CLASSIFICATION",
    "clustering": "CLUSTERING",
    "code_query": "CODE_RETRIEVAL_QUERY",
}


def _part(item: str | ImageInput) -> dict[str, Any]:
    if isinstance(item, ImageInput):
        return {"inlineData": {"mimeType": item.media_type, "data": item.data}}
    return {"text": item}


class GeminiEmbeddings(EmbedCodec):
    name = "gemini"
    input_types = TASK_TYPES
    takes_images = True
    max_inputs = 100

    def encode(self, batch: EmbedBatch) -> dict[str, Any]:
        task = self.wire_input_type(batch.input_type)
        requests = []
        for item in batch.inputs:
            one: dict[str, Any] = {
                "model": f"models/{batch.model}",
                "content": {"parts": [_part(item)]},
            }
            if task is not None:
                one["taskType"] = task
            if batch.dimensions is not None:
                one["outputDimensionality"] = batch.dimensions
            requests.append(one)
        return {"requests": requests}

    def error_from_http(self, status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
        return google_error(status, headers, body)

    def decode(
        self, body: dict[str, Any], headers: Mapping[str, str], batch: EmbedBatch
    ) -> Embedded:
        found = body.get("embeddings")
        if found.__class__ is not list:
            raise malformed("embeddings", "a list of {values}", found)
        if len(found) != len(batch.inputs):
            raise ProtocolError(f"embeddings: {len(found)} vectors for {len(batch.inputs)} inputs")
        return Embedded(
            [
                vector(
                    object_value(item, f"embeddings[{i}]").get("values"), f"embeddings[{i}].values"
                )
                for i, item in enumerate(found)
            ]
        )


class VertexEmbeddings(EmbedCodec):
    name = "vertex"
    input_types = TASK_TYPES
    truncates = True
    max_inputs = 250

    def encode(self, batch: EmbedBatch) -> dict[str, Any]:
        task = self.wire_input_type(batch.input_type)
        instances = []
        for text in only_texts(self.name, batch):
            instance: dict[str, Any] = {"content": text}
            if task is not None:
                instance["task_type"] = task
            instances.append(instance)
        parameters: dict[str, Any] = {"autoTruncate": batch.truncate}
        if batch.dimensions is not None:
            parameters["outputDimensionality"] = batch.dimensions
        return {"instances": instances, "parameters": parameters}

    def error_from_http(self, status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
        return google_error(status, headers, body)

    def decode(
        self, body: dict[str, Any], headers: Mapping[str, str], batch: EmbedBatch
    ) -> Embedded:
        found = body.get("predictions")
        if found.__class__ is not list:
            raise malformed("predictions", "a list", found)
        if len(found) != len(batch.inputs):
            raise ProtocolError(f"predictions: {len(found)} vectors for {len(batch.inputs)} inputs")
        out: list[list[float]] = []
        counted: int | None = 0
        for i, item in enumerate(found):
            where = f"predictions[{i}].embeddings"
            embedding = object_value(
                object_value(item, f"predictions[{i}]").get("embeddings"), where
            )
            out.append(vector(embedding.get("values"), f"{where}.values"))
            statistics = embedding.get("statistics")
            given = statistics.get("token_count") if statistics.__class__ is dict else None
            if counted is not None:  # one absent or untrue: the whole unknown (estimated)
                count = tokens(given, f"{where}.statistics.token_count", self.name)
                counted = None if count is None else counted + count
        model = body.get("deployedModelId")
        return Embedded(out, counted, model if isinstance(model, str) else None)
