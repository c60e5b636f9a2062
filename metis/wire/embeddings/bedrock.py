"""Embeddings through Bedrock's InvokeModel (``POST /model/{modelId}/invoke``), whose body is
the model's own:

- Amazon Titan Text Embeddings: ``{inputText, dimensions?, normalize}`` -> ``{embedding,
  inputTextTokenCount}``, one text a call; ``dimensions`` on v2 only (256, 512, 1024)
  (docs.aws.amazon.com/bedrock/latest/userguide/model-parameters-titan-embed-text.html);
- Cohere Embed: Cohere's v2 body without ``model`` -> ``{embeddings}``, the token count in
  the header ``x-amzn-bedrock-input-token-count``, 96 texts a call
  (model-parameters-embed.html).

The model id says which: ``amazon.titan-embed-*`` or ``cohere.embed-*`` (a cross-region
profile's ``us.`` prefix and an ARN's path are looked through).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metis.core.digits import ascii_digits
from metis.errors import AdapterError, CapabilityError
from metis.wire.bedrock_converse.errors import error_from_http as aws_error_from_http
from metis.wire.embeddings.base import EmbedBatch, EmbedCodec, Embedded, only_texts, tokens, vector
from metis.wire.embeddings.cohere import INPUT_TYPES, cohere_body, cohere_vectors


def family(model: str) -> str:
    """``titan`` or ``cohere`` for a Bedrock model id; a CapabilityError for any other."""
    name = model.rsplit("/", 1)[-1]
    for prefix in ("", "us.", "eu.", "apac.", "global."):
        if name.startswith(prefix + "amazon.titan-embed"):
            return "titan"
        if name.startswith(prefix + "cohere.embed"):
            return "cohere"
    raise CapabilityError(
        f"bedrock embeddings: {model!r} is neither an Amazon Titan (amazon.titan-embed-*) nor "
        "a Cohere (cohere.embed-*) embedding model"
    )


class BedrockEmbeddings(EmbedCodec):
    name = "bedrock"
    input_types = INPUT_TYPES  # Cohere's; Titan's are refused by the embedder per model
    truncates = True
    takes_images = True

    def max_inputs_for(self, model: str) -> int | None:
        return 1 if family(model) == "titan" else 96

    def input_types_for(self, model: str) -> Mapping[str, str]:
        return {} if family(model) == "titan" else self.input_types

    def encode(self, batch: EmbedBatch) -> dict[str, Any]:
        if family(batch.model) == "cohere":
            return cohere_body(batch, self.input_types)
        (text,) = only_texts(self.name, batch)
        body: dict[str, Any] = {"inputText": text, "normalize": True}
        if batch.dimensions is not None:
            body["dimensions"] = batch.dimensions
        return body

    def decode(
        self, body: dict[str, Any], headers: Mapping[str, str], batch: EmbedBatch
    ) -> Embedded:
        if family(batch.model) == "cohere":
            header = next(
                (v for k, v in headers.items() if k.lower() == "x-amzn-bedrock-input-token-count"),
                None,
            )
            said = header or ""  # ASCII digits only: int("²") fails, though "²".isdigit()
            counted = int(said) if ascii_digits(said) else None
            return Embedded(cohere_vectors(body, len(batch.inputs)), counted)
        return Embedded(
            [vector(body.get("embedding"), "embedding")],
            tokens(body.get("inputTextTokenCount"), "inputTextTokenCount", self.name),
        )

    def error_from_http(self, status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
        return aws_error_from_http(status, headers, body)
