"""One-line calls: a model string, the messages, the options; no adapter, no models.yaml.

::

    import metis

    reply = metis.complete("anthropic:claude-sonnet-4-5", "Name three moons of Jupiter.")
    print(reply.text)

    for event in metis.stream("openai:gpt-4o", "Count to five."):
        ...
    reply = await metis.acomplete("gemini:gemini-2.5-flash", messages, tools=[weather])

A :class:`~metis.routing.Router` can stand where the model string goes: the call then goes
to the first of its models that serves it (docs/routing.md).

The part before ``:`` names a built-in stack (or ``path/to/stack.yaml:model``); the key comes
from the stack's variable (``ANTHROPIC_API_KEY``), the base URL from the SDKs' conventional one
where the stack names it (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, ...). Adapters are built
once per (stack, key, base URL, timeout, retries) and event loop, then reused. The synchronous
forms run on a private event loop in a background thread, so they work in scripts and threads;
inside a running event loop they refuse, pointing at the async form.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import functools
import os
import sys
import threading
import weakref
from collections.abc import AsyncGenerator, Callable, Iterator, Sequence
from typing import Any, TypedDict, TypeVar, Unpack, overload

import anyio
import anyio.lowlevel
from anyio.from_thread import BlockingPortal, start_blocking_portal
from pydantic import TypeAdapter, ValidationError

from metis.adapter.adapter import Adapter
from metis.errors import ConfigError, OutputValidationError
from metis.model.content import Message
from metis.model.dicts import MessageDict
from metis.model.events import StreamEvent
from metis.model.request import CanonicalRequest, ThinkingConfig, ToolChoice, ToolDefinition
from metis.model.response import CanonicalResponse
from metis.pipeline.config import AdapterConfig
from metis.registry.registry import NotConfiguredError
from metis.routing.router import Router
from metis.stacks.loader import StackSpec, load_stack
from metis.tools import Tool, as_tool_definition

MessagesLike = str | Message | MessageDict | Sequence[Message | MessageDict]
"""A user's text, one message, or the conversation: Message objects or plain dicts."""
ModelLike = str | Router
"""``"provider:model"``, or a router over several models."""
DEFAULT_MAX_OUTPUT_TOKENS = 4096
T = TypeVar("T")

_adapters: weakref.WeakKeyDictionary[object, dict[tuple[Any, ...], Adapter]] = (
    weakref.WeakKeyDictionary()
)
_portal_lock = threading.Lock()
_portal: tuple[BlockingPortal, contextlib.AbstractContextManager[BlockingPortal]] | None = None


class CallOptions(TypedDict, total=False):
    """The options every one-line call takes (all keyword, all optional)."""

    system: str
    tools: Sequence[Tool | ToolDefinition | Callable[..., Any]]
    tool_choice: ToolChoice
    max_output_tokens: int
    """Default: the model's own limit, up to 4,096."""
    temperature: float
    stop_sequences: Sequence[str]
    output_schema: dict[str, Any]
    thinking: ThinkingConfig
    session_id: str
    api_key: str
    """Default: the stack's variable (``ANTHROPIC_API_KEY``, ...)."""
    base_url: str
    """Default: the SDK's variable where the stack names one, else the provider's URL."""
    timeout_seconds: float
    max_retries: int


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
async def acomplete(
    model: ModelLike,
    messages: MessagesLike,
    *,
    output_type: type[T] | None = None,
    **options: Unpack[CallOptions],
) -> CanonicalResponse | T:
    """One call, folded into a :class:`CanonicalResponse` (``.text``, ``.tool_calls``,
    ``.message``); with ``output_type`` (a pydantic model, a dataclass, any type pydantic
    validates), the reply's structured output as a validated instance of it."""
    output = TypeAdapter(output_type) if output_type is not None else None
    if output is not None:
        options = {**options, "output_schema": output.json_schema()}
    adapter = await _adapter(model, options)
    response = await adapter.complete(_request(adapter, model, messages, options))
    if output is None:
        return response
    return _validated(output, response)


async def astream(
    model: ModelLike, messages: MessagesLike, **options: Unpack[CallOptions]
) -> AsyncGenerator[StreamEvent, None]:
    """One streamed call: its canonical events, ending with ``message.complete``."""
    adapter = await _adapter(model, options)
    async for event in adapter.stream(_request(adapter, model, messages, options)):
        yield event


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
def complete(
    model: ModelLike,
    messages: MessagesLike,
    *,
    output_type: type[T] | None = None,
    **options: Unpack[CallOptions],
) -> CanonicalResponse | T:
    """:func:`acomplete`, for code that runs no event loop (the same arguments)."""
    portal = _sync_portal("complete")

    async def call() -> CanonicalResponse | T:
        if output_type is None:
            return await acomplete(model, messages, **options)
        return await acomplete(model, messages, output_type=output_type, **options)

    return portal.call(call)


