"""The one-line embedding calls (docs/embeddings.md)::

    import metis

    result = metis.embed("openai:text-embedding-3-small", ["first text", "second text"])
    result.vectors            # one vector per text, in order
    result = await metis.aembed("voyage:voyage-3.5", texts, input_type="document")

The part before ``:`` names a built-in embedding stack (``metis/stacks/embeddings/``) or a
stack file; the key comes from the stack's variable. An embedder is built once per (stack,
key, base URL, settings, timeout, retries) and event loop, reused and closed with the loop,
as the chat adapters of the one-line calls are (:mod:`metis.calls.adapters`).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, TypedDict, Unpack

from metis.adapter.embedder import Embedder
from metis.calls.adapters import _settings_key, settings_of, this_loop
from metis.calls.background import background_loop, on_background_loop
from metis.calls.request import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_SECONDS, stack_and_model
from metis.catalog.embedding_models import embedding_model, embedding_models
from metis.core.options import check_options
from metis.core.suggest import closest
from metis.errors import BlockingCallError, InvalidRequestError
from metis.model.embeddings import EmbeddingResult, EmbedInput, InputType
from metis.pipeline.config import checked_config
from metis.stacks.embedding import EmbeddingStackSpec, load_embedding_stack


class EmbedOptions(TypedDict, total=False):
    """What :func:`embed` takes besides the model and the inputs (all keyword, all optional)."""

    dimensions: int
    """The vector size, where the model can give several (a CapabilityError otherwise)."""
    input_type: InputType
    """``query`` or ``document`` (and the others a provider has), where it embeds them
    differently; ignored where it does not distinguish them."""
    truncate: bool
    """Cut a text longer than the model takes, instead of refusing it before sending."""
    concurrency: int
    """Requests in flight at once when the inputs are split (default: the stack's)."""
    api_key: str
    base_url: str
    timeout_seconds: float
    """Bounds each request of the call, its retries included (default 600)."""
    max_retries: int
    settings: Mapping[str, Any]


_CALL_KEYS = ("dimensions", "input_type", "truncate", "concurrency")
_OPTIONS = EmbedOptions.__optional_keys__


def embed(
    model: str, inputs: str | Sequence[EmbedInput], **options: Unpack[EmbedOptions]
) -> EmbeddingResult:
    """The vectors of ``inputs`` (a text, or a list of texts and images) from ``model``
    (``"provider:model"``), in input order, with the usage and the model that served.

    Blocks until every vector is in, on metis's own event loop in a background thread; in
    async code use ``await metis.aembed(...)``. A failure of some of the requests raises that
    request's error (``RateLimitError``, ...) carrying every vector that arrived as
    ``error.partial_embeddings``."""
    _check("embed", options)
    if on_background_loop():
        raise BlockingCallError(
            "metis.embed() was called on the event loop metis runs the synchronous calls on, "
            "where waiting would wait for itself; there, use 'await metis.aembed(...)'"
        )
    return background_loop().call(functools.partial(_aembed, model, inputs, options))


async def aembed(
    model: str, inputs: str | Sequence[EmbedInput], **options: Unpack[EmbedOptions]
) -> EmbeddingResult:
    """:func:`embed` in async code (asyncio or trio)."""
    _check("aembed", options)
    return await _aembed(model, inputs, options)


async def _aembed(
    model: str, inputs: str | Sequence[EmbedInput], options: EmbedOptions
) -> EmbeddingResult:
    given: dict[str, Any] = dict(options)
    call = {key: given[key] for key in _CALL_KEYS if key in given}
    async with leased_embedder(model, options) as embedder:
        try:
            return await embedder.embed(inputs, model=model, **call)
        except InvalidRequestError as error:
            note = unknown_embedding_note(embedder, model) if error.provider_status == 404 else None
            if note is not None:
                error.add_note(note)  # shown under the traceback's last line
            raise


def unknown_embedding_note(embedder: Embedder, model: str) -> str | None:
    """For a provider's "no such model" (404): the embedding models metis knows there nearest
    the one asked for, when it knows none by that name (a misspelling, or a chat model)."""
    catalog, wire = embedder.stack.catalog, embedder.wire_model(model)
    if catalog is None or embedding_model(catalog, wire) is not None:
        return None
    ids = [m.id for m in embedding_models() if m.catalog == catalog]
    near = closest(wire, ids, n=3, cutoff=0.5) or ids[:3]
    known = f"; its embedding models include {', '.join(near)}" if near else ""
    return f"metis: {wire!r} is not an embedding model metis knows at {catalog}{known}"


@contextlib.asynccontextmanager
async def leased_embedder(model: str, options: EmbedOptions) -> AsyncIterator[Embedder]:
    """The embedder for ``model``'s stack and these options on the running event loop."""
    stack_name, _ = stack_and_model(model)
    stack = _stack(stack_name)
    api_key = options.get("api_key") or (os.environ.get(stack.auth.env) if stack.auth.env else None)
    base_url = options.get("base_url")
    timeout = options.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS)
    retries = options.get("max_retries", DEFAULT_MAX_RETRIES)
    settings = options.get("settings")
    config = checked_config(
        "options",
        InvalidRequestError,
        api_key=api_key,
        base_url=base_url,
        timeout_seconds=timeout,
        max_retries=retries,
        settings=settings_of(settings),
    )
    key = (
        f"embeddings:{stack_name}",
        api_key,
        base_url or stack.endpoint.env_base_url(),
        timeout,
        retries,
        _settings_key(settings),
    )
    async with this_loop().lease(key, functools.partial(Embedder, stack, config)) as held:
        assert isinstance(held, Embedder)  # the key names an embedding stack
        yield held


@functools.cache
def _stack(name: str) -> EmbeddingStackSpec:
    return load_embedding_stack(name)


def _check(what: str, options: Mapping[str, Any]) -> None:
    check_options(f"metis.{what}()", options, _OPTIONS)
