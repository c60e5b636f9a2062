"""What each column spends above HTTP: ``python -m benchmarks.above_http``.

The floor's and metis's streams read the same bytes from an in-memory httpx transport (the
section-1 workload, cut one event per chunk or in 16 KiB reads, exactly as the loopback
server sends them), so what is timed is only what each does above httpcore: the floor's
``aiter_lines`` + ``json.loads``, metis's framing, reading, hooks and frames. httpcore and
h11's work per chunk, the same for both and most of a one-event-per-chunk stream, is left out.
The response says it is HTTP/1.1 with a socket, so metis reads it as it reads a real one (no
cancel scope per read). Calls alternate in one process, CPU time, median after warm-up.

    python -m benchmarks.above_http                       # five formats, both regimes
    python -m benchmarks.above_http --providers gemini --reads 16384 --rounds 30

Under callgrind (``valgrind --tool=callgrind``) a run counts instructions, which the load
of a shared machine does not move: ``--column metis --rounds 3`` against ``--rounds 1``,
the difference halved, is one stream's count without the imports.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import warnings
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx

from benchmarks import formats, workload
from benchmarks.clients import METIS_STACKS, PROVIDERS, floor_events
from benchmarks.workload import Scenario


def body_chunks(provider: str, scenario: Scenario) -> list[bytes]:
    """The body the loopback server sends, as its HTTP chunks."""
    if provider == "anthropic":
        parts = workload.anthropic_stream_events(scenario)
    elif provider == "responses":
        parts = formats.responses_stream_events(scenario)
    elif provider == "gemini":
        parts = formats.gemini_stream_events(scenario)
    elif provider == "ollama":
        parts = formats.ollama_stream_events(scenario)
    else:
        parts = workload.openai_stream_events(scenario, True)
    size = scenario.read_size
    if size:
        body = b"".join(parts)
        parts = [body[i : i + size] for i in range(0, len(body), size)]
    return parts


class _Socket:
    def shutdown(self, how: int) -> None:
        return None


class _NetworkStream:
    """What metis looks for to bound and interrupt a real socket's reads."""

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:  # noqa: ASYNC109
        return b""

    def get_extra_info(self, name: str) -> Any:
        return _Socket() if name == "socket" else None


class _Body(httpx.AsyncByteStream):
    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk


class InMemory(httpx.AsyncBaseTransport):
    """Answers every request with ``chunks``."""

    def __init__(self, chunks: list[bytes], content_type: str) -> None:
        self.chunks, self.content_type = chunks, content_type

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200,
            headers={"content-type": self.content_type},
            stream=_Body(self.chunks),
            extensions={"http_version": b"HTTP/1.1", "network_stream": _NetworkStream()},
        )


async def floor(client: httpx.AsyncClient, ndjson: bool) -> int:
    """The floor's stream (benchmarks/clients.py ``Floor.stream``)."""
    async with client.stream("POST", "http://bench/v1", json={}) as response:
        return await floor_events(response, ndjson)


class MetisStream:
    """metis's stream (benchmarks/clients.py ``Metis.stream``), invariants on."""

    def __init__(self, provider: str, client: httpx.AsyncClient) -> None:
        from metis import AdapterConfig, ToolDefinition, build_adapter

        stack, model = METIS_STACKS[provider]
        self.model = f"{stack}:{model}"
        self.tool = ToolDefinition(
            name=workload.TOOL_NAME, description="w", input_schema=workload.TOOL_SCHEMA
        )
        self.adapter = build_adapter(
            stack,
            AdapterConfig(
                api_key="x",
                base_url="http://bench",
                http_client=client,
                capabilities={"supports_tools": True} if provider == "ollama" else {},
            ),
        )

    async def __call__(self) -> Any:
        from metis import CanonicalRequest, Message, MessageComplete, ToolUseBlock

        request = CanonicalRequest(
            model=self.model,
            messages=[Message.user(workload.QUESTION)],
            tools=[self.tool],
            system_prompt=workload.SYSTEM,
            max_output_tokens=1024,
            stream=True,
        )
        final = None
        async for event in self.adapter.stream(request):
            if event.__class__ is MessageComplete:
                final = event
        assert final is not None
        tools = [b.input for b in final.final_content if isinstance(b, ToolUseBlock)]
        return tools[0] if tools else None


async def compare(provider: str, reads: int, rounds: int, column: str) -> dict[str, Any]:
    scenario = Scenario(2000, 200, reads)
    chunks = body_chunks(provider, scenario)
    content_type = "application/x-ndjson" if provider == "ollama" else "text/event-stream"
    client = httpx.AsyncClient(transport=InMemory(chunks, content_type))
    metis = MetisStream(provider, client)
    expected = scenario.tool_input()

    async def run_floor() -> None:
        await floor(client, provider == "ollama")

    async def run_metis() -> None:
        assert await metis() == expected, f"{provider}: metis read a different tool input"

    calls = {"floor": run_floor, "metis": run_metis}
    if column != "both":
        calls = {column: calls[column]}
    samples: dict[str, list[float]] = {name: [] for name in calls}
    for round_ in range(rounds + 2):
        for name, call in calls.items():
            gc.collect()
            start = time.process_time()
            await call()
            if round_ >= 2:
                samples[name].append(time.process_time() - start)
    await client.aclose()
    ms = {name: statistics.median(values) * 1e3 for name, values in samples.items()}
    return {"provider": provider, "reads": reads, "chunks": len(chunks), **ms}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--providers", default=",".join(PROVIDERS))
    parser.add_argument("--reads", default="0,16384", help="HTTP chunk sizes; 0: one event")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--column", default="both", choices=["both", "floor", "metis"])
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")

    async def runs() -> None:
        for reads in (int(r) for r in args.reads.split(",")):
            for provider in args.providers.split(","):
                row = await compare(provider, reads, args.rounds, args.column)
                cells = "  ".join(f"{k} {row[k]:7.2f} ms" for k in ("floor", "metis") if k in row)
                ratio = f"  x{row['metis'] / row['floor']:.2f}" if len(row) == 5 else ""
                print(f"{provider:10} reads {reads:6}  {cells}{ratio}", flush=True)

    anyio.run(runs)


if __name__ == "__main__":
    main()
