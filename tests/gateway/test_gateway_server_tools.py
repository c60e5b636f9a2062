"""Server tools on the translated path, through the emulator: a Messages client's
``web_search`` / ``code_execution`` and a Responses client's ``web_search`` /
``code_interpreter`` / ``file_search``, routed to a model of another family. Mapped by the
library's own declarations where the model has the tool (its options left out and named where
it takes none of them), left out and named in ``x-metis-dropped`` where it has not (never a
refusal), and what the tool did written back in the caller's API (docs/gateway.md, "Server
tools")."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator, code_execution, web_search
from tests.gateway_fixture import GATEWAY_KEY, gateway_config

pytestmark = pytest.mark.anyio

FOUND = [
    ("https://www.python.org/downloads/", "Download Python"),
    ("https://docs.python.org/3/", "Python docs"),
]
SEARCHED = web_search("latest python", FOUND, say="Python 3.14 is out.")
RAN = code_execution("print(6 * 7)", stdout="42\n", say="It is 42.")
SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
CODE = {"type": "code_execution_20250825", "name": "code_execution"}
STREAMS = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])


async def ask(emulator: Emulator, path: str, body: dict[str, Any], *replies: Any) -> httpx.Response:
    emulator.model.extend(replies)  # type: ignore[attr-defined]
    app = create_app(gateway_config(emulator))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        answer = await client.post(path, json=body, headers={"x-api-key": GATEWAY_KEY})
    assert answer.status_code == 200, answer.text
    return answer


def messages(model: str, tools: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    said = [{"role": "user", "content": "Latest Python? Work it out."}]
    return {"model": model, "max_tokens": 300, "tools": tools, "messages": said, "stream": stream}


def responses(model: str, tools: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    said = "Latest Python? Work it out."
    return {"model": model, "input": said, "tools": tools, "stream": stream}


def sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for frame in text.split("\n\n"):
        head, _, data = frame.partition("\ndata: ")
        if data:
            found.append((head.removeprefix("event: "), json.loads(data)))
    return found


def message_content(answer: httpx.Response, stream: bool) -> list[dict[str, Any]]:
    """The Messages reply's blocks, whole or as its stream's block starts and deltas built."""
    if not stream:
        return list(answer.json()["content"])
    blocks: list[dict[str, Any]] = []
    for name, data in sse(answer.text):
        if name == "content_block_start":
            blocks.append(dict(data["content_block"]))
        elif name == "content_block_delta":
            delta, block = data["delta"], blocks[data["index"]]
            if delta["type"] == "text_delta":
                block["text"] += delta["text"]
            elif delta["type"] == "citations_delta":
                block.setdefault("citations", []).append(delta["citation"])
            elif delta["type"] == "input_json_delta":
                block["partial"] = block.get("partial", "") + delta["partial_json"]
    for block in blocks:
        if "partial" in block:
            block["input"] = json.loads(block.pop("partial") or "{}")
    return blocks


def response_output(answer: httpx.Response, stream: bool) -> list[dict[str, Any]]:
    if not stream:
        return list(answer.json()["output"])
    done = [d for name, d in sse(answer.text) if name == "response.completed"]
    return list(done[0]["response"]["output"])


@STREAMS
async def test_a_messages_web_search_to_gemini_searches_and_cites_in_anthropics_blocks(
    stream: bool,
) -> None:
    emulator = Emulator(model=[], models="any")
    answer = await ask(emulator, "/v1/messages", messages("flash", [SEARCH], stream), SEARCHED)
    assert emulator.bodies("gemini")[0]["tools"] == [{"googleSearch": {}}]
    assert answer.headers["x-metis-dropped"] == (
        "tools[0] (web_search_20250305) max_uses (Gemini's Google Search takes only "
        "blocked_domains)"
    )
    (text,) = message_content(answer, stream)
    assert text["text"] == "Python 3.14 is out."
    cited = text["citations"]
    assert [c["type"] for c in cited] == ["web_search_result_location"] * 2
    assert [c["title"] for c in cited] == ["python.org", "docs.python.org"]


@STREAMS
async def test_a_messages_code_execution_on_gemini_comes_back_as_anthropics_blocks(
    stream: bool,
) -> None:
    emulator = Emulator(model=[], models="any")
    answer = await ask(emulator, "/v1/messages", messages("flash", [CODE], stream), RAN)
    assert emulator.bodies("gemini")[0]["tools"] == [{"codeExecution": {}}]
    assert "x-metis-dropped" not in answer.headers
    call, result, text = message_content(answer, stream)
    assert call["type"] == "server_tool_use" and call["name"] == "code_execution"
    assert call["id"].startswith("srvtoolu_") and call["input"] == {"code": "print(6 * 7)"}
    assert result["type"] == "code_execution_tool_result" and result["tool_use_id"] == call["id"]
    assert result["content"]["type"] == "code_execution_result"
    assert result["content"]["stdout"] == "42\n"
    assert text == {"type": "text", "text": "It is 42."}


async def test_a_server_tool_the_model_lacks_is_left_out_and_named_never_refused() -> None:
    emulator = Emulator(model=[], models="any")
    answer = await ask(emulator, "/v1/messages", messages("gpt", [SEARCH], False), "No search.")
    assert answer.headers["x-metis-dropped"] == (
        "tools[0] (web_search_20250305) (on Chat Completions only the search models search the"
        " web (gpt-4o-search-preview, ...); on the Responses API this one does:"
        " openai_responses:gpt-4o)"
    )
    sent = emulator.bodies("openai")[0]
    assert "web_search_options" not in sent and "tools" not in sent


@STREAMS
async def test_a_messages_web_search_on_responses_comes_back_as_anthropics_blocks(
    stream: bool,
) -> None:
    emulator = Emulator(model=[], models="any")
    answer = await ask(emulator, "/v1/messages", messages("gpt5", [SEARCH], stream), SEARCHED)
    assert emulator.bodies("openai_responses")[0]["tools"] == [{"type": "web_search"}]
    assert answer.headers["x-metis-dropped"] == (
        "tools[0] (web_search_20250305) max_uses (OpenAI web search takes no max_uses and no "
        "blocked_domains)"
    )
    call, result, text = message_content(answer, stream)
    assert call["type"] == "server_tool_use" and call["name"] == "web_search"
    assert call["input"] == {"query": "latest python"}
    assert result["type"] == "web_search_tool_result" and result["tool_use_id"] == call["id"]
    assert [r["url"] for r in result["content"]] == [url for url, _ in FOUND]
    assert text["text"] == "Python 3.14 is out."


@STREAMS
async def test_a_responses_code_interpreter_on_gemini_comes_back_as_its_item(
    stream: bool,
) -> None:
    emulator = Emulator(model=[], models="any")
    tools = [{"type": "code_interpreter", "container": {"type": "auto"}}]
    answer = await ask(emulator, "/v1/responses", responses("flash", tools, stream), RAN)
    assert emulator.bodies("gemini")[0]["tools"] == [{"codeExecution": {}}]
    ran, said = response_output(answer, stream)
    assert ran["type"] == "code_interpreter_call" and ran["status"] == "completed"
    assert ran["code"] == "print(6 * 7)"
    assert ran["outputs"] == [{"type": "logs", "logs": "42\n"}]
    assert said["type"] == "message" and said["content"][0]["text"] == "It is 42."
    if stream:
        kinds = [name for name, _ in sse(answer.text)]
        assert "response.code_interpreter_call_code.delta" in kinds


@STREAMS
async def test_a_responses_web_search_on_claude_and_file_search_left_out(stream: bool) -> None:
    emulator = Emulator(model=[], models="any")
    tools = [
        {"type": "web_search", "search_context_size": "low"},
        {"type": "file_search", "vector_store_ids": ["vs_1"]},
    ]
    answer = await ask(emulator, "/v1/responses", responses("sonnet", tools, stream), SEARCHED)
    sent = emulator.bodies("anthropic")[0]["tools"]  # the stack's cache policy marks the last
    assert [(t["type"], t["name"]) for t in sent] == [("web_search_20250305", "web_search")]
    assert answer.headers["x-metis-dropped"] == (
        "tools[1] (file_search); tools[0] (web_search) search_context_size (Anthropic web "
        "search takes no context_size)"
    )
    searched, said = response_output(answer, stream)
    assert searched["type"] == "web_search_call" and searched["status"] == "completed"
    assert searched["action"]["query"] == "latest python"
    assert [s["url"] for s in searched["action"]["sources"]] == [url for url, _ in FOUND]
    assert said["content"][0]["text"] == "Python 3.14 is out."


async def test_a_tool_the_models_stack_refuses_beside_function_tools_is_left_out() -> None:
    """Gemini before 3 takes no built-in tool beside function tools: the library refuses the
    request, so the gateway leaves the server tool out, named with the library's reason."""
    emulator = Emulator(model=[], models="any")
    weather = {"name": "get_weather", "input_schema": {"type": "object"}}
    answer = await ask(emulator, "/v1/messages", messages("flash", [weather, CODE], False), "Hi.")
    assert answer.headers["x-metis-dropped"] == (
        "tools[1] (code_execution_20250825) (Gemini takes built-in tools beside function tools "
        "from Gemini 3 on)"
    )
    sent = emulator.bodies("gemini")[0]["tools"]
    assert [list(tool) for tool in sent] == [["functionDeclarations"]]


