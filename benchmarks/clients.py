"""The contenders: each makes the same calls against the loopback server its own way.

- ``floor``: httpx ``aiter_lines`` and ``json.loads`` of every ``data:`` line (of every line,
  for Ollama's NDJSON), nothing more (no normalization, no accumulation): the least a Python
  client written the usual way spends.
- ``floor-fast``: a faster floor: httpx's raw byte chunks split into lines by hand, and
  pydantic_core's ``from_json`` (jiter) of each ``data:`` payload.
- ``metis``: ``Adapter.stream()`` / ``complete()`` with the provider's default stack
  (invariant checking on); ``metis-noinv`` is the same without the ``invariants`` stage.
- ``anthropic-sdk`` / ``openai-sdk``: the official SDKs' streaming helpers with their
  final-message accumulation (``messages.stream(...).get_final_message()``,
  ``chat.completions.stream(...).get_final_completion()``) and plain ``create``.
- ``litellm``: ``acompletion(stream=True)`` then ``stream_chunk_builder``, and
  ``acompletion()``.

Every stream is consumed to its end into a final message whose tool input is parsed (the
floor excepted), and each call returns a small :class:`Outcome` the runner checks, so a
client that silently got less than the others cannot look fast.

Clients import their library lazily: a process benchmarking one column imports nothing else.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from functools import partial
from typing import Any

from benchmarks import formats, workload
from benchmarks.workload import Scenario, Turn

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch at import
os.environ.setdefault("LITELLM_LOG", "ERROR")

CLIENTS = (
    "floor",
    "floor-fast",
    "metis",
    "metis-noinv",
    "anthropic-sdk",
    "openai-sdk",
    "litellm",
)
PROVIDERS = ("anthropic", "openai", "responses", "gemini", "ollama")
"""The five wire formats: Anthropic Messages, Chat Completions, Responses, Gemini, Ollama."""
HISTORY_PROVIDERS = ("anthropic", "openai")
"""The formats whose non-streamed calls (a history in the native format) are measured."""
METIS_STACKS = {
    "anthropic": ("anthropic", workload.ANTHROPIC_MODEL),
    "openai": ("openai", workload.OPENAI_MODEL),
    "responses": ("openai_responses", formats.RESPONSES_MODEL),
    "gemini": ("gemini", formats.GEMINI_MODEL),
    "ollama": ("ollama", formats.OLLAMA_MODEL),
}
"""Each format's metis stack and model."""
ANCHORS = {"anthropic-sdk": "anthropic", "openai-sdk": "openai", "litellm": "litellm"}


def available(client: str, provider: str) -> bool:
    """Whether ``client`` can run here for ``provider`` (its library installed, and an SDK
    only speaks its own provider)."""
    if client == "anthropic-sdk" and provider != "anthropic":
        return False
    if client == "openai-sdk" and provider != "openai":
        return False
    if client == "litellm" and provider not in HISTORY_PROVIDERS:
        return False
    module = ANCHORS.get(client)
    if module is None:
        return True
    import importlib.util

    return importlib.util.find_spec(module) is not None


@dataclass
class Outcome:
    """What a call produced: events parsed, text length, the tool's parsed input."""

    events: int = 0
    text_chars: int = 0
    tool_input: dict[str, Any] | None = None


WIRE_PATHS = {
    "anthropic": "/v1/messages",
    "openai": "/v1/chat/completions",
    "responses": "/v1/responses",
    "gemini": f"/v1beta/models/{formats.GEMINI_MODEL}:streamGenerateContent?alt=sse",
    "ollama": "/api/chat",
}


def wire_url(base: str, provider: str, scenario: str) -> str:
    return f"{base}/s/{scenario}{WIRE_PATHS[provider]}"


def _native_headers(provider: str) -> dict[str, str]:
    if provider == "anthropic":
        return {"x-api-key": "x", "anthropic-version": "2023-06-01"}
    if provider == "gemini":
        return {"x-goog-api-key": "x"}
    return {"authorization": "Bearer x"}


class Client:
    name = ""

    def __init__(self, provider: str, base_url: str, max_connections: int = 1000) -> None:
        self.provider = provider
        self.base_url = base_url
        self.max_connections = max_connections

    def scenario_url(self, scenario: str) -> str:
        return f"{self.base_url}/s/{scenario}"

    async def stream(self, scenario: Scenario, first: Any = None) -> Outcome:
        """One streamed call; ``first`` (an async callable), if given, is awaited once the
        first event has arrived (the concurrency benchmark's barrier)."""
        raise NotImplementedError

    async def complete(self, scenario: Scenario, turns: list[Turn]) -> Outcome:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None


