"""One-line calls: a model string, the messages, the options; no adapter, no models.yaml.

::

    import metis

    reply = metis.complete("anthropic:claude-sonnet-4-5", "Name three moons of Jupiter.")
    print(reply.text())

    for event in metis.stream("openai:gpt-4o", "Count to five."):
        ...
    reply = await metis.acomplete("gemini:gemini-2.5-flash", messages, tools=[weather])

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
from collections.abc import AsyncGenerator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
from anyio.from_thread import BlockingPortal, start_blocking_portal

from metis.adapter import Adapter
from metis.config import AdapterConfig
from metis.errors import ConfigError
from metis.model.content import Message
from metis.model.events import StreamEvent
from metis.model.request import CanonicalRequest, ThinkingConfig, ToolChoice, ToolDefinition
from metis.model.response import CanonicalResponse
from metis.pipeline.stack import StackSpec, load_stack
from metis.registry import NotConfiguredError

MessagesLike = str | Message | dict[str, Any] | Sequence[Message | dict[str, Any]]
DEFAULT_MAX_OUTPUT_TOKENS = 4096

_adapters: weakref.WeakKeyDictionary[object, dict[tuple[Any, ...], Adapter]] = (
    weakref.WeakKeyDictionary()
)
_portal_lock = threading.Lock()
_portal: tuple[BlockingPortal, contextlib.AbstractContextManager[BlockingPortal]] | None = None


async def acomplete(
    model: str,
    messages: MessagesLike,
    *,
    system: str | None = None,
    tools: Sequence[ToolDefinition] = (),
    tool_choice: ToolChoice | None = None,
    max_output_tokens: int | None = None,
    temperature: float | None = None,
    stop_sequences: Sequence[str] = (),
    output_schema: dict[str, Any] | None = None,
    thinking: ThinkingConfig | None = None,
    session_id: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout_seconds: float = 600.0,
    max_retries: int = 2,
) -> CanonicalResponse:
    """One call, folded into a :class:`CanonicalResponse` (``.text()``, ``.tool_calls()``)."""
    settings = _Settings(api_key, base_url, timeout_seconds, max_retries)
    adapter = await _adapter(model, settings)
    request = _request(
        adapter, model, messages, system, tools, tool_choice, max_output_tokens, temperature,
        stop_sequences, output_schema, thinking, session_id,
    )  # fmt: skip
    return await adapter.complete(request)


async def astream(
    model: str,
    messages: MessagesLike,
    *,
    system: str | None = None,
    tools: Sequence[ToolDefinition] = (),
    tool_choice: ToolChoice | None = None,
    max_output_tokens: int | None = None,
    temperature: float | None = None,
    stop_sequences: Sequence[str] = (),
    output_schema: dict[str, Any] | None = None,
    thinking: ThinkingConfig | None = None,
    session_id: str | None = None,
    api_key: str | None = None,
    base_url: str | None = None,
    timeout_seconds: float = 600.0,
    max_retries: int = 2,
) -> AsyncGenerator[StreamEvent, None]:
    """One streamed call: its canonical events, ending with ``message.complete``."""
    settings = _Settings(api_key, base_url, timeout_seconds, max_retries)
    adapter = await _adapter(model, settings)
    request = _request(
        adapter, model, messages, system, tools, tool_choice, max_output_tokens, temperature,
        stop_sequences, output_schema, thinking, session_id,
    )  # fmt: skip
    async for event in adapter.stream(request):
        yield event


def complete(model: str, messages: MessagesLike, **options: Any) -> CanonicalResponse:
    """:func:`acomplete`, for code that runs no event loop (takes the same options)."""
    portal = _sync_portal("complete")
    response: CanonicalResponse = portal.call(lambda: acomplete(model, messages, **options))
    return response


def stream(model: str, messages: MessagesLike, **options: Any) -> Iterator[StreamEvent]:
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


@dataclass(frozen=True, slots=True)
class _Settings:
    api_key: str | None
    base_url: str | None
    timeout_seconds: float
    max_retries: int


def _request(
    adapter: Adapter,
    model: str,
    messages: MessagesLike,
    system: str | None,
    tools: Sequence[ToolDefinition],
    tool_choice: ToolChoice | None,
    max_output_tokens: int | None,
    temperature: float | None,
    stop_sequences: Sequence[str],
    output_schema: dict[str, Any] | None,
    thinking: ThinkingConfig | None,
    session_id: str | None,
) -> CanonicalRequest:
    if max_output_tokens is None:  # the model's own limit, up to a default that fits most replies
        limit = adapter.capabilities_for(adapter.wire_model(model)).max_output_tokens
        max_output_tokens = min(limit, DEFAULT_MAX_OUTPUT_TOKENS)
    return CanonicalRequest(
        model=model,
        messages=_messages(messages),
        system_prompt=system,
        tools=list(tools),
        tool_choice=tool_choice,
        max_output_tokens=max_output_tokens,
        temperature=temperature,
        stop_sequences=list(stop_sequences),
        output_schema=output_schema,
        thinking=thinking,
        session_id=session_id,
    )


def _messages(messages: MessagesLike) -> list[Message]:
    if isinstance(messages, str):
        return [Message.user(messages)]
    if isinstance(messages, Message | dict):
        messages = [messages]
    return [m if isinstance(m, Message) else Message.model_validate(m) for m in messages]


async def _adapter(model: str, settings: _Settings) -> Adapter:
    """The adapter for ``model``'s stack and these settings on the running event loop."""
    stack_name, sep, wire = model.partition(":")
    if not sep or not stack_name or not wire:
        raise ConfigError(
            "expected a model as 'provider:model' (e.g. anthropic:claude-sonnet-4-5), "
            f"got {model!r}"
        )
    stack = _stack(stack_name)
    api_key = settings.api_key or (os.environ.get(stack.auth.env) if stack.auth.env else None)
    _require_key(stack, api_key)
    env = stack.endpoint.base_url_env
    base_url = settings.base_url or (os.environ.get(env) if env else None)
    # Keyed by what the adapter was built from, so a changed variable gets a new adapter.
    key = (stack_name, api_key, base_url, settings.timeout_seconds, settings.max_retries)
    loop = anyio.lowlevel.current_token().native_token
    cache = _adapters.setdefault(loop, {})
    adapter = cache.get(key)
    if adapter is None:
        config = AdapterConfig(
            api_key=api_key,
            base_url=settings.base_url,  # else the stack's variable, read by the adapter
            timeout_seconds=settings.timeout_seconds,
            max_retries=settings.max_retries,
        )
        adapter = cache[key] = Adapter(stack, config)
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
        await adapter.close()


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
        return True
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    return bool(trio is not None and trio.lowlevel.in_trio_run())
