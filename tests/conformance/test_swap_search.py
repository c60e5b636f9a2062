"""A property search over conversations that move between every built-in stack (docs/contract.md
§6-13): a history of mixed content from elsewhere (text and empty text, images inline and by
URL, documents with titles and context, file ids, audio, video, tool calls with odd and reused
ids, results holding text, images, documents or failures, signed, unsigned and redacted
thinking, citations, server-tool blocks, opaque blocks, system prompts at the start and later),
then turns each answered by a stack drawn from all of them (whole or streamed, with thinking,
parallel calls, web searches, code runs and structured output where it has them) on the
emulator in process. For every request: the emulator, refusing what that API refuses, takes it;
every text, call and result of the history is read back by the emulator's model in its role and
order, each result answering its call; every block not on the wire is in the reply's warnings
by its type; a document on the wire has its title and context; and the reply reads back as the
model said it. The search's size: tests/conftest.py (METIS_FULL_SEARCH)."""

from __future__ import annotations

import base64
import json
import re
from dataclasses import dataclass, field, replace
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.model import (
    CanonicalRequest,
    CanonicalResponse,
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    WebSearch,
)
from metis.model.citation import Citation
from metis.model.content import OpaqueBlock, ProviderRaw, RedactedThinkingBlock, ThinkingBlock
from metis.model.media import AudioBlock, VideoBlock
from metis.model.server_tools import (
    CodeExecution,
    SearchResult,
    ServerToolCallBlock,
    ServerToolResultBlock,
)
from metis.pipeline.stores import InMemoryToolIdStore
from metis.routing import Router
from metis.testing.emulator import (
    Emulator,
    Reply,
    code_execution,
    text,
    thinking,
    tools,
    web_search,
)
from metis.testing.emulator.model import Prompt
from metis.testing.emulator.script import Script

from ..helpers import answer
from ..stack_table import (
    CLOUD,
    FAMILIES,
    LONG_TAIL,
    MODELS,
    NO_TOOLS,
    WEATHER,
    google_credentials,
    target,
)

COMPATIBLE = {  # at their own URLs, which the in-process transport serves by path
    "mistral": "mistral:mistral-large-latest",
    "deepseek": "deepseek:deepseek-chat",
    "together": "together:meta-llama/Llama-3.3-70B-Instruct-Turbo",
    "openrouter": "openrouter:openai/gpt-4o",
    "vllm": "vllm:qwen",
    "llamacpp": "llamacpp:local",
    "openai_compatible": "openai_compatible:some-model",
}
ALL = {**MODELS, **COMPATIBLE}
STACKS = sorted({*FAMILIES, *CLOUD, *LONG_TAIL, *COMPATIBLE})
SEARCHES = {  # the model that searches (and runs code, but for Chat and Perplexity)
    "anthropic": MODELS["anthropic"],
    "openai_responses": MODELS["openai_responses"],
    "gemini": MODELS["gemini"],
    "vertex": MODELS["vertex"],
    "openai": "openai:gpt-4o-search-preview",
    "bedrock": "bedrock:us.amazon.nova-2-lite-v1:0",
    "perplexity": MODELS["perplexity"],
}
ALONE = {"gemini", "vertex", "openai", "perplexity"}  # server tools without function tools
LOCAL = {"ollama", "vllm", "llamacpp", "openai_compatible"}  # capabilities the caller declares


def built(
    stack: str, emulator: Emulator, client: httpx.AsyncClient, store: InMemoryToolIdStore
) -> Adapter:
    settings_: dict[str, Any] = {}
    api_key: str | None = "test-key"
    if stack.startswith("vertex"):
        settings_ = {"project": "proj-1", "location": "us-east5"}
        settings_["google_credentials"] = google_credentials()
        api_key = None
    local = {"supports_tools": True, "supports_images": True, "max_context_tokens": 32768}
    config = AdapterConfig(
        api_key=api_key,
        base_url=None if stack in COMPATIBLE else emulator.base_url(target(stack)),
        http_client=client,
        settings=settings_,
        capabilities=local if stack in LOCAL else {},
    )
    return build_adapter(stack, config, tool_id_store=store)


