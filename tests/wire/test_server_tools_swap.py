"""One conversation swapped across every family (Anthropic, OpenAI Chat, Responses, Gemini,
Bedrock, Vertex, Azure, then Anthropic again) carrying a PDF, an image inside a tool result, a
web search with citations and a code run, on the emulator, whose rules refuse what each real
API refuses (issue 22, docs/contract.md §9-12).

Each family, in turn, is asked to search the web and to run code (where it has the server
tool: elsewhere declaring one is a CapabilityError before sending), then calls a tool whose
result holds text and a screenshot. Every request is accepted; each reply reads back as the
canonical blocks its provider makes (server-tool calls and results, citations); every block a
provider could not take is in the result's ``warnings``, by kind; the blocks of other
providers arrive projected to text; and the last family, Anthropic again, gets its own
blocks back verbatim.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest

from metis.errors import CapabilityError
from metis.model import (
    Base64ImageSource,
    CanonicalRequest,
    DocumentBlock,
    ImageBlock,
    Message,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ToolDefinition,
    ToolResultBlock,
    WebSearch,
)
from metis.model.server_tools import CodeExecution
from metis.pipeline.stores import InMemoryToolIdStore
from metis.testing.emulator import Emulator, code_execution, tools, web_search

from .test_server_tools_every_api import adapter

pytestmark = pytest.mark.backend_independent  # wire formats checked against the emulator

PDF = DocumentBlock.from_bytes(b"%PDF-1.7\n1 0 obj\n", "application/pdf", title="Q3 report")
PNG = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBORw0KGgo="))
FOUND = [
    ("https://www.python.org/downloads/", "Download Python"),
    ("https://docs.python.org/3/", "Python docs"),
]
URLS = [url for url, _ in FOUND]
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)
ROTATION = [
    "anthropic",
    "openai",
    "openai_responses",
    "gemini",
    "bedrock",
    "vertex",
    "azure",
    "anthropic",
]
MODELS = {
    "anthropic": "anthropic:claude-sonnet-4-5",
    "openai": "openai:gpt-4o",
    "openai_responses": "openai_responses:gpt-4o",
    "gemini": "gemini:gemini-2.5-flash",
    "bedrock": "bedrock:us.amazon.nova-2-lite-v1:0",
    "vertex": "vertex:gemini-2.5-flash",
    "azure": "azure:my-gpt-4o-deployment",
}
SEARCH_MODELS = {"openai": "openai:gpt-4o-search-preview"}  # Chat searches with these only


@dataclass
class Conversation:
    """The history, the emulator answering it, and what each family's turns showed."""

    emulator: Emulator
    history: list[Message] = field(default_factory=list)
    store: InMemoryToolIdStore = field(default_factory=InMemoryToolIdStore)
    warned: dict[str, set[str]] = field(default_factory=dict)
    refused: dict[str, list[str]] = field(default_factory=dict)
    stream: bool = False

    async def turn(self, stack: str, said: str, answer: Any, **fields: Any) -> Any:
        """The user says ``said``; the family answers ``answer`` (the emulator's script)."""
        self.history.append(Message.user(said))
        return await self.answer(stack, answer, **fields)

    async def answer(self, stack: str, answer: Any, model: str | None = None, **fields: Any) -> Any:
        self.emulator.model.extend([answer])  # type: ignore[attr-defined]
        request = CanonicalRequest(
            model=model or MODELS[stack],
            session_id="swapped",
            messages=list(self.history),
            max_output_tokens=512,
            stream=self.stream,
            **fields,
        )
        with anyio.fail_after(20):
            reply = await adapter(stack, self.emulator, self.store).complete(request)
        assert self.emulator.model.remaining == 0, stack  # type: ignore[attr-defined]
        self.history.append(reply.message)
        self.warned.setdefault(stack, set()).update(w.block_type for w in reply.warnings)
        return reply

    async def cannot(self, stack: str, kind: str, tool: Any) -> None:
        """Declaring ``tool`` on ``stack`` is refused before anything is sent."""
        sent = len(self.emulator.requests)
        request = CanonicalRequest(
            model=MODELS[stack],
            messages=[Message.user("?")],
            server_tools=[tool],
            max_output_tokens=64,
        )
        with pytest.raises(CapabilityError), anyio.fail_after(20):
            await adapter(stack, self.emulator, self.store).complete(request)
        assert len(self.emulator.requests) == sent, stack
        self.refused.setdefault(stack, []).append(kind)


