"""Server tools on the emulator in every API that has them, streamed and whole: its scripted
model answers a web search (with citations) and a code run in each provider's own wire form
(metis/testing/emulator/formats/server_*.py), and metis reads them back as canonical blocks;
the history goes back and is accepted; what an API refuses of them in a history is refused."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import (
    CanonicalRequest,
    Message,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    WebSearch,
)
from metis.model.server_tools import CodeExecution, CodeOutput
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator, code_execution, web_search

pytestmark = pytest.mark.backend_independent  # wire formats checked against the emulator

FOUND = [
    ("https://www.python.org/downloads/", "Download Python"),
    ("https://docs.python.org/3/", "Python docs"),
]
SAID = "Python 3.14 is out."
MODELS = {
    "openai_responses": "openai_responses:gpt-4o",
    "openai": "openai:gpt-4o-search-preview",
    "perplexity": "perplexity:sonar-pro",
    "xai": "xai:grok-4",
    "gemini": "gemini:gemini-2.5-flash",
    "vertex": "vertex:gemini-2.5-flash",
    "bedrock": "bedrock:us.amazon.nova-2-lite-v1:0",
}
EMULATED_AS = {"perplexity": "deepseek", "xai": "openai"}
STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    """An emulator of its own per test: its script starts empty (:func:`script` fills it)."""
    with Emulator(host="127.0.0.1", port=0, model=[], models="any") as running:
        yield running


def google_credentials() -> Any:
    from google.oauth2.credentials import Credentials

    expiry = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) + datetime.timedelta(hours=1)
    return Credentials(token="ya29.emulator", expiry=expiry)


def adapter(stack: str, emulator: Emulator, store: InMemoryToolIdStore | None = None) -> Adapter:
    """``stack``'s adapter, pointed at the emulator (Vertex with a token, Azure at its mount)."""
    options: dict[str, Any] = {}
    api_key: str | None = "test-key"
    if stack.startswith("vertex"):
        options = {"project": "proj-1", "location": "us-east5"}
        options["google_credentials"] = google_credentials()
        api_key = None
    settings = AdapterConfig(
        api_key=api_key,
        base_url=emulator.base_url(EMULATED_AS.get(stack, stack)),
        settings=options,
    )
    return build_adapter(stack, settings, tool_id_store=store or InMemoryToolIdStore())


def ask(stack: str, *messages: Message, **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODELS.get(stack, stack), messages=list(messages), max_output_tokens=512, **fields
    )


def script(emulator: Emulator, *replies: Any) -> None:
    emulator.model.extend(replies)  # type: ignore[attr-defined]


async def complete(stack: str, emulator: Emulator, request: CanonicalRequest) -> Any:
    with anyio.fail_after(20):
        return await adapter(stack, emulator).complete(request)


def cited(reply: Any) -> list[tuple[str | None, str | None]]:
    return [(c.url, c.title) for c in reply.citations]


# Web search and citations -------------------------------------------------------------------


@pytest.mark.anyio
@STREAMS
async def test_responses_searches_with_a_web_search_call_and_url_citations(
    emulator: Emulator, stream: bool
) -> None:
    script(emulator, web_search("latest python", FOUND, say=SAID), "Thanks noted.")
    question = Message.user("What is the latest Python?")
    request = ask("openai_responses", question, server_tools=[WebSearch()], stream=stream)
    reply = await complete("openai_responses", emulator, request)
    call, result, text = reply.content
    assert isinstance(call, ServerToolCallBlock) and call.id.startswith("ws_")
    assert call.input == {"type": "search", "query": "latest python"}
    assert isinstance(result, ServerToolResultBlock) and result.tool_call_id == call.id
    assert [r.url for r in result.search_results or []] == [url for url, _ in FOUND]
    assert isinstance(text, TextBlock) and text.text == SAID
    assert cited(reply) == FOUND
    assert all(c.span is not None and (c.span.start, c.span.end) == (0, len(SAID))
               for c in reply.citations)  # fmt: skip
    assert reply.tool_calls == [] and reply.warnings == []
    (sent,) = emulator.bodies("openai_responses")
    assert sent["include"] == ["web_search_call.action.sources"]
    again = ask("openai_responses", question, reply.message, Message.user("Thanks"))
    assert (await complete("openai_responses", emulator, again)).text == "Thanks noted."
    item = emulator.bodies("openai_responses")[1]["input"][1]
    assert item["type"] == "web_search_call" and item["id"] == call.id  # back whole, once


@pytest.mark.anyio
@STREAMS
@pytest.mark.parametrize("stack", ["gemini", "vertex"])
async def test_gemini_grounds_its_answer_in_google_search(
    emulator: Emulator, stream: bool, stack: str
) -> None:
    script(emulator, web_search("latest python", FOUND, say=SAID))
    request = ask(stack, Message.user("Latest Python?"), server_tools=[WebSearch()], stream=stream)
    reply = await complete(stack, emulator, request)
    (text,) = reply.content
    assert isinstance(text, TextBlock) and text.text == SAID
    assert [c.title for c in reply.citations] == ["python.org", "docs.python.org"]
    assert all(
        (c.url or "").startswith("https://vertexaisearch.cloud.google.com/grounding-api-redirect/")
        and c.span is not None
        and (c.span.start, c.span.end) == (0, len(SAID))
        for c in reply.citations
    )
    assert emulator.bodies()[0]["tools"] == [{"googleSearch": {}}]