# What the search draws -----------------------------------------------------------------------

ODD_IDS = ["call_1", "toolu_01A", "a b/c.d", "a_b_c_d", "a-b-c-d", "x" * 80, "x" * 80 + "y"]
ODD_IDS += ["ñ-1", "fc_1", "123456789", "call:1", "-", "call_0", "0"]


WORDS = [
    ".",
    " — naïve café, 東京 🌧?",
    ".\n\nA second paragraph:\n- a list",
    ' "quoted" \\ back\tslash',
]
CITIES = ["", "São Paulo ", "Zürich\n", '"Quote" ']


MARK = re.compile(r"[a-z]+[0-9]+q")


@dataclass
class Marks:
    """Unique words, one per block, so each block is found (or not) in what was sent."""

    n: int = 0

    def __call__(self, kind: str) -> str:
        self.n += 1
        return f"{kind}{self.n}q"


def png(mark: str) -> ImageBlock:
    return ImageBlock.from_bytes(b"\x89PNG\r\n\x1a\n" + mark.encode(), "image/png")


@st.composite
def user_message(draw: st.DrawFn, marks: Marks) -> Message:
    words = draw(st.sampled_from(WORDS))
    blocks: list[Any] = [TextBlock(text=f"Look at {marks('user')}{words}")]
    if draw(st.booleans()):
        blocks.append(TextBlock(text=""))
    if draw(st.booleans()):
        blocks.append(png(marks("img")))
    if draw(st.booleans()):
        blocks.append(ImageBlock.from_url(f"https://example.com/{marks('url')}.png"))
    if draw(st.booleans()):
        pdf = b"%PDF-1.7\n% " + marks("pdf").encode()
        context = draw(st.sampled_from([None, f"Context {marks('context')}"]))
        title = f"Report {marks('title')}"
        blocks.append(
            DocumentBlock.from_bytes(pdf, "application/pdf", title=title, context=context)
        )
    if draw(st.booleans()):
        title = f"Notes {marks('title')}"
        blocks.append(DocumentBlock.from_text(f"Notes {marks('doc')}", title=title))
    files = st.sampled_from(["none", "pdf url", "file id", "audio", "video url"])
    file = draw(files)
    if file == "pdf url":
        blocks.append(DocumentBlock.from_url(f"https://example.com/{marks('pdf')}.pdf"))
    elif file == "file id":
        blocks.append(DocumentBlock.from_file_id(f"file-{marks('fid')}", provider="openai"))
    elif file == "audio":
        wav = b"RIFF\x24\x00\x00\x00WAVEfmt " + marks("wav").encode()
        blocks.append(AudioBlock.from_bytes(wav, "audio/wav"))
    elif file == "video url":
        blocks.append(VideoBlock.from_url(f"https://www.youtube.com/watch?v={marks('vid')}"))
    return Message(role=Role.USER, content=draw(st.permutations(blocks)))


ELSEWHERE = ProviderRaw(provider="anthropic", model="claude-3-7-sonnet-20250219")


@st.composite
def assistant_turn(draw: st.DrawFn, marks: Marks) -> list[Message]:
    """An assistant message from elsewhere (an imported history), and its calls' results."""
    blocks: list[Any] = []
    if draw(st.booleans()):
        blocks.append(ThinkingBlock(thinking=f"Hmm {marks('think')}."))
    if draw(st.booleans()):
        signed = f"Signed {marks('think')}."
        blocks.append(ThinkingBlock(thinking=signed, signature="c2lnbmVk", provider_raw=ELSEWHERE))
    if draw(st.booleans()):
        blocks.append(RedactedThinkingBlock(data=marks("redacted"), provider_raw=ELSEWHERE))
    if draw(st.booleans()):
        url = f"https://example.com/{marks('found')}"
        call = ServerToolCallBlock(
            id="srvtoolu_1", name="web_search", input={"query": "q"}, provider_raw=ELSEWHERE
        )
        result = ServerToolResultBlock(
            tool_call_id="srvtoolu_1",
            name="web_search",
            search_results=[SearchResult(url=url, title="Found")],
            provider_raw=ELSEWHERE,
        )
        blocks += [call, result]
    if draw(st.booleans()):
        item = {"type": "mcp_call", "id": marks("opaque")}
        raw = ProviderRaw(provider="elsewhere", data={"item": item})
        blocks.append(OpaqueBlock(kind="mcp_call", provider_raw=raw))
    said = f"Said {marks('said')}."
    cited = [Citation(kind="url", url="https://example.com/c", title="C")]
    blocks.append(TextBlock(text=said, citations=cited if draw(st.booleans()) else None))
    if draw(st.booleans()):
        blocks.append(TextBlock(text=""))
    ids = draw(st.lists(st.sampled_from(ODD_IDS), max_size=3, unique=True))
    city = draw(st.sampled_from(CITIES))
    calls = [
        ToolUseBlock(id=i, name="get_weather", input={"city": city + marks("city")}) for i in ids
    ]
    turn = [Message(role=Role.ASSISTANT, content=blocks + calls)]
    if calls:  # answered, so the files in the results are of an older turn
        turn.append(Message.tool(*[draw(tool_result(call, marks)) for call in calls]))
        turn.append(Message.assistant(f"Done {marks('said')}."))
    return turn