async def test_a_server_tools_option_out_of_range_is_a_400_naming_it() -> None:
    app = create_app(gateway_config(Emulator()))
    transport = httpx.ASGITransport(app=app)
    body = messages("flash", [{**SEARCH, "max_uses": 0}], False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        answer = await client.post("/v1/messages", json=body, headers={"x-api-key": GATEWAY_KEY})
    assert answer.status_code == 400
    assert answer.json()["error"]["message"].startswith("tools[0].max_uses: ")


async def test_a_declaration_the_model_takes_whole_is_taken_whole_every_time() -> None:
    """What a model takes is asked of its stack once: the next request with the same tool
    is served the same, nothing named."""
    emulator = Emulator(model=[RAN, RAN], models="any")
    app = create_app(gateway_config(emulator))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        for _ in range(2):
            body, key = messages("flash", [CODE], False), {"x-api-key": GATEWAY_KEY}
            answer = await client.post("/v1/messages", json=body, headers=key)
            assert answer.status_code == 200 and "x-metis-dropped" not in answer.headers
    assert [b["tools"] for b in emulator.bodies("gemini")] == [[{"codeExecution": {}}]] * 2


async def test_only_the_options_the_model_refuses_are_left_out() -> None:
    """Gemini's Google Search takes blocked domains (its ``excludeDomains``) but no
    ``max_uses``: the one goes, the other is named."""
    emulator = Emulator(model=[], models="any")
    searching = {**SEARCH, "blocked_domains": ["example.com"]}
    body = messages("flash", [searching], False)
    answer = await ask(emulator, "/v1/messages", body, SEARCHED)
    assert emulator.bodies("gemini")[0]["tools"] == [
        {"googleSearch": {"excludeDomains": ["example.com"]}}
    ]
    assert answer.headers["x-metis-dropped"].startswith("tools[0] (web_search_20250305) max_uses (")


async def test_a_code_interpreters_container_files_are_named_as_left_out() -> None:
    """A container given as options (files to put in it) is OpenAI's alone: the code runs
    elsewhere without them, and the client is told."""
    emulator = Emulator(model=[], models="any")
    tools = [{"type": "code_interpreter", "container": {"type": "auto", "file_ids": ["file_1"]}}]
    answer = await ask(emulator, "/v1/responses", responses("flash", tools, False), RAN)
    assert answer.headers["x-metis-dropped"] == "tools[0].container.file_ids"
    assert emulator.bodies("gemini")[0]["tools"] == [{"codeExecution": {}}]