# The floor -----------------------------------------------------------------------------------


async def floor_events(response: Any, ndjson: bool, first: Any = None) -> int:
    """The floor's reading of a streamed body: httpx's lines, ``json.loads`` of each event's
    data (an NDJSON line, or an SSE ``data:`` line other than ``[DONE]``); the events read.
    ``first`` is awaited after the first event."""
    loads, events = json.loads, 0
    async for line in response.aiter_lines():
        if ndjson:
            if not line.strip():
                continue
            loads(line)
        elif line.startswith("data:"):
            data = line[5:].strip()
            if data == "[DONE]":
                continue
            loads(data)
        else:
            continue
        events += 1
        if first is not None and events == 1:
            await first()
    return events


class Floor(Client):
    name = "floor"

    def __init__(self, provider: str, base_url: str, max_connections: int = 1000) -> None:
        super().__init__(provider, base_url, max_connections)
        # METIS_BENCH_FLOOR_LEAN=1: read over metis's lean transport (benchmarks/README.md,
        # "leandefault"); by default over httpx's own
        lean = os.environ.get("METIS_BENCH_FLOOR_LEAN") == "1"
        self.pools = HTTPPools(max_connections, floor_lean=lean)
        self.headers = _native_headers(provider)
        if provider in HISTORY_PROVIDERS:
            self.stream_body = _native_request(provider, [Turn("user", workload.QUESTION)], True)
        else:
            self.stream_body = formats.native_stream_request(provider)

    async def stream(self, scenario: Scenario, first: Any = None) -> Outcome:
        url = wire_url(self.base_url, self.provider, scenario.name)
        ndjson = self.provider == "ollama"
        async with self.pools.next().stream(
            "POST", url, json=self.stream_body, headers=self.headers
        ) as response:
            events = await floor_events(response, ndjson, first)
        return Outcome(events=events)

    async def complete(self, scenario: Scenario, turns: list[Turn]) -> Outcome:
        body = _native_request(self.provider, turns, False, image=_image())
        url = wire_url(self.base_url, self.provider, scenario.name)
        response = await self.pools.next().post(url, json=body, headers=self.headers)
        response.json()
        return Outcome(events=1)

    async def aclose(self) -> None:
        await self.pools.aclose()


class FloorFast(Floor):
    """The floor with the bytes split by hand and parsed by pydantic_core (jiter)."""

    name = "floor-fast"

    async def stream(self, scenario: Scenario, first: Any = None) -> Outcome:
        from pydantic_core import from_json

        events = 0
        url = wire_url(self.base_url, self.provider, scenario.name)
        ndjson = self.provider == "ollama"
        held = b""
        async with self.pools.next().stream(
            "POST", url, json=self.stream_body, headers=self.headers
        ) as response:
            async for chunk in response.aiter_raw():
                lines = (held + chunk if held else chunk).split(b"\n")
                held = lines.pop()
                for line in lines:
                    if ndjson:
                        if not line.strip():
                            continue
                        from_json(line)
                    elif line[:5] == b"data:":
                        data = line[5:].strip()
                        if data == b"[DONE]":
                            continue
                        from_json(data)
                    else:
                        continue
                    events += 1
                    if first is not None and events == 1:
                        await first()
        return Outcome(events=events)


POOL_SIZE = 250
"""Connections per httpx client; more concurrent streams get more clients (pools)."""


