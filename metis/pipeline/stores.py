"""Per-session state that outlives one call: the tool-id map (docs/contract.md §6, §1).

Canonical tool ids (``tu_<ulid>``) are what applications see. Each provider namespace keeps its
own ids; the store remembers, per session and provider, which provider id stands for which
canonical id, so a conversation that moves between providers and back sends each provider the
ids it issued. The store is an interface: in memory by default, shared by every adapter in the
process; a deployment whose turns land on different workers plugs in a shared one
(:class:`metis.redis.tool_ids.RedisToolIdStore`). A store call may fail or hang: the ``tool_ids``
stage bounds it by the call's cancel and deadline and goes on with derived ids
(docs/tool-id-store.md).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from typing import Protocol

from metis.core.options import checked_init
from metis.errors import ConfigError


class ToolIdStore(Protocol):
    """Where a session's canonical tool ids and each provider's ids are remembered
    (docs/contract.md §6): in memory by default, in Redis to share between workers."""

    async def provider_ids(
        self, session_id: str, provider: str, canonical_ids: Iterable[str]
    ) -> dict[str, str]:
        """The known provider id for each canonical id that has one."""
        ...

    async def remember(self, session_id: str, provider: str, pairs: Mapping[str, str]) -> None:
        """Record canonical id -> provider id pairs."""
        ...

    async def forget(self, session_id: str) -> None:
        """Drop every pair kept for the session."""
        ...


@checked_init
class InMemoryToolIdStore:
    """A process-local store that keeps the most recently used ``max_sessions`` sessions."""

    def __init__(self, max_sessions: int = 10_000) -> None:
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise ConfigError(
                "InMemoryToolIdStore: max_sessions is a whole number of sessions >= 1, got "
                f"{type(max_sessions).__name__} {max_sessions!r:.60}"
            )
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[str, dict[str, dict[str, str]]] = OrderedDict()

    def __repr__(self) -> str:
        return f"InMemoryToolIdStore({len(self._sessions)} of at most {self.max_sessions} sessions)"

    async def provider_ids(
        self, session_id: str, provider: str, canonical_ids: Iterable[str]
    ) -> dict[str, str]:
        """The known provider id for each canonical id that has one."""
        session = self._sessions.get(session_id)
        if session is None:
            return {}
        self._sessions.move_to_end(session_id)
        known = session.get(provider, {})
        return {cid: known[cid] for cid in canonical_ids if cid in known}

    async def remember(self, session_id: str, provider: str, pairs: Mapping[str, str]) -> None:
        """Record canonical id -> provider id pairs; the session becomes the most recent."""
        if not pairs:
            return
        session = self._sessions.setdefault(session_id, {})
        self._sessions.move_to_end(session_id)
        session.setdefault(provider, {}).update(pairs)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)

    async def forget(self, session_id: str) -> None:
        """Drop every pair kept for the session."""
        self._sessions.pop(session_id, None)


default_tool_id_store = InMemoryToolIdStore()
