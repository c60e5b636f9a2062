"""thinking_filter: opaque reasoning goes back only to the provider and model that made it.

A thinking block's signature (and a redacted block's data) is only meaningful to the model
that produced it; ``provider_raw`` records who that was. Elsewhere the block is dropped whole,
with one structured WARN (docs/contract.md §7), or, when ``as_text`` is set, its readable
reasoning is kept as plain text (redacted blocks have none and are always dropped).
"""

from __future__ import annotations

from metis.model.content import (
    ContentBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
)
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.stage import RequestStage
from metis.stages.options import ThinkingFilterOptions

NO_SIGNATURE = "it has no signature"


class ThinkingFilter(RequestStage[CanonicalRequest]):
    name = "thinking_filter"

    Options = ThinkingFilterOptions

    options: ThinkingFilterOptions

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        thinking_at = call.history(request.messages).thinking_at
        if not thinking_at:
            return request
        messages = list(request.messages)
        for i in thinking_at:
            messages[i] = self._filter(messages[i], i, call)
        if all(a is b for a, b in zip(messages, request.messages, strict=True)):
            return request  # every block may go to this model
        return request.model_copy(update={"messages": messages})

    def _filter(self, message: Message, index: int, call: Call) -> Message:
        kept: list[ContentBlock] = []
        for block in message.content:
            if not isinstance(block, ThinkingBlock | RedactedThinkingBlock):
                kept.append(block)
                continue
            reason = self._refusal(block, call)
            if reason is None:
                kept.append(block)
                continue
            if reason == NO_SIGNATURE and self.options.quiet_own_unsigned:
                continue
            if self.options.as_text and isinstance(block, ThinkingBlock) and block.thinking:
                kept.append(TextBlock(text=block.thinking))
                reason += "; kept its text as a plain text block"
            call.warn_dropped(block.type, reason, message.id or f"messages[{index}]")
        if len(kept) == len(message.content) and all(
            a is b for a, b in zip(kept, message.content, strict=True)
        ):
            return message
        return message.model_copy(update={"content": kept})

    def _refusal(self, block: ThinkingBlock | RedactedThinkingBlock, call: Call) -> str | None:
        """Why this block may not go to this call's model, or None when it may."""
        origin = block.provider_raw
        if self.options.keep == "never":
            return "this stack never sends reasoning back"
        if origin is None:
            return (
                "its producing provider and model are unknown, so its signature cannot be trusted"
            )
        if origin.provider != call.provider:
            return f"it was produced by {origin.provider}, not {call.provider}"
        if self.options.keep == "same_model" and origin.model != call.model:
            return f"it was produced by model {origin.model}, not {call.model}"
        if isinstance(block, ThinkingBlock) and not block.signature and self.options.signed_only:
            return NO_SIGNATURE
        return None
