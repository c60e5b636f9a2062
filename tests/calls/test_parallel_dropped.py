"""``parallel_tool_calls: false`` where the provider has no such switch (Gemini, Vertex, Bedrock
Converse): the setting is reported dropped with the call's result, never silently ignored
(docs/contract.md §8); where the provider takes it, nothing is reported."""

from __future__ import annotations

import pytest

from metis.model import CanonicalRequest, Message, MessageComplete, MessageStart, ToolChoice
from metis.testing.emulator import tools

from ..conversations import TOOLS, adapters_for, scripted
from ..helpers import answer

TWO_CALLS = tools(("get_weather", {"city": "Paris"}), ("get_weather", {"city": "Rome"}))


@pytest.fixture(autouse=True)
def _aws(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in [("AWS_REGION", "us-east-1"), ("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")]:
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


def _request(stack: str, **fields: object) -> CanonicalRequest:
    return CanonicalRequest(
        model=f"{stack}:m",
        messages=[Message.user("Weather in Paris and Rome?")],
        tools=TOOLS,
        max_output_tokens=256,
        **fields,  # type: ignore[arg-type]
    )


@pytest.mark.anyio
@pytest.mark.parametrize("streaming", [True, False], ids=["stream", "complete"])
@pytest.mark.parametrize("stack", ["gemini", "bedrock"])
async def test_a_parallel_switch_the_provider_lacks_is_reported_dropped(
    stack: str, streaming: bool
) -> None:
    adapter = adapters_for(scripted([TWO_CALLS]), stack)[stack]
    response = await answer(adapter, _request(stack, parallel_tool_calls=False), streaming)
    dropped = [w for w in response.warnings if w.block_type == "parallel_tool_calls"]
    assert [(w.provider, w.message_id) for w in dropped] == [(stack, None)]
    assert "one tool call" in dropped[0].reason


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("stack", "fields"),
    [
        ("gemini", {"parallel_tool_calls": True}),
        ("gemini", {"parallel_tool_calls": False, "tool_choice": ToolChoice(type="none")}),
        ("bedrock", {}),
        ("anthropic", {"parallel_tool_calls": False}),
        ("openai", {"parallel_tool_calls": False}),
    ],
)
async def test_no_drop_where_nothing_was_lost(stack: str, fields: dict[str, object]) -> None:
    adapter = adapters_for(scripted([TWO_CALLS]), stack)[stack]
    response = await answer(adapter, _request(stack, **fields), False)
    assert [w.block_type for w in response.warnings] == []


@pytest.mark.anyio
async def test_a_streams_start_already_names_what_the_request_lost() -> None:
    """Dropped while encoding, before the provider was called: ``message.start`` says so, and
    ``message.complete`` lists it again."""
    adapter = adapters_for(scripted([TWO_CALLS, TWO_CALLS]), "gemini")["gemini"]
    request = _request("gemini", parallel_tool_calls=False, stream=True)
    events = [event async for event in adapter.stream(request)]
    assert isinstance(events[0], MessageStart) and isinstance(events[-1], MessageComplete)
    assert [w.block_type for w in events[0].warnings] == ["parallel_tool_calls"]
    assert events[-1].warnings == events[0].warnings
    plain = [e async for e in adapter.stream(_request("gemini", stream=True))]
    assert isinstance(plain[0], MessageStart) and plain[0].warnings == []
