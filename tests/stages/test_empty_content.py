"""empty_content (issue 12 item 5): empty user text and empty error tool results are handled
the same way by every stack, against servers that refuse what each API refuses."""

from __future__ import annotations

import json

import anyio
import pytest

from metis import InvalidRequestError
from metis.model import (
    CanonicalRequest,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.stages.policy.empty_content import EMPTY_ERROR_RESULT, EmptyContent
from metis.testing.emulator import Emulator

from ..helpers import make_call
from ..stack_table import DEADLINE, FAMILIES, MODELS, WEATHER, adapter

PROVIDERS = list(FAMILIES)

pytestmark = [
    pytest.mark.backend_independent,
    pytest.mark.usefixtures("no_backoff"),
]  # wire formats; sockets: test_transport and others

CALL = ToolUseBlock(id="tu_01JEMPTYERRORRESULT0000000", name="get_weather", input={"city": "Oslo"})


def history(*last: Message) -> list[Message]:
    return [
        Message.user("What's the weather in Oslo?"),
        Message.assistant("Checking.", CALL),
        Message.tool(ToolResultBlock(tool_use_id=CALL.id, content="", is_error=True)),
        *last,
    ]


def test_empty_text_is_left_out_and_a_silent_error_says_so() -> None:
    request = CanonicalRequest(
        model="m",
        messages=[
            *history(),
            Message.user(TextBlock(text=""), "And Rome?", TextBlock(text="  \n")),
        ],
        max_output_tokens=64,
    )
    out = EmptyContent().rewrite(request, make_call())
    (result,) = out.messages[2].content
    assert isinstance(result, ToolResultBlock) and result.content == EMPTY_ERROR_RESULT
    assert result.is_error
    assert [b.text for b in out.messages[3].content] == ["And Rome?"]  # type: ignore[union-attr]
    assert out.messages[1] is request.messages[1]  # assistant turns are not touched


def test_a_request_with_nothing_empty_is_passed_as_it_is() -> None:
    request = CanonicalRequest(
        model="m", messages=[Message.user("hi"), Message.assistant("")], max_output_tokens=64
    )
    assert EmptyContent().rewrite(request, make_call()) is request


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_every_stack_sends_a_silent_error_result_in_words(
    provider: str, emulator: Emulator
) -> None:
    a = adapter(provider, emulator)
    request = CanonicalRequest(
        model=MODELS[provider],
        session_id=f"empty-{provider}",
        messages=history(Message.user(TextBlock(text=""), "Try again, please.")),
        tools=[WEATHER],
        max_output_tokens=256,
    )
    with anyio.fail_after(DEADLINE):
        await a.complete(request)  # the emulator refuses what the real API refuses
    sent = json.dumps(emulator.requests[-1].json())
    assert EMPTY_ERROR_RESULT in sent
    assert '"text": ""' not in sent and '"content": ""' not in sent
    await a.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_every_stack_refuses_an_empty_user_message_before_sending(
    provider: str, emulator: Emulator
) -> None:
    a = adapter(provider, emulator)
    request = CanonicalRequest(
        model=MODELS[provider],
        messages=[Message.user("Hello"), Message.assistant("Hi!"), Message.user(" ")],
        max_output_tokens=64,
    )
    with pytest.raises(InvalidRequestError, match=r"messages\[2\]: a user message has nothing"):
        await a.complete(request)
    assert emulator.stats.requests == 0
    await a.aclose()
