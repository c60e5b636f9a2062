"""What every embedding codec shares: the batch it encodes, what it decodes, the checks.

A codec is sans-IO: ``encode(batch)`` is the JSON body of one provider request,
``decode(body, headers, batch)`` reads the answer into vectors (in the batch's order),
``error_from_http`` classifies an error answer (docs/contract.md §4). The embedder splits a
call into batches and sends them (metis.adapter.embedder).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from metis.errors import AdapterError, ProtocolError
from metis.model.embeddings import EmbedInput, ImageInput, InputType
from metis.wire.http_errors import body_excerpt, http_error, json_body, openai_error_fields
from metis.wire.read import UntrueCount, malformed, said_untrue, shown, token_count


@dataclass(frozen=True, slots=True)
class EmbedBatch:
    """The inputs of one provider request and what the call asked of them."""

    inputs: tuple[EmbedInput, ...]
    model: str
    """The provider's name for the model (the wire model)."""
    dimensions: int | None = None
    input_type: InputType | None = None
    truncate: bool = False
    """Whether the provider may cut an input that is too long (where its wire says so)."""

    @property
    def texts(self) -> list[str]:
        return [item for item in self.inputs if isinstance(item, str)]

    @property
    def has_images(self) -> bool:
        return any(isinstance(item, ImageInput) for item in self.inputs)


@dataclass(frozen=True, slots=True)
class Embedded:
    """One answer read: a vector per input in order, the tokens the provider counted (None
    when it reports none) and the model it names (None when it names none)."""

    vectors: list[list[float]]
    input_tokens: int | None = None
    model: str | None = None


class EmbedCodec:
    """One embedding wire format. Subclasses say what the wire carries (class attributes)
    and implement :meth:`encode` and :meth:`decode`."""

    name: ClassVar[str] = ""
    input_types: ClassVar[Mapping[str, str]] = {}
    """The input types the wire distinguishes, canonical -> wire. Empty: it embeds queries
    and documents alike, so ``query`` and ``document`` are taken and nothing is sent."""
    takes_dimensions: ClassVar[bool] = True
    takes_images: ClassVar[bool] = False
    truncates: ClassVar[bool] = False
    """Whether the wire has a truncation switch (else the embedder cuts the text itself)."""
    max_inputs: ClassVar[int | None] = None
    """Inputs one request of this wire may carry, whatever the model."""

    def max_inputs_for(self, model: str) -> int | None:
        """Inputs one request may carry for ``model`` (Bedrock's Titan takes one)."""
        return self.max_inputs

    def input_types_for(self, model: str) -> Mapping[str, str]:
        """The input types the wire distinguishes for ``model``."""
        return self.input_types

    def wire_input_type(self, input_type: InputType | None) -> str | None:
        return None if input_type is None else self.input_types.get(input_type)

    def encode(self, batch: EmbedBatch) -> dict[str, Any]:
        raise NotImplementedError

    def decode(
        self, body: dict[str, Any], headers: Mapping[str, str], batch: EmbedBatch
    ) -> Embedded:
        raise NotImplementedError

    def error_from_http(self, status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
        return generic_error(status, headers, body)


def vector(value: Any, where: str) -> list[float]:
    """``value`` as a vector: a non-empty list of finite numbers."""
    if value.__class__ is not list or not value:
        raise malformed(where, "a list of numbers", value)
    for number in value:
        if number.__class__ not in (float, int) or not math.isfinite(number):
            raise malformed(where, "a list of finite numbers", number)
    return value


def vectors(value: Any, where: str, count: int) -> list[list[float]]:
    """``value`` as ``count`` vectors; a ProtocolError when it is not, or counts otherwise."""
    if value.__class__ is not list:
        raise malformed(where, "a list of vectors", value)
    if len(value) != count:
        raise ProtocolError(f"{where}: {len(value)} vectors for {count} inputs")
    return [vector(item, f"{where}[{i}]") for i, item in enumerate(value)]


def indexed(data: Any, where: str, count: int) -> list[list[float]]:
    """OpenAI's ``data: [{index, embedding}]``, put in input order (the API documents
    ``index``; the order of ``data`` is not promised)."""
    if data.__class__ is not list:
        raise malformed(where, "a list", data)
    found: dict[int, list[float]] = {}
    for i, item in enumerate(data):
        if item.__class__ is not dict:
            raise malformed(f"{where}[{i}]", "an object", item)
        index = item.get("index", i)
        if index.__class__ is not int or not 0 <= index < count or index in found:
            raise malformed(f"{where}[{i}].index", f"a distinct index below {count}", index)
        found[index] = vector(item.get("embedding"), f"{where}[{i}].embedding")
    if len(found) != count:
        raise ProtocolError(f"{where}: {len(found)} vectors for {count} inputs")
    return [found[i] for i in range(count)]


def tokens(value: Any, field: str, provider: str) -> int | None:
    """A reply's token count; None when it gives none, or one below zero, which cannot be
    true (said in a warning): the embedder estimates the tokens then, as a chat reply's usage
    is estimated (metis.wire.read.counts_of)."""
    if value is None:
        return None
    try:
        return token_count(value, field, provider)
    except UntrueCount as error:
        said_untrue(provider, error)
        return None


def only_texts(codec: str, batch: EmbedBatch) -> list[str]:
    """The batch's texts, for a wire that takes no images (the embedder checks first)."""
    if batch.has_images:
        raise ProtocolError(f"{codec}: this wire format embeds texts only")
    return list(batch.texts)


def generic_error(status: int, headers: Mapping[str, str], body: bytes) -> AdapterError:
    """An error answer of an embedding API: OpenAI's shape (OpenAI, Azure, Mistral, vLLM),
    Google's ``{"error": {"message", "status"}}``, Cohere's ``{"message"}``, Voyage's and
    FastAPI servers' ``{"detail"}``, else an excerpt of the body."""
    data = json_body(body)
    fields = openai_error_fields(data) if data is not None else None
    if fields is not None:
        message, code, kind = fields
        if isinstance(data, dict) and isinstance(data.get("error"), dict):
            status_name = data["error"].get("status")  # Google's RESOURCE_EXHAUSTED, ...
            code = status_name if isinstance(status_name, str) else code
        return http_error(status, headers, message, code=code or kind)
    message = ""
    if data is not None:
        found = data.get("message", data.get("detail"))
        message = found if isinstance(found, str) else shown(found) if found else ""
    return http_error(status, headers, message or body_excerpt(body))
