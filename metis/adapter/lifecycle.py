"""An adapter's lifecycle (docs/contract.md §1): ``init`` once, ``aclose`` once, and ``async with``.

:class:`~metis.adapter.adapter.Adapter` holds the pipeline and the connection pool; this is the
part that opens and closes what a provider keeps between calls (its lifespan, the stages'
``init`` and ``dispose``, the pool the adapter made)."""

from __future__ import annotations

from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Self

from metis.adapter.deprecated import OldClosingNames
from metis.core.any_loop import AnyLoopSlots

if TYPE_CHECKING:
    from metis.model.capabilities import AdapterCapabilities
    from metis.pipeline.pipeline import Pipeline
    from metis.transport.loop_clients import LoopClients


class Lifecycle(OldClosingNames):
    """``init``, ``aclose`` and the context manager, over the state the adapter sets up."""

    _pipeline: Pipeline | None
    _initialized: bool
    _init_lock: AnyLoopSlots
    _lifespan: AsyncExitStack | None
    _closed: bool
    _owns_client: bool
    _own_clients: LoopClients

    @property
    def pipeline(self) -> Pipeline:
        raise NotImplementedError

    @property
    def capabilities(self) -> AdapterCapabilities:
        raise NotImplementedError

    @capabilities.setter
    def capabilities(self, value: AdapterCapabilities) -> None:
        raise NotImplementedError

    async def init(self) -> None:
        """Lifecycle hook: enters the provider's lifespan (a local provider checks its server
        and model there, and the capabilities it reports become this adapter's), then runs
        each stage's ``init``; a remote HTTP stack has nothing to prepare. Runs once however
        often it is called; an adapter built with ``init_on_first_call`` runs it before its
        first call."""
        if self._initialized:
            return
        turn = object()  # the first init is one at a time, whichever loop or thread asks
        await self._init_lock.take(turn)
        try:
            if not self._initialized:
                await self._enter()
        finally:
            self._init_lock.give_back(turn)

    async def _enter(self) -> None:
        provider = self.pipeline.provider
        lifespan = provider.lifespan(self.capabilities) if provider is not None else None
        if lifespan is not None:
            exits = AsyncExitStack()
            self.capabilities = await exits.enter_async_context(lifespan)
            self._lifespan = exits
        for stage in self.pipeline:
            await stage.init(self)
        self._initialized = True

    async def aclose(self) -> None:
        """Runs each stage's ``dispose``, innermost first, leaves the provider's lifespan (a
        local model is unloaded there), then releases the connection pool if this adapter
        made it. ``async with adapter`` calls it on the way out; calling it again does
        nothing, and a call after it is a ClosedError."""
        if self._closed:
            return
        try:
            for stage in reversed(self._pipeline.stages if self._pipeline else ()):
                await stage.dispose(self)  # a pipeline never built has no stage to dispose
            lifespan, self._lifespan = self._lifespan, None
            if lifespan is not None:
                await lifespan.aclose()
        finally:
            self._initialized = False
            self._closed = True
            if self._owns_client:
                await self._own_clients.aclose()

    async def __aenter__(self) -> Self:
        await self.init()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