@st.composite
def tool_result(draw: st.DrawFn, call: ToolUseBlock, marks: Marks) -> ToolResultBlock:
    kind = draw(st.sampled_from(["text", "image", "document", "error"]))
    if kind == "image":
        content: Any = [TextBlock(text=f"Chart {marks('result')}"), png(marks("img"))]
        return ToolResultBlock(tool_use_id=call.id, content=content)
    if kind == "document":
        pdf = b"%PDF-1.7\n% " + marks("pdf").encode()
        attached = DocumentBlock.from_bytes(pdf, "application/pdf", title=f"Scan {marks('title')}")
        content = [TextBlock(text=f"Scanned {marks('result')}"), attached]
        return ToolResultBlock(tool_use_id=call.id, content=content)
    if kind == "error":
        return ToolResultBlock(tool_use_id=call.id, content="", is_error=True)
    return ToolResultBlock(tool_use_id=call.id, content=f"Sunny {marks('result')}")


@dataclass
class Step:
    """One turn: the stack answering, what its model says, how it is asked."""

    stack: str
    reply: Reply
    stream: bool
    schema: bool
    model: str = ""
    saved: bool = False
    """The history goes through its JSON form (a session saved and loaded) after this turn."""
    routed: bool = False
    """Asked through a route (``metis.routing.Router``), which fits the request first."""

    @property
    def tools(self) -> list[ToolDefinition]:
        alone = self.reply.server and self.stack in ALONE
        return [] if self.stack in NO_TOOLS or alone else [WEATHER]


SCHEMA = {
    "type": "object",
    "properties": {"answer": {"type": "string"}},
    "required": ["answer"],
    "additionalProperties": False,
}


@st.composite
def step(draw: st.DrawFn, marks: Marks, pool: list[str]) -> Step:
    stack = draw(st.sampled_from(pool))
    kinds = ["text", "empty", "json"]
    kinds += ["tools", "tools"] if stack not in NO_TOOLS else []
    kinds += ["search"] if stack in SEARCHES else []
    kinds += ["code"] if stack in SEARCHES and stack not in {"openai", "perplexity"} else []
    kind = draw(st.sampled_from(kinds))
    if kind == "tools":
        count = draw(st.integers(1, 3))
        say = draw(st.sampled_from(["", f"Checking {marks('said')}."]))
        city = draw(st.sampled_from(CITIES))
        reply = tools(
            *[("get_weather", {"city": city + marks("city")}) for _ in range(count)], say=say
        )
    elif kind == "search":
        found = [(f"https://example.com/{marks('found')}", "Found")]
        cite = draw(st.booleans())
        reply = web_search("q", found, say=f"Found {marks('said')}.", cite=cite)
    elif kind == "code":
        reply = code_execution("print(1)", stdout=marks("stdout"), say=f"Ran {marks('said')}.")
    elif kind == "json":
        reply = text(json.dumps({"answer": marks("json")}))
    else:
        reply = text("" if kind == "empty" else f"Reply {marks('said')}.")
    if draw(st.booleans()):
        reply = thinking(f"Think {marks('think')}.", reply)
    model = SEARCHES[stack] if reply.server else ALL[stack]
    stream, saved, routed = (draw(st.booleans()) for _ in range(3))
    return Step(stack, reply, stream, kind == "json", model, saved, routed)


