"""One model call of a session: its events streamed, and its reply as it ended.

A reply that completes, or that the session's ``cancel()`` stops (through the adapter's own
``cancel``), is its ``message.complete``'s (docs/contract.md §2: what arrived, with stop reason
``cancelled``). One that ends without a ``message.complete`` (the caller's own cancel scope, a
stream left early) keeps the text that arrived; its reasoning (unsigned yet) and unfinished tool
calls are not kept. A call cancelled before it was sent ends with a ``message.complete`` made
here, with nothing in it.
"""

from __future__ import annotations

import time

from metis.adapter.adapter import Adapter
from metis.calls.priced import priced_usage
from metis.model.content import Message, Role, TextBlock
from metis.model.events import MessageComplete, StreamEvent, TextDelta
from metis.model.request import CanonicalRequest
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage
from metis.sessions.models import ChatLike, Resolved

CANCELLED = StopReason(kind=StopKind.CANCELLED, raw="Session.cancel()")


class Reply:
    """What one model call has given so far."""

    def __init__(self, resolved: Resolved, request: CanonicalRequest, input_tokens: int) -> None:
        self.resolved = resolved
        self.request = request
        self.input_tokens = input_tokens
        """The input as measured before sending (the usage of a reply cut short)."""
        self.started = time.monotonic()
        self.final: MessageComplete | None = None
        self.kept: Message | None = None
        """What the history kept of the reply (set once the call is over)."""
        self._texts: dict[int, list[str]] = {}

    def see(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._texts.setdefault(event.content_block_index, []).append(event.text)
        elif isinstance(event, MessageComplete):
            self.final = event

    def cancelled(self) -> MessageComplete:
        """The ``message.complete`` of a call the session cancelled before it was sent.

        Its ``model`` is the provider's own name, as on a call that was made: the one the
        request would have named, or None for a router, which had chosen no provider yet."""
        content = self._text_blocks()
        output = sum(len(block.text) for block in content) // 4
        usage = TokenUsage(input_tokens=self.input_tokens, output_tokens=output, estimated=True)
        chat = self.resolved.chat
        model = chat.wire_model(self.request.model) if isinstance(chat, Adapter) else None
        self.final = MessageComplete(list(content), CANCELLED, usage, model=model)
        return self.final

    @property
    def response(self) -> CanonicalResponse | None:
        """The reply as it ended, when a ``message.complete`` ended it."""
        final = self.final
        if final is None:
            return None
        chat = self.resolved.chat
        routed = not isinstance(chat, Adapter)
        model = served_by(chat, final.model) if routed else self.request.model
        cost = priced_usage(model, final.usage)
        return CanonicalResponse(
            request_id=self.request.request_id,
            model=model,
            provider=f"route:{chat.name}" if routed else chat.name,
            content=final.final_content,
            stop_reason=final.stop_reason,
            usage=final.usage,
            latency_ms=int((time.monotonic() - self.started) * 1000),
            message_id=final.message_id,
            warnings=final.warnings,
            cost_usd=cost.usd,
            cost_known=cost.priced,
        )

    def message(self) -> Message | None:
        """What the history keeps of the reply: the reply's message (a cut one without its
        tool calls), or the text that arrived; None when that is nothing."""
        response = self.response
        if response is not None:
            message = response.message
        else:
            message = Message(role=Role.ASSISTANT, content=list(self._text_blocks()))
        return message if message.content else None

    def _text_blocks(self) -> list[TextBlock]:
        texts = ("".join(self._texts[i]) for i in sorted(self._texts))
        return [TextBlock(text=text) for text in texts if text]


def served_by(route: ChatLike, reported: str | None) -> str:
    """The route's model that answered: the one whose provider name is the model the reply
    reports (``gpt-4o`` for ``gpt-4o-2024-08-06``), when exactly one is; else the report."""
    targets = getattr(route, "targets", ())
    found = {
        target.model
        for target in targets
        if reported and reported.startswith(target.adapter.wire_model(target.model))
    }
    if len(found) == 1:
        return str(found.pop())
    return reported or f"route:{getattr(route, 'name', '?')}"
