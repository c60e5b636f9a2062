"""What an embedding call is checked for before anything is sent, and how it is split.

- each input is a non-empty text or an :class:`ImageInput` the model takes;
- ``dimensions`` is one the model can give, ``input_type`` one the provider knows
  (a CapabilityError otherwise);
- no text is longer than the model takes (a ContextOverflowError naming the item), unless the
  caller asked to ``truncate``: then the provider cuts it where its wire has a switch for it,
  else the text is cut here to the model's limit (by the offline token estimate);
- the inputs are split into requests that keep under the provider's per-request limits
  (count and tokens), in input order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import get_args

from metis.catalog.embedding_models import EmbeddingModel
from metis.catalog.estimate import PER_IMAGE, count_text
from metis.errors import CapabilityError, ContextOverflowError, InvalidRequestError
from metis.model.embeddings import EmbedInput, ImageInput, InputType
from metis.stacks.embedding import EmbeddingLimits
from metis.wire.embeddings import EmbedCodec

INPUT_TYPES: tuple[str, ...] = get_args(InputType)
_SYMMETRIC = ("query", "document")


@dataclass(frozen=True, slots=True)
class Limits:
    """The limits one call runs under: the stack's, lowered by the model's and the codec's."""

    max_inputs: int | None
    max_request_tokens: int | None
    max_input_tokens: int | None
    concurrency: int


def limits_for(
    stack: EmbeddingLimits, codec: EmbedCodec, info: EmbeddingModel | None, wire_model: str
) -> Limits:
    counts = [stack.max_inputs, codec.max_inputs_for(wire_model)]
    tokens = [stack.max_request_tokens]
    per_input = stack.max_input_tokens
    if info is not None:
        counts.append(info.max_inputs)
        tokens.append(info.max_request_tokens)
        per_input = info.max_input_tokens
    return Limits(_least(counts), _least(tokens), per_input, stack.concurrency)


def _least(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def check_call(concurrency: object, truncate: object) -> None:
    """An InvalidRequestError for a ``concurrency`` that is not a whole number >= 1 (None: the
    stack's) or a ``truncate`` that is not a bool."""
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1
    ):
        raise InvalidRequestError(f"concurrency: expected a whole number >= 1, got {concurrency!r}")
    if not isinstance(truncate, bool):
        raise InvalidRequestError(f"truncate: expected True or False, got {truncate!r}")


def check_options(
    provider: str,
    codec: EmbedCodec,
    info: EmbeddingModel | None,
    wire_model: str,
    dimensions: int | None,
    input_type: str | None,
) -> None:
    """A CapabilityError for a size or an input type the model or provider cannot take."""
    if dimensions is not None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1:
            raise InvalidRequestError(
                f"dimensions: expected a whole number >= 1, got {dimensions!r}"
            )
        if not codec.takes_dimensions:
            raise CapabilityError(f"{provider}: the embeddings API takes no dimensions")
        if info is not None and not info.takes_dimensions(dimensions):
            raise CapabilityError(
                f"{provider}:{wire_model} gives {info.describe_dimensions()} dimensions, "
                f"not {dimensions}",
                provider=provider,
            )
    if input_type is None:
        return
    if input_type not in INPUT_TYPES:
        raise CapabilityError(
            f"input_type {input_type!r} is none of {', '.join(INPUT_TYPES)}", provider=provider
        )
    known = codec.input_types_for(wire_model)
    if known and input_type not in known:
        raise CapabilityError(
            f"{provider}:{wire_model} takes input_type {', '.join(known)}, not {input_type!r}",
            provider=provider,
        )
    if not known and input_type not in _SYMMETRIC:
        raise CapabilityError(
            f"{provider}:{wire_model} embeds queries and documents alike; input_type "
            f"{input_type!r} means nothing to it",
            provider=provider,
        )


def checked_inputs(
    provider: str,
    inputs: Sequence[EmbedInput],
    codec: EmbedCodec,
    info: EmbeddingModel | None,
    limits: Limits,
    truncate: bool,
) -> tuple[list[EmbedInput], list[int]]:
    """The inputs as they will be sent (a text cut here when asked to and the wire cannot),
    and the estimated tokens of each."""
    if isinstance(inputs, bytes | Mapping) or not isinstance(inputs, Iterable):
        raise InvalidRequestError(
            f"inputs: expected a text or a list of texts and ImageInputs, got "
            f"{type(inputs).__name__}",
            provider=provider,
        )
    out: list[EmbedInput] = []
    estimates: list[int] = []
    takes_images = codec.takes_images and (info is None or info.images)
    for index, item in enumerate(inputs):
        if isinstance(item, ImageInput):
            if not takes_images:
                raise CapabilityError(
                    f"{provider}: input {index} is an image, and this model embeds texts only",
                    provider=provider,
                )
            out.append(item)
            estimates.append(PER_IMAGE)
            continue
        if not isinstance(item, str):
            raise InvalidRequestError(
                f"input {index}: expected a text or an ImageInput, got {type(item).__name__}"
            )
        if not item.strip():
            raise InvalidRequestError(f"input {index} is empty: providers refuse empty texts")
        tokens = count_text(item)
        limit = limits.max_input_tokens
        if limit is not None and tokens > limit:
            if not truncate:
                raise ContextOverflowError(
                    f"{provider}: input {index} is about {tokens} tokens and the model takes "
                    f"at most {limit} (pass truncate=True to cut it)",
                    provider=provider,
                )
            if not codec.truncates:
                item = item[: max(1, len(item) * limit // tokens)]
                tokens = count_text(item)
        out.append(item)
        estimates.append(tokens)
    return out, estimates


def split(estimates: Sequence[int], limits: Limits) -> list[range]:
    """Consecutive runs of the inputs, each within the per-request count and token limits
    (an input alone over the token limit is a request of its own)."""
    chunks: list[range] = []
    start, tokens = 0, 0
    for index, estimate in enumerate(estimates):
        count = index - start
        full = limits.max_inputs is not None and count >= limits.max_inputs
        heavy = (
            limits.max_request_tokens is not None and tokens + estimate > limits.max_request_tokens
        )
        if count and (full or heavy):
            chunks.append(range(start, index))
            start, tokens = index, 0
        tokens += estimate
    if start < len(estimates):
        chunks.append(range(start, len(estimates)))
    return chunks
