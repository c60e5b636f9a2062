"""Ollama's ``POST /api/embed`` (docs.ollama.com/api/embed): ``{model, input: [str],
truncate, dimensions?}`` -> ``{model, embeddings: [[...]], prompt_eval_count}``. With
``truncate: false`` an input past the model's context is an error, not cut (Ollama's default
is to cut, so it is always sent)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.errors import AdapterError
from metis.wire.embeddings.base import EmbedBatch, EmbedCodec, Embedded, only_texts, tokens, vectors
from metis.wire.ollama.read import error_from_http as ollama_error_from_http
from metis.wire.read import optional_text


class OllamaEmbeddings(EmbedCodec):
    name = "ollama"
    truncates = True

    def encode(self, batch: EmbedBatch) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": batch.model,
            "input": only_texts(self.name, batch),
            "truncate": batch.truncate,
        }
        if batch.dimensions is not None:
            body["dimensions"] = batch.dimensions
        return body

    def decode(
        self, body: dict[str, Any], headers: Mapping[str, str], batch: EmbedBatch
    ) -> Embedded:
        return Embedded(
            vectors(body.get("embeddings"), "embeddings", len(batch.inputs)),
            tokens(body.get("prompt_eval_count"), "prompt_eval_count", self.name),
            optional_text(body, "model", "response"),
        )

    def error_from_http(self, status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
        return ollama_error_from_http(status, headers, body)
