"""What metis knows about embedding models: dimensions, per-input and per-request limits, the
input types they distinguish, and prices (docs/embeddings.md).

The maintained catalog (models.dev through :mod:`metis.catalog.catalog`) lists some embedding
models with an input price and a context window, but no dimensions, no per-request limits and
no input types, so this table carries them, from the providers' documentation:

- OpenAI: platform.openai.com/docs/guides/embeddings and the API reference (2,048 inputs and
  300,000 tokens a request, 8,192 tokens an input; ``dimensions`` on text-embedding-3 only);
  batch prices from platform.openai.com/docs/pricing (half the standard rate);
- Gemini: ai.google.dev/gemini-api/docs/embeddings (``outputDimensionality`` 128-3072,
  2,048 input tokens for gemini-embedding-001, 100 requests a ``batchEmbedContents``);
- Vertex AI: cloud.google.com/vertex-ai/generative-ai/docs/embeddings/get-text-embeddings
  (gemini-embedding-001 takes one instance a request; text-embedding-005 up to 250);
- Bedrock: docs.aws.amazon.com/bedrock/latest/userguide/titan-embedding-models.html (Titan
  v2: 256, 512 or 1024 dimensions, 8,192 tokens, one text a call) and model-parameters-embed
  (Cohere: 96 texts a call, 512 tokens an input for v3);
- Cohere: docs.cohere.com/reference/embed (96 texts a call; embed-v4.0 256-1536 dimensions,
  128k-token inputs, images);
- Voyage: docs.voyageai.com/docs/embeddings (1,000 inputs a request, per-model token caps
  per request, ``output_dimension`` 256/512/1024/2048 on the 3.5 and 3-large families);
- Mistral: docs.mistral.ai/capabilities/embeddings (mistral-embed 1,024 dimensions fixed;
  codestral-embed up to 3,072).

A model this table does not know is still served: its limits are its stack's defaults and
its dimensions whatever the provider returns.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from decimal import Decimal

from metis.catalog.lookup import find_model

EMBEDDING_PRICES_VERSION = "metis-embeddings-2026-11"
"""The ``pricing_version`` of a cost priced from this table."""


@dataclass(frozen=True, slots=True)
class EmbeddingModel:
    """One embedding model as a provider serves it. Prices are USD per million input tokens."""

    catalog: str
    """The catalog's provider id (``openai``, ``google``, ``amazon-bedrock``, ``cohere``...)."""
    id: str
    dimensions: int
    """The vector size when none is asked for."""
    dimension_choices: tuple[int, ...] | None = None
    """The sizes it can be asked for, when it takes a few fixed ones."""
    min_dimensions: int | None = None
    """With ``dimensions`` as the top: any size in between (OpenAI's, Gemini's). Neither this
    nor ``dimension_choices``: the size cannot be chosen."""
    max_input_tokens: int = 8192
    max_inputs: int | None = None
    """Inputs a request may carry, when the model limits it more than its stack does."""
    max_request_tokens: int | None = None
    input_types: bool = False
    """Whether it embeds queries and documents differently (input_type matters)."""
    images: bool = False
    price: Decimal | None = None
    batch_price: Decimal | None = None

    def takes_dimensions(self, size: int) -> bool:
        if size == self.dimensions:
            return True
        if self.dimension_choices is not None:
            return size in self.dimension_choices
        return self.min_dimensions is not None and self.min_dimensions <= size <= self.dimensions

    def describe_dimensions(self) -> str:
        if self.dimension_choices is not None:
            return ", ".join(map(str, self.dimension_choices))
        if self.min_dimensions is not None:
            return f"{self.min_dimensions} to {self.dimensions}"
        return f"only {self.dimensions}"  # "gives only 1536 dimensions"


def _d(text: str) -> Decimal:
    return Decimal(text)


