"""Server tools end to end on the emulator: its scripted model answers with a web search (and
citations) or code execution output as Anthropic sends them, streamed and whole; the history
goes back and is accepted; a result echoed without its call, or with encrypted contents the
emulator did not issue, is refused as the real API refuses it; the same history moves to
another provider as text."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import InvalidRequestError
from metis.model import (
    CanonicalRequest,
    Message,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    WebSearch,
)
from metis.model.server_tools import CodeExecution, CodeOutput
from metis.testing.emulator import Emulator, code_execution, web_search

MODEL = "anthropic:claude-sonnet-4-5"
FOUND = [
    ("https://www.python.org/downloads/", "Download Python"),
    ("https://docs.python.org", "Docs"),
]


def adapter(emulator: Emulator, stack: str = "anthropic") -> Any:
    return build_adapter(stack, AdapterConfig(api_key="k", http_client=emulator.client()))


def request(*messages: Message, model: str = MODEL, **kw: Any) -> CanonicalRequest:
    return CanonicalRequest(model=model, messages=list(messages), max_output_tokens=512, **kw)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_web_search_with_citations_and_its_history(stream: bool) -> None:
    emulator = Emulator(
        model=[web_search("latest python", FOUND, say="Python 3.14 is out."), "You are welcome."]
    )
    ask = Message.user("What is the latest Python?")
    with anyio.fail_after(20):
        reply = await adapter(emulator).complete(
            request(ask, server_tools=[WebSearch(max_uses=2)], stream=stream)
        )
    call, result, text = reply.content
    assert isinstance(call, ServerToolCallBlock) and call.input == {"query": "latest python"}
    assert isinstance(result, ServerToolResultBlock) and result.search_results is not None
    assert [(r.url, r.title) for r in result.search_results] == FOUND
    assert isinstance(text, TextBlock) and text.text == "Python 3.14 is out."
    assert [c.url for c in reply.citations] == [url for url, _ in FOUND]
    assert reply.tool_calls == [] and reply.warnings == []
    (sent,) = emulator.bodies("anthropic")[0]["tools"]
    sent.pop("cache_control")  # the cache_control stage's breakpoint: server tools take one
    assert sent == {"type": "web_search_20250305", "name": "web_search", "max_uses": 2}
    with anyio.fail_after(20):
        thanks = await adapter(emulator).complete(
            request(ask, reply.message, Message.user("Thanks"), server_tools=[WebSearch()])
        )
    assert thanks.text == "You are welcome."  # the emulator took the history back


@pytest.mark.anyio
async def test_code_execution_output_reaches_the_reply() -> None:
    emulator = Emulator(model=[code_execution("print(6 * 7)", stdout="42\n", say="It is 42.")])
    with anyio.fail_after(20):
        reply = await adapter(emulator).complete(
            request(Message.user("6 times 7?"), server_tools=[CodeExecution()])
        )
    _, result, _ = reply.content
    assert isinstance(result, ServerToolResultBlock)
    assert result.code_output == CodeOutput(stdout="42\n", exit_code=0)


async def _searched(emulator: Emulator) -> list[Any]:
    reply = await adapter(emulator).complete(
        request(Message.user("Search"), server_tools=[WebSearch()])
    )
    return list(reply.content)


@pytest.mark.anyio
async def test_a_result_sent_without_its_call_is_refused() -> None:
    emulator = Emulator(model=[web_search("q", FOUND, say="Found."), "unused"])
    with anyio.fail_after(20):
        _, result, text = await _searched(emulator)
        history = [Message.user("Search"), Message.assistant(result, text), Message.user("More")]
        with pytest.raises(InvalidRequestError, match="corresponding `server_tool_use`"):
            await adapter(emulator).complete(request(*history, server_tools=[WebSearch()]))


@pytest.mark.anyio
async def test_encrypted_contents_it_did_not_issue_are_refused() -> None:
    emulator = Emulator(model=[web_search("q", FOUND, say="Found."), "unused"])
    with anyio.fail_after(20):
        call, result, text = await _searched(emulator)
        raw = result.provider_raw
        assert raw is not None
        forged = dict(raw.data, content=[{**raw.data["content"][0], "encrypted_content": "Zm9v"}])
        result = result.model_copy(update={"provider_raw": raw.model_copy(update={"data": forged})})
        history = [Message.user("Search"), Message.assistant(call, result, text), Message.user("?")]
        with pytest.raises(InvalidRequestError, match="Invalid `encrypted_content`"):
            await adapter(emulator).complete(request(*history, server_tools=[WebSearch()]))


@pytest.mark.anyio
async def test_the_search_moves_to_another_provider_as_text() -> None:
    emulator = Emulator(model=[web_search("q", FOUND, say="Found."), "Noted."], models="any")
    with anyio.fail_after(20):
        content = await _searched(emulator)
        history = [Message.user("Search"), Message.assistant(*content), Message.user("Summarise")]
        reply = await adapter(emulator, "openai").complete(request(*history, model="openai:gpt-4o"))
    assert reply.text == "Noted." and reply.warnings == []
    sent = emulator.bodies("openai")[0]["messages"][1]["content"]
    assert "[web_search" in sent and "https://docs.python.org" in sent and "Found." in sent