class HTTPPools:
    """One httpx client, or for more than 1,000 connections ``ceil(max_connections /
    POOL_SIZE)`` of them, handed out in turn. httpcore's pool
    scans its connections and queued requests on every request and release
    (``_assign_requests_to_connections``), so one pool of 10,000 costs time quadratic in the
    streams in flight; pools of 250 connections keep that cost small, as an
    application serving that many streams would shard them."""

    def __init__(self, max_connections: int, own: bool = False, floor_lean: bool = False) -> None:
        make = _own_client if own else partial(_http_client, lean=floor_lean)
        if max_connections <= 1000:  # one pool, as the SDKs have
            self.clients = [make(max_connections)]
        else:
            count = -(-max_connections // POOL_SIZE)
            self.clients = [make(POOL_SIZE) for _ in range(count)]
        self._turn = 0

    def next_index(self) -> int:
        self._turn = (self._turn + 1) % len(self.clients)
        return self._turn

    def next(self) -> Any:
        return self.clients[self.next_index()]

    async def aclose(self) -> None:
        for client in self.clients:
            await client.aclose()


def _http_client(max_connections: int, lean: bool = False) -> Any:
    """An httpx client with the official SDKs' pool limits (1,000 connections, 100 kept
    alive). httpx's default (100 and 20) would queue the concurrency benchmark's streams; and
    an unbounded keep-alive pool makes httpcore 1.0's pool bookkeeping quadratic in the number
    of idle connections (connection_pool.py, ``_assign_requests_to_connections``). ``lean``:
    over metis's lean HTTP/1.1 transport (metis/transport/http1.py)."""
    import httpx

    limits = httpx.Limits(
        max_connections=max_connections, max_keepalive_connections=min(100, max_connections)
    )
    transport = None
    if lean:
        from metis.transport.http1 import LeanTransport

        transport = LeanTransport(limits=limits)
    return httpx.AsyncClient(timeout=600, limits=limits, transport=transport)


def _own_client(max_connections: int) -> Any:
    """The client an adapter makes when it is given none (metis/transport/stage.py
    ``http_client``: the same limits, over the transport ``METIS_HTTP_TRANSPORT`` names), made
    once and shared by the column's adapters as an application's own pool would be."""
    from metis.transport.stage import http_client

    return http_client(600.0, keep_alive=min(100, max_connections))


# metis -------------------------------------------------------------------------------------


class Metis(Client):
    name = "metis"
    invariants = True

    def __init__(self, provider: str, base_url: str, max_connections: int = 1000) -> None:
        super().__init__(provider, base_url, max_connections)
        from metis import ToolDefinition

        # Connection pools shared by every scenario's adapters, as large as the concurrency:
        # clients as metis makes its own (METIS_HTTP_TRANSPORT=httpx: on httpx's transport)
        self.pools = HTTPPools(max_connections, own=True)
        self.adapters: dict[tuple[str, int], Any] = {}
        self.tool = ToolDefinition(
            name=workload.TOOL_NAME,
            description="Current weather",
            input_schema=workload.TOOL_SCHEMA,
        )
        self.stack, model = METIS_STACKS[provider]
        self.model = f"{self.stack}:{model}"
        self._histories: dict[int, list[Any]] = {}

    def adapter(self, scenario: str) -> Any:
        shard = self.pools.next_index()
        adapter = self.adapters.get((scenario, shard))
        if adapter is None:
            from metis import AdapterConfig, build_adapter

            adapter = build_adapter(
                self.stack,
                AdapterConfig(
                    api_key="x",
                    base_url=self.scenario_url(scenario),
                    http_client=self.pools.clients[shard],
                    # Ollama declares no tool calling: a local model's abilities are the user's
                    # to declare (metis/stacks/builtin/ollama.yaml)
                    capabilities={"supports_tools": True} if self.provider == "ollama" else {},
                ),
            )
            if not self.invariants:
                adapter.pipeline.remove("invariants")
            self.adapters[(scenario, shard)] = adapter
        return adapter

    def history(self, turns: list[Turn]) -> list[Any]:
        """The canonical history, built once per history (an application keeps its
        conversation as canonical messages)."""
        key = id(turns)
        cached = self._histories.get(key)
        if cached is None:
            cached = self._histories[key] = canonical_history(turns)
        return cached

    async def stream(self, scenario: Scenario, first: Any = None) -> Outcome:
        from metis import CanonicalRequest, Message, MessageComplete, ToolUseBlock

        request = CanonicalRequest(
            model=self.model,
            messages=[Message.user(workload.QUESTION)],
            tools=[self.tool],
            system_prompt=workload.SYSTEM,
            max_output_tokens=1024,
            stream=True,
        )
        events = 0
        final = None
        async for event in self.adapter(scenario.name).stream(request):
            events += 1
            if first is not None and events == 1:
                await first()
            if type(event) is MessageComplete:
                final = event
        assert final is not None
        return _metis_outcome(final.final_content, events, ToolUseBlock)

    async def complete(self, scenario: Scenario, turns: list[Turn]) -> Outcome:
        from metis import CanonicalRequest, ToolUseBlock

        request = CanonicalRequest(
            model=self.model,
            messages=self.history(turns),
            tools=[self.tool],
            system_prompt=workload.SYSTEM,
            max_output_tokens=1024,
        )
        response = await self.adapter(scenario.name).complete(request)
        return _metis_outcome(response.content, 1, ToolUseBlock)

    async def aclose(self) -> None:
        await self.pools.aclose()


class MetisNoInvariants(Metis):
    name = "metis-noinv"
    invariants = False


def _metis_outcome(content: list[Any], events: int, tool_use: type) -> Outcome:
    text = sum(len(block.text) for block in content if getattr(block, "type", "") == "text")
    tools = [block.input for block in content if isinstance(block, tool_use)]
    return Outcome(events=events, text_chars=text, tool_input=tools[0] if tools else None)


def canonical_history(turns: list[Turn]) -> list[Any]:
    from metis import (
        Base64ImageSource,
        ImageBlock,
        Message,
        TextBlock,
        ToolResultBlock,
        ToolUseBlock,
    )

    image = _image()
    out = []
    for turn in turns:
        if turn.role == "user":
            blocks: list[Any] = [TextBlock(text=turn.text)]
            if turn.image:
                blocks.append(
                    ImageBlock(source=Base64ImageSource(media_type="image/png", data=image))
                )
            out.append(Message.user(*blocks))
        elif turn.role == "assistant":
            blocks = [TextBlock(text=turn.text)]
            if turn.tool_call is not None:
                blocks.append(
                    ToolUseBlock(
                        id=_canonical_tool_id(turn.tool_call),
                        name=workload.TOOL_NAME,
                        input={"city": "Paris"},
                    )
                )
            out.append(Message.assistant(*blocks))
        else:
            out.append(
                Message.tool(
                    ToolResultBlock(
                        tool_use_id=_canonical_tool_id(turn.tool_call or 0), content=turn.text
                    )
                )
            )
    return out


def _canonical_tool_id(n: int) -> str:
    return f"tu_01BENCH{n:019d}"


_IMAGE: list[str] = []


def _image() -> str:
    if not _IMAGE:
        _IMAGE.append(workload.image_b64())
    return _IMAGE[0]


def _native_request(
    provider: str, turns: list[Turn], stream: bool, image: str = ""
) -> dict[str, Any]:
    if provider == "anthropic":
        return {
            "model": workload.ANTHROPIC_MODEL,
            "max_tokens": 1024,
            "system": workload.SYSTEM,
            "messages": workload.anthropic_messages(turns, image),
            "tools": workload.anthropic_tools(),
            "stream": stream,
        }
    body: dict[str, Any] = {
        "model": workload.OPENAI_MODEL,
        "max_completion_tokens": 1024,
        "messages": workload.openai_messages(turns, image, workload.SYSTEM),
        "tools": workload.openai_tools(),
        "stream": stream,
    }
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


# The official SDKs ---------------------------------------------------------------------------


class AnthropicSDK(Client):
    name = "anthropic-sdk"

    def __init__(self, provider: str, base_url: str, max_connections: int = 1000) -> None:
        super().__init__(provider, base_url, max_connections)
        self.clients: dict[str, Any] = {}
        self.question = workload.anthropic_messages([Turn("user", workload.QUESTION)], "")
        self.tools = workload.anthropic_tools()
        self._histories: dict[int, list[dict[str, Any]]] = {}

    def client(self, scenario: str) -> Any:
        client = self.clients.get(scenario)
        if client is None:
            import anthropic

            client = self.clients[scenario] = anthropic.AsyncAnthropic(
                api_key="x", base_url=self.scenario_url(scenario), max_retries=0
            )
        return client

    async def stream(self, scenario: Scenario, first: Any = None) -> Outcome:
        events = 0
        async with self.client(scenario.name).messages.stream(
            model=workload.ANTHROPIC_MODEL,
            max_tokens=1024,
            system=workload.SYSTEM,
            messages=self.question,
            tools=self.tools,
        ) as stream:
            if first is not None:
                async for _ in stream:
                    events += 1
                    break
                await first()
            message = await stream.get_final_message()
        return _anthropic_outcome(message, events)

    async def complete(self, scenario: Scenario, turns: list[Turn]) -> Outcome:
        key = id(turns)
        messages = self._histories.get(key)
        if messages is None:
            messages = self._histories[key] = workload.anthropic_messages(turns, _image())
        message = await self.client(scenario.name).messages.create(
            model=workload.ANTHROPIC_MODEL,
            max_tokens=1024,
            system=workload.SYSTEM,
            messages=messages,
            tools=self.tools,
        )
        return _anthropic_outcome(message, 1)

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.close()


def _anthropic_outcome(message: Any, events: int) -> Outcome:
    text = sum(len(block.text) for block in message.content if block.type == "text")
    tools = [block.input for block in message.content if block.type == "tool_use"]
    return Outcome(events=events, text_chars=text, tool_input=tools[0] if tools else None)


class OpenAISDK(Client):
    name = "openai-sdk"

    def __init__(self, provider: str, base_url: str, max_connections: int = 1000) -> None:
        super().__init__(provider, base_url, max_connections)
        self.clients: dict[str, Any] = {}
        self.question = workload.openai_messages(
            [Turn("user", workload.QUESTION)], "", workload.SYSTEM
        )
        self.tools = workload.openai_tools(strict=True)
        self._histories: dict[int, list[dict[str, Any]]] = {}

    def client(self, scenario: str) -> Any:
        client = self.clients.get(scenario)
        if client is None:
            import openai

            client = self.clients[scenario] = openai.AsyncOpenAI(
                api_key="x", base_url=self.scenario_url(scenario) + "/v1", max_retries=0
            )
        return client

    async def stream(self, scenario: Scenario, first: Any = None) -> Outcome:
        events = 0
        async with self.client(scenario.name).chat.completions.stream(
            model=workload.OPENAI_MODEL,
            max_completion_tokens=1024,
            messages=self.question,
            tools=self.tools,
            stream_options={"include_usage": True},
        ) as stream:
            if first is not None:
                async for _ in stream:
                    events += 1
                    break
                await first()
            completion = await stream.get_final_completion()
        return _openai_outcome(completion.choices[0].message, events)

    async def complete(self, scenario: Scenario, turns: list[Turn]) -> Outcome:
        key = id(turns)
        messages = self._histories.get(key)
        if messages is None:
            messages = self._histories[key] = workload.openai_messages(
                turns, _image(), workload.SYSTEM
            )
        completion = await self.client(scenario.name).chat.completions.create(
            model=workload.OPENAI_MODEL,
            max_completion_tokens=1024,
            messages=messages,
            tools=self.tools,
        )
        return _openai_outcome(completion.choices[0].message, 1)

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.close()


def _openai_outcome(message: Any, events: int) -> Outcome:
    calls = message.tool_calls or []
    tool_input = None
    if calls:
        # The stream helper has parsed strict tools' arguments already; others are parsed here.
        tool_input = getattr(calls[0].function, "parsed_arguments", None)
        if tool_input is None:
            tool_input = json.loads(calls[0].function.arguments)
    return Outcome(events=events, text_chars=len(message.content or ""), tool_input=tool_input)


# LiteLLM -------------------------------------------------------------------------------------


class LiteLLM(Client):
    name = "litellm"

    def __init__(self, provider: str, base_url: str, max_connections: int = 1000) -> None:
        super().__init__(provider, base_url, max_connections)
        import litellm

        litellm.suppress_debug_info = True
        litellm.telemetry = False
        self.litellm = litellm
        self.model = (
            f"anthropic/{workload.ANTHROPIC_MODEL}"
            if provider == "anthropic"
            else f"openai/{workload.OPENAI_MODEL}"
        )
        self.question = workload.openai_messages(
            [Turn("user", workload.QUESTION)], "", workload.SYSTEM
        )
        self.tools = workload.openai_tools()
        self._histories: dict[int, list[dict[str, Any]]] = {}

    def api_base(self, scenario: str) -> str:
        url = self.scenario_url(scenario)
        return url + "/v1/messages" if self.provider == "anthropic" else url + "/v1"

    async def stream(self, scenario: Scenario, first: Any = None) -> Outcome:
        extra = {"stream_options": {"include_usage": True}} if self.provider == "openai" else {}
        response = await self.litellm.acompletion(
            model=self.model,
            messages=self.question,
            tools=self.tools,
            max_tokens=1024,
            stream=True,
            api_base=self.api_base(scenario.name),
            api_key="x",
            **extra,
        )
        chunks = []
        async for chunk in response:
            chunks.append(chunk)
            if first is not None and len(chunks) == 1:
                await first()
        final = self.litellm.stream_chunk_builder(chunks, messages=self.question)
        return _openai_outcome(final.choices[0].message, len(chunks))

    async def complete(self, scenario: Scenario, turns: list[Turn]) -> Outcome:
        key = id(turns)
        messages = self._histories.get(key)
        if messages is None:
            messages = self._histories[key] = workload.openai_messages(
                turns, _image(), workload.SYSTEM
            )
        response = await self.litellm.acompletion(
            model=self.model,
            messages=messages,
            tools=self.tools,
            max_tokens=1024,
            api_base=self.api_base(scenario.name),
            api_key="x",
        )
        return _openai_outcome(response.choices[0].message, 1)


def make_client(name: str, provider: str, base_url: str, max_connections: int = 1000) -> Client:
    classes: dict[str, type[Client]] = {
        "floor": Floor,
        "floor-fast": FloorFast,
        "metis": Metis,
        "metis-noinv": MetisNoInvariants,
        "anthropic-sdk": AnthropicSDK,
        "openai-sdk": OpenAISDK,
        "litellm": LiteLLM,
    }
    return classes[name](provider, base_url, max_connections)