def stream(
    model: ModelLike, messages: MessagesLike, **options: Unpack[CallOptions]
) -> Iterator[StreamEvent]:
    """:func:`astream`, for code that runs no event loop: a plain iterator of events."""
    portal = _sync_portal("stream")
    events = astream(model, messages, **options)
    try:
        while True:
            try:
                yield portal.call(events.__anext__)
            except StopAsyncIteration:
                return
    finally:
        portal.call(events.aclose)


# Internals -------------------------------------------------------------------------------


def _request(
    adapter: Adapter | Router, model: ModelLike, messages: MessagesLike, options: CallOptions
) -> CanonicalRequest:
    if isinstance(model, Router):
        model = f"route:{model.name}"
    max_output_tokens = options.get("max_output_tokens")
    if max_output_tokens is None:  # the model's own limit, up to a default that fits most replies
        limit = adapter.capabilities_for(adapter.wire_model(model)).max_output_tokens
        max_output_tokens = min(limit, DEFAULT_MAX_OUTPUT_TOKENS)
    return CanonicalRequest(
        model=model,
        messages=_messages(messages),
        system_prompt=options.get("system"),
        tools=[as_tool_definition(t) for t in options.get("tools", ())],
        tool_choice=options.get("tool_choice"),
        max_output_tokens=max_output_tokens,
        temperature=options.get("temperature"),
        stop_sequences=list(options.get("stop_sequences", ())),
        output_schema=options.get("output_schema"),
        thinking=options.get("thinking"),
        session_id=options.get("session_id"),
    )


def _validated(output: TypeAdapter[T], response: CanonicalResponse) -> T:
    try:
        return output.validate_json(response.text)
    except ValidationError as exc:
        error = OutputValidationError(
            f"{response.model}: the reply does not validate as {output}: "
            + "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors()
            ),
            raw_text=response.text,
            provider=response.provider,
            request_id=response.request_id,
        )
        error.partial_response = response
        raise error from None


def _messages(messages: MessagesLike) -> list[Message]:
    if isinstance(messages, str):
        return [Message.user(messages)]
    if isinstance(messages, Message | dict):
        messages = [messages]
    return [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]


async def _adapter(model: ModelLike, options: CallOptions) -> Adapter | Router:
    """The adapter for ``model``'s stack and these settings on the running event loop (a
    router is its own adapter)."""
    if isinstance(model, Router):
        return model
    stack_name, sep, wire = model.partition(":")
    if not sep or not stack_name or not wire:
        raise ConfigError(
            "expected a model as 'provider:model' (e.g. anthropic:claude-sonnet-4-5), "
            f"got {model!r}"
        )
    stack = _stack(stack_name)
    api_key = options.get("api_key") or (os.environ.get(stack.auth.env) if stack.auth.env else None)
    _require_key(stack, api_key)
    env = stack.endpoint.base_url_env
    base_url = options.get("base_url") or (os.environ.get(env) if env else None)
    timeout, retries = options.get("timeout_seconds", 600.0), options.get("max_retries", 2)
    # Keyed by what the adapter was built from, so a changed variable gets a new adapter.
    key = (stack_name, api_key, base_url, timeout, retries)
    loop = anyio.lowlevel.current_token().native_token
    cache = _adapters.setdefault(loop, {})
    adapter = cache.get(key)
    if adapter is None:
        config = AdapterConfig(
            api_key=api_key,
            base_url=options.get("base_url"),  # else the stack's variable, read by the adapter
            timeout_seconds=timeout,
            max_retries=retries,
        )
        adapter = cache[key] = Adapter(stack, config, init_on_first_call=True)
    return adapter


@functools.cache
def _stack(name: str) -> StackSpec:
    return load_stack(name)


def _require_key(stack: StackSpec, api_key: str | None) -> None:
    auth = stack.auth
    if api_key or not auth.env or auth.optional:
        return
    raise NotConfiguredError(
        f"{stack.name}: no API key: set {auth.env} (or pass api_key=...)",
        model=None,
        adapter=stack.name,
        api_key_env=auth.env,
    )


def _sync_portal(what: str) -> BlockingPortal:
    """The background event loop the synchronous forms run on (started on first use)."""
    if _in_event_loop():
        raise RuntimeError(
            f"metis.{what}() blocks, and this thread is running an event loop: "
            f"use 'await metis.a{what}(...)' (or 'async for ... in metis.a{what}(...)') instead"
        )
    global _portal
    with _portal_lock:
        if _portal is None:
            manager = start_blocking_portal()
            _portal = (manager.__enter__(), manager)
            atexit.register(_stop_portal)
        return _portal[0]


def _stop_portal() -> None:
    global _portal
    if _portal is not None:
        portal, manager = _portal
        _portal = None
        with contextlib.suppress(Exception):
            portal.call(_close_adapters)
            manager.__exit__(None, None, None)


async def _close_adapters() -> None:
    loop = anyio.lowlevel.current_token().native_token
    for adapter in _adapters.pop(loop, {}).values():
        await adapter.dispose()


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    return bool(trio is not None and trio.lowlevel.in_trio_run())
