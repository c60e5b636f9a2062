"""``ThinkingConfig.display``: the reasoning's text back (``summarized``, the default) or left
out (``omitted``). Claude takes it as ``thinking.display`` on every platform that serves it
(the Messages API, Bedrock and Vertex: anthropics/claude-code#86959, a Vertex rawPredict call
with ``display: summarized`` answered with text; #71599, the same for Bedrock; the notes'
Anthropic row ``thinking:{type:"enabled", budget_tokens, display?} | {type:"adaptive",
display?}``); the Responses API has the same knob as its reasoning summary, left out for
``omitted``; other providers have none and report it dropped. The gateway's Messages reader
takes it, so a ``metis serve`` client asking ``omitted`` gets it."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from metis.errors import InvalidRequestError
from metis.gateway.anthropic_api import read_messages
from metis.model import CanonicalRequest, Message, ThinkingConfig
from metis.testing.emulator import Emulator

from .. import stack_table as platforms
from ..helpers import answer

pytestmark = pytest.mark.backend_independent

OPUS = {
    "anthropic": "anthropic:claude-opus-4-7",
    "bedrock_anthropic": "bedrock_anthropic:us.anthropic.claude-opus-4-7",
    "vertex_anthropic": "vertex_anthropic:claude-opus-4-7",
    "bedrock": "bedrock:us.anthropic.claude-opus-4-7",
}


def _ask(model: str, thinking: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=model,
        messages=[Message.user("Plan a trip")],
        max_output_tokens=4000,
        thinking=thinking,
    )


def _thinking_sent(body: dict[str, Any]) -> Any:
    return (body.get("additionalModelRequestFields") or body)["thinking"]


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "stream"])
@pytest.mark.parametrize("stack", sorted(OPUS))
async def test_claude_is_asked_for_the_display_chosen_on_every_platform(
    emulator: Emulator, stack: str, stream: bool
) -> None:
    adapter = platforms.adapter(stack, emulator)
    for display in ("omitted", "summarized"):
        asked = ThinkingConfig(effort="high", display=display)
        reply = await answer(adapter, _ask(OPUS[stack], asked), stream)
        body = emulator.bodies(platforms.target(stack))[-1]
        assert _thinking_sent(body) == {"type": "adaptive", "display": display}
        assert bool(reply.thinking) is (display == "summarized")
        assert not reply.warnings


@pytest.mark.anyio
async def test_a_budget_sends_display_only_when_one_is_chosen(emulator: Emulator) -> None:
    adapter = platforms.adapter("anthropic", emulator)
    model = "anthropic:claude-sonnet-4-5"
    await answer(adapter, _ask(model, ThinkingConfig(budget_tokens=2048, display="omitted")), False)
    await answer(adapter, _ask(model, 2048), False)
    sent = [body["thinking"] for body in emulator.bodies("anthropic")]
    assert sent == [
        {"type": "enabled", "budget_tokens": 2048, "display": "omitted"},
        {"type": "enabled", "budget_tokens": 2048},
    ]


@pytest.mark.anyio
async def test_the_responses_api_is_asked_for_no_summary_when_omitted(
    emulator: Emulator,
) -> None:
    adapter = platforms.adapter("openai_responses", emulator)
    asked = ThinkingConfig(effort="high", display="omitted")
    reply = await answer(adapter, _ask("openai_responses:gpt-5", asked), False)
    [body] = emulator.bodies("openai_responses")
    assert body["reasoning"] == {"effort": "high"}
    assert not reply.thinking and not reply.warnings


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stack", "model"),
    [("openai", "openai:o3"), ("bedrock", "bedrock:us.amazon.nova-2-lite-v1:0")],
)
async def test_a_provider_without_the_choice_reports_it_dropped(
    emulator: Emulator, stack: str, model: str
) -> None:
    adapter = platforms.adapter(stack, emulator)
    reply = await answer(
        adapter, _ask(model, ThinkingConfig(effort="high", display="omitted")), False
    )
    [body] = emulator.bodies(platforms.target(stack))
    assert "display" not in str(body)
    assert "reasoning.display" in {w.block_type for w in reply.warnings}


def test_display_omitted_beside_a_summary_is_refused() -> None:
    with pytest.raises(ValidationError, match="summary or display"):
        ThinkingConfig(effort="high", summary="detailed", display="omitted")
    with pytest.raises(ValidationError):
        ThinkingConfig(effort="high", display="full")  # type: ignore[arg-type]


def _messages(thinking: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "m",
        "max_tokens": 4000,
        "thinking": thinking,
        "output_config": {"effort": "high"},
        "messages": [{"role": "user", "content": "Plan a trip"}],
    }


def test_the_gateway_reads_the_display_a_messages_client_asks_for() -> None:
    adaptive = read_messages(_messages({"type": "adaptive", "display": "omitted"}))
    assert adaptive.fields["thinking"] == ThinkingConfig(effort="high", display="omitted")
    assert adaptive.ignored == []  # read, so not named as left out
    budget = read_messages(
        _messages({"type": "enabled", "budget_tokens": 2048, "display": "omitted"})
    )
    assert budget.fields["thinking"].display == "omitted"
    plain = read_messages(_messages({"type": "adaptive"}))
    assert plain.fields["thinking"].display is None
    with pytest.raises(InvalidRequestError, match=r"thinking\.display"):
        read_messages(_messages({"type": "adaptive", "display": "full"}))
