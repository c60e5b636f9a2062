"""One-line calls: a model string, the messages, the options; no adapter, no models.yaml.

::

    import metis

    reply = metis.complete("anthropic:claude-sonnet-4-5", "Name three moons of Jupiter.")
    print(reply.text)

    for event in metis.stream("openai:gpt-4o", "Count to five."):
        ...
    reply = await metis.acomplete("gemini:gemini-2.5-flash", messages, tools=[weather])
    count = metis.count_tokens("anthropic:claude-sonnet-4-5", messages)

A :class:`~metis.routing.Router` can stand where the model string goes: the call then goes
to the first of its models that serves it (docs/routing.md).

The part before ``:`` names a built-in stack; the key comes from the stack's variable
(``ANTHROPIC_API_KEY``), the base URL from the SDKs' conventional one where the stack names it
(``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, ...). An option the calls do not take is a
TypeError naming the nearest one they do. Adapters are built once per (stack, key, base URL,
timeout, retries) and event loop, reused, and closed with the loop (:mod:`metis.calls.adapters`).
The synchronous forms run on a private event loop in a background thread, so they work in
scripts, threads, forked workers and notebooks, and Ctrl-C cancels the call in flight
(:mod:`metis.calls.background`).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncGenerator, AsyncIterator
from typing import TypeVar, Unpack, overload

from metis.adapter.adapter import Adapter
from metis.adapter.count_tokens import TokenCount
from metis.calls.adapters import model_adapter, this_loop
from metis.calls.arguments import needs_messages
from metis.calls.async_stream import AsyncStream
from metis.calls.background import (
    BackgroundLoop,
    BlockingStream,
    blocking_loop_for,
    on_background_loop,
)
from metis.calls.priced import with_cost
from metis.calls.request import (
    CallOptions,
    MessagesLike,
    ModelLike,
    build_request,
    check_call_options,
    structured_output,
    validated,
)
from metis.model.events import StreamEvent
from metis.model.response import CanonicalResponse
from metis.routing.router import Router

__all__ = [
    "CallOptions",
    "MessagesLike",
    "ModelLike",
    "acomplete",
    "acount_tokens",
    "astream",
    "complete",
    "count_tokens",
    "stream",
]

T = TypeVar("T")


@overload
def complete(
    model: ModelLike,
    messages: MessagesLike,
    *,
    output_type: None = None,
    **options: Unpack[CallOptions],
) -> CanonicalResponse: ...
@overload
def complete(
    model: ModelLike,
    messages: MessagesLike,
    *,
    output_type: type[T],
    **options: Unpack[CallOptions],
) -> T: ...
@needs_messages
def complete(
    model: ModelLike,
    messages: MessagesLike,
    *,
    output_type: type[T] | None = None,
    **options: Unpack[CallOptions],
) -> CanonicalResponse | T:
    """One call, folded into a :class:`CanonicalResponse` (``.text``, ``.tool_calls``,
    ``.message``, ``.usage``); with ``output_type``, the reply's structured output.

    ``model``: ``"provider:model"`` (a built-in stack, then the model's name), or a Router.
    ``messages``: the user's text, one message, or the conversation (:class:`Message` objects
    or plain dicts in the same shape).

    Options (all keyword, all optional; any other name is a TypeError naming the nearest):

    - ``output_type``: a pydantic model, a dataclass or any type pydantic validates: the
      reply is asked for in its JSON schema and returned validated as an instance of it (an
      ``OutputValidationError`` carrying the reply when it does not validate).
    - ``system``: the system prompt.
    - ``tools``: what the model may call: :func:`metis.tool` functions, plain functions,
      :class:`ToolDefinition` objects.
    - ``tool_choice``: :class:`ToolChoice`: ``auto`` (the default), ``any`` tool, one ``tool``
      by name, or ``none``.
    - ``max_output_tokens``: the reply's limit; default the model's own, up to 4,096.
    - ``temperature``: sampling temperature (0 and up); default the provider's.
    - ``top_p``: nucleus sampling; it and the next four go where the model takes them, else
      are left out with a warning; out of range: InvalidRequestError (docs/contract.md §13).
    - ``top_k``: sample from the k likeliest tokens.
    - ``seed``: a seed for sampling, where the provider takes one.
    - ``frequency_penalty``: penalise tokens by how often they appeared.
    - ``presence_penalty``: penalise tokens that appeared at all.
    - ``stop_sequences``: strings that end the reply where they appear.
    - ``output_schema``: a JSON schema the reply must follow (``output_type`` sets it).
    - ``thinking``: :class:`ThinkingConfig`, an effort or a budget (docs/reasoning.md).
    - ``reasoning``: ``thinking``'s shorthand, an effort (``"high"``) or a budget (``8000``).
    - ``provider_options``: wire fields for one provider only (``{"openai": {...}}``).
    - ``extra_headers``: HTTP headers for one provider only, keyed as ``provider_options``.
    - ``extra_query``: URL query parameters for one provider only, keyed the same way.
    - ``cache``: :class:`CachePolicy`: what to cache; default the stack's (the system
      prompt and tools, and the conversation once it has a reply; docs/caching.md).
    - ``session_id``: the conversation's id, so tool-call ids stay consistent across
      providers when the conversation moves between them.
    - ``api_key``: default the stack's variable (``ANTHROPIC_API_KEY``, ...).
    - ``base_url``: default the SDK's variable the stack names (``ANTHROPIC_BASE_URL``, ...),
      else the provider's URL.
    - ``timeout_seconds``: bounds the whole call, retries and waits included (default 600).
    - ``max_retries``: retries of a transient failure (default 2).
    - ``settings``: the provider's own, of its stack's kind (``{"region": "eu-west-1"}`` for
      Bedrock, ``{"project": ...}`` for Vertex; docs/engine.md); a misspelt one is a
      ConfigError naming the nearest.

    It blocks until the reply is in, on metis's own event loop in a background thread, so it
    works inside a running event loop too (a notebook); Ctrl-C cancels the call. In async code
    use ``await metis.acomplete(...)``.
    """
    check_call_options("complete", options, "output_type")
    loop = _blocking_loop("complete", model)
    return loop.call(functools.partial(_acomplete, model, messages, output_type, options))


@overload
async def acomplete(
    model: ModelLike,
    messages: MessagesLike,
    *,
    output_type: None = None,
    **options: Unpack[CallOptions],
) -> CanonicalResponse: ...
@overload
async def acomplete(
    model: ModelLike,
    messages: MessagesLike,
    *,
    output_type: type[T],
    **options: Unpack[CallOptions],
) -> T: ...
@needs_messages
async def acomplete(
    model: ModelLike,
    messages: MessagesLike,
    *,
    output_type: type[T] | None = None,
    **options: Unpack[CallOptions],
) -> CanonicalResponse | T:
    """:func:`complete` in async code (asyncio or trio): the same arguments and options."""
    check_call_options("acomplete", options, "output_type")
    return await _acomplete(model, messages, output_type, options)


@needs_messages
def stream(
    model: ModelLike, messages: MessagesLike, **options: Unpack[CallOptions]
) -> BlockingStream[StreamEvent]:
    """One streamed call: its canonical events as they arrive (``message.start``, text,
    thinking and tool-call deltas, ...), ending with ``message.complete`` (the final content,
    stop reason and usage). Nothing is sent until the first event is asked for; leaving the
    loop early closes the stream.

    ``model`` and ``messages`` as :func:`complete`'s. Options (all keyword, all optional; any
    other name is a TypeError naming the nearest):

    - ``system``: the system prompt.
    - ``tools``: :func:`metis.tool` functions, plain functions, :class:`ToolDefinition` objects.
    - ``tool_choice``: :class:`ToolChoice`: ``auto`` (the default), ``any``, ``tool``, ``none``.
    - ``max_output_tokens``: the reply's limit; default the model's own, up to 4,096.
    - ``temperature``: sampling temperature (0 and up); default the provider's.
    - ``top_p``: nucleus sampling (0 to 1); where taken, as for :func:`complete`.
    - ``top_k``: sample from the k likeliest tokens.
    - ``seed``: a seed for sampling.
    - ``frequency_penalty``: penalise tokens by how often they appeared.
    - ``presence_penalty``: penalise tokens that appeared at all.
    - ``stop_sequences``: strings that end the reply where they appear.
    - ``output_schema``: a JSON schema the reply must follow.
    - ``thinking``: :class:`ThinkingConfig` (an ``effort`` or ``budget_tokens``).
    - ``reasoning``: ``thinking``'s shorthand (``"high"``, ``8000``).
    - ``provider_options``: wire fields for one provider only, as for :func:`complete`.
    - ``extra_headers``: HTTP headers for one provider only.
    - ``extra_query``: URL query parameters for one provider only.
    - ``cache``: :class:`CachePolicy`: what to cache; default the stack's (docs/caching.md).
    - ``session_id``: the conversation's id (tool-call ids across providers).
    - ``api_key``: default the stack's variable (``ANTHROPIC_API_KEY``, ...).
    - ``base_url``: default the SDK's variable the stack names, else the provider's URL.
    - ``timeout_seconds``: bounds the whole call (default 600).
    - ``max_retries``: retries of a transient failure before the first event (default 2).
    - ``settings``: the provider's own, as for :func:`complete`.

    An iterator, run on metis's own event loop in a background thread (so it works inside
    a running loop too), closed at the end of a ``with`` block (``with metis.stream(...) as
    events:``); Ctrl-C cancels the stream. In async code use
    ``async for event in metis.astream(...)``.
    """
    check_call_options("stream", options)
    loop = _blocking_loop("stream", model)
    return loop.iterate(functools.partial(_astream, model, messages, options))


@needs_messages
def astream(
    model: ModelLike, messages: MessagesLike, **options: Unpack[CallOptions]
) -> AsyncStream[StreamEvent]:
    """:func:`stream` in async code: ``async for event in metis.astream(...)``, closed at the
    end of an ``async with`` block (``async with metis.astream(...) as events:``)."""
    check_call_options("astream", options)
    return AsyncStream(_astream(model, messages, options))


@needs_messages
def count_tokens(
    model: ModelLike, messages: MessagesLike, **options: Unpack[CallOptions]
) -> TokenCount:
    """How many input tokens :func:`complete` would send with these arguments, a
    :class:`TokenCount`: ``.input_tokens``, and ``.source``: ``provider`` (its counting
    endpoint: Anthropic, OpenAI Responses, Gemini, Bedrock) or ``estimate`` (offline;
    ``.detail`` says why). The same options as :func:`complete`; what is counted is what
    would be sent."""
    check_call_options("count_tokens", options)
    loop = _blocking_loop("count_tokens", model)
    return loop.call(functools.partial(_acount_tokens, model, messages, options))


@needs_messages
async def acount_tokens(
    model: ModelLike, messages: MessagesLike, **options: Unpack[CallOptions]
) -> TokenCount:
    """:func:`count_tokens` in async code."""
    check_call_options("acount_tokens", options)
    return await _acount_tokens(model, messages, options)


# Internals -------------------------------------------------------------------------------


async def _acomplete(
    model: ModelLike, messages: MessagesLike, output_type: type[T] | None, options: CallOptions
) -> CanonicalResponse | T:
    options = {**options}
    output = structured_output(output_type, options)
    async with _adapter(model, options) as adapter:
        response = await adapter.complete(build_request(adapter, model, messages, options))
    return with_cost(response) if output is None else validated(output, response)


async def _astream(
    model: ModelLike, messages: MessagesLike, options: CallOptions
) -> AsyncGenerator[StreamEvent, None]:
    async with _adapter(model, options) as adapter:
        request = build_request(adapter, model, messages, options)
        events = adapter.stream(request)
        try:
            async for event in events:
                yield event
        finally:
            await _aclose(events)


async def _acount_tokens(
    model: ModelLike, messages: MessagesLike, options: CallOptions
) -> TokenCount:
    async with _adapter(model, options) as adapter:
        return await adapter.count_tokens(build_request(adapter, model, messages, options))


async def _aclose(events: AsyncIterator[StreamEvent]) -> None:
    aclose = getattr(events, "aclose", None)  # an adapter's events are an async generator
    if aclose is not None:
        await aclose()


@contextlib.asynccontextmanager
async def _adapter(model: ModelLike, options: CallOptions) -> AsyncIterator[Adapter | Router]:
    """The adapter for ``model``'s stack and these settings on the running event loop (a
    router is its own adapter), open while the block runs."""
    if isinstance(model, Router):
        if on_background_loop():  # a synchronous call: the router is closed at exit
            this_loop().watch(model)
        yield model
        return
    async with model_adapter(model, options) as adapter:
        yield adapter


def _blocking_loop(what: str, model: ModelLike) -> BackgroundLoop:
    """The loop a synchronous form runs its call on; refused where waiting would deadlock."""
    usage = {
        "complete": "reply = await metis.acomplete(...)",
        "stream": "async for event in metis.astream(...): ...",
        "count_tokens": "count = await metis.acount_tokens(...)",
    }[what]
    routed = isinstance(model, Router)
    if routed:
        usage = usage.replace("(...)", "(router, ...)")
    return blocking_loop_for(f"metis.{what}()", usage, routed=routed)
