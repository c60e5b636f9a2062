"""What every emulated embeddings endpoint shares: deterministic vectors and token counts,
and which models it serves.

A vector is a function of the model, the input and the size alone (BLAKE2b of the three,
spread over the size and scaled to unit length), so the same text always gets the same
vector, different texts different ones, and a test can compute what it expects
(:func:`unit_vector`).
"""

from __future__ import annotations

import base64
import hashlib
import math
import struct
from typing import Any

from metis.catalog.embedding_models import embedding_model
from metis.testing.emulator.formats.base import Env
from metis.testing.emulator.rules import Refused

DEFAULT_DIMENSIONS = 768
"""The size of a model the embedding table does not know (nomic-embed-text's)."""


def unit_vector(model: str, item: str, size: int) -> list[float]:
    """The emulator's vector of ``item`` from ``model`` with ``size`` dimensions."""
    seed = hashlib.blake2b(f"{model}\0{item}".encode(), digest_size=32).digest()
    values: list[float] = []
    block = 0
    while len(values) < size:
        chunk = hashlib.blake2b(seed + block.to_bytes(4, "big"), digest_size=64).digest()
        values.extend((byte - 127.5) / 127.5 for byte in chunk)
        block += 1
    values = values[:size]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [round(v / norm, 7) for v in values]


def tokens_of(item: str) -> int:
    """About four characters a token, at least one."""
    return max(1, (len(item) + 3) // 4)


def default_size(catalog: str, model: str) -> int:
    found = embedding_model(catalog, model)
    return found.dimensions if found is not None else DEFAULT_DIMENSIONS


def sized(catalog: str, model: str, asked: Any) -> int:
    """The vector size a request asks of ``model`` (``asked``, None for the default), checked
    against the embedding table; any size for a model it does not know."""
    info = embedding_model(catalog, model)
    if info is None:
        return size_of(asked, asked or default_size(catalog, model), None, 1)
    return size_of(asked, info.dimensions, info.dimension_choices, info.min_dimensions)


def served(env: Env, catalogs: tuple[str, ...], model: str) -> bool:
    """A model of the embedding table, or of the catalog with ``embed`` in its name, or one
    the emulator was told to serve."""
    if env.served.policy == "any" or model in env.served.names:
        return True
    if any(embedding_model(catalog, model) is not None for catalog in catalogs):
        return True
    return "embed" in model and env.served.known(catalogs, model)


def embedded(fmt: Any, call: Any, catalogs: tuple[str, ...] | None = None) -> list[list[float]]:
    """The vectors of ``call``'s texts at its size; a model it does not serve (by ``catalogs``,
    or the format's own ``serves``) is the format's "not found"."""
    model = call.model
    if not (fmt.serves(call.env, model) if catalogs is None else served(call.env, catalogs, model)):
        raise fmt.unknown_model(model)
    return [unit_vector(model, text, call.options["size"]) for text in call.options["texts"]]


def used(call: Any) -> int:
    """The tokens of ``call``'s texts."""
    return sum(tokens_of(text) for text in call.options["texts"])


def as_base64(vector: list[float]) -> str:
    """OpenAI's ``encoding_format: base64``: little-endian float32s."""
    return base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()


def text_list(value: str | list[str]) -> list[str]:
    """A request's texts, checked by its table: a single text is a list of one."""
    return [value] if isinstance(value, str) else value


def size_of(given: Any, default: int, choices: tuple[int, ...] | None, low: int | None) -> int:
    """The vector size a request asks for, checked against what the model gives."""
    if given is None:
        return default
    if not isinstance(given, int) or isinstance(given, bool):
        raise Refused(f"dimensions: expected an integer, got {given!r}")
    fits = given == default or (
        given in choices if choices is not None else low is not None and low <= given <= default
    )
    if not fits:
        raise Refused(f"dimensions {given} is not supported by this model")
    return given
