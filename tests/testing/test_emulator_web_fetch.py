"""A scripted page fetch (``web_fetch``): Anthropic's ``web_fetch`` call and result (counted in
``server_tool_use.web_fetch_requests``) and Gemini's ``urlContextMetadata``, whole and
streamed, read back by metis as a ``web_fetch`` call and result (docs/emulator.md)."""

from __future__ import annotations

import pytest

import metis
from metis.testing.emulator import Emulator, web_fetch

pytestmark = pytest.mark.anyio

URL = "https://python.org/news"
FETCHED = web_fetch(URL, "Python 3.14 is out.", title="News", say="It is out.")
MODELS = {"anthropic": "anthropic:claude-sonnet-4-5", "gemini": "gemini:gemini-2.5-flash"}


def _request(stack: str, text: str, streamed: bool) -> metis.CanonicalRequest:
    return metis.CanonicalRequest(
        model=MODELS[stack],
        messages=[metis.Message.user(text)],
        server_tools=[metis.WebFetch()],
        max_output_tokens=64,
        stream=streamed,
    )


@pytest.mark.parametrize("stack", sorted(MODELS))
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_fetch_is_a_web_fetch_call_and_result(stack: str, streamed: bool) -> None:
    emulator = Emulator(model=[FETCHED])
    async with (
        emulator.client() as client,
        metis.build_adapter(stack, api_key="k", http_client=client) as adapter,
    ):
        reply = await adapter.complete(_request(stack, f"Read {URL}", streamed))
    [call] = [b for b in reply.content if isinstance(b, metis.ServerToolCallBlock)]
    [result] = [b for b in reply.content if isinstance(b, metis.ServerToolResultBlock)]
    assert (call.name, result.name, result.error) == ("web_fetch", "web_fetch", None)
    assert result.search_results is not None and result.search_results[0].url == URL
    assert reply.text == "It is out."
    if stack == "anthropic":  # the page's text and title; the fetch billed per request
        assert (result.search_results[0].title, result.search_results[0].snippet) == (
            "News",
            "Python 3.14 is out.",
        )
        assert reply.usage.server_tools.web_fetch == 1


async def test_a_fetch_goes_back_to_anthropic_as_it_came_and_to_gemini_as_text() -> None:
    emulator = Emulator(model=[FETCHED, "Noted.", "Again."])
    async with emulator.client() as client:
        adapters = {s: metis.build_adapter(s, api_key="k", http_client=client) for s in MODELS}
        session = metis.Session(MODELS["anthropic"], adapters=adapters)
        await session.asend(f"Read {URL}", tools=[metis.WebFetch()])
        session.model = MODELS["gemini"]
        await session.asend("And?")
        session.model = MODELS["anthropic"]
        await session.asend("Once more.")
        for adapter in adapters.values():
            await adapter.aclose()
    gemini_turn = emulator.bodies("gemini")[-1]["contents"][1]["parts"]
    assert gemini_turn[0]["text"].startswith('[web_fetch {"url": "https://python.org/news"}]')
    kinds = [b["type"] for b in emulator.bodies("anthropic")[-1]["messages"][1]["content"]]
    assert kinds == ["server_tool_use", "web_fetch_tool_result", "text"]
