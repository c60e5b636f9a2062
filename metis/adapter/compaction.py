"""Explicit compaction by the provider: the conversation a request would send, compacted by
the provider's own endpoint into a shorter one that goes back only to it (docs/sessions.md).

* OpenAI Responses: ``POST /v1/responses/compact``
  (https://platform.openai.com/docs/api-reference/responses/compact) answers the request's user
  messages and one ``compaction`` item (:func:`metis.wire.compaction.responses_compacted`).

Anthropic has no such endpoint: it compacts within a call, past a trigger
(:class:`metis.model.request.Compaction`). The request goes the way every request to the
provider goes (its ``fetch``, as :mod:`metis.adapter.count_tokens` counts), run through the
adapter's stages up to ``encode`` so what is compacted is what would be sent.
"""

from __future__ import annotations

from dataclasses import dataclass

from metis.adapter.count_tokens import Countable, side_call
from metis.catalog.estimate import estimate_request_tokens
from metis.errors import CapabilityError
from metis.model.content import Message
from metis.model.request import CanonicalRequest
from metis.model.response import TokenUsage
from metis.pipeline.call import CallTerms
from metis.pipeline.request import WireRequest
from metis.wire.compaction import (
    responses_compact_body,
    responses_compact_usage,
    responses_compacted,
)

COMPACT_CODECS = frozenset({"openai_responses"})
"""The codecs whose provider has a compact endpoint."""


def can_compact(adapter: Countable) -> bool:
    """Whether ``adapter``'s provider compacts a conversation on request."""
    provider = adapter.pipeline.provider
    return provider is not None and provider.codec_name in COMPACT_CODECS


@dataclass(frozen=True, slots=True)
class CompactedConversation:
    """What the compact endpoint answered: the shorter history that stands for the
    conversation, and the tokens the compaction pass spent (billed like any call's)."""

    messages: list[Message]
    usage: TokenUsage
    """As the provider reported it; estimated (``usage.estimated``) when it reported none."""


async def compact_conversation(
    adapter: Countable, request: CanonicalRequest
) -> CompactedConversation:
    """``request``'s conversation as the provider compacted it: a shorter history that
    stands for it, to continue from with the same provider, and what compacting it spent."""
    provider = adapter.pipeline.provider
    encode = provider.part("encode") if provider is not None else None
    if provider is None or encode is None or not can_compact(adapter):
        raise CapabilityError(f"{adapter.name} has no compaction endpoint", provider=adapter.name)
    call = side_call(adapter, request)
    call.terms = CallTerms(capabilities_checked=True)  # it is compacted for being too long
    unstreamed = request.model_copy(update={"stream": False, "compaction": None})
    wire = await adapter.pipeline.prepare(unstreamed, call, through=encode)
    url = wire.url.partition("?")[0]
    if not url.endswith("/responses"):
        raise CapabilityError(
            f"{adapter.name}: no compaction endpoint beside its responses endpoint",
            provider=adapter.name,
        )
    body = responses_compact_body(wire.body)
    answer = await provider.fetch(WireRequest(url + "/compact", body, wire.headers), call)
    messages = responses_compacted(answer.body, adapter.name, call.wire_model)
    usage = responses_compact_usage(answer.body, adapter.name)
    if usage is None:  # counted as a reply with no usage is: its input estimated
        profile = adapter.stack.token_estimate.for_model(call.wire_model)
        estimate = estimate_request_tokens(unstreamed, profile)
        usage = TokenUsage(input_tokens=estimate, estimated=True)
    return CompactedConversation(messages, usage)
