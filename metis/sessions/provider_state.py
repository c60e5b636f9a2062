"""A session's per-provider state, kept with the session so it moves with it between workers:

- the tool-id map (docs/contract.md §6): for each provider, which of its ids stands for each
  canonical tool id of the history. The adapters' store (in memory, or Redis) remains the one
  the stages read; the session copies its own pairs out after each step and back into the
  store of the adapter serving the next one, so a session restored on another worker sends each
  provider the ids it issued, whatever store that worker has;
- the continuation (the ``continuation`` stage, docs/stacks.md): the last reply a stateful API
  (OpenAI Responses) keeps for this session, and a fingerprint of the input it covers. The
  session's copy is put back before each call, so a restored session sends only what is new
  against the reply the provider still holds. A reply the provider no longer has costs one
  whole request (the stage sends the whole transcript), never a wrong conversation.

Copying never fails a call: a store that errs or does not answer in :data:`STORE_WAIT_SECONDS`
is logged and skipped (the stages then derive ids, as for any history from elsewhere).
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
from pydantic import BaseModel, ConfigDict, Field

from metis.adapter.adapter import Adapter
from metis.core.empty import empty_dict, empty_list
from metis.core.raised import is_stray_cancel
from metis.model.content import Message, ToolUseBlock
from metis.stages.edits.continuation import Continuation, Covered

log = logging.getLogger("metis")

STORE_WAIT_SECONDS = 5.0
"""How long copying the tool-id pairs to or from a store may take before it is skipped."""


class ContinuationState(BaseModel):
    """The last stored reply of one (provider, model) and what input it covers."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str
    model: str
    response_id: str
    count: int = Field(ge=0)
    digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    """The covered items' fingerprint, hex (SHA-256)."""


class ProviderState(BaseModel):
    """What a session keeps per provider (saved with it as JSON)."""

    model_config = ConfigDict(extra="forbid")

    tool_ids: dict[str, dict[str, str]] = Field(default_factory=empty_dict)
    """Provider -> canonical tool id -> the provider's id."""
    continuation: list[ContinuationState] = Field(default_factory=empty_list)


class StateKeeper:
    """Copies one session's provider state between the session and the adapters serving it."""

    def __init__(self, session_id: str, state: ProviderState) -> None:
        self.session_id = session_id
        self.state = state
        self._installed: set[tuple[int, str]] = set()
        """(store, provider) pairs that already hold the session's saved ids."""

    async def before_call(self, servers: tuple[tuple[Adapter, str], ...]) -> None:
        """Put the session's state where the adapters that may serve the call read it."""
        for adapter, model in servers:
            await self._install_ids(adapter)
            stage = _continuation(adapter)
            if stage is None:
                continue
            for saved in self.state.continuation:
                if (saved.provider, saved.model) == (adapter.name, model):
                    covered = Covered(saved.response_id, saved.count, bytes.fromhex(saved.digest))
                    stage.memory.put((self.session_id, adapter.name, model), covered)

    async def after_call(
        self, servers: tuple[tuple[Adapter, str], ...], content: list[Any]
    ) -> None:
        """Copy out what the call changed: the ids of its tool calls, the continuation."""
        ids = [block.id for block in content if isinstance(block, ToolUseBlock)]
        for adapter, model in servers:
            if ids:
                await self._copy_ids(adapter, ids)
            self._copy_continuation(adapter, model)

    def forget_ids_not_in(self, history: list[Message]) -> None:
        """Drop the pairs of tool calls no longer in the history (after compaction)."""
        kept = {b.id for m in history for b in m.content if isinstance(b, ToolUseBlock)}
        for provider, pairs in self.state.tool_ids.items():
            self.state.tool_ids[provider] = {c: p for c, p in pairs.items() if c in kept}

    async def _install_ids(self, adapter: Adapter) -> None:
        pairs = self.state.tool_ids.get(adapter.name)
        key = (id(adapter.tool_id_store), adapter.name)
        if not pairs or key in self._installed:
            return
        store = adapter.tool_id_store
        if await _bounded(store.remember(self.session_id, adapter.name, pairs), adapter.name):
            self._installed.add(key)

    async def _copy_ids(self, adapter: Adapter, ids: list[str]) -> None:
        store = adapter.tool_id_store
        found: dict[str, str] = {}

        async def read() -> None:
            found.update(await store.provider_ids(self.session_id, adapter.name, ids))

        if await _bounded(read(), adapter.name) and found:
            self.state.tool_ids.setdefault(adapter.name, {}).update(found)

    def _copy_continuation(self, adapter: Adapter, model: str) -> None:
        stage = _continuation(adapter)
        covered = stage.memory.get((self.session_id, adapter.name, model)) if stage else None
        if covered is None:
            return
        kept = [
            s for s in self.state.continuation if (s.provider, s.model) != (adapter.name, model)
        ]
        kept.append(
            ContinuationState(
                provider=adapter.name,
                model=model,
                response_id=covered.response_id,
                count=covered.count,
                digest=covered.digest.hex(),
            )
        )
        self.state.continuation = kept


class ConnectionLease:
    """A session's hold on the connection an adapter's transport keeps for it (the
    WebSocket transport's, docs/websocket.md): ``aclose`` releases it."""

    def __init__(self, transport: Any, session_id: str) -> None:
        self.transport = transport
        self.session_id = session_id

    async def aclose(self) -> None:
        await self.transport.release(self.session_id)


def lease_connections(
    held: dict[str, Any], session_id: str, servers: tuple[tuple[Adapter, str], ...]
) -> None:
    """Note in ``held`` (a session's connections, by provider) each adapter among ``servers``
    whose transport keeps a connection per session, so closing the session releases it."""
    for adapter, _ in servers:
        provider = adapter.pipeline.provider
        transport = provider.part("transport") if provider is not None else None
        if transport is None or not callable(getattr(transport, "release", None)):
            continue
        key = adapter.name
        kept = held.get(key)
        if kept is not None and getattr(kept, "transport", None) is not transport:
            key = f"{adapter.name} ({id(transport):x})"
        if key not in held:
            held[key] = ConnectionLease(transport, session_id)


def _continuation(adapter: Adapter) -> Continuation | None:
    if "continuation" not in adapter.pipeline:
        return None
    stage = adapter.pipeline["continuation"]
    return stage if isinstance(stage, Continuation) else None


async def _bounded(work: Any, provider: str) -> bool:
    """Await ``work`` (a store call) for up to :data:`STORE_WAIT_SECONDS`; False when it failed
    (an asyncio CancelledError no one cancelled the turn for too) or did not answer in time
    (logged)."""
    try:
        with anyio.fail_after(STORE_WAIT_SECONDS):
            await work
        return True
    except BaseException as exc:  # a store's failure is never the call's
        if not isinstance(exc, Exception) and not is_stray_cancel(exc):
            raise  # the turn's own cancellation, or the application's way out
        log.warning(
            "session: the tool-id store did not answer for %s: %s",
            provider,
            exc if str(exc) else type(exc).__name__,
            extra={"event": "metis.session_store_skipped", "provider": provider},
        )
        return False


async def close_connections(held: dict[str, Any], session_id: str) -> None:
    """Close each of a session's connections (``held``, by provider), emptying it; one that
    fails to close is logged and leaves the others."""
    while held:
        provider, connection = held.popitem()
        with anyio.CancelScope(shield=True):
            try:
                await connection.aclose()
            except Exception as exc:
                log.warning(
                    "session %s: closing %s's connection failed: %r",
                    session_id,
                    provider,
                    exc,
                    extra={"event": "metis.session_close_failed", "provider": provider},
                )
