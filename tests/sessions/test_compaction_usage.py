"""What compacting a history spends: the provider's compact endpoint is a billed call, so its
usage joins the session's and the agent run's totals, priced by the model catalog like any
model call, and the run's step reports it (docs/sessions.md, "Compaction by the provider")."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import httpx
import pytest
import respx

import metis
from metis import AdapterConfig, build_adapter
from metis.adapter.compaction import compact_conversation
from metis.cost import cost_of
from metis.model import CanonicalRequest, Message, TokenUsage
from metis.routing import Router
from metis.sessions import CompactionCall, Session, StepComplete
from metis.sessions.core import add_usage
from metis.testing.emulator import Emulator
from metis.wire.compaction import responses_compact_usage

from .. import stack_table as families
from .test_compaction import adapter, text_of

GPT = families.MODELS["openai_responses"]


def history() -> list[Message]:
    return [
        Message.user("Describe the harbour."),
        Message.assistant(text_of(2500)),
        Message.user("And its boats?"),
        Message.assistant(text_of(2500)),
    ]


def session(emulator: Emulator, **options: Any) -> Session:
    """A Responses session whose history is over its 4,000-token window."""
    return Session(
        GPT,
        history(),
        adapters={"openai_responses": adapter("openai_responses", emulator, 4000)},
        compact="provider",
        context_check="estimate",
        max_output_tokens=200,
        **options,
    )


async def compact_usage(emulator: Emulator) -> dict[str, Any]:
    """The usage the emulator answered the session's compact request with (asked again)."""
    (sent,) = [r for r in emulator.requests if r.path == "/v1/responses/compact"]
    async with emulator.client() as client:
        raw = await client.post(
            "http://emulator/v1/responses/compact", content=sent.body, headers=sent.headers
        )
    usage: dict[str, Any] = raw.json()["usage"]
    return usage


def as_usage(wire: dict[str, Any]) -> TokenUsage:
    cached = wire["input_tokens_details"]["cached_tokens"]
    return TokenUsage(
        input_tokens=wire["input_tokens"] - cached,
        output_tokens=wire["output_tokens"],
        cached_input_tokens=cached,
        reasoning_tokens=wire["output_tokens_details"]["reasoning_tokens"],
    )


@pytest.mark.anyio
async def test_a_session_counts_the_compact_endpoints_usage(emulator: Emulator) -> None:
    chat = session(emulator)
    reply = await chat.asend("What was the harbour like?")
    compaction = as_usage(await compact_usage(emulator))
    assert compaction.input_tokens > 2 * 2500  # the pass read the whole earlier history
    assert chat.usage == add_usage(compaction, reply.usage)
    assert json.loads(chat.to_json())["usage"]["input_tokens"] == chat.usage.input_tokens


@pytest.mark.anyio
async def test_a_runs_totals_and_its_step_count_the_compaction_call(emulator: Emulator) -> None:
    chat = session(emulator)
    steps: list[StepComplete] = []
    result = await chat.arun(
        "What was the harbour like?",
        on_event=lambda e: steps.append(e) if isinstance(e, StepComplete) else None,
    )
    compaction = as_usage(await compact_usage(emulator))
    assert result.usage == add_usage(compaction, result.response.usage)
    assert chat.usage == result.usage
    (step,) = steps
    assert step.compaction == CompactionCall(GPT, compaction, cost_of(GPT, compaction))
    assert result.costs == (cost_of(GPT, compaction), cost_of(GPT, result.response.usage))
    assert result.cost_usd == sum((c.usd for c in result.costs), Decimal(0)) > 0
    assert step.compaction.cost.usd > 0  # the catalog prices the model


@pytest.mark.anyio
async def test_a_run_that_fits_reports_no_compaction(emulator: Emulator) -> None:
    chat = Session(
        GPT, adapters={"openai_responses": families.adapter("openai_responses", emulator)}
    )
    steps: list[StepComplete] = []
    result = await chat.arun(
        "Hi", on_event=lambda e: steps.append(e) if isinstance(e, StepComplete) else None
    )
    assert [s.compaction for s in steps] == [None] and len(result.costs) == 1


COMPACTED = {
    "id": "resp_1",
    "object": "response.compaction",
    "output": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Hi"}]},
        {"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAAAABx"},
    ],
}


@pytest.mark.anyio
@respx.mock
@pytest.mark.parametrize(
    ("usage", "expected"),
    [
        (
            {
                "input_tokens": 900,
                "input_tokens_details": {"cached_tokens": 100},
                "output_tokens": 40,
                "output_tokens_details": {"reasoning_tokens": 8},
            },
            TokenUsage(
                input_tokens=800, cached_input_tokens=100, output_tokens=40, reasoning_tokens=8
            ),
        ),
        (None, None),  # no usage: the input estimated, marked so
    ],
)
async def test_the_compact_endpoint_reports_what_it_spent(
    usage: dict[str, Any] | None, expected: TokenUsage | None
) -> None:
    answer = {**COMPACTED, **({"usage": usage} if usage else {})}
    respx.post("https://api.openai.com/v1/responses/compact").mock(
        return_value=httpx.Response(200, json=answer)
    )
    request = CanonicalRequest(
        model=GPT,
        messages=[Message.user("Hi"), Message.assistant(text_of(400))],
        max_output_tokens=100,
    )
    config = AdapterConfig(api_key="sk-test", max_retries=0)
    async with build_adapter("openai_responses", config) as chat:
        compacted = await compact_conversation(chat, request)
    assert [m.role.value for m in compacted.messages] == ["user", "assistant"]
    if expected is not None:
        assert compacted.usage == expected
    else:
        assert compacted.usage.estimated and compacted.usage.input_tokens > 300


def test_a_malformed_compact_usage_is_a_protocol_error() -> None:
    with pytest.raises(metis.ProtocolError, match=r"usage\.input_tokens"):
        responses_compact_usage({"usage": {"input_tokens": 1.5}}, "openai_responses")
    # below zero, a count cannot be true: no usage said (estimated), the history kept
    assert responses_compact_usage({"usage": {"input_tokens": -1}}, "openai_responses") is None


@pytest.mark.anyio
async def test_over_a_router_the_compact_endpoint_is_asked_for_the_routed_model(
    emulator: Emulator,
) -> None:
    """The compact request names the provider's model (the route's name is no model of
    OpenAI's: the emulator refuses it, as the API does), and its cost is that model's."""
    small = adapter("openai_responses", emulator, 4000)
    route = Router([GPT], adapters={"openai_responses": small}, max_retries=0, name="harbour")
    chat = Session(
        route, history(), compact="provider", context_check="estimate", max_output_tokens=200
    )
    result = await chat.arun("What was the harbour like?")
    (compact,) = [r for r in emulator.requests if r.path == "/v1/responses/compact"]
    assert json.loads(compact.body)["model"] == "gpt-4o"
    compaction = as_usage(await compact_usage(emulator))
    assert result.costs[0] == cost_of(GPT, compaction) and result.costs[0].usd > 0
