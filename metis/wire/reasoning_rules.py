"""What OpenAI refuses of a reasoning effort sent to a model that does not reason (the model
catalog's ``reasoning: false``: gpt-4o, gpt-4.1), in each API's words: run by the client's
``pre_send_check`` (metis/wire/rules.py) and the emulator's tables (the "reasoning model"
checks of ``tables/chat.yaml`` and ``tables/responses.yaml``). A model the catalog does not
describe is not refused: whether it reasons is not known. metis's own encoders never send
one there (the setting is dropped with a warning, docs/reasoning.md)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from metis.wire.refusal import Refusal

CHAT_WORDS = "Unrecognized request argument supplied: reasoning_effort"
RESPONSES_WORDS = "Unsupported parameter: 'reasoning.effort' is not supported with this model."


def _unreasoning(model: Any) -> bool:
    from metis.catalog.lookup import find_model  # asked only of a body with an effort

    info = find_model("openai", str(model))
    return info is not None and info.reasoning is False


def chat_effort(body: dict[str, Any]) -> Iterator[Refusal]:
    """Chat Completions: ``reasoning_effort`` (any level, ``none`` too) is an argument a model
    without reasoning does not recognize."""
    if body.get("reasoning_effort") is not None and _unreasoning(body.get("model")):
        yield Refusal(CHAT_WORDS)


def responses_effort(body: dict[str, Any]) -> Iterator[Refusal]:
    """The Responses API: ``reasoning.effort`` is a parameter such a model does not support."""
    reasoning = body.get("reasoning")
    effort = reasoning.get("effort") if isinstance(reasoning, dict) else None
    if effort is not None and _unreasoning(body.get("model")):
        yield Refusal(RESPONSES_WORDS, "reasoning.effort", "unsupported_parameter")
