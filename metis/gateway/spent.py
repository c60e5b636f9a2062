"""What a served request spent: the model its usage is priced as, and the usage (charged to
its key, counted in the metrics); for a translated stream cut before its usage came (the
deadline, the client gone), an estimate of it."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from metis.catalog.token_profile import CHARS_PER_TOKEN
from metis.model.events import (
    MessageComplete,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseInputDelta,
)
from metis.model.request import CanonicalRequest
from metis.model.response import CanonicalResponse, TokenUsage

log = logging.getLogger("metis.gateway")

OUTPUT_TEXT = {TextDelta: "text", ThinkingDelta: "thinking", ToolUseInputDelta: "partial_json"}
"""The events that stream the model's output, and the field of each that holds it."""


@dataclass(slots=True)
class Spent:
    """What a request spent: the model its usage is priced as, and the usage."""

    model: str | None = None
    usage: TokenUsage | None = None


def spent_by(response: CanonicalResponse | None) -> tuple[str | None, TokenUsage | None]:
    """The model a whole answer is priced as, and its usage (None, None: no answer)."""
    if response is None:
        return None, None
    return priced_model(response.provider, response.model), response.usage


def streamed_model(asked: str, complete: MessageComplete) -> str:
    """The model a stream's usage is priced as, the request having ``asked`` for a model: the
    routed model's canonical id, or for a route the model that answered (its wire name,
    priced when only one provider has it)."""
    return complete.model or asked if asked.startswith("route:") else asked


def priced_model(provider: str | None, model: str) -> str:
    """The name a model's price is found by: ``provider:model`` where the model has no prefix."""
    return model if ":" in model or provider is None else f"{provider}:{model}"


def output_chars(event: StreamEvent) -> int:
    """The characters of the model's output ``event`` streams (text, thinking, a tool call's
    arguments); 0 for any other event."""
    field = OUTPUT_TEXT.get(type(event))
    return len(getattr(event, field)) if field is not None else 0


def cut_usage(chat_model: Any, request: CanonicalRequest, streamed: int) -> TokenUsage:
    """The usage of a stream cut before its provider reported any (its usage comes with its
    end): the request's input tokens as the library estimates them for ``chat_model`` (a
    route: its first model), and the ``streamed`` characters of output at the library's
    characters a token; marked ``estimated``, and logged (``metis.usage_estimated``)."""
    model = None if request.model.startswith("route:") else request.model
    estimate = getattr(chat_model, "estimate_input_tokens", None)
    try:
        given = request.messages, request.tools, request.system_prompt
        input_tokens = int(estimate(*given, model=model)) if estimate is not None else 0
    except Exception:  # a model of the application's own that cannot say: the output alone
        input_tokens = 0
    usage = TokenUsage(
        input_tokens=input_tokens,
        output_tokens=int(streamed / CHARS_PER_TOKEN),
        estimated=True,
    )
    log.warning(
        "a call of %s was cut before its usage came; charged an estimate (%d input, %d "
        "output tokens)",
        request.model,
        usage.input_tokens,
        usage.output_tokens,
        extra={"event": "metis.usage_estimated", "request_id": request.request_id},
    )
    return usage


def passed_cut_usage(model: str, body: Any) -> TokenUsage:
    """The usage of a passed-through stream cut before its provider reported any (a Chat
    stream's comes last, a Responses stream's with ``response.completed``): the body's input
    tokens as the library estimates a request's whose provider reports none (its characters
    over the characters a token); the output it streamed is not counted, as the relay passes
    the provider's events on unread. Marked ``estimated``, and logged."""
    from metis.wire.response_reader import body_tokens

    usage = TokenUsage(input_tokens=body_tokens(body), estimated=True)
    log.warning(
        "a passed-through stream of %s was cut before its usage came; charged an estimate of "
        "its input (%d tokens)",
        model,
        usage.input_tokens,
        extra={"event": "metis.usage_estimated"},
    )
    return usage