SEARCHES = {"anthropic", "openai", "openai_responses", "gemini", "bedrock", "vertex"}
RUNS_CODE = {"anthropic", "openai_responses", "gemini", "bedrock", "vertex"}


@pytest.fixture
def emulator() -> Iterator[Emulator]:
    with Emulator(host="127.0.0.1", port=0, model=[], models="any") as running:
        yield running


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
async def test_a_conversation_with_files_and_server_tools_swapped_across_every_family(
    emulator: Emulator, stream: bool
) -> None:
    talk = Conversation(emulator, [Message.user("Read the report.", PDF)], stream=stream)
    await talk.answer("anthropic", "Read.")
    for n, stack in enumerate(ROTATION):
        await _search(talk, stack, n)
        await _run_code(talk, stack, n)
        await _call_a_tool(talk, stack, n)
    assert talk.refused == {"openai": ["code_execution"], "azure": ["web_search", "code_execution"]}
    # what each family could not take, by kind (all else went, or went as text)
    assert talk.warned == {
        "anthropic": set(),
        "openai": set(),
        "openai_responses": set(),
        "gemini": set(),
        "bedrock": set(),
        "vertex": set(),
        "azure": {"document"},  # Azure documents no files on Chat Completions
    }
    _files_went_where_they_are_read(emulator)
    _others_blocks_went_as_text(emulator)
    _anthropic_took_its_own_blocks_back(emulator)


def _files_went_where_they_are_read(emulator: Emulator) -> None:
    """Every request took the screenshots of the tool results before it, and every family
    but Azure the PDF of the first turn."""
    served = [r for r in emulator.requests if r.status == 200]
    assert len(served) == 1 + 7 + 6 + 2 * 8  # the PDF turn, searches, runs, tool round trips
    screenshots = [r.body.count(b"iVBORw0KGgo=") for r in served]
    assert screenshots == sorted(screenshots) and screenshots[-1] == 8
    with_pdf = {r.path.split("/")[1] for r in served if b"JVBERi0xLjcKMSAwIG9iago=" in r.body}
    without_pdf = {r.path for r in served if b"JVBERi0xLjcKMSAwIG9iago=" not in r.body}
    assert with_pdf == {"v1", "v1beta", "model", "v1beta1"}  # every family but one
    assert {path.split("/")[1] for path in without_pdf} == {"azure"}


async def _search(talk: Conversation, stack: str, n: int) -> None:
    if stack not in SEARCHES:
        await talk.cannot(stack, "web_search", WebSearch())
        return
    said = f"Python {n} is out."
    reply = await talk.turn(
        stack,
        f"What is the latest Python, {stack}? Search the web.",
        web_search(f"latest python {n}", FOUND, say=said),
        model=SEARCH_MODELS.get(stack),
        server_tools=[WebSearch()],
    )
    kinds = [block.type for block in reply.content]
    assert reply.text == said and reply.tool_calls == []
    if stack in ("anthropic", "openai_responses"):  # the search itself is in the reply
        assert kinds == ["server_tool_call", "server_tool_result", "text"], stack
        call, result, _ = reply.content
        assert isinstance(call, ServerToolCallBlock) and call.input["query"] == f"latest python {n}"
        assert isinstance(result, ServerToolResultBlock) and result.tool_call_id == call.id
        assert [r.url for r in result.search_results or []] == URLS
    else:  # grounding: only the citations show it
        assert kinds == ["text"], stack
    if stack in ("gemini", "vertex"):  # Google cites redirects, titled by the page's domain
        assert [c.title for c in reply.citations] == ["python.org", "docs.python.org"]
    else:
        assert [c.url for c in reply.citations] == URLS, stack


