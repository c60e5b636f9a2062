"""ChatModel: what an :class:`~metis.adapter.Adapter` and a :class:`~metis.routing.Router`
both are to the code that calls them.

Code written against a ChatModel takes either: one provider's adapter, or a router over
several models. The one-line calls (``metis.complete(model, ...)``) take a router where a model
string goes for the same reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from metis.adapter.count_tokens import TokenCount
    from metis.model.capabilities import AdapterCapabilities
    from metis.model.events import StreamEvent
    from metis.model.request import CanonicalRequest
    from metis.model.response import CanonicalResponse

__all__ = ["ChatModel"]


@runtime_checkable
class ChatModel(Protocol):
    """Streams and completes canonical requests, counts their tokens, says what a model can
    serve, and releases what it holds."""

    def stream(self, request: CanonicalRequest) -> AsyncIterator[StreamEvent]:
        """The canonical events of one call, ending with ``message.complete``."""
        ...

    async def complete(self, request: CanonicalRequest) -> CanonicalResponse:
        """One call's response."""
        ...

    async def count_tokens(self, request: CanonicalRequest) -> TokenCount:
        """The request's input tokens: the provider's count where it has one, else an estimate."""
        ...

    def capabilities_for(self, wire_model: str) -> AdapterCapabilities:
        """What ``wire_model`` can serve here."""
        ...

    async def aclose(self) -> None:
        """Release connections and run lifecycle teardown; the object is not used after it."""
        ...
