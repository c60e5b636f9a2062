"""The adapters the one-line calls build, held per event loop and released with it.

An adapter (and its connection pool) is built once per stack, key, base URL, settings, timeout
and retry count on each event loop, and reused by the calls that name the same. A loop holds at most
:data:`MAX_ADAPTERS_PER_LOOP` of them: making one more closes the least recently used (once
its calls in flight have ended), so a server calling with a thousand tenants' keys keeps a
bounded number of pools. When the loop ends (``asyncio.run``, ``trio.run``, the end of the
synchronous forms' own loop) its adapters are closed, so a loop per job leaks nothing. A loop
closed without ending its tasks (``loop.close()`` after ``run_until_complete``) has its
adapters dropped at the next call on another loop, unclosed. A forked child starts with none
of its parent's: their connections belong to the parent.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import weakref
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from metis.adapter.adapter import Adapter
from metis.adapter.embedder import Embedder
from metis.calls.notes import call_note
from metis.calls.request import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_SECONDS, stack_and_model
from metis.errors import AdapterError, InvalidRequestError, NotConfiguredError
from metis.pipeline.config import checked_config
from metis.pipeline.settings import with_model
from metis.stacks.loader import StackSpec, load_stack
from metis.telemetry.sink import default_sink
from metis.transport.loop_clients import at_loop_end

if TYPE_CHECKING:
    from metis.routing.router import Router

MAX_ADAPTERS_PER_LOOP = 16
"""How many adapters (each with its own connection pool) one event loop keeps for the
one-line calls; the least recently used beyond it is closed."""

Pooled = Adapter | Embedder
"""What a loop keeps for the one-line calls: chat adapters and embedders."""

AdapterKey = tuple[str, str | None, str | None, float, int, str]
"""What an adapter was built from: stack, key, base URL, timeout, retries, settings."""
_Kept = tuple[AdapterKey, int]
"""An adapter's key and the default telemetry sink's id when it was built."""


@dataclass(eq=False)
class _Held:
    adapter: Pooled
    calls: int = 0
    """Calls in flight on it: an evicted adapter is closed when the last one ends."""
    evicted: bool = False


class LoopAdapters:
    """One event loop's adapters for the one-line calls, least recently used first."""

    def __init__(self) -> None:
        self._held: OrderedDict[_Kept, _Held] = OrderedDict()
        self.release_task: object = None
        """What closes them when the loop ends (a task the loop holds only weakly)."""
        self._routers: weakref.WeakSet[Router] = weakref.WeakSet()

    def __len__(self) -> int:
        return len(self._held)

    def adapters(self) -> list[Pooled]:
        return [held.adapter for held in self._held.values()]

    @contextlib.asynccontextmanager
    async def lease(self, key: AdapterKey, build: Callable[[], Pooled]) -> AsyncIterator[Pooled]:
        """The adapter for ``key`` (built on first use), kept open while the block runs; one
        built under another default telemetry sink is not this one (its sink is the old)."""
        kept = (key, id(default_sink()))
        held = self._held.get(kept)
        if held is None:
            held = self._held[kept] = _Held(build())
        self._held.move_to_end(kept)
        held.calls += 1
        try:
            await self._evict_beyond(MAX_ADAPTERS_PER_LOOP)
            yield held.adapter
        finally:
            held.calls -= 1
            if held.evicted and held.calls == 0:
                await _close(held.adapter)

    def watch(self, router: Router) -> None:
        """A router the synchronous forms called through on this loop: its adapters' pools are
        this loop's, so it is closed with the loop (at exit, for the synchronous forms')."""
        self._routers.add(router)

    async def aclose(self) -> None:
        """Close every adapter, and every router watched (the loop is ending)."""
        await self._evict_beyond(0)
        for router in list(self._routers):
            await _close(router)

    async def _evict_beyond(self, limit: int) -> None:
        while len(self._held) > limit:
            _, held = self._held.popitem(last=False)
            held.evicted = True
            if held.calls == 0:
                await _close(held.adapter)


_loops: dict[object, LoopAdapters] = {}
"""By the native token of each event loop that made a one-line call (an asyncio loop, a trio
run's token)."""


def this_loop() -> LoopAdapters:
    """The running event loop's adapters (watched from the first call on, to be closed when
    the loop ends)."""
    token = anyio.lowlevel.current_token().native_token
    held = _loops.get(token)
    if held is None:
        _forget_closed_loops()
        held = _loops[token] = LoopAdapters()
        release = functools.partial(_release, token, held)
        held.release_task = at_loop_end(token, release, "metis: close the one-line adapters")
    return held