@dataclass
class Plan:
    prefix: list[Message]
    steps: list[Step]
    system: str | None
    marks: Marks = field(default_factory=Marks)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    marks = Marks()
    prefix: list[Message] = []
    if draw(st.booleans()):
        prefix.append(Message.system(f"Be brief {marks('system')}."))
    for _ in range(draw(st.integers(0, 2))):
        prefix.append(draw(user_message(marks)))
        prefix += draw(assistant_turn(marks))
        if draw(st.booleans()):
            prefix.append(Message.system(f"From now on {marks('system')}."))
    pool = draw(st.lists(st.sampled_from(STACKS), min_size=1, max_size=3, unique=True))
    steps = draw(st.lists(step(marks, pool), min_size=2, max_size=5))  # back and forth
    system = draw(st.sampled_from([None, "", f"Answer in English {marks('system')}."]))
    return Plan(prefix, steps, system, marks)


# Playing it ----------------------------------------------------------------------------------


@dataclass
class Turn:
    stack: str
    said: Reply
    sent: list[Message]
    response: CanonicalResponse
    body: str
    prompt: Prompt
    emulated_tools: bool
    model: str
    issued: set[str] = field(default_factory=set)
    """The call ids this stack's replies gave out before this turn."""


async def play(plan: Plan) -> list[Turn]:
    script = Script([])
    emulator = Emulator(model=script, models="any")
    async with emulator.client() as client:
        return await turns_of(plan, script, emulator, client)


async def turns_of(
    plan: Plan, script: Script, emulator: Emulator, client: httpx.AsyncClient
) -> list[Turn]:
    store = InMemoryToolIdStore()
    history = list(plan.prefix)
    turns: list[Turn] = []
    issued: dict[str, set[str]] = {}
    for step in plan.steps:
        if step.stack in NO_TOOLS and history and history[-1].role is Role.TOOL:
            continue  # results it cannot read, in the turn sent: refused (docs/contract.md §8)
        adapter = built(step.stack, emulator, client, store)
        can = adapter.capabilities_for(adapter.wire_model(step.model))
        reply = step.reply
        if reply.thinking and not can.supports_thinking:
            reply = replace(reply, thinking="")
        if not history or history[-1].role is not Role.TOOL:
            history.append(Message.user(f"Next {plan.marks('ask')}?"))
        said = replace(reply, calls=list(reply.calls), server=list(reply.server))
        script.extend([reply])
        request = CanonicalRequest(
            model=step.model,
            session_id="swap-search",
            system_prompt=plan.system,
            messages=list(history),
            tools=step.tools,
            server_tools=[server_tool(out.name) for out in reply.server],
            max_output_tokens=2048,
            thinking=ThinkingConfig(budget_tokens=1024) if reply.thinking else None,
            output_schema=SCHEMA if step.schema and can.supports_structured_output else None,
        )
        with anyio.fail_after(20):
            if step.routed:
                route = Router([step.model], adapters={step.stack: adapter}, max_retries=0)
                routed = request.model_copy(update={"model": "route:swap"})
                response = await answer(route, routed, step.stream)
            else:
                response = await answer(adapter, request, step.stream)
        await adapter.aclose()
        body = emulator.requests[-1].body.decode()
        prompt = script.prompts[-1]
        turn = Turn(
            step.stack,
            said,
            request.messages,
            response,
            body,
            prompt,
            can.tools_emulated,
            step.model,
            set(issued.get(step.stack, ())),
        )
        issued.setdefault(step.stack, set()).update(emulator.requests[-1].call_ids)
        turns.append(turn)
        history.append(response.message)
        if response.tool_calls:
            results = [
                ToolResultBlock(tool_use_id=c.id, content=f"Sunny {plan.marks('result')}")
                for c in response.tool_calls
            ]
            history.append(Message.tool(*results))
        if step.saved:
            history = saved_and_loaded(history)
    return turns


