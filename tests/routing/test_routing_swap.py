"""A tool-using conversation through a router whose turns land on different providers because
of random injected failures; the emulator refuses, as each real API does, any request whose
history it would not take (unanswered tool calls, foreign ids, foreign thinking signatures)."""

from __future__ import annotations

import itertools
import random

import anyio
import pytest

from metis.model import CanonicalRequest, Message, MessageComplete, Role, ThinkingConfig
from metis.model.content import ToolResultBlock, ToolUseBlock
from metis.model.response import CanonicalResponse
from metis.routing import InMemoryAvailability, Router
from metis.telemetry import ListSink, RouteDecided
from metis.testing.emulator import Emulator

from ..routing_helpers import WEATHER, emulated

pytestmark = [
    pytest.mark.backend_independent,
    pytest.mark.usefixtures("no_backoff"),
]  # wire formats, through the emulator in process; sockets: test_transport and others

PLAIN = ["anthropic:claude-sonnet-4-5", "openai_responses:gpt-4o", "gemini:gemini-2.5-flash"]
PLAIN.append("openai:gpt-4o")
THINKING = ["anthropic:claude-sonnet-4-5", "openai_responses:o4-mini", "gemini:gemini-2.5-flash"]
FAULTS = ["overloaded", "rate_limit=0", "server_error", "drop=0"]
QUESTIONS = ["What's the weather in Paris?", "And the weather in Rome?", "And in Oslo?"]
TURNS = 6


async def answer(route: Router, request: CanonicalRequest, streaming: bool) -> CanonicalResponse:
    if not streaming:
        return await route.complete(request)
    final = None
    async for event in route.stream(request):
        final = event
    assert isinstance(final, MessageComplete)
    return CanonicalResponse(
        request_id=request.request_id,
        model="?",
        provider="?",
        content=final.final_content,
        stop_reason=final.stop_reason,
        usage=final.usage,
        latency_ms=0,
    )


async def converse(
    emulator: Emulator, order: list[str], seed: int, streaming: bool, thinking: bool
) -> tuple[list[Message], list[str]]:
    rng = random.Random(seed)
    now = [0.0]
    sink = ListSink()
    route = Router(
        order,
        adapters=emulated(emulator, http_client=emulator.client()),  # in process: no sockets
        max_retries=0,
        availability=InMemoryAvailability(clock=lambda: now[0]),
        telemetry=sink,
    )
    questions = iter(QUESTIONS)
    history = [Message.user(next(questions))]
    served: list[str] = []
    for _ in range(TURNS):
        now[0] += 1000  # every cool-down is over: each model gets its probe
        emulator.clear_faults()
        serving = rng.randrange(len(order))
        for model in order[:serving]:
            emulator.push_fault(rng.choice(FAULTS), provider=model.partition(":")[0])
        request = CanonicalRequest(
            model="route:swap",
            session_id=f"swap-{seed}-{streaming}-{thinking}",
            system_prompt="Use the weather tool.",
            messages=history,
            tools=[WEATHER],
            max_output_tokens=4096,
            thinking=ThinkingConfig(budget_tokens=1024) if thinking else None,
        )
        with anyio.fail_after(20):
            response = await answer(route, request, streaming)
        decided = [e for e in sink.events if isinstance(e, RouteDecided)][-1]
        assert decided.served_by == order[serving]
        served.append(order[serving])
        history = [*history, Message(role=Role.ASSISTANT, content=response.content)]
        calls = [b for b in response.content if isinstance(b, ToolUseBlock)]
        served[-1] += " (tool call)" if calls else ""
        if calls:
            history.append(
                Message.tool(*(ToolResultBlock(tool_use_id=c.id, content="Sunny") for c in calls))
            )
        elif (question := next(questions, None)) is not None:
            history.append(Message.user(question))
    await route.aclose()
    return history, served


def handed_over(served: list[str]) -> bool:
    """Did a turn after a tool call go to another provider than the one that made it?"""
    return any(
        calling.endswith("(tool call)") and after.split()[0] != calling.split()[0]
        for calling, after in itertools.pairwise(served)
    )


@pytest.mark.anyio
@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
async def test_a_six_turn_conversation_survives_random_failures_across_providers(
    emulator: Emulator, seed: int, streaming: bool
) -> None:
    history, served = await converse(emulator, PLAIN, seed, streaming, thinking=False)
    refused = [r for r in emulator.requests if r.status != 200 and not r.faults]
    assert refused == [], [(r.provider, r.status, r.body[:300]) for r in refused]
    assert len({s.split()[0] for s in served}) >= 2, served  # turns moved between providers
    assert handed_over(served), served  # a tool call answered through another provider
    calls = [b for m in history for b in m.content if isinstance(b, ToolUseBlock)]
    results = [b for m in history for b in m.content if isinstance(b, ToolResultBlock)]
    assert calls and all(c.id.startswith("tu_") for c in calls)
    assert [r.tool_use_id for r in results] == [c.id for c in calls]
    assert emulator.stats.faults_injected > 0


@pytest.mark.anyio
@pytest.mark.parametrize("seed", [4, 5])
async def test_with_thinking_every_provider_accepts_the_history_after_a_swap(
    emulator: Emulator, seed: int
) -> None:
    history, served = await converse(emulator, THINKING, seed, streaming=True, thinking=True)
    refused = [r for r in emulator.requests if r.status != 200 and not r.faults]
    assert refused == [], [(r.provider, r.status, r.body[:300]) for r in refused]
    assert handed_over(served), served
    assert any(b.type == "thinking" for m in history for b in m.content)