@contextlib.asynccontextmanager
async def model_adapter(model: str, options: Mapping[str, Any]) -> AsyncIterator[Adapter]:
    """:func:`leased_adapter` for ``model`` (``provider:model``) and a call's settings in
    ``options`` (``api_key``, ``base_url``, ``timeout_seconds``, ``max_retries``,
    ``settings``), the one-line calls' defaults where they are left out. An AdapterError
    raised in the block is given a note of what was meant (a model the provider does not
    have, where a refused key came from)."""
    stack_name, wire = stack_and_model(model)
    async with leased_adapter(
        stack_name,
        api_key=options.get("api_key"),
        base_url=options.get("base_url"),
        timeout_seconds=options.get("timeout_seconds", DEFAULT_TIMEOUT_SECONDS),
        max_retries=options.get("max_retries", DEFAULT_MAX_RETRIES),
        settings=options.get("settings"),
        model=wire,
    ) as adapter:
        try:
            yield adapter
        except AdapterError as error:
            keyed, based = bool(options.get("api_key")), bool(options.get("base_url"))
            note = call_note(error, adapter, model, keyed, base_url_given=based)
            if note is not None:
                error.add_note(note)  # shown under the traceback's last line
            raise


@contextlib.asynccontextmanager
async def leased_adapter(
    stack_name: str,
    *,
    api_key: str | None,
    base_url: str | None,
    timeout_seconds: float,
    max_retries: int,
    settings: Mapping[str, Any] | None = None,
    model: str | None = None,
) -> AsyncIterator[Adapter]:
    """The adapter for ``stack_name`` and these settings on the running event loop, open
    while the block runs. The key defaults to the stack's variable; the base URL to the SDK's
    variable the stack names (read by the adapter); ``model`` (the call's, as the provider
    names it) is the settings' model where the stack's settings take one."""
    stack = builtin_stack(stack_name)
    settings = with_model(stack.settings, settings, model)
    api_key = api_key or (os.environ.get(stack.auth.env) if stack.auth.env else None)
    _require_key(stack, api_key)
    # Keyed by what the adapter is built from, so a changed variable gets a new adapter.
    key = (stack_name, api_key, base_url or stack.endpoint.env_base_url())
    config = checked_config(
        "options",
        InvalidRequestError,
        api_key=api_key,
        base_url=base_url,
        timeout_seconds=timeout_seconds,
        max_retries=max_retries,
        settings=settings_of(settings),
    )
    build = functools.partial(Adapter, stack, config, init_on_first_call=True)
    lease = (*key, timeout_seconds, max_retries, _settings_key(settings))
    async with this_loop().lease(lease, build) as adapter:
        assert isinstance(adapter, Adapter)  # the key names a chat stack
        yield adapter


def settings_of(settings: object) -> dict[str, Any]:
    """A call's ``settings=`` (None: none) as a dict; not a mapping, an InvalidRequestError."""
    if settings is None:
        return {}
    if not isinstance(settings, Mapping):
        raise InvalidRequestError(
            "settings: expected a mapping of the provider's settings ({'region': ...}), got "
            f"{type(settings).__name__}"
        )
    return dict(settings)


def _settings_key(settings: Mapping[str, Any] | None) -> str:
    """The settings as part of the key: equal values, one adapter; an object (credentials, a
    token provider) by identity."""
    return json.dumps(
        dict(settings or {}), sort_keys=True, default=lambda value: f"{type(value)}@{id(value)}"
    )


@functools.cache
def builtin_stack(name: str) -> StackSpec:
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


async def _close(adapter: Pooled | Router) -> None:
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        await adapter.aclose()


async def _release(token: object, held: LoopAdapters) -> None:
    """``held`` closed as its loop ends, and forgotten."""
    if _loops.get(token) is held:
        del _loops[token]
    await held.aclose()


def _forget_closed_loops() -> None:
    """Drop what closed asyncio loops held (their tasks never ran to the end)."""
    for token, held in list(_loops.items()):
        if isinstance(token, asyncio.AbstractEventLoop) and token.is_closed():
            del _loops[token]
            _quiet(held.release_task)


def _forget_all_after_fork() -> None:
    for held in _loops.values():
        _quiet(held.release_task)
    _loops.clear()


def _quiet(task: Any) -> None:
    """A task of a loop that will never run again is dropped without asyncio's "Task was
    destroyed but it is pending" log line."""
    if isinstance(task, asyncio.Task):
        task._log_destroy_pending = False  # type: ignore[attr-defined]


os.register_at_fork(after_in_child=_forget_all_after_fork)