def saved_and_loaded(history: list[Message]) -> list[Message]:
    """The history through its JSON form, which reads back equal (provenance, signatures and
    all), as a session moved to another worker does."""
    loaded = [Message.model_validate_json(m.model_dump_json()) for m in history]
    assert loaded == history
    return loaded


def server_tool(kind: str) -> Any:
    return WebSearch() if kind == "web_search" else CodeExecution()


@pytest.mark.usefixtures("no_backoff")
@settings(suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(plan=plans())
def test_a_conversation_swapped_across_every_stack_loses_nothing_unreported(plan: Plan) -> None:
    played = anyio.run(play, plan)
    for turn in played:
        check(turn)
        read_back(turn)


@pytest.mark.usefixtures("no_backoff")
def test_one_conversation_holding_everything_visits_every_stack_in_turn() -> None:
    """The same checks, on one history holding every kind of block, each built-in stack taking
    a turn in order: a call, reasoning or an answer by turns, each answered by the next."""
    marks = Marks()
    steps = []
    for i, stack in enumerate(STACKS):
        reply = (
            tools(("get_weather", {"city": marks("city")}), ("get_weather", {"city": "Rome"}))
            if i % 3 == 0 and stack not in NO_TOOLS
            else thinking(f"Think {marks('think')}.", f"Reply {marks('said')}.")
            if i % 3 == 1
            else text(f"Reply {marks('said')}.")
        )
        steps.append(Step(stack, reply, stream=i % 2 == 1, schema=False, model=ALL[stack]))
    plan = Plan(everything(marks), steps, f"Answer in English {marks('system')}.", marks)
    played = anyio.run(play, plan)
    assert len(played) >= len(STACKS) - 1  # Perplexity may come when results are due
    for turn in played:
        check(turn)
        read_back(turn)


def everything(marks: Marks) -> list[Message]:
    pdf = b"%PDF-1.7\n% " + marks("pdf").encode()
    asked = Message.user(
        f"Look at {marks('user')}.",
        TextBlock(text=""),
        png(marks("img")),
        ImageBlock.from_url(f"https://example.com/{marks('url')}.png"),
        DocumentBlock.from_bytes(pdf, "application/pdf", title=f"R {marks('t')}", context="Q3"),
        DocumentBlock.from_text(f"Notes {marks('doc')}", title=f"N {marks('t')}"),
        DocumentBlock.from_file_id(f"file-{marks('fid')}", provider="openai"),
        AudioBlock.from_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt " + marks("wav").encode(), "audio/wav"),
        VideoBlock.from_url(f"https://www.youtube.com/watch?v={marks('vid')}"),
    )
    found = [SearchResult(url=f"https://example.com/{marks('found')}", title="Found")]
    raw = ProviderRaw(provider="elsewhere", data={"item": {"type": "mcp_call", "id": "mcp1"}})
    calls = [
        ToolUseBlock(id=odd, name="get_weather", input={"city": marks("city")})
        for odd in ("a b/c.d", "x" * 80, "call_0")
    ]
    answered = Message(
        role=Role.ASSISTANT,
        content=[
            ThinkingBlock(thinking=f"Hmm {marks('think')}."),
            ThinkingBlock(
                thinking=f"Signed {marks('think')}.", signature="c2ln", provider_raw=ELSEWHERE
            ),
            RedactedThinkingBlock(data=marks("redacted"), provider_raw=ELSEWHERE),
            ServerToolCallBlock(
                id="srv_1", name="web_search", input={"q": "q"}, provider_raw=ELSEWHERE
            ),
            ServerToolResultBlock(
                tool_call_id="srv_1",
                name="web_search",
                search_results=found,
                provider_raw=ELSEWHERE,
            ),
            OpaqueBlock(kind="mcp_call", provider_raw=raw),
            TextBlock(text=f"Said {marks('said')}.", citations=[Citation(kind="url", url="u")]),
            *calls,
        ],
    )
    results = Message.tool(
        ToolResultBlock(tool_use_id=calls[0].id, content=f"Sunny {marks('result')}"),
        ToolResultBlock(
            tool_use_id=calls[1].id, content=[TextBlock(text="Chart"), png(marks("img"))]
        ),
        ToolResultBlock(tool_use_id=calls[2].id, content="", is_error=True),
    )
    again = ToolUseBlock(id="call_0", name="get_weather", input={"city": marks("city")})
    return [
        Message.system(f"Be brief {marks('system')}."),
        asked,
        answered,
        results,
        Message.assistant(f"Done {marks('said')}."),
        Message.system(f"From now on {marks('system')}."),
        Message.user(f"Again {marks('user')}?"),
        Message.assistant(again),
        Message.tool(ToolResultBlock(tool_use_id="call_0", content=f"Rain {marks('result')}")),
        Message.assistant(f"Done {marks('said')}."),
    ]


def check(turn: Turn) -> None:
    """The request was taken (else ``complete`` raised); what it read back holds every call,
    result and text of the history; whatever did not reach the wire is reported."""
    warned = {w.block_type for w in turn.response.warnings}
    body = json.loads(turn.body)
    wire = json.dumps(body, ensure_ascii=False)
    lost = [
        (i, block.type)
        for i, message in enumerate(turn.sent)
        for block in blocks_of(message)
        if not arrived(block, wire)
        and getattr(block, "kind", block.type) not in warned  # an opaque block: by its kind
        and not own_summary(block, turn)
    ]
    assert lost == [], (turn.stack, lost, turn.response.warnings)
    leaked = [s for s, owner in secrets(turn.sent) if not made_by(owner, turn) and s in wire]
    assert leaked == [], (turn.stack, leaked)
    if turn.stack == "mistral":  # 9 of [A-Za-z0-9], unless it issued it (the emulator does not)
        sent = [c["id"] for m in body["messages"] for c in m.get("tool_calls") or []]
        sent += [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
        odd = [i for i in sent if i not in turn.issued and not re.fullmatch("[A-Za-z0-9]{9}", i)]
        assert odd == [], odd
    if not turn.emulated_tools and turn.stack not in NO_TOOLS:
        same_calls_and_results(turn)
    if "text" not in warned:
        texts_in_order(turn)


def texts_in_order(turn: Turn) -> None:
    """Each text of the history is read back in a turn of its own role, in the history's
    order (a system message's anywhere: APIs hoist it, or take it in place)."""
    read = [(t.role, t.text + "".join(r.content for r in t.results)) for t in turn.prompt.turns]
    everything = "\n".join([turn.prompt.system, *(text for _, text in read)])
    at = 0
    for message in turn.sent:
        role = "assistant" if message.role is Role.ASSISTANT else "user"
        for block in message.content:
            if not isinstance(block, TextBlock) or not block.text:
                continue
            if message.role is Role.SYSTEM:
                assert block.text in everything, (turn.stack, block.text)
                continue
            found = [i for i, (r, text) in enumerate(read) if i >= at and r == role]
            found = [i for i in found if block.text in read[i][1]]
            assert found, (turn.stack, role, block.text, read[at:])
            at = found[0]


SECRET_KEYS = ("thoughtSignature", "encrypted_content", "reasoningText")


def secrets(messages: list[Message]) -> list[tuple[str, ProviderRaw | None]]:
    """What only the model that made it may be sent: signatures, redacted or encrypted
    reasoning, opaque blocks, with who made each."""
    found: list[tuple[str, ProviderRaw | None]] = []
    for block in (b for m in messages for b in blocks_of(m)):
        raw = block.provider_raw
        if isinstance(block, ThinkingBlock) and block.signature:
            found.append((block.signature, raw))
        elif isinstance(block, RedactedThinkingBlock):
            found.append((block.data, raw))
        elif isinstance(block, OpaqueBlock):
            found.append((json.dumps(block.provider_raw.data["item"])[1:-1], raw))
        data = raw.data if raw is not None else {}
        found += [(v, raw) for k in SECRET_KEYS if isinstance(v := data.get(k), str) and v]
    return found


def made_by(owner: ProviderRaw | None, turn: Turn) -> bool:
    models = {turn.model, turn.model.partition(":")[2]}
    return owner is not None and owner.provider == turn.stack and owner.model in models


def own_summary(block: Any, turn: Turn) -> bool:
    """A thought summary the same model wrote (Gemini's carry no signature): left out of its
    next request without a WARN, as it loses nothing (docs/contract.md §7)."""
    raw = block.provider_raw
    return (
        isinstance(block, ThinkingBlock)
        and not block.signature
        and raw is not None
        and raw.provider == turn.stack
        and raw.model == turn.model
    )


def blocks_of(message: Message) -> list[Any]:
    """The message's blocks, and those inside its tool results."""
    out: list[Any] = []
    for block in message.content:
        out.append(block)
        if isinstance(block, ToolResultBlock) and isinstance(block.content, list):
            out += block.content
    return out


def arrived(block: Any, wire: str) -> bool:
    """Whether ``block`` (its unique word, data or URL) is in what was sent; a document that
    arrived arrives with its title and context."""
    if isinstance(block, DocumentBlock) and _arrived(block, wire):
        kept = [x for x in (block.title, block.context) if x and x not in wire]
        assert kept == [], kept
    return _arrived(block, wire)


def _arrived(block: Any, wire: str) -> bool:
    if isinstance(block, TextBlock):
        return json.dumps(block.text, ensure_ascii=False)[1:-1] in wire or not block.text.strip()
    if isinstance(block, OpaqueBlock):
        return str(block.provider_raw.data["item"]["id"]) in wire
    if isinstance(block, ImageBlock | DocumentBlock | AudioBlock | VideoBlock):
        source = block.source
        found = [getattr(source, key, None) for key in ("data", "url", "text", "file_id")]
        text = getattr(source, "text", None)
        if text:
            found.append(base64.b64encode(text.encode()).decode())
        return any(f and f in wire for f in found)
    if isinstance(block, ThinkingBlock):
        return block.thinking in wire
    if isinstance(block, RedactedThinkingBlock):
        return block.data in wire
    if isinstance(block, ServerToolResultBlock):
        return all(r.url in wire for r in block.search_results or [])
    if isinstance(block, ToolUseBlock):  # arguments may be a JSON string in the body, escaped
        return all(mark in wire for mark in MARK.findall(json.dumps(block.input)))  # twice
    if isinstance(block, ToolResultBlock):
        return json.dumps(block.text, ensure_ascii=False)[1:-1] in wire
    return True  # a server call: in its result's text


def same_calls_and_results(turn: Turn) -> None:
    """The calls and results read back are the history's, each result answering its call (the
    latest before it of that id: a history may use an id again in a later turn)."""
    calls: list[ToolUseBlock] = []
    results: list[tuple[ToolResultBlock, int]] = []
    latest: dict[str, int] = {}
    for block in (b for m in turn.sent for b in m.content):
        if isinstance(block, ToolUseBlock):
            latest[block.id] = len(calls)
            calls.append(block)
        elif isinstance(block, ToolResultBlock):
            results.append((block, latest[block.tool_use_id]))
    read_calls = [c for t in turn.prompt.turns for c in t.calls]
    read_results = [r for t in turn.prompt.turns for r in t.results]
    assert [(c.name, c.args) for c in read_calls] == [(c.name, c.input) for c in calls], turn.stack
    assert len(read_results) == len(results), turn.stack
    read_ids = [c.id for c in read_calls]
    for (result, answered), read in zip(results, read_results, strict=True):
        assert result.text in read.content, (turn.stack, result.text, read.content)
        flagged = read.is_error or read.content.startswith("Error")  # Chat has no is_error
        assert flagged == result.is_error, (turn.stack, read)
        assert read.call_id == read_ids[answered], turn.stack


def read_back(turn: Turn) -> None:
    """The reply reads back as what the model said: its text, calls and reasoning."""
    said = turn.said
    response = turn.response
    assert response.text == said.text, (turn.stack, response.text, said.text)
    calls = [(c.name, c.input) for c in response.tool_calls]
    assert calls == [(c.name, c.args) for c in said.calls], turn.stack
    thought = "".join(b.thinking for b in response.content if isinstance(b, ThinkingBlock))
    if said.thinking and thought:
        assert thought == said.thinking, turn.stack
