"""Before each call a session checks the history against the model's context window (the
catalog's, here narrowed by the adapter's configuration): a history that does not fit is a
ContextOverflowError before anything is sent, or is compacted by the application's function;
``auto`` asks the provider's own count only near the limit."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.errors import ConfigError, ContextOverflowError
from metis.model import Message
from metis.sessions import ContextBudget, Session
from metis.testing.emulator import Emulator

CLAUDE = "anthropic:claude-sonnet-4-5"
WINDOW = 2000
LONG = "The harbour was busy that morning, and every boat came in with fish. " * 40  # ~600


def small_window(emulator: Emulator) -> Adapter:
    config = AdapterConfig(
        api_key="test-key",
        base_url=emulator.base_url("anthropic"),
        capabilities={"max_context_tokens": WINDOW},
    )
    return build_adapter("anthropic", config)


def session(emulator: Emulator, history: list[Message], **options: object) -> Session:
    adapters = {"anthropic": small_window(emulator)}
    return Session(CLAUDE, history, adapters=adapters, max_output_tokens=200, **options)  # type: ignore[arg-type]


def paths(emulator: Emulator) -> list[str]:
    return [request.path for request in emulator.requests]


@pytest.mark.anyio
async def test_a_history_over_the_window_is_refused_before_anything_is_sent(
    emulator: Emulator,
) -> None:
    history = [Message.user(LONG), Message.assistant("Go on."), Message.user(LONG)]
    chat = session(emulator, history, context_check="estimate")
    with pytest.raises(ContextOverflowError, match="over the context window of 2000") as caught:
        await chat.asend(LONG)
    assert "Session(compact=...)" in str(caught.value) and caught.value.provider == "anthropic"
    assert emulator.requests == []
    assert chat.messages == history  # the turn is taken back


@pytest.mark.anyio
async def test_auto_asks_the_providers_count_only_near_the_limit(emulator: Emulator) -> None:
    chat = session(emulator, [])
    await chat.asend("Hello there")  # far from the limit: the estimate says it fits
    assert paths(emulator) == ["/v1/messages"]
    await chat.asend(LONG + LONG)  # past half the room: the provider counts
    assert paths(emulator)[1:] == ["/v1/messages/count_tokens", "/v1/messages"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("check", "expected"),
    [
        ("count", ["/v1/messages/count_tokens", "/v1/messages"]),
        ("estimate", ["/v1/messages"]),
        ("off", ["/v1/messages"]),
    ],
)
async def test_the_context_check_counts_as_asked(
    check: str, expected: list[str], emulator: Emulator
) -> None:
    chat = session(emulator, [], context_check=check)
    await chat.asend("Hello there")
    assert paths(emulator) == expected


@pytest.mark.anyio
async def test_off_sends_what_does_not_fit(emulator: Emulator) -> None:
    """Off: the input (about 700 tokens) and the reply's limit (1,500) are over the window,
    but no check says so (the provider would)."""
    chat = session(emulator, [], context_check="off")
    await chat.asend(LONG, max_output_tokens=1500)
    assert paths(emulator) == ["/v1/messages"]
    with pytest.raises(ContextOverflowError):
        await session(emulator, [], context_check="estimate").asend(LONG, max_output_tokens=1500)


@pytest.mark.anyio
async def test_a_compactor_makes_the_history_fit_and_replaces_it(emulator: Emulator) -> None:
    budgets: list[ContextBudget] = []

    async def keep_the_last(messages: list[Message], budget: ContextBudget) -> list[Message]:
        budgets.append(budget)
        return [Message.user("Earlier: a long story about a harbour."), messages[-1]]

    history = [Message.user(LONG), Message.assistant("Go on.")] * 2 + [Message.user(LONG)]
    chat = session(emulator, history, compact=keep_the_last, context_check="estimate")
    reply = await chat.asend("And then?")
    (budget,) = budgets
    assert not budget.fits and budget.window == WINDOW and budget.max_output_tokens == 200
    assert budget.input_tokens > budget.limit == WINDOW - 200 and budget.source == "estimate"
    sent = str(emulator.requests[-1].json()["messages"])
    assert (
        "Earlier: a long story" in sent and "And then?" in sent and "harbour was busy" not in sent
    )
    assert [m.text for m in chat.messages] == [
        "Earlier: a long story about a harbour.",
        "And then?",
        reply.text,
    ]


@pytest.mark.anyio
async def test_a_compactor_that_does_not_make_it_fit_is_an_overflow(emulator: Emulator) -> None:
    def keep_everything(messages: list[Message], budget: ContextBudget) -> Sequence[Message]:
        return messages

    history = [Message.user(LONG)] * 4
    chat = session(emulator, history, compact=keep_everything, context_check="estimate")
    with pytest.raises(ContextOverflowError, match="the compactor's history does not fit"):
        await chat.asend("And then?")
    assert emulator.requests == []


@pytest.mark.anyio
@pytest.mark.parametrize("returned", ["a summary", [], [{"role": "user", "content": "x"}]])
async def test_a_compactor_returns_messages(returned: object, emulator: Emulator) -> None:
    chat = session(
        emulator, [Message.user(LONG)] * 4, compact=lambda m, b: returned, context_check="estimate"
    )
    with pytest.raises(ConfigError, match="compactor"):
        await chat.asend("And then?")
