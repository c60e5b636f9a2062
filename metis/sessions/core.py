"""A session's state and its one primitive: a model call over the history, whose reply, as it
ended, is appended.

What the history keeps of a call (docs/sessions.md):

- a reply that completes: its message;
- a reply cut short (cancelled, an error in the stream, a stream left early): what arrived,
  without its unfinished tool calls (docs/contract.md §2), so the next request is valid for
  every provider;
- a call that fails before anything arrived: nothing, and the messages the turn added for it
  are taken back out, so the turn can be sent again as it was.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

from metis.adapter.adapter import Adapter
from metis.calls.request import (
    CallOptions,
    ModelLike,
    ModelOptions,
    build_request,
    default_output_tokens,
)
from metis.model.content import Message
from metis.model.events import MessageComplete, StreamEvent
from metis.model.request import CanonicalRequest
from metis.model.response import StopKind, TokenUsage
from metis.sessions.context import Compact, ContextCheck, fitted, with_provider_compaction
from metis.sessions.control import TurnControl
from metis.sessions.events import CompactionCall
from metis.sessions.models import Resolved, resolved
from metis.sessions.provider_state import (
    ProviderState,
    StateKeeper,
    close_connections,
    lease_connections,
)
from metis.sessions.reply import Reply
from metis.sessions.spending import Spending

UNFINISHED = (StopKind.CANCELLED, StopKind.ERROR)


@dataclass(slots=True)
class CallRecord:
    """Filled in by :meth:`Conversation.call`: the call's reply and the model it went to."""

    reply: Reply | None = None
    model: str = ""
    compaction: CompactionCall | None = None
    """The call to the provider's compact endpoint made before the model call, if one was."""


class Conversation:
    """The state a :class:`~metis.sessions.Session` owns."""

    def __init__(
        self,
        model: ModelLike,
        history: list[Message],
        session_id: str,
        adapters: Mapping[str, Adapter],
        options: ModelOptions,
        *,
        compact: Compact,
        context_check: ContextCheck,
        provider_state: ProviderState,
        spending: Spending,
    ) -> None:
        self.model = model
        self.history = history
        self.session_id = session_id
        self.adapters = dict(adapters)
        self.options = options
        self.compact = compact
        self.context_check = context_check
        self.keeper = StateKeeper(session_id, provider_state)
        self.spending = spending
        self.connections: dict[str, Any] = {}
        """What a provider keeps open for this conversation, by provider (the WebSocket
        transport's connection, docs/websocket.md); :meth:`Session.aclose` closes each."""

    def options_with(self, overrides: ModelOptions) -> ModelOptions:
        """The session's options as they are now, with a turn's ``overrides``."""
        merged: ModelOptions = {**self.options, **overrides}
        return merged

    async def call(
        self, overrides: ModelOptions, control: TurnControl, record: CallRecord, mark: int | None
    ) -> AsyncGenerator[StreamEvent, None]:
        """One model call over the history with the session's options (as they are now) and
        ``overrides``, its events yielded and its reply appended as it ended. When it fails or
        is cancelled with nothing arrived, the history is cut back to ``mark`` (if given)."""
        options = self.options_with(overrides)
        kept = finished = False
        try:
            async with resolved(self.model, self.adapters, options) as found:
                record.model = found.label
                request = build_request(
                    found.chat, found.model, self.history, self._call_options(found, options)
                )
                request = with_provider_compaction(found, request, self.compact)
                fit = await fitted(found, request, self.context_check, self.compact)
                request, budget = fit.request, fit.budget
                if fit.compaction is not None:
                    record.compaction = fit.compaction
                    self.spending.add_cost(fit.compaction.usage, fit.compaction.cost)
                if fit.compacted:
                    self.history[:] = request.messages
                    self.keeper.forget_ids_not_in(self.history)
                    mark = None  # the turn's own messages are no longer where they were
                await self.keeper.before_call(found.servers)
                lease_connections(self.connections, self.session_id, found.servers)
                reply = record.reply = Reply(found, request, budget.input_tokens if budget else 0)
                try:
                    async with aclosing(self._stream(found, request, reply, control)) as events:
                        async for event in events:
                            if isinstance(event, MessageComplete):
                                finished = event.stop_reason.kind not in UNFINISHED
                                await self._completed(found, event, reply)
                            yield event
                finally:
                    kept = self._keep(reply)
        finally:
            if not kept and not finished and mark is not None:
                del self.history[mark:]
            if control.release:
                await close_connections(self.connections, self.session_id)

    async def _stream(
        self, found: Resolved, request: CanonicalRequest, reply: Reply, control: TurnControl
    ) -> AsyncGenerator[StreamEvent, None]:
        """The call's events, each seen by ``reply``; the adapter's ``cancel`` stops it."""
        if control.cancelled:  # before it was sent
            yield reply.cancelled()
            return
        events = found.chat.stream(request)
        stop = functools.partial(found.chat.cancel, request.request_id)
        try:
            with control.calling(stop):
                async for event in events:
                    reply.see(event)
                    control.event_arrived()
                    yield event
        finally:
            aclose = getattr(events, "aclose", None)  # an adapter's and a router's have one
            if aclose is not None:
                await aclose()

    def _call_options(self, found: Resolved, options: ModelOptions) -> CallOptions:
        """The call's options: the session's id, and a reply limit that leaves the input at
        least half the window (the one-line calls' default otherwise)."""
        with_id: CallOptions = {**options, "session_id": self.session_id}
        if "max_output_tokens" not in options:
            caps = found.chat.capabilities_for(found.wire_model)
            half = max(1, caps.max_context_tokens // 2)
            limit = min(caps.max_output_tokens, default_output_tokens(options), half)
            with_id["max_output_tokens"] = limit
        return with_id

    def _keep(self, reply: Reply) -> bool:
        message = reply.kept = reply.message()
        if message is not None:
            self.history.append(message)
        return message is not None

    async def _completed(self, found: Resolved, final: MessageComplete, reply: Reply) -> None:
        response = reply.response
        self.spending.add(response.model if response else found.label, final.usage)
        await self.keeper.after_call(found.servers, final.final_content)


def add_usage(total: TokenUsage, more: TokenUsage) -> TokenUsage:
    return total.plus(more)