@pytest.mark.anyio
@STREAMS
async def test_a_chat_search_model_cites_in_annotations(emulator: Emulator, stream: bool) -> None:
    script(emulator, web_search("latest python", FOUND, say=SAID))
    request = ask(
        "openai", Message.user("Latest Python?"), server_tools=[WebSearch()], stream=stream
    )
    reply = await complete("openai", emulator, request)
    assert reply.text == SAID and cited(reply) == FOUND
    assert [(c.span.start, c.span.end) for c in reply.citations if c.span] == [(0, len(SAID))] * 2
    assert emulator.bodies("openai")[0]["web_search_options"] == {}


@pytest.mark.anyio
@STREAMS
@pytest.mark.parametrize("stack", ["perplexity", "xai"])
async def test_perplexity_and_xai_list_their_sources(
    emulator: Emulator, stream: bool, stack: str
) -> None:
    script(emulator, web_search("latest python", FOUND, say=SAID + " [1][2]"))
    tools = [WebSearch()] if stack == "perplexity" else []
    request = ask(stack, Message.user("Latest Python?"), server_tools=tools, stream=stream)
    reply = await complete(stack, emulator, request)
    assert reply.text == SAID + " [1][2]"
    titles = [t for _, t in FOUND] if stack == "perplexity" else [None, None]
    assert cited(reply) == list(zip([u for u, _ in FOUND], titles, strict=True))


@pytest.mark.anyio
@STREAMS
async def test_nova_grounding_cites_web_pages(emulator: Emulator, stream: bool) -> None:
    script(emulator, web_search("latest python", FOUND, say=SAID), "Welcome.")
    question = Message.user("Latest Python?")
    request = ask("bedrock", question, server_tools=[WebSearch()], stream=stream)
    reply = await complete("bedrock", emulator, request)
    assert reply.text == SAID
    assert [c.url for c in reply.citations] == [url for url, _ in FOUND]
    assert emulator.bodies("bedrock")[0]["toolConfig"]["tools"] == [
        {"systemTool": {"name": "nova_grounding"}}
    ]
    again = ask(
        "bedrock", question, reply.message, Message.user("Thanks"), server_tools=[WebSearch()]
    )
    assert (await complete("bedrock", emulator, again)).text == "Welcome."


# Code execution -----------------------------------------------------------------------------

RAN = code_execution("print(6 * 7)", stdout="42\n", say="It is 42.")


@pytest.mark.anyio
@STREAMS
@pytest.mark.parametrize("stack", ["openai_responses", "gemini", "vertex", "bedrock"])
async def test_code_execution_output_in_every_api_that_runs_code(
    emulator: Emulator, stream: bool, stack: str
) -> None:
    script(emulator, RAN, "You are welcome.")
    question = Message.user("What is 6 times 7? Run it.")
    request = ask(stack, question, server_tools=[CodeExecution()], stream=stream)
    reply = await complete(stack, emulator, request)
    call, result, text = reply.content
    assert isinstance(call, ServerToolCallBlock) and call.name == "code_execution"
    assert call.input["code"] == "print(6 * 7)"
    assert isinstance(result, ServerToolResultBlock) and result.tool_call_id == call.id
    expected = {"openai_responses": None, "bedrock": 0}.get(stack)
    assert result.code_output == CodeOutput(stdout="42\n", exit_code=expected)
    assert isinstance(text, TextBlock) and text.text == "It is 42."
    assert reply.tool_calls == [] and reply.warnings == []
    history = [question, reply.message, Message.user("Thanks")]
    again = ask(stack, *history, server_tools=[CodeExecution()])
    assert (await complete(stack, emulator, again)).text == "You are welcome."


# Refused as the real APIs refuse them ---------------------------------------------------------


async def _post(emulator: Emulator, path: str, body: dict[str, Any]) -> httpx.Response:
    async with httpx.AsyncClient(base_url=emulator.url) as client:
        return await client.post(path, json=body, headers={"authorization": "Bearer k"})


@pytest.mark.anyio
async def test_converse_refuses_a_code_result_echoed_without_its_call(emulator: Emulator) -> None:
    result = {"toolUseId": "tooluse_1", "type": "nova_code_interpreter_result",
              "status": "success", "content": [{"text": "{}"}]}  # fmt: skip
    body = {
        "messages": [
            {"role": "user", "content": [{"text": "Run it"}]},
            {"role": "assistant", "content": [{"toolResult": result}, {"text": "Done."}]},
            {"role": "user", "content": [{"text": "Thanks"}]},
        ],
        "toolConfig": {"tools": [{"systemTool": {"name": "nova_code_interpreter"}}]},
    }
    path = "/model/us.amazon.nova-2-lite-v1:0/converse"
    refused = await _post(emulator, path, body)
    assert refused.status_code == 400
    assert "must follow the toolUse of type server_tool_use" in refused.json()["message"]


@pytest.mark.anyio
async def test_responses_refuses_a_server_item_without_its_required_fields(
    emulator: Emulator,
) -> None:
    item = {"type": "code_interpreter_call", "id": "ci_1", "status": "completed", "code": "1"}
    body = {"model": "gpt-4o", "input": [{"role": "user", "content": "Run it"}, item]}
    refused = await _post(emulator, "/v1/responses", body)
    assert refused.status_code == 400
    assert refused.json()["error"]["param"] == "input[1].container_id"