_V35 = (256, 512, 1024, 2048)
_COHERE_V4 = (256, 512, 1024, 1536)
_MODELS: tuple[EmbeddingModel, ...] = (
    *(
        EmbeddingModel(
            p,
            "text-embedding-3-small",
            1536,
            None,
            1,
            8191,
            None,
            300_000,
            price=_d("0.02"),
            batch_price=_d("0.01"),
        )
        for p in ("openai", "azure")
    ),
    *(
        EmbeddingModel(
            p,
            "text-embedding-3-large",
            3072,
            None,
            1,
            8191,
            None,
            300_000,
            price=_d("0.13"),
            batch_price=_d("0.065"),
        )
        for p in ("openai", "azure")
    ),
    *(
        EmbeddingModel(
            p,
            "text-embedding-ada-002",
            1536,
            None,
            None,
            8191,
            None,
            300_000,
            price=_d("0.10"),
            batch_price=_d("0.05"),
        )
        for p in ("openai", "azure")
    ),
    EmbeddingModel(
        "google",
        "gemini-embedding-001",
        3072,
        None,
        128,
        2048,
        100,
        input_types=True,
        price=_d("0.15"),
        batch_price=_d("0.075"),
    ),
    EmbeddingModel(
        "google", "gemini-embedding-2", 3072, None, 128, 8192, 100, input_types=True, images=True
    ),
    EmbeddingModel(
        "google-vertex",
        "gemini-embedding-001",
        3072,
        None,
        128,
        2048,
        1,
        input_types=True,
        price=_d("0.15"),
    ),
    EmbeddingModel(
        "google-vertex", "text-embedding-005", 768, None, 1, 2048, 250, input_types=True
    ),
    EmbeddingModel(
        "google-vertex",
        "text-multilingual-embedding-002",
        768,
        None,
        1,
        2048,
        250,
        input_types=True,
    ),
    EmbeddingModel(
        "amazon-bedrock",
        "amazon.titan-embed-text-v2:0",
        1024,
        (256, 512, 1024),
        None,
        8192,
        1,
        price=_d("0.02"),
    ),
    EmbeddingModel(
        "amazon-bedrock", "amazon.titan-embed-text-v1", 1536, None, None, 8192, 1, price=_d("0.10")
    ),
    *(
        EmbeddingModel(
            "amazon-bedrock", m, 1024, None, None, 512, 96, input_types=True, price=_d("0.10")
        )
        for m in ("cohere.embed-english-v3", "cohere.embed-multilingual-v3")
    ),
    EmbeddingModel(
        "amazon-bedrock",
        "cohere.embed-v4:0",
        1536,
        _COHERE_V4,
        None,
        128_000,
        96,
        input_types=True,
        images=True,
        price=_d("0.12"),
    ),
    EmbeddingModel(
        "cohere",
        "embed-v4.0",
        1536,
        _COHERE_V4,
        None,
        128_000,
        96,
        input_types=True,
        images=True,
        price=_d("0.12"),
    ),
    *(
        EmbeddingModel("cohere", m, 1024, None, None, 512, 96, input_types=True, price=_d("0.10"))
        for m in ("embed-english-v3.0", "embed-multilingual-v3.0")
    ),
    *(
        EmbeddingModel("cohere", m, 384, None, None, 512, 96, input_types=True, price=_d("0.10"))
        for m in ("embed-english-light-v3.0", "embed-multilingual-light-v3.0")
    ),
    EmbeddingModel(
        "voyage",
        "voyage-3.5",
        1024,
        _V35,
        None,
        32_000,
        1000,
        320_000,
        input_types=True,
        price=_d("0.06"),
        batch_price=_d("0.04"),
    ),
    EmbeddingModel(
        "voyage",
        "voyage-3.5-lite",
        1024,
        _V35,
        None,
        32_000,
        1000,
        1_000_000,
        input_types=True,
        price=_d("0.02"),
        batch_price=_d("0.0133"),
    ),
    EmbeddingModel(
        "voyage",
        "voyage-3-large",
        1024,
        _V35,
        None,
        32_000,
        1000,
        120_000,
        input_types=True,
        price=_d("0.18"),
        batch_price=_d("0.12"),
    ),
    EmbeddingModel(
        "voyage",
        "voyage-code-3",
        1024,
        _V35,
        None,
        32_000,
        1000,
        120_000,
        input_types=True,
        price=_d("0.18"),
        batch_price=_d("0.12"),
    ),
    EmbeddingModel(
        "mistral", "mistral-embed", 1024, None, None, 8192, None, 16_384, price=_d("0.10")
    ),
    EmbeddingModel(
        "mistral",
        "codestral-embed",
        1536,
        (256, 512, 1024, 1536, 3072),
        None,
        8192,
        None,
        16_384,
        price=_d("0.15"),
    ),
)


@functools.cache
def _index() -> dict[tuple[str, str], EmbeddingModel]:
    return {(m.catalog, m.id): m for m in _MODELS}


def embedding_model(catalog: str | None, wire_model: str) -> EmbeddingModel | None:
    """The table's entry for ``wire_model`` at ``catalog`` (a dated Bedrock id such as
    ``cohere.embed-v4:0`` matches as written), with the maintained catalog's input price when
    it has one; None when the model is not known."""
    if catalog is None:
        return None
    found = _index().get((catalog, wire_model))
    if found is None:
        return None
    info = find_model(catalog, wire_model)
    if info is not None and info.prices is not None and info.prices.input:
        return _with_price(found, info.prices.input)
    return found


def _with_price(model: EmbeddingModel, price: Decimal) -> EmbeddingModel:
    from dataclasses import replace

    return replace(model, price=price)


def embedding_models() -> list[EmbeddingModel]:
    """Every model of the table, in order."""
    return list(_MODELS)