async def _run_code(talk: Conversation, stack: str, n: int) -> None:
    if stack not in RUNS_CODE:
        await talk.cannot(stack, "code_execution", CodeExecution())
        return
    code = f"print(6 * {n + 7})"
    reply = await talk.turn(
        stack,
        "And what is that times six? Run it.",
        code_execution(code, stdout=f"{6 * (n + 7)}\n", say=f"It is {6 * (n + 7)}."),
        server_tools=[CodeExecution()],
    )
    call, result, text = reply.content
    assert isinstance(call, ServerToolCallBlock) and call.name == "code_execution", stack
    assert call.input["code"] == code
    assert isinstance(result, ServerToolResultBlock) and result.tool_call_id == call.id
    assert result.code_output is not None and result.code_output.stdout == f"{6 * (n + 7)}\n"
    assert isinstance(text, TextBlock) and reply.tool_calls == []


async def _call_a_tool(talk: Conversation, stack: str, n: int) -> None:
    reply = await talk.turn(
        stack,
        f"What's the weather in Paris, {stack}?",
        tools(("get_weather", {"city": "Paris"})),
        tools=[WEATHER],
    )
    (called,) = reply.tool_calls
    assert called.name == "get_weather" and called.input == {"city": "Paris"}
    shown = ToolResultBlock(tool_use_id=called.id, content=[TextBlock(text="18 C; scan:"), PNG])
    talk.history.append(Message.tool(shown))
    answer = await talk.answer(stack, f"18 C in Paris ({n}).", tools=[WEATHER])
    assert answer.text == f"18 C in Paris ({n})."


def _others_blocks_went_as_text(emulator: Emulator) -> None:
    """Azure, last but one, got every other family's searches and runs as text."""
    messages = emulator.bodies("azure")[-1]["messages"]
    said = [m["content"] for m in messages if m["role"] == "assistant" and m["content"]]

    def turn(about: str) -> str:
        (found,) = [text for text in said if about in text]
        return str(found)

    assert turn("latest python 0") == (  # Anthropic's search, then what it said
        '[web_search {"query": "latest python 0"}]\n'
        "- Download Python <https://www.python.org/downloads/>\n"
        "- Python docs <https://docs.python.org/3/>\n\n"
        "Python 0 is out."
    )
    assert turn("print(6 * 7)") == (
        '[code_execution {"code": "print(6 * 7)"}]\nexit code 0\nstdout:\n42\n\n\nIt is 42.'
    )
    assert turn("latest python 2").endswith(  # Responses' search: its sources have no titles
        "- <https://www.python.org/downloads/>\n- <https://docs.python.org/3/>\n\nPython 2 is out."
    )
    assert "Python 1 is out." in said  # Chat's search model: its citations are not sent back
    assert "stdout:\n60\n\n\nIt is 60." in turn("print(6 * 10)")  # Gemini's run
    assert "exit code 0\nstdout:\n66\n\n\nIt is 66." in turn("print(6 * 11)")  # Nova's run
    sent = json.dumps(messages)
    assert "Read the report." in sent and "JVBERi0" not in sent  # the PDF left out


def _anthropic_took_its_own_blocks_back(emulator: Emulator) -> None:
    """The last request, to Anthropic, holds the server blocks of both its visits (the first
    one's across six other families) as they came: the emulator checked their encrypted
    contents, and would have refused a result without its call."""
    messages = emulator.bodies("anthropic")[-1]["messages"]
    blocks = [b for m in messages for b in m["content"] if isinstance(b, dict)]
    kinds = [b.get("type") for b in blocks]
    assert kinds.count("server_tool_use") == 4 and kinds.count("web_search_tool_result") == 2
    assert kinds.count("code_execution_tool_result") == 2
    (first, _) = [b for b in blocks if b["type"] == "web_search_tool_result"]
    assert [r["url"] for r in first["content"]] == URLS
    assert all(r["encrypted_content"] for r in first["content"])
